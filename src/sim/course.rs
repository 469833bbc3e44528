//! A run's course: the engine and the reports it writes, event after
//! event to the end; and a run warmed up to its first pause, from which
//! runs that differ only in that pause's length and their own length go
//! on.
//!
//! Up to the instant the paused server (the backend, or a tier) is
//! stopped nothing depends on either (the pause's end is queued when it
//! starts, the run's end is only compared with), so such runs are the
//! same to the event until then; and while the server is stopped, a run
//! resuming later goes the same way as one resuming sooner until that one
//! resumes. A sweep tries one seed at a dozen pauses or more: it makes the
//! warm-up once, and goes on through a pause from where the last run made
//! left it, if that run resumed no later.

use std::fmt;
use std::time::{Duration, Instant};

use super::chain_report::{TierOutcome, TierReport};
use super::config::SimConfig;
use super::engine::Engine;
use super::event::{Event, MAX_TIERS};
use super::host::virtual_unix_ms;
use super::queue::Key;
use crate::model::wire::Transport;
use crate::report::output::{CsvError, CsvSink, server_csv, write_row};
use crate::report::rows::ServerRow;
use crate::report::summary::{ClientSummary, Reporter, ServerSummary};

/// What a virtual-time run produced.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    /// The client's summary, rows included.
    pub client: ClientSummary,
    /// The server's totals.
    pub server: ServerSummary,
    /// The server's report rows.
    pub server_rows: Vec<ServerRow>,
    /// What each tier of the chain did, from the client inward (empty
    /// without tiers).
    pub tiers: Vec<TierOutcome>,
    /// Connections the client set out to open (first SYNs sent: over
    /// HTTP/1.1 every attempt that found no idle connection in the pool,
    /// over HTTP/2 every one that found every connection's streams taken).
    pub connects: u64,
    /// The client's SYNs dropped by the server's full listen backlog,
    /// first ones and retransmissions.
    pub syns_dropped: u64,
    /// Events processed (for a run made from a warm-up, those after the
    /// state it went on from).
    pub events: u64,
    /// Real time the run took.
    pub wall: Duration,
}

impl SimOutcome {
    /// The engine's speed, for `--verbose`.
    pub fn speed(&self) -> String {
        let secs = self.wall.as_secs_f64().max(1e-9);
        format!(
            "sim: {} events in {:.1} ms ({:.1} M events/s), {:.1} s simulated",
            self.events,
            secs * 1e3,
            self.events as f64 / secs / 1e6,
            self.client.elapsed.as_secs_f64()
        )
    }
}

/// Why a virtual-time run could not start.
#[derive(Debug)]
pub enum SimError {
    /// The client has no `--duration`: a virtual run must end by itself.
    NoDuration,
    /// A CSV file could not be created.
    Csv(CsvError),
    /// A warm-up cannot serve this run, for the reason given.
    Unshared(&'static str),
    /// The service chain is not one the engine can run, for the reason
    /// given.
    Chain(String),
    /// A client speaks HTTP/2 to a server the engine models as closing
    /// each connection after its answer (`--queue backlog`).
    Http2ToBacklog,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::NoDuration => write!(f, "a virtual-time run needs a --duration"),
            SimError::Csv(e) => e.fmt(f),
            SimError::Unshared(why) => write!(f, "a warm-up cannot be shared: {why}"),
            SimError::Chain(why) => write!(f, "a service chain in virtual time: {why}"),
            SimError::Http2ToBacklog => write!(
                f,
                "--http2 against a server with --queue backlog: that server closes each \
                 connection after its answer (as gunicorn's sync workers, which speak only \
                 HTTP/1.1), which the virtual engine does not model over HTTP/2"
            ),
        }
    }
}

impl std::error::Error for SimError {}

/// A run in progress.
struct Course {
    engine: Engine,
    reporter: Reporter,
    server_csv: Option<CsvSink<ServerRow>>,
    server_rows: Vec<ServerRow>,
    /// The tiers' reports, from the client inward.
    tiers: Vec<TierReport>,
    /// When the last client and server rows ended.
    client_last: Duration,
    server_last: Duration,
    /// A server tick fell while the backend was stopped.
    tick_missed: bool,
    config: SimConfig,
    end: Duration,
    /// The first pause's resume is queued by the caller, not at the stop.
    held: bool,
}

