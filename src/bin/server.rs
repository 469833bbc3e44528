//! `server`: the HTTP server whose latency explodes with concurrency.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::ServerArgs;

#[tokio::main]
async fn main() -> ExitCode {
    retry_storm::programs::server(ServerArgs::parse()).await
}
