//! The real engine: for each case, a real server and a real client as child
//! processes; the servers stopped with SIGSTOP after the warm-up and resumed
//! with SIGCONT after the pause; the clients' CSV files read back at the
//! end. Live progress comes from the children's status lines, and whether
//! a client kept up from its last one, its totals. Against a target only
//! the clients run, one case at a time, the outage as the storm's says:
//! through a fault proxy of each run's own when the outage is its fault,
//! switched on (SIGUSR1) for the pause and off (SIGUSR2) at the resume.

use std::fs::File;
use std::future::Future;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Child;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::children::{self, Live, stderr_tail};
use super::error::{StormError, io_err};
use super::scenario::{Case, join_flags};
use super::storm::{Storm, confirmation};
use super::summary::CaseRun;
use super::target::{self, Wires};
use crate::model::timescale::compress;
use crate::report::output::{read_rows, say};
use crate::report::rows::unix_ms;
use crate::report::status::ClientTotals;
use crate::report::verdict::Timeline;
use crate::view::{Feed, Phase, Plan, Progress};

/// How long a server may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// One run's children: repetition `rep` of a case.
struct Run<'a> {
    case: &'a Case,
    rep: u32,
    /// The run's name: its case's, with several runs its repetition's.
    name: String,
    /// The results folder, where its children's files are.
    out: PathBuf,
    /// The project's server; against a target, the run's fault proxy if
    /// the outage is its fault, else none.
    server: Option<Child>,
    /// `server` is the fault proxy in front of a target.
    proxied: bool,
    /// The tiers between client and server, from the client inward, each
    /// with the URL it calls.
    tiers: Vec<(Child, String)>,
    client: Option<Child>,
    /// The reader of the client's status lines.
    client_status: Option<JoinHandle<()>>,
    url: String,
    live: Arc<Mutex<Live>>,
    timeline: Option<Timeline>,
}

/// The shutdown signal, pinned so that every phase can wait on it.
type Shutdown<'a> = Pin<&'a mut dyn Future<Output = ()>>;

/// Runs every case through the protocol, each `storm.runs()` times, and
/// reads back their rows. Runs go side by side `storm.parallel` at a time,
/// repetition after repetition; by default every case of one repetition
/// at once.
pub(super) async fn run(
    storm: &Storm,
    wires: &Wires,
    commands: &mut File,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Result<Vec<CaseRun>, StormError> {
    let units = storm.units();
    let batches = units.len().div_ceil(storm.batch_size());
    // Batch after batch: a bar of the runs done and the time left, with
    // the progress line in it.
    let bar = Progress::new(
        units.len() as u64,
        "runs",
        storm.progress && batches > 1,
        true,
    );
    let length = compress(storm.client_duration(), storm.time_scale);
    let mut runs = Vec::new();
    for (index, batch) in units.chunks(storm.batch_size()).enumerate() {
        bar.deadline(std::time::Instant::now() + length * (batches - index) as u32);
        let mut children = Vec::new();
        let batch_of = (index, batch);
        let result = drive(
            storm,
            wires,
            batch_of,
            &mut children,
            commands,
            &bar,
            shutdown.as_mut(),
        )
        .await;
        stop_all(&mut children).await;
        result?;
        // The clients' last lines, their totals, read before their runs.
        let deadline = Instant::now() + Duration::from_secs(5);
        for run in &mut children {
            if let Some(status) = run.client_status.take() {
                let _ = tokio::time::timeout_at(deadline, status).await;
            }
        }
        for run in &children {
            let totals = run.live.lock().expect("live lock poisoned").totals.take();
            if totals.is_none() {
                bar.suspend(|| {
                    eprintln!(
                        "warning: the client for {} gave no totals; whether it kept up is not known",
                        run.name
                    )
                });
            }
            runs.push(read_back(storm, run, totals.as_ref())?);
        }
        bar.inc(batch.len() as u64);
    }
    Ok(runs)
}

/// Opens a file of a run in the results folder for a child's output.
fn output(storm: &Storm, case: &Case, rep: u32, suffix: &str) -> Result<File, StormError> {
    let path = storm.file(case, rep, suffix);
    File::create(&path).map_err(io_err(format!("create {}", path.display())))
}

/// Starts a server process (or the fault proxy) as `role` (`server`,
/// `tier-K.server` or `proxy`, the stem of its log files) with `argv`, and
/// waits for its status line saying where it listens.
async fn start_process(
    storm: &Storm,
    (case, rep): (&Case, u32),
    role: &str,
    argv: &[String],
    live: Arc<Mutex<Live>>,
) -> Result<(Child, String), StormError> {
    let name = storm.run_name(case, rep);
    let program = if role == "proxy" { "proxy" } else { "server" };
    let spawned = children::spawn(
        &storm.program,
        program,
        argv,
        output(storm, case, rep, &format!("{role}.log"))?,
        output(storm, case, rep, &format!("{role}.err"))?,
        live,
    )
    .map_err(io_err(format!("start the {role} for {name}")))?;
    let listening = spawned.listening.expect("a server says where it listens");
    let url = tokio::time::timeout(START_TIMEOUT, listening)
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| {
            StormError::Child(format!(
                "the {role} for {name} did not start{}",
                stderr_tail(&storm.out, &name, role)
            ))
        })?;
    Ok((spawned.child, url))
}