/// Where [`Course::go`] stops short of the end.
#[derive(Clone, Copy)]
enum Halt {
    /// Nowhere.
    Never,
    /// Before the first pause's stop.
    AtStop,
    /// Before the first event at or after this key, and before the first
    /// completion after its instant (a completion comes before every
    /// event at its instant).
    Before(Key),
}

impl Halt {
    fn before_event(self, key: Key) -> bool {
        match self {
            Halt::Never => false,
            Halt::AtStop => Event::unpack(key.what) == Event::Stop(0),
            Halt::Before(k) => key >= k,
        }
    }

    fn before_completion(self, at: Duration) -> bool {
        match self {
            Halt::Before(k) => at > k.time(),
            _ => false,
        }
    }
}

impl Course {
    /// The run of `config` at its start.
    fn new(config: &SimConfig) -> Result<Course, SimError> {
        let end = config.client.duration.ok_or(SimError::NoDuration)?;
        check_chain(config)?;
        check_transports(config)?;
        let reporter = Reporter::new(&config.client, None).map_err(SimError::Csv)?;
        let server_csv = server_csv(&config.server).map_err(SimError::Csv)?;
        let tiers = config
            .tiers
            .iter()
            .map(TierReport::new)
            .collect::<Result<_, _>>()
            .map_err(SimError::Csv)?;
        Ok(Course {
            engine: Engine::new(config),
            reporter,
            server_csv,
            server_rows: Vec::new(),
            tiers,
            client_last: Duration::ZERO,
            server_last: Duration::ZERO,
            tick_missed: false,
            config: config.clone(),
            end,
            held: false,
        })
    }

    /// A copy to go on from, if the run writes nothing (files cannot be
    /// shared).
    fn fork(&self) -> Option<Course> {
        if self.server_csv.is_some() {
            return None;
        }
        let tiers = self
            .tiers
            .iter()
            .map(TierReport::fork)
            .collect::<Option<_>>()?;
        Some(Course {
            engine: self.engine.clone(),
            reporter: self.reporter.fork()?,
            server_csv: None,
            server_rows: self.server_rows.clone(),
            tiers,
            client_last: self.client_last,
            server_last: self.server_last,
            tick_missed: self.tick_missed,
            config: self.config.clone(),
            end: self.end,
            held: self.held,
        })
    }

    /// Processes events in order until the end, or until `halt` says to
    /// stop short of the next (true then).
    fn go(&mut self, halt: Halt) -> bool {
        let end = self.end;
        loop {
            let engine = &mut self.engine;
            let next = engine.queue.peek();
            // Completions due at an instant come before other events at it.
            if let Some(at) = engine.next_completion()
                && at < end
                && next.is_none_or(|e| at <= e.time())
            {
                if halt.before_completion(at) {
                    return true;
                }
                engine.events += 1;
                engine.complete(at);
                continue;
            }
            let Some(key) = next else {
                return false;
            };
            let (now, event) = (key.time(), Event::unpack(key.what));
            if now >= end {
                return false;
            }
            if halt.before_event(key) {
                return true;
            }
            engine.queue.pop_peeked(key);
            engine.events += 1;
            self.handle(now, event);
        }
    }

    /// Does what `event` at `now` says. Inlined in [`Course::go`]: a call
    /// per event was a percent of a storm.
    #[inline(always)]
    fn handle(&mut self, now: Duration, event: Event) {
        let engine = &mut self.engine;
        match event {
            Event::Due(user) => engine.due::<true>(0, user, now),
            Event::Arrival => engine.arrival(now),
            Event::Deadline(id) => engine.deadline::<true>(0, id, now),
            Event::Syn(id) => engine.syn::<true>(0, id, now),
            Event::CallDue(..) | Event::CallDeadline(..) | Event::CallSyn(..) => {
                engine.call_event(event, now);
            }
            Event::TierTick(t) => self.tier_tick(t as usize, now),
            Event::ClientTick => {
                self.reporter.report(
                    &engine.client.recorder,
                    now - self.client_last,
                    virtual_unix_ms(now),
                    now,
                );
                self.client_last = now;
                engine.push(now + self.config.client.report_interval, Event::ClientTick);
            }
            Event::ServerTick => {
                if engine.backend_stopped() {
                    self.tick_missed = true;
                    return;
                }
                self.server_row(now);
            }
            Event::Stop(i) => {
                engine.stop();
                if !(i == 0 && self.held) {
                    engine.push(now + self.config.pauses[i as usize].length, Event::Resume);
                }
            }
            Event::Resume => {
                match self.config.paused {
                    None if std::mem::take(&mut self.tick_missed) => self.server_row(now),
                    None => {}
                    Some(t) => self.tiers[t].resumed(engine, t, now),
                }
                self.engine.resume(now);
            }
        }
    }

