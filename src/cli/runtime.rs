//! The runtime flag `server` and `client` share.

use clap::Args;

/// The runtime flag `server` and `client` share.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// Threads ("lanes"), each running its share of the work (the
    /// client's users, the server's connections) on a runtime of its own,
    /// so that no lane wakes another for its own work. 1 runs everything
    /// on one thread, which with both programs on one core (`taskset -c
    /// 0`) is cheapest per request, but one core is then the ceiling.
    /// [default: one per core]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
}
