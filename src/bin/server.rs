//! `server`: the HTTP server whose latency explodes with concurrency.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::ServerArgs;
use retry_storm::output::say;
use retry_storm::{limits, server, shutdown};

#[tokio::main]
async fn main() -> ExitCode {
    let args = ServerArgs::parse();
    let config = args.config().unwrap_or_else(|e| e.exit());
    // Descriptors for a full backlog plus the connections being served.
    if let Some(warning) = limits::ensure_nofile(u64::from(config.backlog) + 1024, "the server") {
        eprintln!("{warning}");
    }
    let server = match server::Server::bind(config.clone()) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    say(server::describe(&config, server.local_addr()));
    server.run(shutdown::requested()).await;
    ExitCode::SUCCESS
}
