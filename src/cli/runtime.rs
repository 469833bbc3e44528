//! The runtime flag `server` and `client` share.

use clap::Args;

/// The runtime flag `server` and `client` share.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// Worker threads of the async runtime. 1 runs everything on one
    /// thread: a quarter to a third less CPU per request at moderate load
    /// (no wake-ups between threads), about half with both programs on one
    /// thread on the same core (`taskset -c 0`), but one core is then the
    /// ceiling. [default: one per core]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
}