    /// Tier `t`'s report tick at `now`.
    #[inline(never)]
    fn tier_tick(&mut self, t: usize, now: Duration) {
        self.tiers[t].tick(&mut self.engine, t, now);
    }

    /// Writes the server's row of the interval ending at `now`, and
    /// queues the next tick.
    fn server_row(&mut self, now: Duration) {
        let row = self.engine.host.report(now, now - self.server_last);
        write_row(&mut self.server_csv, &row);
        self.server_rows.push(row);
        self.server_last = now;
        self.engine
            .push(now + self.config.server.report_interval, Event::ServerTick);
    }

    /// The last rows, and what the run produced; `events` processed by
    /// the caller, `wall` its real time.
    fn finish(mut self, events: u64, wall: Duration) -> SimOutcome {
        let (end, engine) = (self.end, &mut self.engine);
        self.reporter.report(
            &engine.client.recorder,
            end - self.client_last,
            virtual_unix_ms(end),
            end,
        );
        if end > self.server_last && !engine.backend_stopped() {
            let row = engine.host.report(end, end - self.server_last);
            write_row(&mut self.server_csv, &row);
            self.server_rows.push(row);
        }
        let tiers = (self.tiers.into_iter().enumerate())
            .map(|(t, report)| report.finish(engine, t, end))
            .collect();
        SimOutcome {
            client: self.reporter.close(
                end,
                self.config.client.clients,
                0,
                &engine.client.recorder,
            ),
            server: engine.host.summary(),
            server_rows: self.server_rows,
            tiers,
            connects: engine.client.connects,
            syns_dropped: engine.client.syns_dropped,
            events,
            wall,
        }
    }
}

/// Whether the engine can run `config`'s chain: every tier calls inward,
/// the backend calls nothing, and the paused server is one of them.
fn check_chain(config: &SimConfig) -> Result<(), SimError> {
    let fail = |why: String| Err(SimError::Chain(why));
    if config.server.call.is_some() {
        return fail(
            "the backend (the last server) makes no call; a server that calls the next \
             is one of the tiers"
                .to_string(),
        );
    }
    if config.tiers.len() > MAX_TIERS {
        return fail(format!(
            "{} tiers, more than the {MAX_TIERS} a virtual run takes",
            config.tiers.len()
        ));
    }
    if let Some(i) = config.tiers.iter().position(|tier| tier.call.is_none()) {
        return fail(format!(
            "tier {i} (from 0, next to the client) makes no call; every tier calls the next \
             server inward"
        ));
    }
    match config.paused {
        Some(i) if i >= config.tiers.len() => fail(format!(
            "the pauses stop tier {i} (from 0), but the chain has {} tiers",
            config.tiers.len()
        )),
        _ => Ok(()),
    }
}

/// Whether every caller speaking HTTP/2 calls a server that keeps its
/// connections open.
fn check_transports(config: &SimConfig) -> Result<(), SimError> {
    let callers = std::iter::once(&config.client).chain(
        (config.tiers.iter())
            .filter_map(|tier| tier.call.as_deref())
            .map(|call| &call.client),
    );
    let called = config.tiers.iter().chain(std::iter::once(&config.server));
    for (caller, server) in callers.zip(called) {
        if caller.wire.transport == Transport::Http2 && server.waits_in_backlog() {
            return Err(SimError::Http2ToBacklog);
        }
    }
    Ok(())
}

/// Runs one experiment in virtual time, writing the CSV files the
/// configurations name.
pub fn run(config: &SimConfig) -> Result<SimOutcome, SimError> {
    let wall = Instant::now();
    let mut course = Course::new(config)?;
    course.go(Halt::Never);
    let events = course.engine.events;
    Ok(course.finish(events, wall.elapsed()))
}

