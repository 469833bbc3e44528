//! The engine's state and what each event does to it: users, the
//! server as the network sees it, the connection pool and the event queue.

use std::collections::VecDeque;
use std::time::{Duration, UNIX_EPOCH};

use super::config::SimConfig;
use super::event::{AttemptId, Event, GENERATION_MASK};
use super::host::{Delivery, Host};
use super::live::Live;
use super::queue::{EventQueue, Key};
use super::slot::{Flight, Flights, Slot, State, in_flight};
use crate::model::arrivals::user_rng;
use crate::model::open::Source;
use crate::model::outcome::{Hints, Outcome};
use crate::model::service::{Exit, Refusal};
use crate::model::user::{Attempt, Rules, User};
use crate::policy::{Throttle, format_retry_after, parse_retry_after};
use crate::report::counts::ClientRecorder;

/// The least time an attempt answered at once takes before its user can
/// try again (a loopback round trip, or one pass of a client's event
/// loop): without it, a zero retry delay against an instant refusal would
/// stop virtual time.
const INSTANT_ANSWER: Duration = Duration::from_micros(100);

/// Linux's SYN retransmissions (`tcp_syn_retries`) before a connect fails.
const SYN_RETRIES: u32 = 6;
/// Linux's initial retransmission timeout; each retransmission doubles it.
const SYN_TIMEOUT: Duration = Duration::from_secs(1);

/// The engine's state: users, the server and the connection pool.
#[derive(Clone)]
pub(super) struct Engine {
    rules: Rules,
    slots: Vec<Slot>,
    /// Each user's attempt in flight, in sync with `slots`.
    live: Live,
    pub(super) host: Host<AttemptId>,
    throttle: Option<Throttle>,
    pub(super) recorder: ClientRecorder,
    /// Idle keep-alive connections in the client's pool.
    pool: u64,
    /// The server's `Retry-After` as the client reads it.
    retry_after: Option<Duration>,
    /// The server's gRPC pushback, if it sends one with its refusals.
    pushback_ms: Option<i64>,
    /// The status of a shed request (429 is a throttling answer).
    shed_status: u16,
    /// The status of a failing backend's failures (429 too).
    fail_status: u16,
    pub(super) queue: EventQueue,
    /// Attempts answered by the departures at hand, and how (kept to
    /// reuse its memory).
    answered: Vec<(AttemptId, Exit)>,
    /// A hedge cancelled while answers were handed out: its disconnect may
    /// have made others due at once.
    recomplete: bool,
    /// Users waiting for a rate limiter's token, longest first, with the
    /// number of their wait.
    waiters: VecDeque<(u32, u32)>,
    /// Where open traffic's sessions come from, if the client sends it.
    source: Option<Source>,
    /// Slots whose session has left, to be taken by the next arrivals.
    free: Vec<u32>,
    pub(super) events: u64,
}

