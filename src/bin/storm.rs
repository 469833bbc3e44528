//! `storm`: the whole experiment, unattended, with verdicts and plots.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::{StormCli, StormCommand};
use retry_storm::output::say;
use retry_storm::{programs, shutdown, storm};

// jemalloc hands memory back to the system once a burst of connections is
// over; glibc's per-thread arenas keep it (results/reliability.md, the long
// run).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = StormCli::parse();
    match cli.command {
        Some(StormCommand::Server(args)) => {
            programs::block_on(args.runtime.threads, programs::server(*args))
        }
        Some(StormCommand::Client(args)) => {
            programs::block_on(args.run.runtime.threads, programs::client(*args))
        }
        Some(StormCommand::Sweep(args)) => programs::sweep(*args),
        // The runner spawns its children from this one thread, so that the
        // kernel's parent-death signal follows the runner's lifetime.
        None => programs::block_on(Some(1), run(cli)),
    }
}

async fn run(cli: StormCli) -> ExitCode {
    let program = std::env::current_exe().expect("the path of this program");
    let config = cli.run.config(program);
    if let Err(e) = config.validate() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    say(format!(
        "storm: {} for {}; results in {}",
        config
            .strategies
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
        if config.virtual_time {
            "a run in virtual time"
        } else if config.time_scale > 1.0 {
            "a quick run (times / 10)"
        } else {
            "a full run"
        },
        config.out.display()
    ));
    match storm::run(&config, shutdown::requested()).await {
        Ok(report) => {
            say(storm::summary_table(&report).trim_end());
            say(format!("results: {}", config.out.display()));
            ExitCode::SUCCESS
        }
        Err(storm::StormError::Flags(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        Err(storm::StormError::Interrupted) => {
            eprintln!(
                "interrupted: every server resumed and stopped; partial results in {}",
                config.out.display()
            );
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e}; partial results in {}", config.out.display());
            ExitCode::FAILURE
        }
    }
}
