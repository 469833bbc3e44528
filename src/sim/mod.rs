//! The experiment in virtual time: a discrete-event engine that runs the
//! same model as the real server and client, in milliseconds instead of
//! minutes.
//!
//! One implementation, two engines: users are the same [`User`] state
//! machines as the real client's, drawing from the same per-user random
//! streams through the same policies and throttle; the server is the same
//! completion scheduler over the same latency model; counts go through the
//! same recorder into the same report rows and CSV files. This module
//! imports nothing from the networked engine, nor hyper or tokio. What the
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

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::model::arrivals::user_rng;
use crate::model::client::ClientConfig;
use crate::model::outcome::{Hints, Outcome};
use crate::model::server::ServerConfig;
use crate::model::service::{Exit, Refusal};
use crate::model::user::{Attempt, Rules, User};
use crate::policy::{Throttle, format_retry_after, parse_retry_after};
use crate::report::counts::ClientRecorder;
use crate::report::output::{CsvError, server_csv, write_row};
use crate::report::rows::ServerRow;
use crate::report::summary::{ClientSummary, Reporter, ServerSummary};

mod event;
mod host;
mod live;
mod queue;
mod slot;

use event::{AttemptId, Event, GENERATION_MASK};
use host::{Delivery, Host, virtual_unix_ms};
use live::Live;
use queue::{EventQueue, Key};
use slot::{Flight, Flights, Slot, State, in_flight};

/// The least time an attempt answered at once takes before its user can
/// try again (a loopback round trip, or one pass of a client's event
/// loop): without it, a zero retry delay against an instant refusal would
/// stop virtual time.
const INSTANT_ANSWER: Duration = Duration::from_micros(100);

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

/// The engine's state: users, the server and the connection pool.
struct Engine {
    rules: Rules,
    slots: Vec<Slot>,
    /// Each user's attempt in flight, in sync with `slots`.
    live: Live,
    host: Host<AttemptId>,
    throttle: Option<Throttle>,
    recorder: ClientRecorder,
    /// Idle keep-alive connections in the client's pool.
    pool: u64,
    /// The server's `Retry-After` as the client reads it.
    retry_after: Option<Duration>,
    /// The server's gRPC pushback, if it sends one with its refusals.
    pushback_ms: Option<i64>,
    /// The status of a shed request (429 is a throttling answer).
    shed_status: u16,
    queue: EventQueue,
    /// Attempts answered by the departures at hand, and how (kept to
    /// reuse its memory).
    answered: Vec<(AttemptId, Exit)>,
    /// A hedge cancelled while answers were handed out: its disconnect may
    /// have made others due at once.
    recomplete: bool,
    /// Users waiting for a rate limiter's token, longest first, with the
    /// number of their wait.
    waiters: VecDeque<(u32, u32)>,
    events: u64,
}

impl Engine {
    fn push(&mut self, at: Duration, event: Event) {
        let key = Key::new(at, event.pack());
        match event {
            // Timeouts come in time order unless a deadline cuts one short.
            Event::Deadline(_) => self.queue.push_ordered(key),
            _ => self.queue.push(key),
        }
    }

    fn current(&self, id: AttemptId) -> Option<State> {
        if self.live.of(id) == Some(false) {
            return None;
        }
        let slot = &self.slots[id.user as usize];
        slot.position(id)
            .map(|at| slot.flights.iter().nth(at).expect("in flight").state)
    }

