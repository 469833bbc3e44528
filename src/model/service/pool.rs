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

#[derive(Clone)]
struct Waiting<T> {
    ticket: Ticket,
    payload: T,
    admitted: Duration,
    /// The longest it may wait, if the queue timeout is on.
    limit: Option<Duration>,
    /// Its client has gone (known in `cancel` mode only).
    gone: bool,
}

#[derive(Clone)]
struct Job<T> {
    payload: T,
    admitted: Duration,
}

/// The pool's state: busy workers, the queue and the generator of service
/// times.
#[derive(Clone)]
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

    /// Whether requests left since the departures were last taken.
    #[inline]
    pub(crate) fn has_departed(&self) -> bool {
        !self.out.is_empty()
    }

    /// Takes the departures so far, in order.
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, Departure<T>> {
        self.out.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `workers` serving exactly 100 ms each, `queue` places.
    fn model(workers: u32, queue: u32) -> PoolModel {
        PoolModel::constant(workers, ms(100), queue)
    }

    fn pool(model: PoolModel, cancel: bool) -> Pool<&'static str> {
        Pool::new(model, cancel, Xoshiro256PlusPlus::seed_from_u64(1))
    }

    fn admit(p: &mut Pool<&'static str>, at: u64, name: &'static str) -> Ticket {
        p.admit(ms(at), name)
            .unwrap_or_else(|_| panic!("{name} admitted"))
    }

    /// Runs the pool as a running server does, looking at every event up
    /// to `until`, and takes what left.
    fn departures(p: &mut Pool<&'static str>, until: u64) -> Vec<(&'static str, u64, Exit)> {
        while let Some(next) = p.next_event().filter(|&t| t <= ms(until)) {
            p.advance(next);
        }
        p.advance(ms(until));
        p.drain()
            .map(|d| (d.payload, d.at.as_millis() as u64, d.exit))
            .collect()
    }

    #[test]
    fn workers_serve_in_order_and_a_full_queue_refuses() {
        let mut p = pool(model(2, 2), false);
        for (at, name) in [(0, "a"), (10, "b"), (20, "c"), (30, "d")] {
            admit(&mut p, at, name);
        }
        assert_eq!((p.busy(), p.queue_len(), p.concurrency()), (2, 2, 4));
        assert_eq!(p.admit(ms(40), "e"), Err("e"), "two busy, two waiting");
        assert_eq!(p.next_event(), Some(ms(100)));
        // "c" starts when "a" ends, "d" when "b" does.
        assert_eq!(
            departures(&mut p, 1000),
            vec![
                ("a", 100, Exit::Served),
                ("b", 110, Exit::Served),
                ("c", 200, Exit::Served),
                ("d", 210, Exit::Served),
            ]
        );
        assert_eq!(p.last_sojourn(), ms(180), "d waited 80 and took 100");
        assert_eq!(p.concurrency(), 0);
    }

    #[test]
    fn codel_drops_at_the_head_what_waited_past_its_limit() {
        let mut p = pool(
            PoolModel {
                codel: Some(CoDel::default()),
                ..model(1, 10)
            },
            false,
        );
        admit(&mut p, 0, "a");
        // The queue fills at 10 ms: b and c may wait N = 100 ms.
        admit(&mut p, 10, "b");
        admit(&mut p, 20, "c");
        // At 100 "b" has waited 90: served. "c" stays.
        assert_eq!(departures(&mut p, 100), vec![("a", 100, Exit::Served)]);
        // At 120 the queue has not been empty for 110 ms: "d" may wait M.
        admit(&mut p, 120, "d");
        // At 200 "c" has waited 180 > 100 and "d" 80 > 5: both dropped.
        assert_eq!(
            departures(&mut p, 200),
            vec![
                ("b", 200, Exit::Served),
                ("c", 200, Exit::Dropped),
                ("d", 200, Exit::Dropped),
            ]
        );
        assert_eq!(p.concurrency(), 0);
    }

    #[test]
    fn adaptive_lifo_serves_the_newest_once_the_queue_stays_full() {
        let mut p = pool(
            PoolModel {
                lifo: Some(ms(100)),
                ..model(1, 10)
            },
            false,
        );
        for (at, name) in [(0, "a"), (10, "b"), (20, "c"), (30, "d")] {
            admit(&mut p, at, name);
        }
        // At 100 the queue has been busy 90 ms: oldest first ("b"). At 200
        // it has been 190 ms: newest first ("d"), then "c".
        let order: Vec<_> = departures(&mut p, 1000)
            .into_iter()
            .map(|(n, at, _)| (n, at))
            .collect();
        assert_eq!(order, vec![("a", 100), ("b", 200), ("d", 300), ("c", 400)]);
    }

    #[test]
    fn cancel_drops_a_gone_request_before_it_starts_but_not_during_service() {
        let mut p = pool(model(1, 10), true);
        let a = admit(&mut p, 0, "a");
        let b = admit(&mut p, 10, "b");
        admit(&mut p, 20, "c");
        assert_eq!(p.start_of(a), Some(ms(0)));
        assert_eq!(p.start_of(b), Some(ms(10)));
        // Both clients go at 50: "a" is in service and runs to its end,
        // "b" is dropped when the worker would start it.
        p.cancel(a);
        p.cancel(b);
        assert_eq!(
            departures(&mut p, 1000),
            vec![
                ("a", 100, Exit::Served),
                ("b", 100, Exit::Cancelled),
                ("c", 200, Exit::Served),
            ]
        );
        assert_eq!(p.start_of(b), None);
    }

    #[test]
    fn a_stopped_server_starts_nothing_until_it_is_looked_at_again() {
        let mut p = pool(model(1, 10), false);
        admit(&mut p, 0, "a");
        admit(&mut p, 10, "b");
        // Nothing looks between 0 and 5000 ms (the server was stopped):
        // "a" ended on time, but "b" starts only at 5000.
        p.advance(ms(5000));
        let served: Vec<_> = p.drain().map(|d| (d.payload, d.at)).collect();
        assert_eq!(served, vec![("a", ms(100))]);
        assert_eq!(p.next_event(), Some(ms(5100)));
        let in_flight: Vec<_> = p.in_flight().map(|(n, at)| (*n, at)).collect();
        assert_eq!(in_flight, vec![("b", ms(10))]);
    }

    #[test]
    fn exponential_service_times_have_the_mean_asked_for() {
        let mut p = pool(
            PoolModel {
                distribution: ServiceDistribution::Exponential,
                ..model(1, 0)
            },
            false,
        );
        let n = 20_000;
        let total: Duration = (0..n).map(|_| p.service_time()).sum();
        let mean = total.as_secs_f64() / f64::from(n);
        // The standard error of the mean is 0.1 / sqrt(20000) = 0.7 ms.
        assert!((mean - 0.1).abs() < 0.004, "{mean}");
    }
}
