//! The load generator: N simulated users sending Poisson traffic and
//! retrying failures under a chosen policy.
//!
//! Each user is an actor: think, attempt, retry per strategy until OK, think
//! again; one attempt in flight at a time, unless it hedges. Connections are
//! pooled and reused; an attempt holds one only while it is in flight, and a
//! timed-out attempt or a hedge that lost closes its connection.

use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::balance::Balance;
use super::lanes::{self, Lanes, Load};
use super::pool::{Pool, Target};
use super::timer::{Sleep, Timer};
use crate::model::arrivals::user_rng;
use crate::model::client::ClientConfig;
use crate::model::open::Source;
use crate::model::outcome::{Hints, Outcome};
use crate::model::shard::ShardSource;
use crate::model::user::{Attempt, Rules, Sent, User};
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
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Url(why) => write!(f, "--url: {why}"),
            StartError::Csv(e) => e.fmt(f),
            StartError::Timer(e) => write!(f, "cannot create a timer: {e}"),
            StartError::Traffic(why) => write!(f, "--arrival-rate: {why}"),
        }
    }
}

impl std::error::Error for StartError {}

/// What every user shares, whatever its lane.
struct Common {
    recorder: ClientRecorder,
    rules: Rules,
    throttle: Option<Mutex<Throttle>>,
    /// The run's time origin: users and the throttle count from it.
    epoch: Instant,
    /// Users waiting for a rate limiter's token sleep on it too, to be
    /// woken one at a time when the throttle says so, in any lane.
    waiters: Notify,
    /// Users moving from busy lanes to idle ones.
    balance: Balance<Mover>,
}

/// A user as it moves between lanes: its whole state.
type Mover = User<Xoshiro256PlusPlus>;

impl Common {
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

    /// The throttle, locked, if there is one.
    fn throttle(&self) -> Option<MutexGuard<'_, Throttle>> {
        self.throttle
            .as_ref()
            .map(|t| t.lock().expect("throttle lock poisoned"))
    }
}

/// What the users of one lane share: its connections and its timer,
/// both served by the lane's own runtime.
struct Shared {
    pool: Pool,
    /// Wakes users for their attempts, on the configured steps.
    timer: Timer,
    common: Arc<Common>,
    /// Which lane this is.
    lane: usize,
}

impl Shared {
    /// Lane `lane`'s connections and timer, on the current runtime.
    fn start(
        target: Target,
        resolution: Duration,
        common: Arc<Common>,
        lane: usize,
    ) -> std::io::Result<Self> {
        Ok(Shared {
            pool: Pool::new(target),
            timer: Timer::start(resolution)?,
            common,
            lane,
        })
    }
}

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
                users.spawn(user(shared.clone(), state));
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
                    self.users.spawn(user(self.shared.clone(), state));
                }
                Some(_) = self.users.join_next() => {}
                _ = ticker.tick() => self.shared.pool.expire_idle(),
            }
        }
    }
}

/// How an attempt on the network ended, and when (read as it lands).
type Landed = (Outcome, Hints, Duration);

/// One attempt on the network.
async fn attempt(shared: Arc<Shared>, deadline: Duration) -> Landed {
    let common = &shared.common;
    let (outcome, hints) = shared.pool.attempt(common.at(deadline)).await;
    (outcome, hints, common.now())
}

/// An attempt in flight, polled by its user's own task: what the user
/// sent, and the exchange that lands it. Dropping it drops its
/// connection, which closes the socket.
struct Flight {
    sent: Sent,
    landing: Pin<Box<dyn Future<Output = Landed> + Send>>,
}

/// The first of `flights` to land, taken out of them with what its user
/// sent. Every flight is polled each time the user's task is woken: a user
/// has one in flight, a few when it hedges. An attempt that panics lands
/// as an error at `now()`, which its user goes on from, as it would from a
/// task of its own that died.
fn land(
    flights: &mut Vec<Flight>,
    cx: &mut Context<'_>,
    now: impl Fn() -> Duration,
) -> Poll<(Sent, Landed)> {
    for i in 0..flights.len() {
        let landing = &mut flights[i].landing;
        let landed = match catch_unwind(AssertUnwindSafe(|| landing.as_mut().poll(cx))) {
            Ok(Poll::Pending) => continue,
            Ok(Poll::Ready(landed)) => landed,
            Err(_) => (Outcome::Error, Hints::default(), now()),
        };
        return Poll::Ready((flights.swap_remove(i).sent, landed));
    }
    Poll::Pending
}

