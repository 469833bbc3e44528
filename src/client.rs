//! The load generator: N simulated users sending Poisson traffic and
//! retrying failures under a chosen policy.
//!
//! Each user is a sequential actor with at most one attempt in flight: think,
//! attempt, retry per strategy until OK, think again. Connections are pooled
//! and reused; a user holds one only while its attempt is in flight, and a
//! timed-out attempt closes its connection.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::Uri;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::arrivals::{ThinkTime, user_rng};
use crate::output::{CsvError, CsvSink, say, write_row};
use crate::policy::{RetryLimits, Strategy, Throttle, ThrottleConfig, Verdict};
use crate::pool::{Pool, Target};
use crate::stats::{
    ATTEMPT_BUCKETS, ClientCounts, ClientRecorder, ClientRow, Outcome, Percentiles, unix_ms,
};
use crate::timer::Timer;
use crate::user::{Attempt, Finished, Rules, User};

/// Everything the client needs to run.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The URL every attempt requests (http only).
    pub url: Uri,
    /// Number of simulated users.
    pub clients: u32,
    /// Think-time distribution between a user's logical requests.
    pub think: ThinkTime,
    /// Time an attempt may take, from its intended start.
    pub timeout: Duration,
    /// Delay schedule between attempts.
    pub strategy: Strategy,
    /// Attempt limit, deadline and `Retry-After` handling.
    pub limits: RetryLimits,
    /// Throttle shared by all users, if any.
    pub throttle: Option<ThrottleConfig>,
    /// How often to report.
    pub report_interval: Duration,
    /// Stop after this long (otherwise when `shutdown` completes).
    pub duration: Option<Duration>,
    /// Users start evenly over this time (zero: all at once).
    pub ramp_up: Duration,
    /// Step of the timer that starts attempts (zero: exact).
    pub timer_resolution: Duration,
    /// Seed of every random draw.
    pub seed: u64,
    /// Where to write report rows, if anywhere.
    pub csv: Option<PathBuf>,
    /// Print nothing on stdout (for tests and embedding).
    pub quiet: bool,
}

impl ClientConfig {
    /// When user `index` starts thinking, since the start of the run.
    pub fn start_of(&self, index: u32) -> Duration {
        let share = f64::from(index) / f64::from(self.clients.max(1));
        self.ramp_up.mul_f64(share)
    }

    /// The rules every user follows.
    pub fn rules(&self) -> Rules {
        Rules {
            think: self.think,
            timeout: self.timeout,
            strategy: self.strategy,
            limits: self.limits,
        }
    }
}

