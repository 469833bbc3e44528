//! The server as a service: what serves the requests (a delay curve or a
//! thread pool) and the defences at its door (shedding, a concurrency
//! limiter, admission control). Pure, with time as a [`Duration`] since an
//! epoch the caller chooses: the real server (wall clock) and the virtual
//! engine drive this same code.
//!
//! A request arrives with [`Service::admit`]: refused at once, or given a
//! [`Ticket`]. Time moves with [`Service::advance`], and what leaves is
//! taken with [`Service::drain`], whose caller answers each departure and
//! says whether a client was still there to receive it. A client that goes
//! is told with [`Service::cancel`] when the server notices it.
//!
//! The gates, in order: a failing backend's failures, admission control
//! (an outer proxy), shedding, the limiter, then the shape itself (a pool's
//! full queue). A failing backend answers a request it fails at once, at
//! the door, before any other gate sees it or any work is done: no other
//! gate draws, counts or learns anything from it (as a fault injected in
//! front of the proxy). Admission control
//! records every refusal behind it as it is given, and every served or
//! dropped request whose client received the answer (as Envoy records
//! whatever its upstream answered, unless the client reset first); the
//! limiter takes a
//! sample from each request it let in when it leaves: served, dropped
//! (refused by a full queue, or by the queue timeout) or ignored (its
//! client gone, never served).

mod curve;
mod failing;
mod fifo;
mod pool;
mod ticket;

use std::collections::HashMap;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::model::server::{PoolModel, QueueKind, ServerConfig, Shape};
use crate::policy::defence::{ACCURACY, AdmissionControl, Limiter};
use curve::CompletionScheduler;
use failing::Failures;
use pool::Pool;
pub use ticket::{Departure, Exit, Fate, Ticket};

/// Why a request was answered 503 (or 429, or a failing backend's status)
/// without being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A failing backend failed it (`--fail-rate`), with its status.
    Failed,
    /// Over the shedding threshold (`--shed-above`), with `Retry-After`.
    Shed,
    /// The pool's queue was full.
    Full,
    /// The concurrency limiter was at its limit.
    Limited,
    /// Admission control rejected it.
    Rejected,
    /// The queue timeout dropped it.
    Expired,
    /// The listen backlog was full: the connection attempt was dropped
    /// without an answer (its SYN, which the client's kernel retransmits).
    /// Only a pool waiting in the backlog refuses so.
    Unaccepted,
}

/// What does the work: a delay curve shared by every request in flight, or
/// a pool of workers with a queue.
#[derive(Clone)]
enum Work<T> {
    Curve(CompletionScheduler<T>),
    Pool(Pool<T>),
}

/// Figures of a pool and of the defences, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Requests waiting in a pool's queue.
    pub queue: u64,
    /// A pool's busy workers.
    pub busy: u64,
    /// The limiter's limit, if there is one.
    pub limit: Option<u64>,
}

/// A server's shape with its defences.
#[derive(Clone)]
pub struct Service<T> {
    shape: Work<T>,
    /// Whether a full queue drops the connection instead of answering
    /// 503 (a pool waiting in the listen backlog).
    unaccepted_when_full: bool,
    shed_above: Option<u64>,
    /// The status of a shed request counts as a success for admission
    /// control when it is under 500 (a 429).
    shed_succeeds: bool,
    limiter: Option<Limiter>,
    /// In-flight count at admission of each request the limiter let in.
    let_in: HashMap<Ticket, u64>,
    admission: Option<AdmissionControl>,
    rng: Xoshiro256PlusPlus,
    /// A failing backend's failures, if it is one.
    fail: Option<Failures>,
    out: Vec<Departure<T>>,
    /// The latest instant the service was advanced to.
    clock: Duration,
    /// An empty buffer to swap with `out` while draining.
    spare: Vec<Departure<T>>,
}

/// Separate streams of the server's seed, so that turning one defence on
/// does not change another's draws.
const POOL_STREAM: u64 = 0;
const ADMISSION_STREAM: u64 = 0x9E37_79B9_7F4A_7C15;
const LIMITER_STREAM: u64 = 0xD1B5_4A32_D192_ED03;
const FAIL_STREAM: u64 = 0x94D0_49BB_1331_11EB;

