//! The experiment in virtual time: a discrete-event engine that runs the
//! same model as the real server and client, in milliseconds instead of
//! minutes.
//!
//! One implementation, two engines: users are the same [`User`] state
//! machines as the real client's, drawing from the same per-user random
//! streams through the same policies and throttle; the server is the same
//! [`CompletionScheduler`] over the same [`LatencyModel`]; counts go through
//! the same recorder into the same report rows and CSV files. What the
//! engine adds is a model of what the network does, and only of what
//! decides the outcome:
//!
//! - a running server reads every request the instant it is sent (loopback
//!   takes microseconds against delays of 100 ms and more);
//! - a stopped server reads nothing: a request written on a pooled
//!   keep-alive connection waits in its socket, and a new connection waits
//!   in the listen backlog while there is room; beyond the backlog the
//!   kernel drops the SYN, which is retransmitted after 1 s, 3 s, 7 s...
//!   (Linux's schedule) and fails after six retransmissions;
//! - on resume the server reads every waiting request at once, including
//!   those whose client has already timed out and closed the connection:
//!   that is the burst of abandoned work the storm starts from;
//! - a timed-out attempt closes its connection; in `cancel` mode the server
//!   drops the work when it notices (at once, or at resume), in `continue`
//!   mode the work counts until its modelled completion;
//! - the server's report ticks stop while it is stopped and the missed one
//!   fires at resume, as tokio's interval does in the real server.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant, UNIX_EPOCH};

use rand::rngs::Xoshiro256PlusPlus;

use crate::arrivals::user_rng;
use crate::client::{ClientConfig, ClientSummary, Reporter, record};
use crate::output::{CsvError, CsvSink, write_row};
use crate::policy::{Throttle, format_retry_after, parse_retry_after};
use crate::scheduler::{CompletionScheduler, Ticket};
use crate::server::{OnDisconnect, ServerConfig, ServerSummary};
use crate::stats::{ClientRecorder, Outcome, ServerCounts, ServerRow};
use crate::user::{Attempt, Rules, User};

/// Linux's SYN retransmissions (`tcp_syn_retries`) before a connect fails.
const SYN_RETRIES: u32 = 6;
/// Linux's initial retransmission timeout; each retransmission doubles it.
const SYN_TIMEOUT: Duration = Duration::from_secs(1);

/// A stop of the server: SIGSTOP at `at`, SIGCONT `length` later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// Since the start of the run.
    pub at: Duration,
    /// How long the server stays stopped.
    pub length: Duration,
}

/// One virtual-time experiment: the server's and the client's
/// configurations (as their programs would take them) and the pauses.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The server; its address is unused.
    pub server: ServerConfig,
    /// The client; its URL is unused and `duration` is the run's length.
    pub client: ClientConfig,
    /// When the server is stopped, in order.
    pub pauses: Vec<Pause>,
}

/// What a virtual-time run produced.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    /// The client's summary, rows included.
    pub client: ClientSummary,
    /// The server's totals.
    pub server: ServerSummary,
    /// The server's report rows.
    pub server_rows: Vec<ServerRow>,
    /// Events processed.
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
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::NoDuration => write!(f, "a virtual-time run needs a --duration"),
            SimError::Csv(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SimError {}

/// Identifies one attempt: its user and that user's attempt number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AttemptId {
    user: u32,
    generation: u32,
}

/// How a request reached a stopped server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Read and admitted into the model.
    Admitted(Ticket),
    /// Refused at once by load shedding.
    Shed,
    /// Waiting in a socket or the listen backlog until the server runs.
    Waiting,
    /// No room in the backlog: the SYN was dropped.
    Dropped,
}

/// The server process as the network sees it: the latency model, the
/// listen backlog and requests waiting while it is stopped.
pub struct Host<T> {
    scheduler: CompletionScheduler<T>,
    stopped: bool,
    /// Requests written but not read (the server is stopped), in order,
    /// each marked if its connection holds a backlog slot.
    unread: VecDeque<(T, bool)>,
    /// Backlog slots in use.
    queued: usize,
    backlog: usize,
    shed_above: Option<u64>,
    cancel: bool,
    /// Disconnects the stopped server will notice when it resumes.
    cancels: Vec<Ticket>,
    /// Counts since the last report.
    pub interval: ServerCounts,
    /// Counts over the whole run.
    pub totals: ServerCounts,
    /// Highest concurrency reached.
    pub peak: u64,
}