/// Why the client could not start.
#[derive(Debug)]
pub enum StartError {
    /// The URL is not an `http://host:port/path` this client can use.
    Url(String),
    /// The CSV file could not be created.
    Csv(CsvError),
    /// No timerfd for the users' attempt starts (no file descriptor left).
    Timer(std::io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Url(why) => write!(f, "--url: {why}"),
            StartError::Csv(e) => e.fmt(f),
            StartError::Timer(e) => write!(f, "cannot create a timer: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// What a whole client run saw.
#[derive(Debug, Clone)]
pub struct ClientSummary {
    /// How long the load ran.
    pub elapsed: Duration,
    /// Counts and latencies over the whole run.
    pub totals: ClientCounts,
    /// Every report row, in order.
    pub rows: Vec<ClientRow>,
    /// The seed, to reproduce the run.
    pub seed: u64,
    /// Strategy name.
    pub strategy: &'static str,
    /// Number of simulated users.
    pub clients: u32,
}

impl fmt::Display for ClientSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals.tally;
        let secs = self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        let rate = |n: u64| n as f64 / secs;
        writeln!(
            f,
            "summary: {:.1} s, {} clients, strategy {}, seed {}",
            self.elapsed.as_secs_f64(),
            self.clients,
            self.strategy,
            self.seed
        )?;
        writeln!(
            f,
            "  attempts: {} (OK {}, errors {}, timed out {}; retries {}, throttled {}, \
             rejected locally {})",
            t.attempts(),
            t.ok,
            t.errors,
            t.timeouts,
            t.retries,
            t.throttled,
            t.rejected
        )?;
        writeln!(
            f,
            "  requests: {} started, {} given up, {} attempts sent per request",
            t.started,
            t.gave_up,
            t.amplification()
                .map_or("-".to_string(), |a| format!("{a:.2}"))
        )?;
        write!(f, "  attempts per finished request:")?;
        for ((_, label), count) in ATTEMPT_BUCKETS.iter().zip(t.attempts_per_request) {
            write!(f, " {label}: {count},")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  OK: {:.2} req/sec, errors: {:.2} req/sec, timedout: {:.2} req/sec",
            rate(t.ok),
            rate(t.errors),
            rate(t.timeouts)
        )?;
        writeln!(
            f,
            "  attempt latency (OK): {}",
            Percentiles::of(&self.totals.attempt_latency)
        )?;
        let late = Percentiles::of(&self.totals.lateness);
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |ms| format!("{ms:.3}ms"));
        writeln!(
            f,
            "  start lateness (attempts against their intended instant): p50: {}, p99: {}, max: {}",
            ms(late.p50_ms),
            ms(late.p99_ms),
            ms(late.max_ms)
        )?;
        write!(
            f,
            "  request latency (first attempt to OK): {}",
            Percentiles::of(&self.totals.request_latency)
        )
    }
}

/// What every user task shares.
struct Shared {
    pool: Pool,
    recorder: ClientRecorder,
    rules: Rules,
    throttle: Option<Mutex<Throttle>>,
    /// Wakes users for their attempts, on the configured steps.
    timer: Timer,
    /// The run's time origin: users and the throttle count from it.
    epoch: Instant,
}

impl Shared {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// The instant `since` after the epoch; beyond what an `Instant` holds,
    /// a century away (never, for a run).
    fn at(&self, since: Duration) -> Instant {
        const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
        self.epoch
            .checked_add(since)
            .unwrap_or(self.epoch + CENTURY)
    }

    fn throttle_verdict(&self, is_retry: bool, rng: &mut impl rand::Rng) -> Verdict {
        match &self.throttle {
            Some(t) => {
                t.lock()
                    .expect("throttle lock poisoned")
                    .before_attempt(is_retry, self.now(), rng)
            }
            None => Verdict::Allow,
        }
    }

    fn throttle_record(&self, ok: bool) {
        if let Some(t) = &self.throttle {
            t.lock()
                .expect("throttle lock poisoned")
                .after_attempt(ok, self.now());
        }
    }
}

/// Records what an ended attempt produced.
pub(crate) fn record(recorder: &ClientRecorder, finished: Finished) {
    recorder.attempt_finished(finished.attempt);
    if let Some(request) = finished.request {
        recorder.request_finished(request);
    }
}

/// One simulated user, forever: think, attempt until OK or given up, think
/// again.
async fn user(shared: Arc<Shared>, seed: u64, index: u64, start: Duration) {
    let rules = &shared.rules;
    let mut user = User::new(rules, user_rng(seed, index), start);
    loop {
        shared.timer.sleep_until(shared.at(user.due())).await;
        let verdict = shared.throttle_verdict(user.is_retry(), user.rng());
        match user.begin(rules, verdict, shared.now()) {
            Attempt::Refused(request) => shared.recorder.request_finished(request),
            Attempt::Rejected(finished) => record(&shared.recorder, finished),
            Attempt::Send { deadline } => {
                shared.recorder.attempt_started();
                let (outcome, retry_after) = shared.pool.attempt(shared.at(deadline)).await;
                shared.throttle_record(outcome == Outcome::Ok);
                let finished = user.finish(rules, outcome, retry_after, shared.now());
                record(&shared.recorder, finished);
            }
        }
    }
}