/// Starts a run's servers (the run at `place` in its batch): the backend,
/// then its tiers from the innermost outward, each calling the one
/// started before it. Its client goes to the outermost. Against a target
/// through the fault proxy, the proxy alone, speaking the case's `wires`.
async fn start_server<'a>(
    storm: &Storm,
    wires: &Wires,
    (case, rep): (&'a Case, u32),
    place: usize,
) -> Result<Run<'a>, StormError> {
    let name = storm.run_name(case, rep);
    let live = Arc::new(Mutex::new(Live {
        watch: storm.watch.as_ref().map(|w| w.run(place)),
        ..Live::default()
    }));
    let mut run = Run {
        case,
        rep,
        name,
        out: storm.out.clone(),
        server: None,
        proxied: false,
        tiers: Vec::new(),
        client: None,
        client_status: None,
        url: String::new(),
        live,
        timeline: None,
    };
    if let Some(url) = &storm.scenario.target {
        run.url = url.clone();
        if let Some(fault) = storm.scenario.outage.as_ref().and_then(|o| o.fault()) {
            let argv = storm.proxy_argv((case, rep), url, fault, &wires.of_case(case));
            let (proxy, at) =
                start_process(storm, (case, rep), "proxy", &argv, run.live.clone()).await?;
            (run.server, run.proxied, run.url) = (Some(proxy), true, at);
        }
        return Ok(run);
    }
    let argv = storm.server_argv(case, rep);
    let (server, mut url) =
        start_process(storm, (case, rep), "server", &argv, run.live.clone()).await?;
    run.server = Some(server);
    for tier in (1..=case.tiers.len()).rev() {
        let argv = storm.tier_argv(case, rep, tier, &url);
        let role = format!("tier-{tier}.server");
        // A tier's rows are read back from its files; the live view shows
        // them as they come, as that tier's.
        let tier_live = Arc::new(Mutex::new(Live {
            watch: storm.watch.as_ref().map(|w| w.run(place).tier(tier)),
            ..Live::default()
        }));
        let (child, at) = start_process(storm, (case, rep), &role, &argv, tier_live).await?;
        run.tiers.insert(0, (child, url));
        url = at;
    }
    run.url = url;
    Ok(run)
}

fn start_client(storm: &Storm, run: &mut Run) -> Result<(), StormError> {
    let (case, rep) = (run.case, run.rep);
    let spawned = children::spawn(
        &storm.program,
        "client",
        &storm.client_argv(case, rep, &run.url),
        output(storm, case, rep, "client.log")?,
        output(storm, case, rep, "client.err")?,
        run.live.clone(),
    )
    .map_err(io_err(format!("start the client for {}", run.name)))?;
    run.client = Some(spawned.child);
    run.client_status = Some(spawned.status);
    Ok(())
}