/// A run warmed up: made up to the instant its first pause begins, the
/// server not yet stopped. [`WarmedUp::finish`] makes from it any run
/// whose configuration differs only in that pause's length and the run's
/// length, exactly as [`run`] would.
pub struct WarmedUp {
    /// Halted before the first pause's stop.
    course: Course,
    /// The last run made through the pause: stopped, its resume not
    /// queued, halted where it resumed (the instant given). A run that
    /// resumes no sooner goes on from there.
    paused: Option<(Duration, Course)>,
    /// The events the warm-up processed.
    events: u64,
}

impl WarmedUp {
    /// Makes the warm-up of `config`, which pauses at least once, before
    /// its end, writes no file and prints nothing.
    pub fn new(config: &SimConfig) -> Result<WarmedUp, SimError> {
        let first = config
            .pauses
            .first()
            .ok_or(SimError::Unshared("no pause"))?;
        if config.client.duration.is_some_and(|end| first.at >= end) {
            return Err(SimError::Unshared("the first pause starts after the end"));
        }
        let (client, server) = (&config.client, &config.server);
        let tier_writes = config.tiers.iter().any(|tier| {
            let call = tier.call.as_deref().map(|c| &c.client);
            tier.csv.is_some() || call.is_some_and(|c| c.csv.is_some() || c.hlog.is_some())
        });
        if client.csv.is_some() || client.hlog.is_some() || server.csv.is_some() || tier_writes {
            return Err(SimError::Unshared("it writes files"));
        }
        if !client.quiet {
            // Its rows up to the fork would be printed once, not per run.
            return Err(SimError::Unshared("it prints its rows"));
        }
        let mut course = Course::new(config)?;
        let halted = course.go(Halt::AtStop);
        debug_assert!(halted, "the first pause starts before the end");
        Ok(WarmedUp {
            events: course.engine.events,
            course,
            paused: None,
        })
    }

    /// The events the warm-up processed.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The run of `config`, which must be the warm-up's but for the first
    /// pause's length and the run's length (ending after the first pause
    /// starts). The outcome counts the events this call processed.
    pub fn finish(&mut self, config: &SimConfig) -> Result<SimOutcome, SimError> {
        let wall = Instant::now();
        let end = self.check(config)?;
        let first = config.pauses[0];
        let resume = first.at.saturating_add(first.length);
        // The kept run goes on itself: a copy of it is kept below.
        let (mut course, from) = match self.paused.take() {
            Some((at, paused)) if at <= resume && resume < end => {
                let from = paused.engine.events;
                (paused, from)
            }
            kept => {
                self.paused = kept;
                (self.stopped(), self.events)
            }
        };
        if resume < end {
            // Through the pause up to the resume, whatever the run's end;
            // kept for the next run that resumes later.
            course.end = Duration::MAX;
            course.go(Halt::Before(Key::new(resume, Event::Resume.pack())));
            self.paused = Some((resume, course.fork().expect("a warm-up writes nothing")));
            course.engine.push(resume, Event::Resume);
        }
        course.config = config.clone();
        course.end = end;
        course.go(Halt::Never);
        let events = course.engine.events - from;
        Ok(course.finish(events, wall.elapsed()))
    }

    /// The warm-up, the server stopped: the first pause's stop taken, its
    /// resume left to the caller.
    fn stopped(&self) -> Course {
        let mut course = self.course.fork().expect("a warm-up writes nothing");
        course.held = true;
        let key = course.engine.queue.pop().expect("the first pause's stop");
        debug_assert_eq!(Event::unpack(key.what), Event::Stop(0));
        course.engine.events += 1;
        course.handle(key.time(), Event::Stop(0));
        course
    }

    /// The end of `config`'s run, if `config` is the warm-up's but for the
    /// first pause's length and the run's length.
    fn check(&self, config: &SimConfig) -> Result<Duration, SimError> {
        let warm = &self.course.config;
        let mut same = config.clone();
        same.client.duration = warm.client.duration;
        if let (Some(pause), Some(first)) = (same.pauses.first_mut(), warm.pauses.first()) {
            pause.length = first.length;
        }
        same.server.unused_seed_as(&warm.server);
        for (tier, warm) in same.tiers.iter_mut().zip(&warm.tiers) {
            tier.unused_seed_as(warm);
        }
        if same != *warm {
            return Err(SimError::Unshared(
                "another configuration than the warm-up's",
            ));
        }
        match config.client.duration {
            Some(end) if end > warm.pauses[0].at => Ok(end),
            Some(_) => Err(SimError::Unshared("the run ends before its first pause")),
            None => Err(SimError::NoDuration),
        }
    }
}
