//! `storm`: the whole experiment, unattended, with verdicts and plots;
//! `storm run FILE` for a scenario file, `storm sweep` for the map of where
//! each policy breaks.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::app;
use retry_storm::cli::StormCli;

// jemalloc hands memory back to the system once a burst of connections is
// over; glibc's per-thread arenas keep it (results/reliability.md, the long
// run).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    app::storm(StormCli::parse())
}
