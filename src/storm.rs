//! The whole experiment, unattended: for each strategy, start a real server
//! and a real client as child processes, stop the server with SIGSTOP after
//! the warm-up, resume it with SIGCONT after the pause, observe, then read
//! the CSV files back and judge each run.
//!
//! Children run in their own process group (so a Ctrl-C reaches only this
//! runner, which then resumes and stops them in order) and are killed by the
//! kernel if the runner dies (`PR_SET_PDEATHSIG`), so no stopped or orphaned
//! server is ever left behind.

use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::Instant;

use clap::Parser;

use crate::cli::{ClientCli, ServerArgs, StrategyArg};
use crate::client::ClientConfig;
use crate::output::say;
use crate::server::ServerConfig;
use crate::sim::{self, Pause, SimConfig};
use crate::stats::{ClientRow, ServerRow, unix_ms};
use crate::timescale::compress;
use crate::verdict::{Figures, STREAK, Timeline, figures};

/// Everything a storm run needs.
#[derive(Debug, Clone)]
pub struct StormConfig {
    /// Strategies to compare, one run each.
    pub strategies: Vec<StrategyArg>,
    /// Warm-up before the pause (at full scale).
    pub warmup: Duration,
    /// How long the server stays stopped (at full scale).
    pub pause: Duration,
    /// Observation after the resume (at full scale).
    pub observe: Duration,
    /// The client's report interval (at full scale): the verdict's unit.
    pub report_interval: Duration,
    /// Time compression: 10 with `--quick`, else 1.
    pub time_scale: f64,
    /// One strategy after the other instead of side by side.
    pub in_turn: bool,
    /// Results folder.
    pub out: PathBuf,
    /// Plots as PNG instead of SVG.
    pub png: bool,
    /// Seed of every client.
    pub seed: u64,
    /// Extra flags for every server.
    pub server_args: Vec<String>,
    /// Extra flags for every client.
    pub client_args: Vec<String>,
    /// The program to run as `PROGRAM server ...` and `PROGRAM client ...`.
    pub program: PathBuf,
    /// Show live progress on stdout.
    pub progress: bool,
    /// Run in virtual time ([`crate::sim`]) instead of real processes.
    pub virtual_time: bool,
    /// Say what the engine did.
    pub verbose: bool,
}

/// Why a storm run failed.
#[derive(Debug)]
pub enum StormError {
    /// Flags that a server or client refuses.
    Flags(String),
    /// A file or process could not be handled.
    Io(String, io::Error),
    /// A child ended or misbehaved.
    Child(String),
    /// Stopped by SIGINT or SIGTERM; partial results are on disk.
    Interrupted,
}

impl fmt::Display for StormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StormError::Flags(msg) | StormError::Child(msg) => write!(f, "{msg}"),
            StormError::Io(what, e) => write!(f, "{what}: {e}"),
            StormError::Interrupted => write!(f, "interrupted"),
        }
    }
}

impl std::error::Error for StormError {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> StormError {
    let what = what.into();
    move |e| StormError::Io(what, e)
}

/// The result of one strategy's run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Strategy name.
    pub strategy: &'static str,
    /// The run's figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// When its phases happened.
    pub timeline: Timeline,
    /// Client CSV file name, in the results folder.
    pub client_csv: String,
    /// Server CSV file name, in the results folder.
    pub server_csv: String,
}

/// The protocol as run, for the summary.
#[derive(Debug, Clone, Serialize)]
pub struct Protocol {
    /// Warm-up, seconds (full scale).
    pub warmup_s: f64,
    /// Pause, seconds (full scale).
    pub pause_s: f64,
    /// Observation, seconds (full scale).
    pub observe_s: f64,
    /// Time compression (10 with --quick).
    pub time_scale: f64,
    /// Client report interval, seconds (full scale).
    pub report_interval_s: f64,
    /// Client seed.
    pub seed: u64,
}

/// A whole storm: the protocol and one report per strategy.
#[derive(Debug, Clone, Serialize)]
pub struct StormReport {
    /// The protocol.
    pub protocol: Protocol,
    /// One per strategy, in the order asked.
    pub runs: Vec<RunReport>,
}

/// Live state of one run, fed by the children's output.
#[derive(Default)]
struct Live {
    client: Mutex<String>,
    server: Mutex<String>,
}