/// Turns a run's recorded counts into report rows: the terminal line, the
/// CSV row and the run's totals. Shared by both engines.
pub(crate) struct Reporter {
    csv: Option<CsvSink<ClientRow>>,
    quiet: bool,
    /// Intervals shorter than this only add to the totals.
    sliver: Duration,
    interval: ClientCounts,
    /// Counts over the whole run.
    pub totals: ClientCounts,
    /// Every row reported, in order.
    pub rows: Vec<ClientRow>,
}

impl Reporter {
    pub(crate) fn new(config: &ClientConfig) -> Result<Self, CsvError> {
        Ok(Reporter {
            csv: CsvSink::create_if(config.csv.as_deref())?,
            quiet: config.quiet,
            sliver: config.report_interval / 20,
            interval: ClientCounts::default(),
            totals: ClientCounts::default(),
            rows: Vec::new(),
        })
    }

    /// Reports the interval of length `measured` that ends now. A sliver
    /// too short for meaningful rates (the stop landing just after a tick)
    /// only adds to the totals.
    pub(crate) fn report(
        &mut self,
        recorder: &ClientRecorder,
        measured: Duration,
        unix_ms: u64,
        elapsed: Duration,
    ) {
        recorder.take_interval(&mut self.interval);
        self.totals.merge(&self.interval);
        if measured < self.sliver {
            return;
        }
        let row = ClientRow::new(
            &self.interval,
            measured,
            recorder.in_flight(),
            unix_ms,
            elapsed,
        );
        if !self.quiet {
            say(&row);
        }
        write_row(&mut self.csv, &row);
        self.rows.push(row);
    }
}

/// Runs the load until `config.duration` has passed or `shutdown` completes,
/// reporting every interval, and returns the run's summary.
pub async fn run(
    config: ClientConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<ClientSummary, StartError> {
    let target = Target::resolve(&config.url).await?;
    let timer = Timer::start(config.timer_resolution).map_err(StartError::Timer)?;
    let mut reporter = Reporter::new(&config).map_err(StartError::Csv)?;
    let shared = Arc::new(Shared {
        pool: Pool::new(target),
        recorder: ClientRecorder::new(),
        rules: config.rules(),
        throttle: config.throttle.map(|t| Mutex::new(Throttle::new(t))),
        timer,
        epoch: Instant::now(),
    });

    let start = shared.epoch;
    let mut users = JoinSet::new();
    for index in 0..config.clients {
        let start = config.start_of(index);
        users.spawn(user(shared.clone(), config.seed, u64::from(index), start));
    }

    let until = async {
        match config.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let mut stop = pin!(async {
        tokio::select! {
            _ = shutdown => {}
            _ = until => {}
        }
    });
    let mut ticker =
        tokio::time::interval_at(start + config.report_interval, config.report_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = start;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let now = Instant::now();
                reporter.report(&shared.recorder, now - last, unix_ms(), now - start);
                last = now;
                shared.pool.expire_idle();
            }
            _ = &mut stop => break,
        }
    }
    // Attempts still in flight are cut short and not counted.
    users.abort_all();
    let now = Instant::now();
    reporter.report(&shared.recorder, now - last, unix_ms(), now - start);
    Ok(ClientSummary {
        elapsed: now - start,
        totals: reporter.totals,
        rows: reporter.rows,
        seed: config.seed,
        strategy: config.strategy.name(),
        clients: config.clients,
    })
}

/// Human-readable description of a run, for the client's start-up line.
pub fn describe(config: &ClientConfig) -> String {
    let demand = f64::from(config.clients) / config.think.mean().as_secs_f64();
    format!(
        "{} clients -> {}, mean think {} (about {demand:.1} req/s), timeout {}, \
         strategy {}{}, seed {}",
        config.clients,
        config.url,
        humantime::format_duration(config.think.mean()),
        humantime::format_duration(config.timeout),
        config.strategy.name(),
        config
            .throttle
            .map_or(String::new(), |t| format!(", throttle {}", t.name())),
        config.seed
    )
}