    /// A user's attempt falls due at `now` (unless the event is stale).
    fn due(&mut self, user: u32, now: Duration) {
        let slot = &mut self.slots[user as usize];
        if slot.due_at != Some(now) {
            return;
        }
        slot.due_at = None;
        match slot.user.begin(&self.rules, self.throttle.as_mut(), now) {
            Attempt::Wait => {
                slot.waits = slot.waits.wrapping_add(1);
                self.waiters.push_back((user, slot.waits));
                self.schedule(user, now, false);
            }
            Attempt::Refused(request) => {
                self.recorder.request_finished_mut(request);
                self.schedule(user, now, true);
            }
            Attempt::Rejected(finished) => {
                self.recorder.finished_mut(finished);
                self.schedule(user, now, true);
            }
            Attempt::Held => {}
            Attempt::Send { deadline, sent } => {
                self.recorder.attempt_started_mut();
                let id = AttemptId {
                    user,
                    generation: slot.generation,
                };
                slot.generation = (slot.generation + 1) & GENERATION_MASK;
                slot.flights.push(Flight {
                    generation: id.generation,
                    state: State::Waiting,
                    sent,
                });
                self.live.set(user, slot.flights.generations());
                self.push(deadline.max(now), Event::Deadline(id));
                let pooled = self.pool > 0;
                self.pool -= u64::from(pooled);
                let delivery = self.host.send(now, id, pooled);
                self.delivered(id, delivery, now, 0);
                // A hedging user's next hedge (an instant refusal has
                // scheduled what follows it already).
                if in_flight(&self.live, &self.slots, id) {
                    self.schedule(user, now, false);
                }
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
                self.push(now + backoff, Event::Syn(id));
                State::Connecting { tries: tries + 1 }
            }
            Delivery::Refused(why) => {
                // The refusal comes back on a connection that stays open;
                // only shedding sends Retry-After.
                self.pool += 1;
                let shed = why == Refusal::Shed;
                let hints = Hints {
                    retry_after: self.retry_after.filter(|_| shed),
                    pushback_ms: self.pushback_ms,
                    throttled: shed && self.shed_status == 429,
                };
                self.end(id, Outcome::Error, hints, now, true);
                return;
            }
        };
        let slot = &mut self.slots[id.user as usize];
        if let Some(at) = slot.position(id) {
            slot.flights.get_mut(at).state = state;
        }
    }

    /// Ends attempt `id` at `now` (`instant` if it was answered the moment
    /// it was sent) and schedules what comes next; if it ended its request,
    /// the request's other attempts (hedges that lost) are cancelled.
    fn end(&mut self, id: AttemptId, outcome: Outcome, hints: Hints, now: Duration, instant: bool) {
        let slot = &mut self.slots[id.user as usize];
        let Some(at) = slot.position(id) else {
            return;
        };
        let sent = slot.flights.swap_remove(at).sent;
        self.live.set(id.user, slot.flights.generations());
        let finished = slot.user.finish(
            &self.rules,
            self.throttle.as_mut(),
            sent,
            outcome,
            hints,
            now,
        );
        self.recorder.finished_mut(finished);
        if finished.request.is_some() {
            self.cancel_flights(id.user, now);
        }
        self.schedule(id.user, now, instant);
        if finished.wake_a_waiter {
            self.wake_a_waiter(now);
        }
    }

    /// Wakes the user that has waited longest for a token to look again.
    fn wake_a_waiter(&mut self, now: Duration) {
        while let Some((user, wait)) = self.waiters.pop_front() {
            let slot = &mut self.slots[user as usize];
            if slot.waits == wait && slot.user.wake(now) {
                self.schedule(user, now, false);
                return;
            }
        }
    }

    /// Cancels a user's attempts still in flight: their connections close.
    fn cancel_flights(&mut self, user: u32, now: Duration) {
        let mut flights = std::mem::take(&mut self.slots[user as usize].flights);
        self.live.set(user, std::iter::empty());
        flights.clear_with(|flight| {
            let record = flight.sent.cancel(self.throttle.as_mut(), now);
            self.recorder.attempt_finished_mut(record);
            if let State::Admitted(ticket) = flight.state {
                self.host.disconnect(now, ticket);
                self.recomplete = true;
            }
        });
        // Keep the memory.
        self.slots[user as usize].flights = flights;
    }

    /// Queues a user's next attempt, if one is due; after an instant
    /// answer, no sooner than a round trip later.
    fn schedule(&mut self, user: u32, now: Duration, instant: bool) {
        let slot = &mut self.slots[user as usize];
        let Some(due) = slot.user.due() else {
            slot.due_at = None;
            return;
        };
        // A hedge due a delay after a copy that went late is due now, not
        // in the past.
        let due = if instant {
            due.max(now + INSTANT_ANSWER)
        } else {
            due.max(now)
        };
        if slot.due_at == Some(due) {
            return;
        }
        slot.due_at = Some(due);
        self.push(due, Event::Due(user));
    }

    fn deadline(&mut self, id: AttemptId, now: Duration) {
        let Some(state) = self.current(id) else {
            return;
        };
        self.end(id, Outcome::Timeout, Hints::default(), now, false);
        if let State::Admitted(ticket) = state {
            self.host.disconnect(now, ticket);
            // A cancellation lowers the delay: others may be done at once.
            self.complete(now);
        }
    }