/// One strategy's children.
struct Run {
    strategy: StrategyArg,
    server: Child,
    client: Option<Child>,
    url: String,
    live: Arc<Live>,
    timeline: Option<Timeline>,
}

impl Run {
    fn name(&self) -> &'static str {
        self.strategy.name()
    }
}

/// Sends `signal` to a child, if it is still there.
fn signal(child: &Child, signal: Signal) {
    if let Some(pid) = child.id() {
        let _ = kill(Pid::from_raw(pid as i32), signal);
    }
}

fn humanize(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

impl StormConfig {
    /// How long each client runs (full scale): the protocol plus enough
    /// intervals to confirm a recovery whose first interval is the last one
    /// that starts within the window.
    fn client_duration(&self) -> Duration {
        self.warmup + self.pause + self.observe + self.report_interval * (STREAK as u32 - 1)
    }

    /// The server's flags.
    pub fn server_argv(&self, strategy: StrategyArg) -> Vec<String> {
        let mut argv = vec![
            "--listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--csv".to_string(),
            self.out
                .join(format!("{}.server.csv", strategy.name()))
                .display()
                .to_string(),
            "--time-scale".to_string(),
            self.time_scale.to_string(),
        ];
        argv.extend(self.server_args.iter().cloned());
        argv
    }

    /// The client's flags, against `url`.
    pub fn client_argv(&self, strategy: StrategyArg, url: &str) -> Vec<String> {
        let mut argv: Vec<String> = [
            "--url",
            url,
            "--strategy",
            strategy.name(),
            "--duration",
            &humanize(self.client_duration()),
            "--report-interval",
            &humanize(self.report_interval),
            "--seed",
            &self.seed.to_string(),
            "--time-scale",
            &self.time_scale.to_string(),
            "--csv",
            &self
                .out
                .join(format!("{}.client.csv", strategy.name()))
                .display()
                .to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(self.client_args.iter().cloned());
        argv
    }

    /// The server's and client's configurations for `strategy`, exactly as
    /// the children parse their flags.
    pub fn configs(
        &self,
        strategy: StrategyArg,
    ) -> Result<(ServerConfig, ClientConfig), StormError> {
        let name = strategy.name();
        let argv = std::iter::once("server".to_string()).chain(self.server_argv(strategy));
        let server = ServerArgs::try_parse_from(argv)
            .and_then(|a| a.config())
            .map_err(|e| {
                StormError::Flags(format!("--server-args for {name}: {}", first_line(&e)))
            })?;
        let argv = std::iter::once("client".to_string())
            .chain(self.client_argv(strategy, "http://127.0.0.1:1/api"));
        let client = ClientCli::try_parse_from(argv)
            .and_then(|c| c.run.config())
            .map_err(|e| {
                StormError::Flags(format!("--client-args for {name}: {}", first_line(&e)))
            })?;
        Ok((server, client))
    }

    /// Checks every child's flags before anything starts.
    pub fn validate(&self) -> Result<(), StormError> {
        for &strategy in &self.strategies {
            self.configs(strategy)?;
        }
        Ok(())
    }

    /// The protocol's phases as planned from `start_ms`, at full scale:
    /// the timeline of a virtual-time run.
    pub fn timeline(&self, start_ms: u64) -> Timeline {
        let ms = |d: Duration| d.as_millis() as u64;
        let stop_ms = start_ms + ms(self.warmup);
        let resume_ms = stop_ms + ms(self.pause);
        Timeline {
            start_ms,
            stop_ms,
            resume_ms,
            end_ms: resume_ms + ms(self.observe),
        }
    }

    /// The server flags of a virtual run: the real ones, with the backlog
    /// fixed at [`sim::DEFAULT_BACKLOG`] unless given, so that results do
    /// not depend on the host's `somaxconn`.
    pub fn sim_server_argv(&self, strategy: StrategyArg) -> Vec<String> {
        let mut argv = self.server_argv(strategy);
        if !argv
            .iter()
            .any(|a| a == "--backlog" || a.starts_with("--backlog="))
        {
            argv.extend(["--backlog".to_string(), sim::DEFAULT_BACKLOG.to_string()]);
        }
        argv
    }

    /// The virtual-time experiment for `strategy`.
    pub fn sim_config(&self, strategy: StrategyArg) -> Result<SimConfig, StormError> {
        let (_, mut client) = self.configs(strategy)?;
        let argv = std::iter::once("server".to_string()).chain(self.sim_server_argv(strategy));
        let mut server = ServerArgs::try_parse_from(argv)
            .and_then(|a| a.config())
            .map_err(|e| StormError::Flags(format!("--server-args: {}", first_line(&e))))?;
        server.quiet = true;
        client.quiet = true;
        Ok(SimConfig {
            server,
            client,
            pauses: vec![Pause {
                at: self.warmup,
                length: self.pause,
            }],
        })
    }
}

/// The first line of a clap error, without its `error: ` prefix.
fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

fn command(program: &Path, role: &str, args: &[String], log: File) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg(role)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no
    // memory of the parent: the child is killed if the runner dies.
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from));
    }
    cmd
}

