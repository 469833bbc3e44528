//! A thread pool with a queue: `workers` serve one request each, for a
//! service time drawn from a seeded distribution; up to `queue` more wait,
//! and one that finds the queue full is refused at once. FIFO, or newest
//! first under adaptive LIFO; the queue timeout drops a request that
//! waited too long when a worker would start it.
//!
//! A worker takes its next request when the server sees it free: in a
//! running server that is the instant its last one ended, but a stopped
//! server starts nothing until it resumes (work in progress, a timer here,
//! still ends on time). A request whose client has gone keeps its worker
//! to the end (`continue`, and `cancel` too: a real server cannot abort
//! work in progress) but, in `cancel` mode, is dropped unserved when a
//! worker would start it, as a server that checks the connection first.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Exp1};

use super::ticket::{Departure, Exit, Ticket};
use crate::model::server::{PoolModel, ServiceDistribution};
use crate::policy::defence::{CoDel, QueueWatch};

struct Waiting<T> {
    ticket: Ticket,
    payload: T,
    admitted: Duration,
    /// The longest it may wait, if the queue timeout is on.
    limit: Option<Duration>,
    /// Its client has gone (known in `cancel` mode only).
    gone: bool,
}

struct Job<T> {
    payload: T,
    admitted: Duration,
}

/// The pool's state: busy workers, the queue and the generator of service
/// times.
pub(crate) struct Pool<T> {
    model: PoolModel,
    cancel: bool,
    rng: Xoshiro256PlusPlus,
    /// Jobs in service by (end, ticket): the next to end first.
    busy: BTreeMap<(Duration, Ticket), Job<T>>,
    /// The end of each job in service, by ticket.
    ends: HashMap<Ticket, Duration>,
    /// Waiting requests in ticket order (both ends are taken from).
    queue: VecDeque<Waiting<T>>,
    watch: QueueWatch,
    next_ticket: u64,
    clock: Duration,
    /// Time in the server of the last request served.
    last_sojourn: Duration,
    out: Vec<Departure<T>>,
}

impl<T> Pool<T> {
    /// An idle pool; `cancel` drops gone clients' requests before serving
    /// them; service times come from `rng`.
    pub(crate) fn new(model: PoolModel, cancel: bool, rng: Xoshiro256PlusPlus) -> Self {
        Pool {
            model,
            cancel,
            rng,
            busy: BTreeMap::new(),
            ends: HashMap::new(),
            queue: VecDeque::new(),
            watch: QueueWatch::default(),
            next_ticket: 0,
            clock: Duration::ZERO,
            last_sojourn: Duration::ZERO,
            out: Vec::new(),
        }
    }

    /// Requests in the server: in service and waiting.
    pub(crate) fn concurrency(&self) -> u64 {
        (self.busy.len() + self.queue.len()) as u64
    }

    /// Requests waiting.
    pub(crate) fn queue_len(&self) -> u64 {
        self.queue.len() as u64
    }

    /// Workers serving a request.
    pub(crate) fn busy(&self) -> u64 {
        self.busy.len() as u64
    }

    /// How long the last request served spent in the server.
    pub(crate) fn last_sojourn(&self) -> Duration {
        self.last_sojourn
    }

    /// When the next job ends.
    pub(crate) fn next_event(&self) -> Option<Duration> {
        self.busy.keys().next().map(|&(end, _)| end.max(self.clock))
    }

    /// Admits a request at `now`: to a free worker, or to the queue; a
    /// full queue gives it back.
    pub(crate) fn admit(&mut self, now: Duration, payload: T) -> Result<Ticket, T> {
        self.advance(now);
        let now = self.clock;
        let free = self.busy.len() < self.model.workers as usize;
        if !free && self.queue.len() >= self.model.queue as usize {
            return Err(payload);
        }
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        if free {
            self.start(now, ticket, payload, now);
        } else {
            let limit = self.model.codel.map(|c: CoDel| c.limit(&self.watch, now));
            self.queue.push_back(Waiting {
                ticket,
                payload,
                admitted: now,
                limit,
                gone: false,
            });
            self.watch.on_length(now, self.queue.len());
        }
        Ok(ticket)
    }

