//! The load generator: N simulated users sending Poisson traffic and
//! retrying failures under a chosen policy.
//!
//! Each user is an actor: think, attempt, retry per strategy until OK, think
//! again; one attempt in flight at a time, unless it hedges. Connections are
//! pooled and reused; an attempt holds one only while it is in flight, and a
//! timed-out attempt or a hedge that lost closes its connection.

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::balance::Balance;
use super::lanes::{self, Lanes, Load};
use super::target::Target;
use super::user::{Common, Mover, Shared, user};
use crate::model::arrivals::user_rng;
use crate::model::client::ClientConfig;
use crate::model::open::Source;
use crate::model::shard::ShardSource;
use crate::model::user::User;
use crate::policy::Throttle;
use crate::report::counts::ClientRecorder;
use crate::report::metrics::ClientMetrics;
use crate::report::output::CsvError;
use crate::report::rows::unix_ms;
use crate::report::status::StatusSink;
use crate::report::summary::{ClientSummary, Reporter};

/// Why the client could not start.
#[derive(Debug)]
pub enum StartError {
    /// The URL is not an `http://host:port/path` this client can use.
    Url(String),
    /// The CSV file could not be created.
    Csv(CsvError),
    /// No timerfd for the users' attempt starts (no file descriptor left),
    /// or no thread for a lane.
    Timer(std::io::Error),
    /// The open traffic asked for is not one (a rate that is not above 0).
    Traffic(String),
    /// A first request showed that no attempt can succeed (a failed TLS
    /// handshake, no HTTP/2, a gRPC method not served).
    Protocol(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Url(why) => write!(f, "--url: {why}"),
            StartError::Csv(e) => e.fmt(f),
            StartError::Timer(e) => write!(f, "cannot create a timer: {e}"),
            StartError::Traffic(why) => write!(f, "--arrival-rate: {why}"),
            StartError::Protocol(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for StartError {}

/// A lane's users: those dealt to it and those that came to it from a
/// busier lane.
struct Home {
    shared: Arc<Shared>,
    users: JoinSet<()>,
    arrivals: mpsc::UnboundedReceiver<Mover>,
}

impl Home {
    /// Lane `shared.lane`, starting the users of `population` from its
    /// position on, every `dealt`th (none if it is not among the first
    /// `dealt`).
    fn new(
        shared: Arc<Shared>,
        arrivals: mpsc::UnboundedReceiver<Mover>,
        population: &[(u64, Duration)],
        dealt: usize,
        seed: u64,
    ) -> Home {
        let common = &shared.common;
        let mut users = JoinSet::new();
        let lane = shared.lane;
        if lane < dealt {
            for &(index, start) in population.iter().skip(lane).step_by(dealt) {
                let state = User::new(&common.rules, user_rng(seed, index), start);
                common.balance.joined(lane);
                users.spawn(member(shared.clone(), state));
            }
        }
        Home {
            shared,
            users,
            arrivals,
        }
    }

    /// Takes in the users that come, lets go of those that left, and
    /// closes the connections idle too long every `expiry`, until dropped.
    async fn serve(&mut self, expiry: Duration) {
        let mut ticker = tokio::time::interval(expiry);
        loop {
            tokio::select! {
                Some(state) = self.arrivals.recv() => {
                    self.users.spawn(member(self.shared.clone(), state));
                }
                Some(_) = self.users.join_next() => {}
                _ = ticker.tick() => self.shared.pool.expire_idle(),
            }
        }
    }
}

/// A user of the client's population or traffic, run by its lane under
/// the run's rules until it leaves.
async fn member(shared: Arc<Shared>, state: Mover) {
    user(shared, state, None, std::future::pending()).await;
}

/// Open traffic's sessions: each arrival of `source` at its instant (on
/// `shared`'s timer), admitted and handed to the first `dealt` lanes in
/// turn, or refused at the source. Arrivals that fell due while the lane
/// was busy are taken at once, each keeping its own instant: its first
/// attempt starts late and says so. With an `end`, returns at that instant
/// having taken exactly the arrivals due before it, however late the
/// timer, so a run's arrivals are its stream's and shards add up to the
/// whole; without one, runs forever.
async fn send_sessions(
    shared: Arc<Shared>,
    mut source: Source,
    dealt: usize,
    end: Option<Duration>,
) {
    let common = &shared.common;
    let mut turn = 0;
    loop {
        let next = source.next_at();
        if let Some(end) = end.filter(|&end| next >= end) {
            shared.timer.sleep_until(common.at(end)).await;
            return;
        }
        shared.timer.sleep_until(common.at(next)).await;
        let now = common.now();
        let before = |at: Duration| at <= now && end.is_none_or(|end| at < end);
        while before(source.next_at()) {
            match source.arrive(&common.rules, common.recorder.outstanding()) {
                None => common.recorder.arrival_refused(),
                Some(session) => {
                    common.recorder.session_arrived();
                    common.balance.arrive(turn, session.user);
                    turn = (turn + 1) % dealt;
                }
            }
        }
    }
}

/// How a client's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// At the end of its duration.
    Scheduled,
    /// Asked to stop (or before its start).
    Interrupted,
}

/// Runs the load until `config.duration` has passed or `shutdown` completes,
/// reporting every interval, and returns the run's summary.
pub async fn run(
    config: ClientConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<ClientSummary, StartError> {
    run_with_status(config, None, shutdown).await
}

/// [`run`], writing every report row to `status` too.
pub async fn run_with_status(
    config: ClientConfig,
    status: Option<StatusSink>,
    shutdown: impl Future<Output = ()>,
) -> Result<ClientSummary, StartError> {
    run_with(config, status, None, shutdown).await
}

/// [`run_with_status`], feeding `metrics` too as attempts and requests
/// end.
pub async fn run_with(
    config: ClientConfig,
    status: Option<StatusSink>,
    metrics: Option<Arc<ClientMetrics>>,
    shutdown: impl Future<Output = ()>,
) -> Result<ClientSummary, StartError> {
    let target = Target::resolve(&config.url, &config.wire)
        .await
        .map_err(StartError::Url)?;
    let what = match &config.wire.grpc {
        Some(call) => call.method.clone(),
        None => config.url.clone(),
    };
    super::preflight::check(&target, &what)
        .await
        .map_err(StartError::Protocol)?;
    let mut reporter = Reporter::new(&config, status).map_err(StartError::Csv)?;
    let mut shutdown = pin!(shutdown);
    // Shards wait for their common start; asked to stop before it, the
    // run is empty.
    let mut stopped_early = false;
    if let Some(at) = config.start_at {
        let wait = at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.as_mut() => stopped_early = true,
        }
    }
    // Asked to stop before the start: no user starts. Users are dealt to
    // the lanes in turn; each is seeded by its own index, so which lane
    // runs it changes nothing it draws.
    let population: Arc<[(u64, Duration)]> = config
        .users()
        .filter(|_| !stopped_early)
        .map(|index| (u64::from(index), config.start_of(index)))
        .collect();
    // As many lanes as the users ask for get users at the start; the
    // others, up to one per core, take users from busy lanes in a storm.
    let source = match config.open {
        Some(open) if !stopped_early => Some(
            Source::new(
                open,
                config.seed,
                config.shard,
                Duration::ZERO,
                config.think,
            )
            .map_err(StartError::Traffic)?,
        ),
        _ => None,
    };
    let count = lanes::count(config.threads);
    let users = match source {
        Some(_) => usize::MAX,
        None => population.len().max(1),
    };
    let dealt = lanes::for_demand(config.threads, config.demand())
        .min(users)
        .min(count);
    let (balance, mut arrivals) = Balance::new(count);
    let common = Arc::new(Common {
        recorder: ClientRecorder::with_metrics(metrics),
        rules: config.rules(),
        throttle: config.throttle.map(|t| Mutex::new(Throttle::new(t))),
        epoch: Instant::now(),
        waiters: Notify::new(),
        balance,
    });
    let shared = Shared::start(target.clone(), config.timer_resolution, common.clone(), 0)
        .map_err(StartError::Timer)?;
    let first = arrivals.remove(0);
    let lanes = start_lanes(arrivals, dealt, &population, &target, &config, &common).await?;
    let mut home = Home::new(Arc::new(shared), first, &population, dealt, config.seed);
    let start = common.epoch;
    let door = home.shared.clone();
    // Open traffic's run ends when its stream reaches the duration (the
    // arrivals counted are then exactly the stream's); a closed one's on
    // its own clock.
    let open = source.is_some();
    let duration = config.duration;
    let mut arriving = pin!(async move {
        match source {
            Some(source) => send_sessions(door, source, dealt, duration).await,
            None => std::future::pending().await,
        }
    });

    // A run of fixed length ends `duration` after the start its users'
    // schedules and the report ticks count from, not after this loop
    // first waits (the lanes' start later): an end that late left a
    // remainder past the last tick, a row more whenever it outgrew a
    // sliver.
    let end = config.duration.map(|d| start + d);
    let until = async {
        match end {
            Some(end) if !open => tokio::time::sleep_until(end).await,
            _ => std::future::pending().await,
        }
    };
    let mut stop = pin!(async {
        if stopped_early {
            return Ended::Interrupted;
        }
        tokio::select! {
            _ = shutdown => Ended::Interrupted,
            _ = until => Ended::Scheduled,
        }
    });
    // A row for every tick of the schedule (`start` plus a whole number
    // of intervals) before the end, and the last row, of the interval the
    // end closes, written at the end. A tick comes late under load, never
    // early: its row is written however late (its branch comes before
    // the end's), and a tick missed altogether is made at once, so a run
    // of fixed length has as many rows whatever the timer's lateness.
    // (Ticks put off by a late one, as they were, could fall past the end
    // and make a row less.)
    let interval = config.report_interval;
    let mut ticker = tokio::time::interval_at(start + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut next = start + interval;
    let mut handles = vec![tokio::runtime::Handle::current()];
    handles.extend_from_slice(lanes.handles());
    let mut load = Load::new(handles);
    // The first plan after a whole period: the users' spawning alone
    // would count as a busy lane.
    let every = Balance::<Mover>::EVERY;
    let mut weigh = tokio::time::interval_at(Instant::now() + every, every);
    let mut last = start;
    let ended = {
        let mut serving = pin!(home.serve(config.report_interval));
        loop {
            tokio::select! {
                biased;
                due = ticker.tick(), if end.is_none_or(|end| next < end) => {
                    scheduled_row(&mut reporter, &common.recorder, interval, start, &mut last);
                    next = due + interval;
                }
                ended = &mut stop => break ended,
                () = &mut arriving => break Ended::Scheduled,
                _ = weigh.tick(), if count > 1 => common.balance.plan(load.measure()),
                () = &mut serving => {}
            }
        }
    };
    // Attempts still in flight are cut short and not counted; once the
    // lanes have stopped, nothing more is recorded after the last report.
    home.users.abort_all();
    lanes.stop();
    // The end of the schedule came: any interval of it still unreported
    // (its tick not yet fired when the end's timer did) is a row, and
    // the last, as long as the schedule makes it (from the last tick's
    // instant to the end), is one unless that is a sliver. A run cut
    // short by a stop has its last interval as long as it was.
    let scheduled = match (ended, end) {
        (Ended::Scheduled, Some(end)) => {
            while next < end {
                scheduled_row(&mut reporter, &common.recorder, interval, start, &mut last);
                next += interval;
            }
            Some(end - (next - interval))
        }
        _ => None,
    };
    let now = Instant::now();
    reporter.report_scheduled(
        &common.recorder,
        scheduled.unwrap_or(now - last),
        now - last,
        unix_ms(),
        now - start,
    );
    Ok(reporter.close(
        now - start,
        config.users().count() as u32,
        common.balance.moves(),
        &common.recorder,
    ))
}

/// Writes the row of one whole interval of the run's schedule, measured
/// from `last` (the previous row's instant, moved to now) however late.
fn scheduled_row(
    reporter: &mut Reporter,
    recorder: &ClientRecorder,
    interval: Duration,
    start: Instant,
    last: &mut Instant,
) {
    let now = Instant::now();
    reporter.report_scheduled(recorder, interval, now - *last, unix_ms(), now - start);
    *last = now;
}

/// Starts lanes `1..`, one for each of `arrivals` (the first lane's
/// already taken), each with its own connections and timer, the first
/// `dealt` running every `dealt`th user of `population` from their own
/// position on; waits until each has its timer.
async fn start_lanes(
    arrivals: Vec<mpsc::UnboundedReceiver<Mover>>,
    dealt: usize,
    population: &Arc<[(u64, Duration)]>,
    target: &Target,
    config: &ClientConfig,
    common: &Arc<Common>,
) -> Result<Lanes, StartError> {
    let count = arrivals.len() + 1;
    let arrivals: Arc<Mutex<Vec<_>>> =
        Arc::new(Mutex::new(arrivals.into_iter().map(Some).collect()));
    let (ready_tx, mut ready) = mpsc::unbounded_channel();
    let (population, target, common) = (population.clone(), target.clone(), common.clone());
    let (resolution, seed, expiry) = (config.timer_resolution, config.seed, config.report_interval);
    let lanes = Lanes::spawn(count, "client", move |lane| {
        let (population, target, common) = (population.clone(), target.clone(), common.clone());
        let (ready, arrivals) = (ready_tx.clone(), arrivals.clone());
        async move {
            let door = arrivals.lock().expect("lanes lock poisoned")[lane - 1]
                .take()
                .expect("each lane takes its own door, once");
            let shared = match Shared::start(target, resolution, common, lane) {
                Ok(shared) => Arc::new(shared),
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            Home::new(shared, door, &population, dealt, seed)
                .serve(expiry)
                .await;
        }
    })
    .map_err(StartError::Timer)?;
    for _ in 1..count {
        match ready.recv().await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                lanes.stop();
                return Err(StartError::Timer(e));
            }
            None => break,
        }
    }
    Ok(lanes)
}

/// Human-readable description of a run, for the client's start-up line;
/// `shard` says where a shard was named.
pub fn describe(config: &ClientConfig, shard: ShardSource) -> String {
    let demand = config.demand();
    let policy = match &config.hedging {
        Some(h) => format!(
            "hedging every {}, at most {} copies",
            humantime::format_duration(h.delay),
            h.max_attempts
        ),
        None => format!("strategy {}", config.strategy.name()),
    };
    let population = if let Some(open) = config.open {
        let share = match config.shard.is_whole() {
            true => String::new(),
            false => format!(
                ", arrivals {} mod {} (shard {} from {shard})",
                config.shard.index, config.shard.count, config.shard
            ),
        };
        format!(
            "open traffic: {} arrivals/s, sessions of {} requests on average, at most {} \
             outstanding{share}",
            open.rate,
            open.session.mean(),
            open.max_outstanding
        )
    } else if config.shard.is_whole() {
        format!("{} clients", config.clients)
    } else {
        format!(
            "{} of {} clients (shard {} from {shard})",
            config.users().count(),
            config.clients,
            config.shard
        )
    };
    let start = config.start_at.map_or(String::new(), |at| {
        format!(", starting at {}", humantime::format_rfc3339_millis(at))
    });
    format!(
        "{population} -> {}, mean think {} (about {demand:.1} req/s), timeout {}, \
         {policy}{}, seed {}{start}",
        config.url,
        humantime::format_duration(config.think.mean()),
        humantime::format_duration(config.timeout),
        config
            .throttle
            .map_or(String::new(), |t| format!(", throttle {}", t.name())),
        config.seed
    )
}