impl<T> Service<T> {
    /// An idle service as `config` describes it.
    pub fn new(config: &ServerConfig) -> Self {
        let cancel = config.on_disconnect == crate::model::server::OnDisconnect::Cancel;
        let shape = match (config.shape, config.curve()) {
            (Shape::Pool(model), _) => Work::Pool(Pool::new(
                PoolModel {
                    // Linux's accept queue holds one more than its backlog.
                    queue: match model.kind {
                        QueueKind::Application => model.queue,
                        QueueKind::Backlog => config.backlog.saturating_add(1),
                    },
                    ..model
                },
                cancel,
                Xoshiro256PlusPlus::seed_from_u64(config.seed ^ POOL_STREAM),
            )),
            (_, Some(curve)) => Work::Curve(CompletionScheduler::new(curve)),
            (_, None) => unreachable!("every shape but the pool has a curve"),
        };
        Service {
            shape,
            unaccepted_when_full: config.waits_in_backlog(),
            shed_above: config.shed.map(|s| s.above),
            shed_succeeds: config.shed.is_some_and(|s| s.status < 500),
            limiter: config
                .limiter
                .map(|l| Limiter::new(l, config.seed ^ LIMITER_STREAM)),
            let_in: HashMap::new(),
            admission: config.admission.map(AdmissionControl::new),
            rng: Xoshiro256PlusPlus::seed_from_u64(config.seed ^ ADMISSION_STREAM),
            fail: config
                .fail
                .map(|f| Failures::new(f.rate, config.seed ^ FAIL_STREAM)),
            out: Vec::new(),
            clock: Duration::ZERO,
            spare: Vec::new(),
        }
    }

    /// Requests in the server (for a pool: in service and waiting).
    pub fn concurrency(&self) -> u64 {
        match &self.shape {
            Work::Curve(c) => c.concurrency(),
            Work::Pool(p) => p.concurrency(),
        }
    }

    /// The delay now: the curve's for the current concurrency, or the time
    /// the last request served spent in a pool.
    pub fn current_delay(&self) -> Duration {
        match &self.shape {
            Work::Curve(c) => c.current_delay(),
            Work::Pool(p) => p.last_sojourn(),
        }
    }

    /// Connections waiting in the listen backlog for a worker to accept
    /// them, as the model holds them (a pool waiting in the backlog; 0
    /// otherwise).
    pub fn backlog_waiting(&self) -> u64 {
        match &self.shape {
            Work::Pool(p) if self.unaccepted_when_full => p.queue_len(),
            _ => 0,
        }
    }

    /// Whether this is a failing backend (whose report counts failures).
    pub fn fails(&self) -> bool {
        self.fail.is_some()
    }

    /// A pool's queue and workers and the limiter's limit.
    pub fn gauges(&self) -> Gauges {
        let (queue, busy) = match &self.shape {
            Work::Curve(_) => (0, 0),
            Work::Pool(p) => (p.queue_len(), p.busy()),
        };
        Gauges {
            queue,
            busy,
            limit: self.limiter.as_ref().map(Limiter::limit),
        }
    }

    /// When something next leaves, if nothing else happens before.
    #[inline]
    pub fn next_event(&self) -> Option<Duration> {
        match &self.shape {
            Work::Curve(c) => c.next_completion(),
            Work::Pool(p) => p.next_event(),
        }
    }

    /// The latest instant the service saw, if requests have left that
    /// [`Service::drain`] has not handed out yet (a cancellation can
    /// complete others at once).
    #[inline]
    pub fn undrained(&self) -> Option<Duration> {
        (!self.out.is_empty()).then_some(self.clock)
    }

    /// A request arrives at `now` (after what was due before it has
    /// left): a ticket, or the request back with the reason it was refused.
    pub fn admit(&mut self, now: Duration, payload: T) -> Result<Ticket, (T, Refusal)> {
        self.advance(now);
        if self.fail.as_mut().is_some_and(Failures::fails) {
            return Err((payload, Refusal::Failed));
        }
        if let Some(admission) = &mut self.admission {
            let draw = self.rng.random_range(0..ACCURACY);
            if admission.should_reject(now, draw) {
                return Err((payload, Refusal::Rejected));
            }
        }
        if self
            .shed_above
            .is_some_and(|above| self.concurrency() >= above)
        {
            self.record(now, self.shed_succeeds);
            return Err((payload, Refusal::Shed));
        }
        let inflight = match &mut self.limiter {
            Some(limiter) => match limiter.try_acquire() {
                Some(inflight) => Some(inflight),
                None => {
                    self.record(now, false);
                    return Err((payload, Refusal::Limited));
                }
            },
            None => None,
        };
        let admitted = match &mut self.shape {
            Work::Curve(c) => Ok(c.admit(now, payload)),
            Work::Pool(p) => p.admit(now, payload),
        };
        match admitted {
            Ok(ticket) => {
                if let Some(inflight) = inflight {
                    self.let_in.insert(ticket, inflight);
                }
                self.collect();
                Ok(ticket)
            }
            Err(payload) => {
                if let (Some(limiter), Some(inflight)) = (&mut self.limiter, inflight) {
                    limiter.on_dropped(Duration::ZERO, inflight);
                }
                if self.unaccepted_when_full {
                    // No answer goes out: nothing to record.
                    return Err((payload, Refusal::Unaccepted));
                }
                self.record(now, false);
                Err((payload, Refusal::Full))
            }
        }
    }