/// The exact command lines, for the results folder.
fn command_lines(storm: &Storm, wires: &Wires, runs: &[Run]) -> String {
    let line = |role: &str, args: Vec<String>| {
        let mut words = vec![storm.program.display().to_string(), role.to_string()];
        words.extend(args);
        join_flags(&words)
    };
    let mut out = String::new();
    for run in runs {
        out.push_str(&format!("# {}\n", run.name));
        if let (Some(url), Some(outage)) = (&storm.scenario.target, &storm.scenario.outage) {
            out.push_str(&target::commands_header(url, outage));
            if let Some(fault) = outage.fault() {
                out.push_str(&line(
                    "proxy",
                    storm.proxy_argv((run.case, run.rep), url, fault, &wires.of_case(run.case)),
                ));
                out.push('\n');
            }
        } else {
            out.push_str(&line("server", storm.server_argv(run.case, run.rep)));
            out.push('\n');
        }
        for (i, (_, next)) in run.tiers.iter().enumerate().rev() {
            out.push_str(&line(
                "server",
                storm.tier_argv(run.case, run.rep, i + 1, next),
            ));
            out.push('\n');
        }
        out.push_str(&line(
            "client",
            storm.client_argv(run.case, run.rep, &run.url),
        ));
        out.push('\n');
    }
    out
}

/// One progress line: phase, time left, live rates of every run.
fn progress_line(phase: &str, left: Duration, runs: &[Run]) -> String {
    let mut line = format!("{phase:<8} {:>4}s left", left.as_secs());
    for run in runs {
        let live = run.live.lock().expect("live lock poisoned");
        let (ok, timeouts) = live.client.as_ref().map_or(("-".into(), "-".into()), |r| {
            (
                format!("{:.2}", r.ok_per_s),
                format!("{:.2}", r.timeouts_per_s),
            )
        });
        let concurrency = match (&live.server, &live.proxy) {
            (Some(r), _) => r.concurrency.to_string(),
            // Through a fault proxy: what it holds, to the target or not.
            (None, Some(r)) => (r.in_flight + r.held).to_string(),
            (None, None) => "-".into(),
        };
        line.push_str(&format!(
            " | {}: OK {ok}/s, timeouts {timeouts}/s, concurrency {concurrency}",
            run.name
        ));
    }
    line
}

/// Waits `length` (already scaled), showing progress (in `bar`, when it
/// is shown on the same terminal); fails early if a child exits or
/// `shutdown` completes. In the `last` phase a client that ends well has
/// simply finished (its run length ends with the phase).
async fn phase(
    name: &str,
    length: Duration,
    last: bool,
    runs: &mut [Run<'_>],
    progress: bool,
    bar: &Progress,
    shutdown: &mut Shutdown<'_>,
) -> Result<(), StormError> {
    let end = Instant::now() + length;
    let tty = io::stdout().is_terminal();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks = 0u64;
    loop {
        if Instant::now() >= end {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(end) => break,
            _ = shutdown.as_mut() => return Err(StormError::Interrupted),
            _ = tick.tick() => {
                ticks += 1;
                if progress {
                    let line = progress_line(name, end - Instant::now(), runs);
                    if tty && bar.is_shown() {
                        bar.message(line);
                    } else if tty {
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
                            "the client for {} exited early ({status}){}",
                            run.name,
                            stderr_tail(&run.out, &run.name, "client")
                        )));
                    }
                    if let Some(Ok(Some(status))) = run.server.as_mut().map(Child::try_wait) {
                        let role = if run.proxied { "proxy" } else { "server" };
                        return Err(StormError::Child(format!(
                            "the {role} for {} exited early ({status}){}",
                            run.name,
                            stderr_tail(&run.out, &run.name, role)
                        )));
                    }
                    for (i, (tier, _)) in run.tiers.iter_mut().enumerate() {
                        if let Ok(Some(status)) = tier.try_wait() {
                            let role = format!("tier-{}.server", i + 1);
                            return Err(StormError::Child(format!(
                                "tier {} for {} exited early ({status}){}",
                                i + 1,
                                run.name,
                                stderr_tail(&run.out, &run.name, &role)
                            )));
                        }
                    }
                }
            }
        }
    }
    if progress && tty && !bar.is_shown() {
        println!();
    }
    Ok(())
}