impl Engine {
    pub(super) fn push(&mut self, at: Duration, event: Event) {
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
    pub(super) fn due(&mut self, user: u32, now: Duration) {
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
                self.retire_if_gone(user);
            }
            Attempt::Rejected(finished) => {
                let ended = finished.request.is_some();
                self.recorder.finished_mut(finished);
                self.schedule(user, now, true);
                if ended {
                    self.retire_if_gone(user);
                }
            }
            // A refused hedge, or (grpc-js) a failure's timer with nothing
            // to send: whatever is due later.
            Attempt::Held => self.schedule(user, now, false),
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
                // only shedding sends Retry-After, and a failure (an error,
                // not a push-back) no pushback either.
                self.pool += 1;
                let shed = why == Refusal::Shed;
                let status = match why {
                    Refusal::Shed => self.shed_status,
                    Refusal::Failed => self.fail_status,
                    _ => 503,
                };
                let hints = Hints {
                    retry_after: self.retry_after.filter(|_| shed),
                    pushback_ms: self.pushback_ms.filter(|_| why != Refusal::Failed),
                    // As the networked client reads an answer.
                    throttled: status == 429,
                    // The networked server sends x-amz-retry-after beside
                    // Retry-After, the same wait in milliseconds.
                    amz_retry_after: self.retry_after.filter(|_| shed),
                    throttle_code: false,
                    status: Some(status),
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
        if finished.request.is_some() {
            self.retire_if_gone(id.user);
        }
        if finished.wake_a_waiter {
            self.wake_a_waiter(now);
        }
    }

    /// The next session of open traffic arrives at `now`: it takes a free
    /// slot (or a new one) and its first attempt is due at once, unless
    /// the client holds its bound of sessions; the arrival after it is
    /// queued.
    pub(super) fn arrival(&mut self, now: Duration) {
        let source = self.source.as_mut().expect("arrivals come from a source");
        let admitted = source.arrive(&self.rules, self.recorder.outstanding());
        let next = source.next_at();
        self.push(next, Event::Arrival);
        let Some(session) = admitted else {
            self.recorder.arrival_refused_mut();
            return;
        };
        self.recorder.session_arrived_mut();
        let user = match self.free.pop() {
            Some(free) => {
                // The slot keeps its attempt numbers and its count of
                // waits, so that events of the session before are stale.
                self.slots[free as usize].user = session.user;
                free
            }
            None => {
                self.slots.push(Slot {
                    user: session.user,
                    generation: 0,
                    flights: Flights::default(),
                    due_at: None,
                    waits: 0,
                });
                self.live.grow(self.slots.len());
                (self.slots.len() - 1) as u32
            }
        };
        self.schedule(user, now, false);
    }

    /// Frees the slot of a session that has made its last request.
    fn retire_if_gone(&mut self, user: u32) {
        let slot = &self.slots[user as usize];
        if slot.user.is_gone() {
            debug_assert!(slot.flights.iter().next().is_none() && slot.due_at.is_none());
            self.free.push(user);
            self.recorder.session_left_mut();
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
                self.recomplete |= self.host.disconnect(now, ticket);
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

    pub(super) fn deadline(&mut self, id: AttemptId, now: Duration) {
        let Some(state) = self.current(id) else {
            return;
        };
        self.end(id, Outcome::Timeout, Hints::default(), now, false);
        // A cancellation lowers the delay: others may be done at once.
        if let State::Admitted(ticket) = state
            && self.host.disconnect(now, ticket)
        {
            self.complete(now);
        }
    }

    pub(super) fn syn(&mut self, id: AttemptId, now: Duration) {
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
    pub(super) fn complete(&mut self, now: Duration) {
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
                        status: Some(503),
                        ..Hints::default()
                    },
                ),
            };
            self.end(id, outcome, hints, now, false);
        }
        self.answered = answered;
    }

    pub(super) fn resume(&mut self, now: Duration) {
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

    /// The engine of `config` at the start: every user thinking, the
    /// report ticks and the pauses queued.
    pub(super) fn new(config: &SimConfig) -> Engine {
        let client = &config.client;
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
            fail_status: config.server.fail.map_or(500, |f| f.status),
            queue: EventQueue::with_capacity(client.clients as usize * 2),
            answered: Vec::new(),
            recomplete: false,
            waiters: VecDeque::new(),
            source: client.open.map(|open| {
                Source::new(
                    open,
                    client.seed,
                    client.shard,
                    Duration::ZERO,
                    client.think,
                )
                .expect("a validated arrival rate")
            }),
            free: Vec::new(),
            events: 0,
        };
        for user in 0..client.clients {
            engine.schedule(user, Duration::ZERO, false);
        }
        if let Some(source) = &engine.source {
            engine.push(source.next_at(), Event::Arrival);
        }
        engine.push(client.report_interval, Event::ClientTick);
        engine.push(config.server.report_interval, Event::ServerTick);
        for (i, pause) in config.pauses.iter().enumerate() {
            engine.push(pause.at, Event::Stop(i as u32));
        }
        engine
    }
}
