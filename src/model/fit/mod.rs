//! Fitting.

#[cfg(test)]
mod closed_loop;
mod search;
mod level;
