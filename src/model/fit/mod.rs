//! Fitting.

#[cfg(test)]
mod closed_loop;
mod level;
mod search;
pub mod shapes;
