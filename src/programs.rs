//! The `server` and `client` programs as functions, so that their binaries
//! and `storm` (which runs them as child processes of itself) share one
//! implementation.

use std::process::ExitCode;

use crate::cli::{ClientCli, ClientCommand, PlanFormat, ServerArgs};
use crate::output::say;
use crate::{client, limits, planner, server, shutdown};

/// Runs the server until SIGINT or SIGTERM.
pub async fn server(args: ServerArgs) -> ExitCode {
    let config = args.config().unwrap_or_else(|e| e.exit());
    if let Some(warning) = server::exposure_warning(config.listen) {
        eprintln!("{warning}");
    }
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

/// Runs the client (or prints a plan) as its command line says.
pub async fn client(cli: ClientCli) -> ExitCode {
    if let Some(ClientCommand::Plan(args)) = cli.command {
        let request = args.request().unwrap_or_else(|e| e.exit());
        let plan = planner::plan(&request);
        match args.format {
            PlanFormat::Table => say(plan.table().trim_end()),
            PlanFormat::Csv => say(plan.csv().trim_end()),
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