    /// Lets everything due by `now` leave.
    pub fn advance(&mut self, now: Duration) {
        match &mut self.shape {
            Work::Curve(c) => c.advance(now),
            Work::Pool(p) => p.advance(now),
        }
        self.collect();
        self.clock = self.clock.max(now);
    }

    /// When the request of `ticket` was admitted, if it is still in the
    /// server.
    #[inline]
    pub fn start_of(&self, ticket: Ticket) -> Option<Duration> {
        match &self.shape {
            Work::Curve(c) => c.start_of(ticket),
            Work::Pool(p) => p.start_of(ticket),
        }
    }

    /// The server notices at `now` that the client of `ticket` has gone
    /// (in `cancel` mode): under a curve its work stops at once; in a pool
    /// it is dropped when a worker would start it, and work in progress
    /// runs to its end.
    pub fn cancel(&mut self, now: Duration, ticket: Ticket) {
        match &mut self.shape {
            Work::Curve(c) => {
                let start = c.start_of(ticket);
                let cancelled = c.cancel(now, ticket);
                // What was due first leaves first: departures stay in order.
                self.collect();
                if let (Some(start), Some(payload)) = (start, cancelled) {
                    self.out_push(Departure {
                        payload,
                        ticket,
                        start,
                        at: now,
                        exit: Exit::Cancelled,
                    });
                }
            }
            Work::Pool(p) => p.cancel(ticket),
        }
        self.collect();
        self.clock = self.clock.max(now);
    }

    /// The requests in the server, each with its admission instant.
    pub fn in_flight(&self) -> Box<dyn Iterator<Item = (&T, Duration)> + '_> {
        match &self.shape {
            Work::Curve(c) => Box::new(c.in_flight()),
            Work::Pool(p) => Box::new(p.in_flight()),
        }
    }

    /// Hands every departure so far, in order, to `deliver`, which answers
    /// it (OK for [`Exit::Served`], 503 for [`Exit::Dropped`], nothing for
    /// [`Exit::Cancelled`]) and says whether a client received the answer.
    /// Admission control records each answer received as of the latest
    /// instant the service was advanced to, when the answer goes out (after
    /// a pause, later than the departure itself).
    pub fn drain(&mut self, mut deliver: impl FnMut(Departure<T>) -> bool) {
        // Swapped with a spare so that both keep their memory.
        let mut out = std::mem::replace(&mut self.out, std::mem::take(&mut self.spare));
        let now = self.clock;
        for departure in out.drain(..) {
            let exit = departure.exit;
            if deliver(departure) && exit != Exit::Cancelled {
                self.record(now, exit == Exit::Served);
            }
        }
        self.spare = out;
    }

    /// Admission control learns of an answer that reached a client.
    fn record(&mut self, now: Duration, success: bool) {
        if let Some(admission) = &mut self.admission {
            admission.record(now, success);
        }
    }

    /// Takes what the shape let leave, giving the limiter its samples.
    #[inline(always)]
    fn collect(&mut self) {
        let left = match &self.shape {
            Work::Curve(c) => c.has_completed(),
            Work::Pool(p) => p.has_departed(),
        };
        // Most events let nothing leave.
        if !left {
            return;
        }
        let Service {
            shape,
            limiter,
            let_in,
            out,
            ..
        } = self;
        let take = |d| sample(limiter, let_in, out, d);
        match shape {
            Work::Curve(c) => c.drain_completed().for_each(take),
            Work::Pool(p) => p.drain().for_each(take),
        }
    }

    fn out_push(&mut self, departure: Departure<T>) {
        sample(
            &mut self.limiter,
            &mut self.let_in,
            &mut self.out,
            departure,
        );
    }
}

/// Gives the limiter the sample of a departing request it let in, then
/// queues the departure.
fn sample<T>(
    limiter: &mut Option<Limiter>,
    let_in: &mut HashMap<Ticket, u64>,
    out: &mut Vec<Departure<T>>,
    departure: Departure<T>,
) {
    if let Some(limiter) = limiter
        && let Some(inflight) = let_in.remove(&departure.ticket)
    {
        let rtt = departure.at.saturating_sub(departure.start);
        match departure.exit {
            Exit::Served => limiter.on_success(rtt, inflight),
            Exit::Dropped => limiter.on_dropped(rtt, inflight),
            Exit::Cancelled => limiter.on_ignore(),
        }
    }
    out.push(departure);
}

#[cfg(test)]
mod tests;