    fn syn(&mut self, id: AttemptId, now: Duration) {
        let Some(State::Connecting { tries }) = self.current(id) else {
            return;
        };
        if tries > SYN_RETRIES {
            self.end(id, Outcome::Error, Hints::default(), now, false);
            return;
        }
        let delivery = self.host.retry_connect(now, id);
        self.delivered(id, delivery, now, tries);
    }

    /// Answers requests that left the server (served, or dropped from its
    /// queue with a 503) whose clients still wait.
    fn complete(&mut self, now: Duration) {
        loop {
            self.complete_once(now);
            if !std::mem::take(&mut self.recomplete) {
                break;
            }
        }
    }

    fn complete_once(&mut self, now: Duration) {
        let mut answered = std::mem::take(&mut self.answered);
        let (slots, live) = (&self.slots, &self.live);
        self.host.advance(now, |id, exit| {
            let waiting = in_flight(live, slots, id);
            if waiting {
                answered.push((id, exit));
            }
            waiting
        });
        for (id, exit) in answered.drain(..) {
            // A hedge answered at the same instant as the winner: it was
            // cancelled just now.
            if !in_flight(&self.live, &self.slots, id) {
                continue;
            }
            self.pool += 1;
            let (outcome, hints) = match exit {
                Exit::Served => (Outcome::Ok, Hints::default()),
                Exit::Dropped | Exit::Cancelled => (
                    Outcome::Error,
                    Hints {
                        pushback_ms: self.pushback_ms,
                        ..Hints::default()
                    },
                ),
            };
            self.end(id, outcome, hints, now, false);
        }
        self.answered = answered;
    }

    fn resume(&mut self, now: Duration) {
        let mut reads = Vec::new();
        let (slots, live) = (&self.slots, &self.live);
        self.host.resume(
            now,
            |id| !in_flight(live, slots, *id),
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
    let mut reporter = Reporter::new(client, None).map_err(SimError::Csv)?;
    let mut server_csv = server_csv(&config.server).map_err(SimError::Csv)?;
    let rules = client.rules();
    let mut engine = Engine {
        rules,
        slots: (0..client.clients)
            .map(|i| Slot {
                user: User::new(
                    &rules,
                    user_rng(client.seed, u64::from(i)),
                    client.start_of(i),
                ),
                generation: 0,
                flights: Flights::default(),
                due_at: None,
                waits: 0,
            })
            .collect(),
        live: Live::new(client.clients as usize),
        host: Host::new(&config.server),
        throttle: client.throttle.map(Throttle::new),
        recorder: ClientRecorder::new(),
        pool: 0,
        retry_after: config
            .server
            .shed
            .and_then(|s| parse_retry_after(&format_retry_after(s.retry_after), UNIX_EPOCH)),
        pushback_ms: config.server.pushback_ms,
        shed_status: config.server.shed.map_or(503, |s| s.status),
        queue: EventQueue::with_capacity(client.clients as usize * 2),
        answered: Vec::new(),
        recomplete: false,
        waiters: VecDeque::new(),
        events: 0,
    };
    for user in 0..client.clients {
        engine.schedule(user, Duration::ZERO, false);
    }
    engine.push(client.report_interval, Event::ClientTick);
    engine.push(config.server.report_interval, Event::ServerTick);
    for (i, pause) in config.pauses.iter().enumerate() {
        engine.push(pause.at, Event::Stop(i as u32));
    }

    let mut server_rows = Vec::new();
    let (mut client_last, mut server_last) = (Duration::ZERO, Duration::ZERO);
    let mut tick_missed = false;
    loop {
        let next_event = engine.queue.peek().map(|k| k.time());
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
        let Some(key) = engine.queue.pop() else {
            break;
        };
        let (now, event) = (key.time(), Event::unpack(key.what));
        if now >= end {
            break;
        }
        engine.events += 1;
        match event {
            Event::Due(user) => engine.due(user, now),
            Event::Deadline(id) => engine.deadline(id, now),
            Event::Syn(id) => engine.syn(id, now),
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
            Event::Stop(i) => {
                engine.host.stop();
                engine.push(now + config.pauses[i as usize].length, Event::Resume);
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
            strategy: client.policy_name(),
            clients: client.clients,
            moves: 0,
        },
        server: engine.host.summary(),
        server_rows,
        events: engine.events,
        wall: wall.elapsed(),
    })
}