impl<T: Copy> Host<T> {
    /// A running server with `config`'s model, backlog and policies.
    pub fn new(config: &ServerConfig) -> Self {
        Host {
            scheduler: CompletionScheduler::new(config.model),
            stopped: false,
            unread: VecDeque::new(),
            queued: 0,
            backlog: config.backlog as usize,
            shed_above: config.shed.map(|s| s.above),
            cancel: config.on_disconnect == OnDisconnect::Cancel,
            cancels: Vec::new(),
            interval: ServerCounts::default(),
            totals: ServerCounts::default(),
            peak: 0,
        }
    }

    /// Requests in the model.
    pub fn concurrency(&self) -> u64 {
        self.scheduler.concurrency()
    }

    /// Whether the server is stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The next modelled completion, if the server runs.
    pub fn next_completion(&self) -> Option<Duration> {
        if self.stopped {
            None
        } else {
            self.scheduler.next_completion()
        }
    }

    /// A request arrives at `now`, on a connection from the pool
    /// (`pooled`) or a new one.
    pub fn send(&mut self, now: Duration, request: T, pooled: bool) -> Delivery {
        if !self.stopped {
            return self.read(now, request);
        }
        if !pooled && self.queued >= self.backlog {
            return Delivery::Dropped;
        }
        self.queued += usize::from(!pooled);
        self.unread.push_back((request, !pooled));
        Delivery::Waiting
    }

    /// A retransmitted SYN arrives: queued if there is room now.
    pub fn retry_connect(&mut self, now: Duration, request: T) -> Delivery {
        self.send(now, request, false)
    }

    /// The server reads a request: shed, or admitted into the model.
    fn read(&mut self, now: Duration, request: T) -> Delivery {
        // Completions due by now free their places first.
        self.scheduler.advance(now);
        if self
            .shed_above
            .is_some_and(|above| self.scheduler.concurrency() >= above)
        {
            self.interval.shed += 1;
            self.totals.shed += 1;
            return Delivery::Shed;
        }
        let ticket = self.scheduler.admit(now, request);
        self.peak = self.peak.max(self.scheduler.concurrency());
        Delivery::Admitted(ticket)
    }

    /// The client of an admitted request closed its connection.
    pub fn disconnect(&mut self, now: Duration, ticket: Ticket) {
        if !self.cancel {
            return;
        }
        if self.stopped {
            self.cancels.push(ticket);
        } else if self.scheduler.cancel(now, ticket).is_some() {
            self.count_abandoned();
        }
    }

    /// SIGSTOP.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// SIGCONT at `now`: completes what fell due while stopped, notices
    /// disconnects, then reads every waiting request. `gone` tells whether
    /// a request's client has closed its connection; each read request is
    /// passed to `delivered` with its fate.
    pub fn resume(
        &mut self,
        now: Duration,
        gone: impl Fn(&T) -> bool,
        mut delivered: impl FnMut(T, Delivery),
    ) {
        self.stopped = false;
        self.scheduler.advance(now);
        for ticket in std::mem::take(&mut self.cancels) {
            if self.scheduler.cancel(now, ticket).is_some() {
                self.count_abandoned();
            }
        }
        self.queued = 0;
        while let Some((request, _)) = self.unread.pop_front() {
            if self.cancel && gone(&request) {
                // Read, then dropped as soon as the closed socket shows.
                self.count_abandoned();
                continue;
            }
            let fate = self.read(now, request);
            delivered(request, fate);
        }
    }

    /// Completes every request due by `now` (if running), passing each to
    /// `answer`, which says whether its client was still waiting.
    pub fn advance(&mut self, now: Duration, mut answer: impl FnMut(T) -> bool) {
        if self.stopped {
            return;
        }
        self.scheduler.advance(now);
        let done: Vec<T> = self
            .scheduler
            .drain_completed()
            .map(|c| c.payload)
            .collect();
        for payload in done {
            if answer(payload) {
                self.interval.completed += 1;
                self.totals.completed += 1;
            } else {
                self.count_abandoned();
            }
        }
    }