/// Copies a child's stdout to a log file, keeping the latest line.
fn follow(stdout: ChildStdout, mut log: File, latest: Arc<Live>, client: bool) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = writeln!(log, "{line}");
            let slot = if client {
                &latest.client
            } else {
                &latest.server
            };
            *slot.lock().expect("live lock poisoned") = line;
        }
    });
}

/// Starts a server and waits for its address.
async fn start_server(config: &StormConfig, strategy: StrategyArg) -> Result<Run, StormError> {
    let name = strategy.name();
    let stderr = File::create(config.out.join(format!("{name}.server.err")))
        .map_err(io_err(format!("create {name}.server.err")))?;
    let mut server = command(
        &config.program,
        "server",
        &config.server_argv(strategy),
        stderr,
    )
    .spawn()
    .map_err(io_err(format!("start the server for {name}")))?;
    let stdout = server.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let banner = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .ok()
        .and_then(|l| l.ok().flatten())
        .unwrap_or_default();
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .map(|w| w.trim_end_matches(':').to_string())
        .ok_or_else(|| {
            StormError::Child(format!(
                "the server for {name} did not start; see {}",
                config.out.join(format!("{name}.server.err")).display()
            ))
        })?;
    let mut log = File::create(config.out.join(format!("{name}.server.log")))
        .map_err(io_err(format!("create {name}.server.log")))?;
    let _ = writeln!(log, "{banner}");
    let live = Arc::new(Live::default());
    follow(lines.into_inner().into_inner(), log, live.clone(), false);
    Ok(Run {
        strategy,
        server,
        client: None,
        url,
        live,
        timeline: None,
    })
}

fn start_client(config: &StormConfig, run: &mut Run) -> Result<(), StormError> {
    let name = run.name();
    let stderr = File::create(config.out.join(format!("{name}.client.err")))
        .map_err(io_err(format!("create {name}.client.err")))?;
    let argv = config.client_argv(run.strategy, &run.url);
    let mut client = command(&config.program, "client", &argv, stderr)
        .spawn()
        .map_err(io_err(format!("start the client for {name}")))?;
    let log = File::create(config.out.join(format!("{name}.client.log")))
        .map_err(io_err(format!("create {name}.client.log")))?;
    follow(
        client.stdout.take().expect("stdout is piped"),
        log,
        run.live.clone(),
        true,
    );
    run.client = Some(client);
    Ok(())
}

/// The exact command lines, for the results folder.
fn command_lines(config: &StormConfig, runs: &[Run]) -> String {
    let quote = |a: &String| {
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a.clone()
        }
    };
    let line = |role: &str, args: Vec<String>| {
        let mut words = vec![config.program.display().to_string(), role.to_string()];
        words.extend(args.iter().map(quote));
        words.join(" ")
    };
    let mut out = String::new();
    for run in runs {
        out.push_str(&format!("# {}\n", run.name()));
        out.push_str(&line("server", config.server_argv(run.strategy)));
        out.push('\n');
        out.push_str(&line("client", config.client_argv(run.strategy, &run.url)));
        out.push('\n');
    }
    out
}

/// Picks the OK and timeout rates out of a client report line.
fn client_rates(line: &str) -> Option<(String, String)> {
    let field = |name: &str| {
        let start = line.find(name)? + name.len();
        let rest = &line[start..];
        Some(rest.split_whitespace().next()?.to_string())
    };
    Some((field("OK: ")?, field("timedout: ")?))
}