/// Stops every child in order: clients first (SIGTERM: they write their
/// last row), then servers (resumed first, so none stays stopped).
async fn stop_all(runs: &mut [Run<'_>]) {
    for run in runs.iter() {
        if let Some(client) = &run.client {
            children::signal(client, Signal::SIGTERM);
        }
    }
    for run in runs.iter_mut() {
        if let Some(client) = &mut run.client {
            children::reap(client, Duration::from_secs(5)).await;
        }
    }
    // Tiers from the outside in, then the backends: each goes before
    // what it calls.
    for run in runs.iter() {
        for (tier, _) in &run.tiers {
            children::signal(tier, Signal::SIGCONT);
            children::signal(tier, Signal::SIGTERM);
        }
    }
    for run in runs.iter_mut() {
        for (tier, _) in &mut run.tiers {
            children::reap(tier, Duration::from_secs(5)).await;
        }
    }
    for server in runs.iter().filter_map(|run| run.server.as_ref()) {
        children::signal(server, Signal::SIGCONT);
        children::signal(server, Signal::SIGTERM);
    }
    for server in runs.iter_mut().filter_map(|run| run.server.as_mut()) {
        children::reap(server, Duration::from_secs(5)).await;
    }
}

impl Run<'_> {
    /// The child the outage stops: the tier the case names, else the
    /// backend (none against a target).
    fn stopped(&self) -> Option<&Child> {
        match self.case.pause {
            Some(tier) => Some(&self.tiers[tier as usize - 1].0),
            None => self.server.as_ref().filter(|_| !self.proxied),
        }
    }

    /// The fault proxy in front of a target, if the run goes through one.
    fn proxy(&self) -> Option<&Child> {
        self.server.as_ref().filter(|_| self.proxied)
    }
}

/// Tells the live view, if there is one.
fn tell(storm: &Storm, feed: Feed) {
    if let Some(watch) = &storm.watch {
        watch.send(feed);
    }
}