/// One simulated user, forever: think, attempt until OK or given up, think
/// again. Its attempts are polled in its own task (a task of their own
/// would cost a spawn, and a wake-up of this one when each lands), one
/// at a time unless it hedges; a hedge that loses is dropped, which closes
/// its connection. It moves to another lane when its own has too much to
/// do ([`Balance::leave`]), between attempts.
async fn user(shared: Arc<Shared>, mut user: Mover) {
    let common = shared.common.clone();
    let rules = &common.rules;
    let mut flights: Vec<Flight> = Vec::new();
    // The sleep until the next attempt, kept while its instant holds: a
    // dropped sleep stays in the timer's wheel until its deadline.
    let mut sleep: Option<(Duration, Pin<Box<Sleep>>)> = None;
    loop {
        if user.is_gone() {
            // A session of open traffic that made its last request.
            common.balance.left(shared.lane);
            common.recorder.session_left();
            return;
        }
        if flights.is_empty()
            && !user.is_waiting()
            && let Some(to) = common.balance.leave(shared.lane)
        {
            common.balance.arrive(to, user);
            return;
        }
        // Nothing due while the user only waits for its attempts.
        let due = user.due();
        if due != sleep.as_ref().map(|(at, _)| *at) {
            sleep = due.map(|at| (at, Box::pin(shared.timer.sleep_until(common.at(at)))));
        }
        tokio::select! {
            biased;
            (sent, (outcome, hints, now)) = poll_fn(|cx| land(&mut flights, cx, || common.now())), if !flights.is_empty() => {
                let mut throttle = common.throttle();
                let finished =
                    user.finish(rules, throttle.as_deref_mut(), sent, outcome, hints, now);
                common.recorder.finished(finished);
                if finished.wake_a_waiter {
                    common.waiters.notify_one();
                }
                if finished.request.is_some() {
                    // The others lost: cancelled, their connections closed.
                    let now = common.now();
                    for flight in flights.drain(..) {
                        let record = flight.sent.cancel(throttle.as_deref_mut(), now);
                        common.recorder.attempt_finished(record);
                    }
                }
            }
            () = common.waiters.notified(), if user.is_waiting() => {
                user.wake(common.now());
            }
            () = async { sleep.as_mut().expect("a sleep while due").1.as_mut().await }, if sleep.is_some() => {
                sleep = None;
                let begun = user.begin(rules, common.throttle().as_deref_mut(), common.now());
                match begun {
                    // The loop sleeps until the token is there.
                    Attempt::Wait => {}
                    Attempt::Refused(request) => common.recorder.request_finished(request),
                    Attempt::Rejected(finished) => common.recorder.finished(finished),
                    Attempt::Held => {}
                    Attempt::Send { deadline, sent } => {
                        common.recorder.attempt_started();
                        flights.push(Flight {
                            sent,
                            landing: Box::pin(attempt(shared.clone(), deadline)),
                        });
                    }
                }
            }
        }
    }
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
    let target = Target::resolve(&config.url)
        .await
        .map_err(StartError::Url)?;
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

    let until = async {
        match config.duration {
            Some(d) if !open => tokio::time::sleep(d).await,
            _ => std::future::pending().await,
        }
    };
    let mut stop = pin!(async {
        if stopped_early {
            return;
        }
        tokio::select! {
            _ = shutdown => {}
            _ = until => {}
        }
    });
    let mut ticker =
        tokio::time::interval_at(start + config.report_interval, config.report_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut handles = vec![tokio::runtime::Handle::current()];
    handles.extend_from_slice(lanes.handles());
    let mut load = Load::new(handles);
    // The first plan after a whole period: the users' spawning alone
    // would count as a busy lane.
    let every = Balance::<Mover>::EVERY;
    let mut weigh = tokio::time::interval_at(Instant::now() + every, every);
    let mut last = start;
    {
        let mut serving = pin!(home.serve(config.report_interval));
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    let now = Instant::now();
                    reporter.report(&common.recorder, now - last, unix_ms(), now - start);
                    last = now;
                }
                _ = weigh.tick(), if count > 1 => common.balance.plan(load.measure()),
                () = &mut serving => {}
                () = &mut arriving => break,
                _ = &mut stop => break,
            }
        }
    }
    // Attempts still in flight are cut short and not counted; once the
    // lanes have stopped, nothing more is recorded after the last report.
    home.users.abort_all();
    lanes.stop();
    let now = Instant::now();
    reporter.report(&common.recorder, now - last, unix_ms(), now - start);
    Ok(reporter.close(
        now - start,
        config.users().count() as u32,
        common.balance.moves(),
        &common.recorder,
    ))
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
