//! The programs as functions: `server`, `client` and `storm` (with its
//! `run`, `sweep` and `proxy`), each from its parsed flags to its exit
//! code. The
//! binaries parse and call these; `storm` also runs the other two as its
//! own children (`storm server ...`, `storm client ...`).
//!
//! Exit codes (docs/exit-codes.md): 0 success, a server or client stopped
//! by SIGINT or SIGTERM included; 2 bad flags, a bad scenario, a status
//! descriptor that cannot be used, `--tui` without a terminal, a server
//! that cannot bind or a client that cannot start; 130 interrupted
//! (SIGINT or SIGTERM during a storm, or a second signal); 1 anything
//! else.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{
    ClientArgs, ClientCli, ClientCommand, ExecArgs, Generate, PlanFormat, ProgramFlags, RunArgs,
    ServerArgs, StormCli, StormCommand, SweepArgs,
};
use crate::experiment::scenario::Engine;
use crate::experiment::{self, Storm, StormError, sweep};
use crate::model::{burst, planner};
use crate::net::runtime::block_on;
use crate::net::{client, rlimit, server, signals};
use crate::report::metrics::{ClientMetrics, ServerExposition};
use crate::report::output::say;
use crate::report::status::StatusSink;
use crate::view::Setup;

mod calibrate;
mod exit;
mod interrupt;
mod live;
mod merge;
mod metrics;
mod proxy;
mod start;

use exit::failure;
use start::run_program;

/// Sets `stop` at SIGINT or SIGTERM from now on; exits 1 if it cannot.
fn stop_on_signal(stop: &experiment::Stop) -> Result<(), ExitCode> {
    interrupt::stop_on_signal(stop).map_err(|e| {
        eprintln!("error: cannot handle SIGINT and SIGTERM: {e}");
        ExitCode::FAILURE
    })
}

