//! `client`: simulated users sending Poisson traffic and retrying failures;
//! `client plan`: a strategy's schedule, without any network.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::ClientCli;

#[tokio::main]
async fn main() -> ExitCode {
    retry_storm::programs::client(ClientCli::parse()).await
}