/// Runs one batch of cases side by side through the protocol: batch
/// `index`, its runs.
async fn drive<'a>(
    storm: &Storm,
    wires: &Wires,
    (index, batch): (usize, &[(&'a Case, u32)]),
    runs: &mut Vec<Run<'a>>,
    commands: &mut File,
    bar: &Progress,
    mut shutdown: Shutdown<'_>,
) -> Result<(), StormError> {
    let k = storm.time_scale;
    let p = &storm.scenario.protocol;
    if let Some(url) = &storm.scenario.target {
        let names: Vec<String> = batch.iter().map(|&(c, r)| storm.run_name(c, r)).collect();
        // Against a target the runs go one at a time (`batch_size`): the
        // batch is one case, and the target is asked as its clients will
        // ask it. Were there more, the first case's wire would be used.
        let wire = batch.first().map(|&(case, _)| wires.of_case(case));
        let wire = wire.unwrap_or_default();
        tokio::select! {
            calm = target::calm(url, &wire, p.calm, k, &names, commands) => calm?,
            _ = shutdown.as_mut() => return Err(StormError::Interrupted),
        }
    }
    for &(case, rep) in batch {
        runs.push(start_server(storm, wires, (case, rep), runs.len()).await?);
    }
    let lines = command_lines(storm, wires, runs);
    commands
        .write_all(lines.as_bytes())
        .map_err(io_err("write commands.txt"))?;
    if storm.verbose {
        bar.say(lines.trim_end());
    }
    let warmup = compress(p.warmup, k);
    let pause = compress(p.pause, k);
    let rest = compress(storm.client_duration() - p.warmup - p.pause, k);
    let start_ms = unix_ms();
    let plan = Plan {
        warmup,
        pause,
        observe: compress(p.observe, k),
        confirm: compress(confirmation(p), k),
        rest,
    };
    let names = runs.iter().map(|r| r.name.clone()).collect();
    tell(
        storm,
        Feed::Batch {
            index,
            names,
            start_ms,
            plan,
        },
    );
    tell(
        storm,
        Feed::Phase {
            phase: Phase::Warmup,
            at_ms: start_ms,
        },
    );
    for run in runs.iter_mut() {
        start_client(storm, run)?;
    }
    let shown = storm.progress;
    phase("warm-up", warmup, false, runs, shown, bar, &mut shutdown).await?;
    // A protocol without a pause has no outage: nothing is stopped.
    let outage = !p.pause.is_zero();
    for stopped in runs.iter().filter(|_| outage).filter_map(Run::stopped) {
        children::signal(stopped, Signal::SIGSTOP);
    }
    for proxy in runs.iter().filter(|_| outage).filter_map(Run::proxy) {
        children::signal(proxy, Signal::SIGUSR1);
    }
    // A target's outage ends when this goes: at the resume, or on the way
    // out if the pause is cut short.
    let ongoing = match &storm.scenario.outage {
        Some(cause) if outage => {
            let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
            target::begin(cause, &names, commands)?
        }
        _ => None,
    };
    let stop_ms = unix_ms();
    tell(
        storm,
        Feed::Phase {
            phase: Phase::Pause,
            at_ms: stop_ms,
        },
    );
    phase("pause", pause, false, runs, shown, bar, &mut shutdown).await?;
    // A target's resume is when its outage has ended (an end command's
    // exit); it has no children of the storm's to continue.
    if let Some(ongoing) = ongoing {
        ongoing.end()?;
    }
    // Before the first SIGCONT (the stop after the last SIGSTOP): all stay
    // stopped from one to the other, however late this thread runs again.
    let resume_ms = unix_ms();
    for stopped in runs.iter().filter(|_| outage).filter_map(Run::stopped) {
        children::signal(stopped, Signal::SIGCONT);
    }
    for proxy in runs.iter().filter(|_| outage).filter_map(Run::proxy) {
        children::signal(proxy, Signal::SIGUSR2);
    }
    tell(
        storm,
        Feed::Phase {
            phase: Phase::Observe,
            at_ms: resume_ms,
        },
    );
    phase("observe", rest, true, runs, shown, bar, &mut shutdown).await?;
    let end_ms = resume_ms + compress(p.observe, k).as_millis() as u64;
    let confirm_ms = end_ms + compress(confirmation(p), k).as_millis() as u64;
    // The clients end on their own at --duration.
    for run in runs.iter_mut() {
        let client = run.client.as_mut().expect("started above");
        let waited = tokio::select! {
            status = tokio::time::timeout(Duration::from_secs(30), client.wait()) => status,
            _ = shutdown.as_mut() => return Err(StormError::Interrupted),
        };
        match waited {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => {
                return Err(StormError::Child(format!(
                    "the client for {} failed ({status})",
                    run.name
                )));
            }
            _ => {
                return Err(StormError::Child(format!(
                    "the client for {} did not finish",
                    run.name
                )));
            }
        }
        run.timeline = Some(Timeline {
            start_ms,
            stop_ms,
            resume_ms,
            end_ms,
            confirm_ms,
        });
    }
    Ok(())
}

fn read_csv<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<Vec<T>, StormError> {
    read_rows(path).map_err(io_err("read"))
}

/// A finished run's rows, read back from its CSV files: every row the
/// children wrote, the last ones included; and whether its client fell
/// behind, from its `totals` (its last status line).
fn read_back(
    storm: &Storm,
    run: &Run,
    totals: Option<&ClientTotals>,
) -> Result<CaseRun, StormError> {
    let client_behind = totals
        .filter(|t| t.fell_behind(storm.time_scale))
        .map(|t| t.start_lateness);
    Ok(CaseRun {
        client_behind,
        case: run.case.clone(),
        rep: run.rep,
        timeline: run.timeline.expect("read runs are finished"),
        client: read_csv(&storm.file(run.case, run.rep, "client.csv"))?,
        server: match run.server {
            Some(_) if !run.proxied => read_csv(&storm.file(run.case, run.rep, "server.csv"))?,
            _ => Vec::new(),
        },
        proxy: match run.server {
            Some(_) if run.proxied => read_csv(&storm.file(run.case, run.rep, "proxy.csv"))?,
            _ => Vec::new(),
        },
        tiers: storm.read_tiers(&storm.out, run.case, run.rep)?,
    })
}