/// Prints what `--generate` asks for: the man page of `page` (named
/// `name`) or the completions of the whole program.
fn generate(
    kind: Generate,
    page: clap::Command,
    name: &'static str,
    program: clap::Command,
) -> ExitCode {
    let bin = program.get_name().to_string();
    match kind.write(page, name, program, &bin, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`| head`) has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `server` program.
pub fn server(args: ServerArgs) -> ExitCode {
    if let Some(kind) = args.generate.generate {
        return generate(kind, ServerArgs::command(), "server", ServerArgs::command());
    }
    let (tui, status_fd) = (args.view.tui, args.report.status_fd);
    run_program(tui, status_fd, |status| serve(args, status))
}

/// Runs the server until SIGINT or SIGTERM.
async fn serve(args: ServerArgs, status: Option<StatusSink>) -> ExitCode {
    let mut config = args.config().unwrap_or_else(|e| e.exit());
    // The live view shows the rows; the summary prints once it has closed.
    let tui = args.view.tui;
    config.quiet |= tui;
    if let Some(warning) = server::exposure_warning(config.listen) {
        eprintln!("{warning}");
    }
    if let Some(warning) =
        rlimit::ensure_nofile(server::descriptors_needed(config.backlog), "the server")
    {
        eprintln!("{warning}");
    }
    // A tier's metrics, its calls' beside its server's, are labelled with
    // its name, which may be the address it is bound to: they are made
    // once it is.
    let wanted = args.report.metrics_listen.is_some();
    let mut tier = None;
    let bound = server::Server::bind_with(config.clone(), |addr| {
        let name = args.tier.name(addr).filter(|_| wanted)?;
        let metrics = ServerExposition::tier(&config, &name);
        let calls = metrics.calls.clone();
        tier = Some((name, metrics));
        calls
    });
    let server = match bound {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let label = tier.as_ref().map(|(name, _)| name.clone());
    let served = metrics::Served::start(args.report.metrics_listen, || match tier {
        Some((_, metrics)) => metrics,
        None => ServerExposition::plain(&config),
    });
    let served = match served {
        Ok(served) => served,
        Err(code) => return code,
    };
    let server = match &served.metrics {
        Some(m) => server.with_metrics(m.server.clone()),
        None => server,
    };
    // Signals are handled from before the first line, so that anyone who
    // waits for it can stop the server in order.
    let shutdown = signals::requested();
    let description = server::describe(&config, server.local_addr());
    let note = match label {
        Some(name) => format!("{}, every series labelled tier={name:?}", served.note()),
        None => served.note(),
    };
    say(format!("{description}{note}"));
    let view = match live::open(tui, || Setup::Server {
        title: description,
        interval: config.report_interval,
    }) {
        Ok(view) => view,
        Err(code) => return code,
    };
    let server = match live::sink(status, view.as_ref()) {
        Some(sink) => server.with_status(sink),
        None => server,
    };
    let summary = server.run(shutdown).await;
    if let Some(view) = view {
        view.close();
        say(summary);
    }
    if signals::second_arrived() {
        signals::second();
    }
    ExitCode::SUCCESS
}

/// The `client` program (and `client plan`).
pub fn client(cli: ClientCli) -> ExitCode {
    if let Some(kind) = cli.generate.generate {
        return generate(kind, ClientCli::command(), "client", ClientCli::command());
    }
    match cli.command {
        Some(ClientCommand::Plan(args)) => {
            if let Some(kind) = args.generate.generate {
                let plan = ClientCli::command()
                    .find_subcommand("plan")
                    .expect("plan is a subcommand")
                    .clone();
                return generate(kind, plan, "client-plan", ClientCli::command());
            }
            let request = args.request().unwrap_or_else(|e| e.exit());
            let plan = planner::plan(&request);
            let burst_rows = request.burst.as_ref().map(burst::burst);
            match (args.format, burst_rows) {
                (PlanFormat::Table, None) => say(plan.table().trim_end()),
                (PlanFormat::Table, Some(rows)) => {
                    say(plan.table().trim_end());
                    say("");
                    say(burst::describe(request.burst.as_ref().expect("asked for")));
                    say(burst::table(&rows).trim_end());
                }
                // One CSV table: the burst's, when it is asked for.
                (PlanFormat::Csv, None) => say(plan.csv().trim_end()),
                (PlanFormat::Csv, Some(rows)) => say(burst::csv(&rows).trim_end()),
            }
            ExitCode::SUCCESS
        }
        None => {
            let (tui, status_fd) = (cli.run.view.tui, cli.run.report.status_fd);
            run_program(tui, status_fd, |status| load(cli.run, status))
        }
    }
}

/// Runs the client's load until its duration, SIGINT or SIGTERM.
async fn load(args: ClientArgs, status: Option<StatusSink>) -> ExitCode {
    let (mut config, source) = args.sharded_config().unwrap_or_else(|e| e.exit());
    // The live view shows the rows; the summary prints once it has closed.
    let tui = args.view.tui;
    config.quiet |= tui;
    // One connection per user at most, plus a margin for the runtime.
    if let Some(warning) = rlimit::ensure_nofile(config.users().count() as u64 + 64, "the client") {
        eprintln!("{warning}");
    }
    let served = match metrics::Served::start(args.report.metrics_listen, ClientMetrics::new) {
        Ok(served) => served,
        Err(code) => return code,
    };
    let shutdown = signals::requested();
    let description = client::describe(&config, source);
    say(format!("{description}{}", served.note()));
    let view = match live::open(tui, || Setup::Client {
        title: description,
        interval: config.report_interval,
        duration: config.duration,
    }) {
        Ok(view) => view,
        Err(code) => return code,
    };
    let status = live::sink(status, view.as_ref());
    let result = client::run_with(config, status, served.metrics.clone(), shutdown).await;
    drop(view);
    match result {
        Ok(summary) => {
            say(summary);
            if signals::second_arrived() {
                signals::second();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The `storm` program: the default storm, a scenario, a sweep, or (as the
/// runner's child) a server or a client.
pub fn storm(cli: StormCli) -> ExitCode {
    // What `storm SUBCOMMAND --generate KIND` prints: the subcommand's
    // man page (`storm-SUBCOMMAND`), or the whole program's completions.
    let page = |kind: Generate, name: &str, man: &'static str| {
        let subcommand = StormCli::command()
            .find_subcommand(name)
            .expect("a storm subcommand")
            .clone();
        generate(kind, subcommand, man, StormCli::command())
    };
    match cli.command {
        Some(StormCommand::Server(args)) => server(*args),
        Some(StormCommand::Client(args)) => client(*args),
        Some(StormCommand::Guard) => match experiment::outage::guard() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("storm guard: {e}");
                ExitCode::FAILURE
            }
        },
        Some(StormCommand::Sweep(args)) => match args.generate.generate {
            Some(kind) => page(kind, "sweep", "storm-sweep"),
            None => sweep(*args),
        },
        Some(StormCommand::Calibrate(args)) => match args.generate.generate {
            Some(kind) => page(kind, "calibrate", "storm-calibrate"),
            None => calibrate::calibrate(*args, own_program()),
        },
        Some(StormCommand::Merge(args)) => match args.generate.generate {
            Some(kind) => page(kind, "merge", "storm-merge"),
            None => merge::merge(*args),
        },
        Some(StormCommand::Proxy(args)) => match args.generate.generate {
            Some(kind) => page(kind, "proxy", "storm-proxy"),
            None => proxy::proxy(*args),
        },
        Some(StormCommand::Run(args)) => match args.generate.generate {
            Some(kind) => page(kind, "run", "storm-run"),
            None => run(*args),
        },
        None => match cli.run.generate.generate {
            Some(kind) => generate(kind, StormCli::command(), "storm", StormCli::command()),
            None => {
                let args = cli.run;
                let storm = args
                    .scenario()
                    .map(|s| args.exec.storm(s, own_program(), None));
                start(storm, &args.exec, merge::command_line(None))
            }
        },
    }
}

/// `storm run FILE`.
fn run(args: RunArgs) -> ExitCode {
    let storm = args
        .scenario()
        .map(|s| args.exec.storm(s, own_program(), args.stem().as_deref()));
    start(storm, &args.exec, merge::command_line(args.file.as_deref()))
}

/// This program's path, to run its children.
fn own_program() -> PathBuf {
    std::env::current_exe().expect("the path of this program")
}

/// Prints the storm's scenario (`--dump-scenario`) or runs it (its
/// share of the runs, named by `--shard` or the environment); `command`
/// is this process's, for a shard's manifest.
fn start(
    storm: Result<Storm, impl std::fmt::Display>,
    exec: &ExecArgs,
    command: Vec<String>,
) -> ExitCode {
    let storm = storm.map_err(|e| e.to_string()).and_then(|mut storm| {
        let (shard, source) = exec.shard()?;
        storm.shard = shard;
        if !shard.is_whole() {
            say(format!("storm: shard {shard} from {source}"));
        }
        Ok(storm)
    });
    let storm = match storm {
        Ok(storm) => storm,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if exec.dump_scenario {
        let _ = write!(std::io::stdout().lock(), "{}", storm.scenario.to_toml());
        return ExitCode::SUCCESS;
    }
    let tui = exec.view.tui;
    if tui && storm.engine == Engine::Sim {
        eprintln!(
            "error: --tui watches a storm on the real engine; virtual time has nothing to \
             watch live (its runs show a progress bar instead)"
        );
        return ExitCode::from(2);
    }
    if let Err(code) = live::check(tui) {
        return code;
    }
    // The runner spawns its children from this one thread, so that the
    // kernel's parent-death signal follows the runner's lifetime.
    block_on(run_storm(storm, command, tui))
}

/// Runs a storm to its end, or until SIGINT or SIGTERM; with `tui`, in
/// the live view.
async fn run_storm(mut storm: Storm, command: Vec<String>, tui: bool) -> ExitCode {
    if let Err(e) = storm.validate(&ProgramFlags) {
        return failed(e, &storm);
    }
    let names: Vec<&str> = storm
        .scenario
        .cases
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let title = format!(
        "storm: {} for {}; results in {}",
        names.join(", "),
        match storm.engine {
            Engine::Sim => "a run in virtual time".to_string(),
            Engine::Real if storm.time_scale > 1.0 => {
                format!("a quick run (times / {})", storm.time_scale)
            }
            Engine::Real => "a full run".to_string(),
        },
        storm.out.display()
    );
    // Signals are handled from before the first line, whatever this
    // process inherited: the real engine waits on them in its runtime;
    // virtual time keeps this thread busy, so it polls a flag between runs.
    let handlers = match storm.engine {
        Engine::Real => Some(signals::requested()),
        Engine::Sim => {
            if let Err(code) = stop_on_signal(&storm.stop) {
                return code;
            }
            None
        }
    };
    say(&title);
    let shutdown = async move {
        match handlers {
            Some(requested) => requested.await,
            None => std::future::pending().await,
        }
    };
    let batches = storm.batches();
    let view = match live::open(tui, || Setup::Storm { title, batches }) {
        Ok(view) => view,
        Err(code) => return code,
    };
    if let Some(view) = &view {
        storm.watch = Some(view.watch());
        storm.progress = false;
    }
    let result = experiment::run(&storm, &ProgramFlags, shutdown).await;
    drop(view);
    match result {
        Ok(report) => {
            if let Err(e) = merge::write_storm_manifest(&storm, command) {
                return failed(e, &storm);
            }
            say(report.table().trim_end());
            say(format!("results: {}", storm.out.display()));
            ExitCode::SUCCESS
        }
        Err(e) => failed(e, &storm),
    }
}

/// Reports why a storm failed, with the exit code that says so.
fn failed(e: StormError, storm: &Storm) -> ExitCode {
    match e {
        StormError::Flags(msg) | StormError::Target(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        StormError::Interrupted => {
            let what = match (storm.engine, &storm.scenario.outage) {
                (Engine::Real, Some(outage)) if storm.scenario.target.is_some() => {
                    format!("{}, every client stopped", outage.undone())
                }
                (Engine::Real, _) => "every server resumed and stopped".to_string(),
                (Engine::Sim, _) => "the runs made so far written, no summary".to_string(),
            };
            eprintln!(
                "interrupted: {what}; partial results in {}",
                storm.out.display()
            );
            ExitCode::from(130)
        }
        e @ StormError::InterruptedBeforeLoad => {
            eprintln!("{e}");
            ExitCode::from(130)
        }
        e => {
            eprintln!("error: {e}; partial results in {}", storm.out.display());
            ExitCode::FAILURE
        }
    }
}

/// `storm sweep`: every setting's edge (or, at one pause, its share that
/// recovered), its files and its maps.
fn sweep(args: SweepArgs) -> ExitCode {
    let parsed = args.shard().and_then(|(shard, source)| {
        let mut config = args.config()?;
        config.shard = shard;
        // Against a target each run is a storm, with this program's
        // children (clients, the outage's guardian, a fault proxy).
        config.storm.program = own_program();
        Ok((config, source))
    });
    let (config, source) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(code) = stop_on_signal(&config.storm.stop) {
        return code;
    }
    let quiet = args.output.quiet;
    // The summary says the command as typed; a shard's manifest, with the
    // scenario file made absolute, for a merge run elsewhere.
    let command = std::env::args_os()
        .map(|word| word.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let argv = merge::command_line(args.file.as_deref());
    // Which shard, quiet or not: a cluster job's log should say.
    if !config.shard.is_whole() {
        say(format!("sweep: shard {} from {source}", config.shard));
    }
    let scenario = &config.storm.scenario;
    if let (false, Some(url), Some(outage)) = (quiet, &scenario.target, &scenario.outage) {
        say(format!(
            "sweep: measuring {url} through {outage}: {} setting(s), pauses up to {} s, a \
             storm a run until T50's 95 % interval is {} s wide or {} storms a setting; \
             every run in {}",
            config.settings().len(),
            config.max_pause.as_secs_f64(),
            config.precision.as_secs_f64(),
            config.max_runs,
            config.storm.out.join(sweep::RUNS_CSV).display()
        ));
    } else if !quiet {
        let pauses = match config.pause {
            Some(pause) => format!("a pause of {} s", pause.as_secs_f64()),
            None => format!("pauses up to {} s", config.max_pause.as_secs_f64()),
        };
        say(format!(
            "sweep: {} setting(s), {pauses}, {} seed(s) per point, {} thread(s); \
             results in {}",
            config.settings().len(),
            config.seeds,
            config.threads,
            config.storm.out.display()
        ));
    }
    let result = sweep::run(&config, &ProgramFlags, |line| {
        if !quiet {
            say(line);
        }
    })
    .and_then(|report| sweep::write(&config, &report, &command).map(|()| report))
    .and_then(|report| merge::write_sweep_manifest(&config, &report, argv).map(|()| report));
    match result {
        Ok(report) if report.stopped => {
            eprintln!(
                "interrupted: the storm under way stopped, its outage undone; the {} storm(s) \
                 made before it are in {} and the edges they give in {}",
                report.runs,
                config.storm.out.join(sweep::RUNS_CSV).display(),
                config.storm.out.join("critical.csv").display()
            );
            ExitCode::from(130)
        }
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
        Err(e) => failure(e),
    }
}