/// Picks the concurrency out of a server report line.
fn server_concurrency(line: &str) -> Option<String> {
    let start = line.find("concurrency: ")? + "concurrency: ".len();
    Some(line[start..].split(',').next()?.to_string())
}

/// One progress line: phase, time left, live rates of every run.
fn progress_line(phase: &str, left: Duration, runs: &[Run]) -> String {
    let mut line = format!("{phase:<8} {:>4}s left", left.as_secs());
    for run in runs {
        let client = run.live.client.lock().expect("live lock poisoned").clone();
        let server = run.live.server.lock().expect("live lock poisoned").clone();
        let (ok, timeouts) = client_rates(&client).unwrap_or(("-".into(), "-".into()));
        let conc = server_concurrency(&server).unwrap_or("-".into());
        line.push_str(&format!(
            " | {}: OK {ok}/s, timeouts {timeouts}/s, concurrency {conc}",
            run.name()
        ));
    }
    line
}

/// Waits `length` (already scaled), showing progress; fails early if a
/// child exits or `shutdown` completes. In the `last` phase a client that
/// ends well has simply finished (its run length ends with the phase).
async fn phase(
    name: &str,
    length: Duration,
    last: bool,
    runs: &mut [Run],
    progress: bool,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
) -> Result<(), StormError> {
    let end = Instant::now() + length;
    let tty = io::stdout().is_terminal();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks = 0u64;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(end) => break,
            _ = &mut *shutdown => return Err(StormError::Interrupted),
            _ = tick.tick() => {
                ticks += 1;
                if progress {
                    let line = progress_line(name, end - Instant::now(), runs);
                    if tty {
                        print!("\r\x1b[K{line}");
                        let _ = io::stdout().flush();
                    } else if ticks % 10 == 1 {
                        say(line);
                    }
                }
                for run in runs.iter_mut() {
                    let client = run.client.as_mut().expect("clients run during phases");
                    if let Ok(Some(status)) = client.try_wait()
                        && !(last && status.success())
                    {
                        return Err(StormError::Child(format!(
                            "the client for {} exited early ({status})", run.name()
                        )));
                    }
                    if let Ok(Some(status)) = run.server.try_wait() {
                        return Err(StormError::Child(format!(
                            "the server for {} exited early ({status})", run.name()
                        )));
                    }
                }
            }
        }
    }
    if progress && tty {
        println!();
    }
    Ok(())
}