    /// Ends every job due by `now`, in order, then gives free workers
    /// their next requests.
    pub(crate) fn advance(&mut self, now: Duration) {
        let now = now.max(self.clock);
        while let Some(entry) = self.busy.first_entry() {
            let (end, ticket) = *entry.key();
            if end > now {
                break;
            }
            let job = entry.remove();
            self.ends.remove(&ticket);
            self.last_sojourn = end.saturating_sub(job.admitted);
            self.out.push(Departure {
                payload: job.payload,
                ticket,
                start: job.admitted,
                at: end,
                exit: Exit::Served,
            });
        }
        self.clock = now;
        self.fill(now);
    }

    /// Free workers take waiting requests at `now`.
    fn fill(&mut self, now: Duration) {
        while self.busy.len() < self.model.workers as usize {
            let newest_first = self
                .model
                .lifo
                .is_some_and(|interval| self.watch.overloaded(now, interval));
            let next = if newest_first {
                self.queue.pop_back()
            } else {
                self.queue.pop_front()
            };
            let Some(w) = next else {
                break;
            };
            self.watch.on_length(now, self.queue.len());
            let waited = now.saturating_sub(w.admitted);
            let exit = if self.cancel && w.gone {
                Exit::Cancelled
            } else if w.limit.is_some_and(|limit| waited > limit) {
                Exit::Dropped
            } else {
                self.start(now, w.ticket, w.payload, w.admitted);
                continue;
            };
            self.out.push(Departure {
                payload: w.payload,
                ticket: w.ticket,
                start: w.admitted,
                at: now,
                exit,
            });
        }
    }

    fn start(&mut self, now: Duration, ticket: Ticket, payload: T, admitted: Duration) {
        let service = self.service_time();
        let end = now + service;
        self.busy.insert((end, ticket), Job { payload, admitted });
        self.ends.insert(ticket, end);
    }

    /// A service time, at least a nanosecond so that a job ends after it
    /// starts.
    fn service_time(&mut self) -> Duration {
        let mean = self.model.service_time;
        let time = match self.model.distribution {
            ServiceDistribution::Constant => mean,
            ServiceDistribution::Exponential => {
                let x: f64 = Exp1.sample(&mut self.rng);
                Duration::try_from_secs_f64(mean.as_secs_f64() * x).unwrap_or(Duration::MAX)
            }
        };
        time.max(Duration::from_nanos(1))
    }

    /// When the request of `ticket` was admitted, if it is still in the
    /// server.
    pub(crate) fn start_of(&self, ticket: Ticket) -> Option<Duration> {
        if let Some(end) = self.ends.get(&ticket) {
            return self.busy.get(&(*end, ticket)).map(|job| job.admitted);
        }
        self.waiting(ticket).map(|i| self.queue[i].admitted)
    }

    /// The server notices that the client of `ticket` has gone: a waiting
    /// request is marked, to be dropped when a worker would start it; one
    /// in service runs to its end.
    pub(crate) fn cancel(&mut self, ticket: Ticket) {
        if let Some(i) = self.waiting(ticket) {
            self.queue[i].gone = true;
        }
    }

    fn waiting(&self, ticket: Ticket) -> Option<usize> {
        self.queue.binary_search_by_key(&ticket, |w| w.ticket).ok()
    }

    /// The requests in the server, each with its admission instant.
    pub(crate) fn in_flight(&self) -> impl Iterator<Item = (&T, Duration)> {
        self.busy
            .values()
            .map(|j| (&j.payload, j.admitted))
            .chain(self.queue.iter().map(|w| (&w.payload, w.admitted)))
    }

    /// Takes the departures so far, in order.
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, Departure<T>> {
        self.out.drain(..)
    }
}
