//! `sim_memory`: one virtual-time run, and what it took: the process's
//! peak resident memory, the engine's events a second, and the most
//! sessions of open traffic it held at once (`scripts/bench.sh open`).
//!
//! The server's and the client's flags are the programs' own; the client
//! needs a `--duration`. Each run is a process of its own, so that the
//! peak resident memory (`VmHWM` in /proc/self/status) is this run's: the
//! difference between two runs of the same length, one with millions of
//! sessions or users and one with few, over the difference in their
//! numbers, is what one costs.
//!
//! ```sh
//! cargo run --release --example sim_memory -- \
//!     --server-args "--limit 1000000" \
//!     --client-args "--arrival-rate 100000 --max-outstanding 10000000 --duration 40s" \
//!     --pause-at 5s --pause 30s
//! ```
//!
//! Prints one line of JSON.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use retry_storm::cli::{ClientCli, ServerArgs};
use retry_storm::sim::{Pause, SimConfig};

// The storm program's allocator, so that memory is what `storm --engine
// sim` would take.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runs one experiment in virtual time and prints its peak memory and
/// speed as JSON.
#[derive(Debug, Parser)]
struct Args {
    /// The server's flags, as `server` takes them.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    server_args: String,
    /// The client's flags, as `client` takes them; a --duration is needed.
    #[arg(long, allow_hyphen_values = true)]
    client_args: String,
    /// When the server is stopped, since the start.
    #[arg(long, value_parser = humantime::parse_duration, requires = "pause")]
    pause_at: Option<Duration>,
    /// How long the server stays stopped.
    #[arg(long, value_parser = humantime::parse_duration, requires = "pause_at")]
    pause: Option<Duration>,
}

/// Splits `flags` as a shell would and puts `program` before them.
fn argv(program: &str, flags: &str) -> Result<Vec<String>, String> {
    let mut argv = vec![program.to_string()];
    argv.extend(shlex::split(flags).ok_or_else(|| format!("unbalanced quotes in {flags:?}"))?);
    Ok(argv)
}

/// The run's configuration from the programs' flags.
fn config(args: &Args) -> Result<SimConfig, String> {
    let mut server = ServerArgs::try_parse_from(argv("server", &args.server_args)?)
        .and_then(|a| a.config())
        .map_err(|e| e.to_string())?;
    let mut client = ClientCli::try_parse_from(argv("client", &args.client_args)?)
        .and_then(|c| c.run.config())
        .map_err(|e| e.to_string())?;
    server.quiet = true;
    client.quiet = true;
    let pauses = match (args.pause_at, args.pause) {
        (Some(at), Some(length)) => vec![Pause { at, length }],
        _ => Vec::new(),
    };
    Ok(SimConfig {
        server,
        client,
        tiers: Vec::new(),
        paused: None,
        pauses,
    })
}

/// A figure of /proc/self/status in kB (`VmHWM`, `VmRSS`), 0 where there
/// is none.
fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let rest = line.strip_prefix(field)?.strip_prefix(':')?;
                rest.split_whitespace().next()?.parse().ok()
            })
        })
        .unwrap_or(0)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match config(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("sim_memory: {e}");
            return ExitCode::from(2);
        }
    };
    let before_kb = status_kb("VmHWM");
    let outcome = match retry_storm::sim::run(&config) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("sim_memory: {e}");
            return ExitCode::from(2);
        }
    };
    let peak_kb = status_kb("VmHWM");
    let wall = outcome.wall.as_secs_f64();
    let client = &outcome.client;
    let peak_outstanding = client.rows.iter().filter_map(|r| r.outstanding).max();
    let line = serde_json::json!({
        "clients": client.clients,
        "peak_outstanding": peak_outstanding,
        "outstanding_at_end": client.outstanding,
        "refused": client.totals.tally.refused,
        "arrived": client.totals.tally.arrived,
        "attempts": client.totals.tally.sent(),
        "events": outcome.events,
        "wall_s": wall,
        "events_per_s": outcome.events as f64 / wall.max(1e-9),
        "simulated_s": client.elapsed.as_secs_f64(),
        "hwm_before_kb": before_kb,
        "hwm_kb": peak_kb,
    });
    println!("{line}");
    ExitCode::SUCCESS
}
