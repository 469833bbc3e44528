//! `client`: simulated users sending Poisson traffic and retrying failures.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::ClientArgs;
use retry_storm::output::say;
use retry_storm::{client, limits, shutdown};

#[tokio::main]
async fn main() -> ExitCode {
    let args = ClientArgs::parse();
    let config = args.config().unwrap_or_else(|e| e.exit());
    // One connection per user at most, plus a margin for the runtime.
    if let Some(warning) = limits::ensure_nofile(u64::from(config.clients) + 64, "the client") {
        eprintln!("{warning}");
    }
    say(client::describe(&config));
    match client::run(config, shutdown::requested()).await {
        Ok(summary) => {
            say(summary);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