    fn count_abandoned(&mut self) {
        self.interval.abandoned += 1;
        self.totals.abandoned += 1;
    }

    /// The report row of the interval of length `measured` ending at `now`.
    pub fn report(&mut self, now: Duration, measured: Duration) -> ServerRow {
        ServerRow::new(
            std::mem::take(&mut self.interval),
            measured,
            self.scheduler.concurrency(),
            self.scheduler.current_delay(),
            virtual_unix_ms(now),
            now,
        )
    }

    /// The run's totals.
    pub fn summary(&self) -> ServerSummary {
        ServerSummary {
            completed: self.totals.completed,
            abandoned: self.totals.abandoned,
            peak_concurrency: self.peak,
            in_flight: self.scheduler.concurrency(),
            shed: self.totals.shed,
        }
    }
}

/// Wall-clock stamps of a virtual run: milliseconds since its start, as if
/// it had started at the Unix epoch, so output depends on the seed alone.
pub fn virtual_unix_ms(t: Duration) -> u64 {
    t.as_millis() as u64
}

/// Where one user's current attempt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Thinking or backing off: nothing in flight.
    Idle,
    /// The SYN was dropped; retransmission number `tries` is pending.
    Connecting { tries: u32 },
    /// Written, waiting for the stopped server to read it.
    Waiting,
    /// In the server's model.
    Admitted(Ticket),
}

struct Slot {
    user: User<Xoshiro256PlusPlus>,
    generation: u32,
    state: State,
}

/// What the event queue holds. Completions are not in it: the server's
/// scheduler always knows its next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A user's next attempt is due.
    Due(u32),
    /// An attempt's timeout (stale if the attempt has ended).
    Deadline(u32, u32),
    /// A retransmitted SYN (stale if the attempt has ended).
    Syn(u32, u32),
    ClientTick,
    ServerTick,
    Stop(Duration),
    Resume,
}

/// The engine's state: users, the server and the connection pool.
struct Engine {
    rules: Rules,
    slots: Vec<Slot>,
    host: Host<AttemptId>,
    throttle: Option<Throttle>,
    recorder: ClientRecorder,
    /// Idle keep-alive connections in the client's pool.
    pool: u64,
    /// The server's `Retry-After` as the client reads it.
    retry_after: Option<Duration>,
    queue: BinaryHeap<Reverse<(Duration, u64, Event)>>,
    seq: u64,
    events: u64,
}

