//! The `server` and `client` programs as functions, so that their binaries
//! and `storm` (which runs them as child processes of itself) share one
//! implementation; and `storm sweep`.

use std::future::Future;
use std::process::ExitCode;

use crate::cli::{ClientCli, ClientCommand, PlanFormat, ServerArgs, SweepArgs};
use crate::output::say;
use crate::storm::StormError;
use crate::{client, limits, planner, server, shutdown, sweep};

/// Runs `program` (the server or the client) to its end on a tokio runtime
/// with `threads` worker threads (`--threads`; `None` or zero is one per
/// core). The program's top-level future runs on the calling thread.
///
/// One thread is a current-thread runtime: its tasks never wake another
/// thread, which at 4,500 req/s saves a quarter to a third of each
/// program's CPU per request (results/bench.md); several threads share the
/// load of a busier run (a one-thread client collapsed at 40,000 req/s).
pub fn block_on(threads: Option<u32>, program: impl Future<Output = ExitCode>) -> ExitCode {
    let runtime = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(n) if n > 1 => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n as usize)
            .enable_all()
            .build(),
        _ => tokio::runtime::Runtime::new(),
    };
    match runtime {
        Ok(runtime) => runtime.block_on(program),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `storm sweep`: the critical pauses, their files and the heat map.
pub fn sweep(args: SweepArgs) -> ExitCode {
    let config = args.config();
    let quiet = args.common.quiet;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let settings = config.settings().len();
    if !quiet {
        say(format!(
            "sweep: {settings} setting(s), pauses up to {} s, {} seed(s) per point, {} thread(s); \
             results in {}",
            config.max_pause.as_secs_f64(),
            config.seeds,
            config.threads,
            config.storm.out.display()
        ));
    }
    let result = sweep::run(&config, |critical| {
        if !quiet {
            say(critical);
        }
    })
    .and_then(|report| sweep::write(&config, &report, &command).map(|()| report));
    match result {
        Ok(report) => {
            if args.verbose {
                say(format!(
                    "sim: {} runs, {} events in {:.2} s ({:.1} M events/s on {} thread(s))",
                    report.runs,
                    report.events,
                    report.wall.as_secs_f64(),
                    report.events as f64 / report.wall.as_secs_f64().max(1e-9) / 1e6,
                    config.threads
                ));
            }
            say(format!("results: {}", config.storm.out.display()));
            ExitCode::SUCCESS
        }
        Err(StormError::Flags(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the server until SIGINT or SIGTERM.
pub async fn server(args: ServerArgs) -> ExitCode {
    let config = args.config().unwrap_or_else(|e| e.exit());
    if let Some(warning) = server::exposure_warning(config.listen) {
        eprintln!("{warning}");
    }
    if let Some(warning) =
        limits::ensure_nofile(server::descriptors_needed(config.backlog), "the server")
    {
        eprintln!("{warning}");
    }
    let server = match server::Server::bind(config.clone()) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Signals are handled from before the first line, so that anyone who
    // waits for it can stop the server in order.
    let shutdown = shutdown::requested();
    say(server::describe(&config, server.local_addr()));
    server.run(shutdown).await;
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
    let shutdown = shutdown::requested();
    say(client::describe(&config));
    match client::run(config, shutdown).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::runtime::{Handle, RuntimeFlavor};

    /// Runs `block_on` and reports the flavor and worker count it ran on.
    fn ran_on(threads: Option<u32>) -> (RuntimeFlavor, usize) {
        let mut seen = None;
        let code = block_on(threads, async {
            let handle = Handle::current();
            seen = Some((handle.runtime_flavor(), handle.metrics().num_workers()));
            ExitCode::SUCCESS
        });
        assert_eq!(code, ExitCode::SUCCESS);
        seen.expect("the program ran")
    }

    #[test]
    fn one_thread_is_a_current_thread_runtime_and_more_are_workers() {
        assert_eq!(ran_on(Some(1)), (RuntimeFlavor::CurrentThread, 1));
        assert_eq!(ran_on(Some(3)), (RuntimeFlavor::MultiThread, 3));
        // tokio's default: one worker per core (or TOKIO_WORKER_THREADS).
        let default = ran_on(None);
        assert_eq!(default.0, RuntimeFlavor::MultiThread);
        assert_eq!(ran_on(Some(0)), default, "zero means the default");
    }
}