/// Waits for a child, killing it after `grace`.
async fn reap(child: &mut Child, grace: Duration) {
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// Stops every child in order: clients first (SIGTERM: they write their
/// last row), then servers (resumed first, so none stays stopped).
async fn stop_all(runs: &mut [Run]) {
    for run in runs.iter() {
        if let Some(client) = &run.client {
            signal(client, Signal::SIGTERM);
        }
    }
    for run in runs.iter_mut() {
        if let Some(client) = &mut run.client {
            reap(client, Duration::from_secs(5)).await;
        }
    }
    for run in runs.iter() {
        signal(&run.server, Signal::SIGCONT);
        signal(&run.server, Signal::SIGTERM);
    }
    for run in runs.iter_mut() {
        reap(&mut run.server, Duration::from_secs(5)).await;
    }
}

/// Runs one batch of strategies side by side through the protocol.
async fn run_batch(
    config: &StormConfig,
    strategies: &[StrategyArg],
    shutdown: &mut (impl Future<Output = ()> + Unpin),
    commands: &mut File,
) -> Result<Vec<Run>, StormError> {
    let mut runs = Vec::new();
    let result = drive(config, strategies, &mut runs, shutdown, commands).await;
    stop_all(&mut runs).await;
    result.map(|()| runs)
}

async fn drive(
    config: &StormConfig,
    strategies: &[StrategyArg],
    runs: &mut Vec<Run>,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
    commands: &mut File,
) -> Result<(), StormError> {
    let k = config.time_scale;
    for &strategy in strategies {
        runs.push(start_server(config, strategy).await?);
    }
    commands
        .write_all(command_lines(config, runs).as_bytes())
        .map_err(io_err("write commands.txt"))?;
    let start_ms = unix_ms();
    for run in runs.iter_mut() {
        start_client(config, run)?;
    }
    let p = config.progress;
    phase(
        "warm-up",
        compress(config.warmup, k),
        false,
        runs,
        p,
        shutdown,
    )
    .await?;
    for run in runs.iter() {
        signal(&run.server, Signal::SIGSTOP);
    }
    let stop_ms = unix_ms();
    phase("pause", compress(config.pause, k), false, runs, p, shutdown).await?;
    for run in runs.iter() {
        signal(&run.server, Signal::SIGCONT);
    }
    let resume_ms = unix_ms();
    let rest = config.client_duration() - config.warmup - config.pause;
    phase("observe", compress(rest, k), true, runs, p, shutdown).await?;
    let end_ms = resume_ms + compress(config.observe, k).as_millis() as u64;
    // The clients end on their own at --duration.
    for run in runs.iter_mut() {
        let client = run.client.as_mut().expect("started above");
        let waited = tokio::select! {
            status = tokio::time::timeout(Duration::from_secs(30), client.wait()) => status,
            _ = &mut *shutdown => return Err(StormError::Interrupted),
        };
        match waited {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => {
                return Err(StormError::Child(format!(
                    "the client for {} failed ({status})",
                    run.name()
                )));
            }
            _ => {
                return Err(StormError::Child(format!(
                    "the client for {} did not finish",
                    run.name()
                )));
            }
        }
        run.timeline = Some(Timeline {
            start_ms,
            stop_ms,
            resume_ms,
            end_ms,
        });
    }
    Ok(())
}

/// Runs one strategy in virtual time: the same files as a real run.
fn simulate(
    config: &StormConfig,
    strategy: StrategyArg,
    commands: &mut File,
) -> Result<(RunReport, RunRows), StormError> {
    let name = strategy.name();
    let sim_config = config.sim_config(strategy)?;
    let outcome = sim::run(&sim_config).map_err(|e| StormError::Child(format!("{name}: {e}")))?;
    let quote = |args: Vec<String>| args.join(" ");
    writeln!(
        commands,
        "# {name}, in virtual time (storm --engine sim) with these flags\n\
         server {}\nclient {}",
        quote(config.sim_server_argv(strategy)),
        quote(config.client_argv(strategy, "sim"))
    )
    .map_err(io_err("write commands.txt"))?;
    if config.verbose {
        say(format!("{name}: {}", outcome.speed()));
    }
    let rows = RunRows {
        client: outcome.client.rows,
        server: outcome.server_rows,
    };
    let timeline = config.timeline(0);
    let report = RunReport {
        strategy: name,
        figures: figures(&rows.client, &rows.server, &timeline),
        timeline,
        client_csv: format!("{name}.client.csv"),
        server_csv: format!("{name}.server.csv"),
    };
    Ok((report, rows))
}

fn read_csv<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, StormError> {
    let mut reader = csv::Reader::from_path(path)
        .map_err(|e| StormError::Io(path.display().to_string(), io::Error::other(e)))?;
    reader
        .deserialize()
        .collect::<Result<Vec<T>, _>>()
        .map_err(|e| StormError::Io(path.display().to_string(), io::Error::other(e)))
}

/// A finished run's report rows, as read back from its CSV files.
#[derive(Debug, Clone)]
pub struct RunRows {
    /// The client's rows.
    pub client: Vec<ClientRow>,
    /// The server's rows.
    pub server: Vec<ServerRow>,
}

/// Judges a finished run from its CSV files, returning the rows too (for
/// the plots).
fn judge(config: &StormConfig, run: &Run) -> Result<(RunReport, RunRows), StormError> {
    let client_csv = format!("{}.client.csv", run.name());
    let server_csv = format!("{}.server.csv", run.name());
    let client: Vec<ClientRow> = read_csv(&config.out.join(&client_csv))?;
    let server: Vec<ServerRow> = read_csv(&config.out.join(&server_csv))?;
    let timeline = run.timeline.expect("judged runs are finished");
    let report = RunReport {
        strategy: run.name(),
        figures: figures(&client, &server, &timeline),
        timeline,
        client_csv,
        server_csv,
    };
    Ok((report, RunRows { client, server }))
}

/// Runs the whole comparison; writes every file into `config.out`.
pub async fn run(
    config: &StormConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<StormReport, StormError> {
    config.validate()?;
    std::fs::create_dir_all(&config.out)
        .map_err(io_err(format!("create {}", config.out.display())))?;
    let mut commands =
        File::create(config.out.join("commands.txt")).map_err(io_err("create commands.txt"))?;
    let mut shutdown = pin!(shutdown);
    let batches: Vec<Vec<StrategyArg>> = if config.in_turn {
        config.strategies.iter().map(|&s| vec![s]).collect()
    } else {
        vec![config.strategies.clone()]
    };
    let (mut reports, mut rows) = (Vec::new(), Vec::new());
    if config.virtual_time {
        for &strategy in &config.strategies {
            let (report, run_rows) = simulate(config, strategy, &mut commands)?;
            reports.push(report);
            rows.push(run_rows);
        }
    }
    for batch in batches.into_iter().filter(|_| !config.virtual_time) {
        let runs = run_batch(config, &batch, &mut shutdown, &mut commands).await?;
        for run in &runs {
            let (report, run_rows) = judge(config, run)?;
            reports.push(report);
            rows.push(run_rows);
        }
    }
    let report = StormReport {
        protocol: Protocol {
            warmup_s: config.warmup.as_secs_f64(),
            pause_s: config.pause.as_secs_f64(),
            observe_s: config.observe.as_secs_f64(),
            time_scale: config.time_scale,
            report_interval_s: config.report_interval.as_secs_f64(),
            seed: config.seed,
        },
        runs: reports,
    };
    write_summaries(config, &report)?;
    crate::plot::draw_all(config, &report, &rows)
        .map_err(|e| StormError::Child(format!("plots: {e}")))?;
    Ok(report)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// The summary table, as Markdown (also printed on the terminal).
pub fn summary_table(report: &StormReport) -> String {
    let mut out = String::from(
        "| strategy | baseline OK/s | recovered | recovery (s) | peak concurrency | wasted | amplification | p99 before (ms) | p99 after (ms) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &report.runs {
        let f = &r.figures;
        out.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.strategy,
            f.baseline_ok_per_s,
            if f.recovered { "yes" } else { "no" },
            opt(f.recovery_s, 1),
            f.peak_concurrency,
            f.wasted,
            opt(f.amplification, 2),
            opt(f.p99_before_ms, 1),
            opt(f.p99_after_ms, 1),
        ));
    }
    out
}

fn write_summaries(config: &StormConfig, report: &StormReport) -> Result<(), StormError> {
    let p = &report.protocol;
    let markdown = format!(
        "# Storm summary\n\n\
         Warm-up {} s, pause {} s, observation {} s (time compressed {}x; \
         times and rates below are as measured), client report interval {} s, seed {}.\n\n{}\n\
         Recovered: OK/s back to 90 % of the baseline for {STREAK} consecutive report \
         intervals, the first starting within the observation, with no relapse of as many \
         intervals afterwards. Recovery: seconds from resume to the start of that streak. \
         Wasted: requests the server finished (or dropped, with --on-disconnect cancel) \
         after their client had gone. Amplification: attempts sent per logical request \
         started, from the stop on. p99: OK-weighted mean of the intervals' p99, before \
         the stop and after recovery (or resume).\n",
        p.warmup_s,
        p.pause_s,
        p.observe_s,
        p.time_scale,
        p.report_interval_s,
        p.seed,
        summary_table(report)
    );
    std::fs::write(config.out.join("summary.md"), markdown).map_err(io_err("write summary.md"))?;
    let json = serde_json::to_string_pretty(report)
        .map_err(io::Error::other)
        .map_err(io_err("summary.json"))?;
    std::fs::write(config.out.join("summary.json"), json + "\n")
        .map_err(io_err("write summary.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_rates_are_read_from_report_lines() {
        let line = "OK: 98.00 req/sec, errors: 0.00 req/sec, timedout: 3.50 req/sec, retries: 0.00 req/sec";
        assert_eq!(client_rates(line), Some(("98.00".into(), "3.50".into())));
        assert_eq!(client_rates("1000 clients -> ..."), None);
        let line = "concurrency: 4952, last delay: 10m, completed: 0.00 req/sec";
        assert_eq!(server_concurrency(line), Some("4952".into()));
    }
}