impl Engine {
    fn push(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, event)));
    }

    fn current(&self, id: AttemptId) -> Option<State> {
        let slot = &self.slots[id.user as usize];
        (slot.generation == id.generation).then_some(slot.state)
    }

    /// A user's attempt falls due at `now`.
    fn due(&mut self, user: u32, now: Duration) {
        let slot = &mut self.slots[user as usize];
        let verdict = match &mut self.throttle {
            Some(t) => t.before_attempt(slot.user.is_retry(), now, slot.user.rng()),
            None => crate::policy::Verdict::Allow,
        };
        match slot.user.begin(&self.rules, verdict, now) {
            Attempt::Refused(request) => {
                self.recorder.request_finished(request);
                let next = slot.user.due();
                self.push(next, Event::Due(user));
            }
            Attempt::Rejected(finished) => {
                record(&self.recorder, finished);
                let next = slot.user.due();
                self.push(next, Event::Due(user));
            }
            Attempt::Send { deadline } => {
                self.recorder.attempt_started();
                let id = AttemptId {
                    user,
                    generation: slot.generation,
                };
                self.push(deadline.max(now), Event::Deadline(user, id.generation));
                let pooled = self.pool > 0;
                self.pool -= u64::from(pooled);
                let delivery = self.host.send(now, id, pooled);
                self.delivered(id, delivery, now, 0);
            }
        }
    }

    /// Acts on what the server did with attempt `id` at `now`.
    fn delivered(&mut self, id: AttemptId, delivery: Delivery, now: Duration, tries: u32) {
        let state = match delivery {
            Delivery::Admitted(ticket) => State::Admitted(ticket),
            Delivery::Waiting => State::Waiting,
            Delivery::Dropped => {
                let backoff = SYN_TIMEOUT * (1u32 << tries.min(16));
                self.push(now + backoff, Event::Syn(id.user, id.generation));
                State::Connecting { tries: tries + 1 }
            }
            Delivery::Shed => {
                // The refusal comes back on a connection that stays open.
                self.pool += 1;
                let retry_after = self.retry_after;
                self.end(id.user, Outcome::Error, retry_after, now);
                return;
            }
        };
        self.slots[id.user as usize].state = state;
    }

    /// Ends a user's sent attempt at `now` and schedules its next one.
    fn end(&mut self, user: u32, outcome: Outcome, retry_after: Option<Duration>, now: Duration) {
        if let Some(t) = &mut self.throttle {
            t.after_attempt(outcome == Outcome::Ok, now);
        }
        let slot = &mut self.slots[user as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.state = State::Idle;
        let finished = slot.user.finish(&self.rules, outcome, retry_after, now);
        let next = slot.user.due();
        record(&self.recorder, finished);
        self.push(next, Event::Due(user));
    }

    fn deadline(&mut self, id: AttemptId, now: Duration) {
        let Some(state) = self.current(id) else {
            return;
        };
        if let State::Admitted(ticket) = state {
            self.host.disconnect(now, ticket);
        }
        self.end(id.user, Outcome::Timeout, None, now);
    }

    fn syn(&mut self, id: AttemptId, now: Duration) {
        let Some(State::Connecting { tries }) = self.current(id) else {
            return;
        };
        if tries > SYN_RETRIES {
            self.end(id.user, Outcome::Error, None, now);
            return;
        }
        let delivery = self.host.retry_connect(now, id);
        self.delivered(id, delivery, now, tries);
    }

    /// Answers completed requests whose clients still wait.
    fn complete(&mut self, now: Duration) {
        let mut answered = Vec::new();
        let slots = &self.slots;
        self.host.advance(now, |id| {
            let waiting = slots[id.user as usize].generation == id.generation;
            if waiting {
                answered.push(id.user);
            }
            waiting
        });
        for user in answered {
            self.pool += 1;
            self.end(user, Outcome::Ok, None, now);
        }
    }

    fn resume(&mut self, now: Duration) {
        let mut reads = Vec::new();
        let slots = &self.slots;
        self.host.resume(
            now,
            |id| slots[id.user as usize].generation != id.generation,
            |id, fate| reads.push((id, fate)),
        );
        // Requests whose client is gone stay in the model as wasted work.
        for (id, fate) in reads {
            if self.current(id).is_some() {
                self.delivered(id, fate, now, 0);
            }
        }
        // What fell due while the server was stopped is answered now.
        self.complete(now);
    }
}

