//! `client`: simulated users sending Poisson traffic and retrying failures;
//! `client plan`: a strategy's schedule, without any network.

use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::{ClientCli, ClientCommand, PlanFormat};
use retry_storm::output::say;
use retry_storm::{client, limits, planner, shutdown};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = ClientCli::parse();
    if let Some(ClientCommand::Plan(args)) = cli.command {
        let request = args.request().unwrap_or_else(|e| e.exit());
        let plan = planner::plan(&request);
        match args.format {
            PlanFormat::Table => print!("{}", plan.table()),
            PlanFormat::Csv => print!("{}", plan.csv()),
        }
        return ExitCode::SUCCESS;
    }
    let config = cli.run.config().unwrap_or_else(|e| e.exit());
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