/// Runs one experiment in virtual time, writing the CSV files the
/// configurations name.
pub fn run(config: &SimConfig) -> Result<SimOutcome, SimError> {
    let wall = Instant::now();
    let client = &config.client;
    let end = client.duration.ok_or(SimError::NoDuration)?;
    let mut reporter = Reporter::new(client).map_err(|e| match e {
        crate::client::StartError::Csv(e) => SimError::Csv(e),
        crate::client::StartError::Url(_) => unreachable!("the URL is not used"),
    })?;
    let mut server_csv =
        CsvSink::<ServerRow>::create_if(config.server.csv.as_deref()).map_err(SimError::Csv)?;
    let rules = client.rules();
    let mut engine = Engine {
        rules,
        slots: (0..client.clients)
            .map(|i| Slot {
                user: User::new(&rules, user_rng(client.seed, u64::from(i)), Duration::ZERO),
                generation: 0,
                state: State::Idle,
            })
            .collect(),
        host: Host::new(&config.server),
        throttle: client.throttle.map(Throttle::new),
        recorder: ClientRecorder::new(),
        pool: 0,
        retry_after: config
            .server
            .shed
            .and_then(|s| parse_retry_after(&format_retry_after(s.retry_after), UNIX_EPOCH)),
        queue: BinaryHeap::with_capacity(client.clients as usize * 2),
        seq: 0,
        events: 0,
    };
    for user in 0..client.clients {
        let due = engine.slots[user as usize].user.due();
        engine.push(due, Event::Due(user));
    }
    engine.push(client.report_interval, Event::ClientTick);
    engine.push(config.server.report_interval, Event::ServerTick);
    for pause in &config.pauses {
        engine.push(pause.at, Event::Stop(pause.length));
    }

    let mut server_rows = Vec::new();
    let (mut client_last, mut server_last) = (Duration::ZERO, Duration::ZERO);
    let mut tick_missed = false;
    loop {
        let next_event = engine.queue.peek().map(|Reverse((at, _, _))| *at);
        let next_completion = engine.host.next_completion();
        // Completions due at an instant come before other events at it.
        if let Some(at) = next_completion
            && at < end
            && next_event.is_none_or(|e| at <= e)
        {
            engine.events += 1;
            engine.complete(at);
            continue;
        }
        let Some(Reverse((now, _, event))) = engine.queue.pop() else {
            break;
        };
        if now >= end {
            break;
        }
        engine.events += 1;
        match event {
            Event::Due(user) => engine.due(user, now),
            Event::Deadline(user, generation) => {
                engine.deadline(AttemptId { user, generation }, now)
            }
            Event::Syn(user, generation) => engine.syn(AttemptId { user, generation }, now),
            Event::ClientTick => {
                reporter.report(
                    &engine.recorder,
                    now - client_last,
                    virtual_unix_ms(now),
                    now,
                );
                client_last = now;
                engine.push(now + client.report_interval, Event::ClientTick);
            }
            Event::ServerTick => {
                if engine.host.is_stopped() {
                    tick_missed = true;
                    continue;
                }
                let row = engine.host.report(now, now - server_last);
                write_row(&mut server_csv, &row);
                server_rows.push(row);
                server_last = now;
                engine.push(now + config.server.report_interval, Event::ServerTick);
            }
            Event::Stop(length) => {
                engine.host.stop();
                engine.push(now + length, Event::Resume);
            }
            Event::Resume => {
                if tick_missed {
                    tick_missed = false;
                    let row = engine.host.report(now, now - server_last);
                    write_row(&mut server_csv, &row);
                    server_rows.push(row);
                    server_last = now;
                    engine.push(now + config.server.report_interval, Event::ServerTick);
                }
                engine.resume(now);
            }
        }
    }
    reporter.report(
        &engine.recorder,
        end - client_last,
        virtual_unix_ms(end),
        end,
    );
    if end > server_last && !engine.host.is_stopped() {
        let row = engine.host.report(end, end - server_last);
        write_row(&mut server_csv, &row);
        server_rows.push(row);
    }
    Ok(SimOutcome {
        client: ClientSummary {
            elapsed: end,
            totals: reporter.totals,
            rows: reporter.rows,
            seed: client.seed,
            strategy: client.strategy.name(),
            clients: client.clients,
        },
        server: engine.host.summary(),
        server_rows,
        events: engine.events,
        wall: wall.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyModel;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn host(backlog: u32, on_disconnect: OnDisconnect) -> Host<u32> {
        Host::new(&ServerConfig {
            backlog,
            on_disconnect,
            ..ServerConfig::default()
        })
    }

    fn complete_all(h: &mut Host<u32>, now: Duration, waiting: &[u32]) -> Vec<u32> {
        let mut answered = Vec::new();
        h.advance(now, |id| {
            let w = waiting.contains(&id);
            if w {
                answered.push(id);
            }
            w
        });
        answered
    }

    #[test]
    fn a_running_server_admits_at_once_and_answers_after_the_base_delay() {
        let mut h = host(4096, OnDisconnect::Continue);
        assert!(matches!(h.send(ms(10), 1, false), Delivery::Admitted(_)));
        assert_eq!(h.concurrency(), 1);
        assert_eq!(h.next_completion(), Some(ms(110)));
        assert_eq!(complete_all(&mut h, ms(110), &[1]), vec![1]);
        assert_eq!((h.totals.completed, h.totals.abandoned), (1, 0));
        assert_eq!(h.next_completion(), None);
    }

    #[test]
    fn a_cascade_of_completions_at_one_instant() {
        // delay(c) = 100 ms * 2^(c - 1): with three in flight, 400 ms.
        let mut h: Host<u32> = Host::new(&ServerConfig {
            model: LatencyModel {
                base: ms(100),
                limit: 1,
                factor: 2.0,
                scale: 1.0,
                max_delay: Duration::from_secs(60),
            },
            ..ServerConfig::default()
        });
        for (i, at) in [0, 10, 20].into_iter().enumerate() {
            h.send(ms(at), i as u32, false);
        }
        // The first is due at 0 + 400 ms. Its completion brings the delay
        // to 200 ms, which the second (10 + 200) has already passed, and
        // then to 100 ms, which the third (20 + 100) has passed too.
        assert_eq!(h.next_completion(), Some(ms(400)));
        assert!(complete_all(&mut h, ms(399), &[0, 1, 2]).is_empty());
        // The second client gave up: its completion is wasted work.
        assert_eq!(complete_all(&mut h, ms(400), &[0, 2]), vec![0, 2]);
        assert_eq!((h.totals.completed, h.totals.abandoned), (2, 1));
        assert_eq!(h.concurrency(), 0);
    }

    #[test]
    fn a_full_backlog_drops_connections_but_not_requests_on_open_ones() {
        let mut h = host(2, OnDisconnect::Continue);
        h.stop();
        assert_eq!(h.send(ms(1), 1, false), Delivery::Waiting);
        assert_eq!(h.send(ms(2), 2, false), Delivery::Waiting);
        assert_eq!(h.send(ms(3), 3, false), Delivery::Dropped);
        // A pooled connection is already accepted: its request just waits.
        assert_eq!(h.send(ms(4), 4, true), Delivery::Waiting);
        assert_eq!(h.retry_connect(ms(5), 3), Delivery::Dropped);
        assert_eq!(h.concurrency(), 0);
        assert_eq!(
            h.next_completion(),
            None,
            "a stopped server completes nothing"
        );
        // At resume every waiting request is read, gone or not (1 is gone).
        let mut read = Vec::new();
        h.resume(ms(500), |&id| id == 1, |id, fate| read.push((id, fate)));
        assert_eq!(read.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert!(read.iter().all(|r| matches!(r.1, Delivery::Admitted(_))));
        assert_eq!(h.concurrency(), 3);
        assert_eq!(h.peak, 3);
        // The backlog is free again, and the server runs.
        assert!(matches!(h.retry_connect(ms(501), 3), Delivery::Admitted(_)));
        assert_eq!(complete_all(&mut h, ms(601), &[2, 3, 4]), vec![2, 4, 3]);
        assert_eq!((h.totals.completed, h.totals.abandoned), (3, 1));
    }

    #[test]
    fn cancel_mode_drops_gone_requests_when_it_notices() {
        let mut h = host(8, OnDisconnect::Cancel);
        let Delivery::Admitted(ticket) = h.send(ms(0), 1, false) else {
            panic!("a running server admits");
        };
        h.stop();
        h.send(ms(10), 2, false);
        h.send(ms(20), 3, false);
        // Client 1 gives up while the server is stopped: noticed at resume.
        h.disconnect(ms(50), ticket);
        assert_eq!(h.concurrency(), 1);
        let mut read = Vec::new();
        h.resume(ms(80), |&id| id == 2, |id, _| read.push(id));
        assert_eq!(read, vec![3]);
        assert_eq!(h.concurrency(), 1);
        assert_eq!(h.totals.abandoned, 2);
    }

    #[test]
    fn shedding_refuses_at_the_threshold() {
        let mut h: Host<u32> = Host::new(&ServerConfig {
            shed: Some(crate::server::Shedding {
                above: 1,
                status: hyper::StatusCode::SERVICE_UNAVAILABLE,
                retry_after: Duration::from_secs(1),
            }),
            ..ServerConfig::default()
        });
        assert!(matches!(h.send(ms(0), 1, false), Delivery::Admitted(_)));
        assert_eq!(h.send(ms(1), 2, false), Delivery::Shed);
        assert_eq!(h.totals.shed, 1);
        complete_all(&mut h, ms(100), &[1]);
        assert!(matches!(h.send(ms(101), 3, false), Delivery::Admitted(_)));
    }
}
