//! What a client process counts: attempts by outcome, retries, logical
//! requests and their attempts, latency histograms; and what a server
//! counts per interval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histogram::{latency_histogram, latency_us, lateness_us, record_all};
use super::metrics::ClientMetrics;
use crate::model::outcome::{AttemptRecord, Outcome, RequestRecord};
use crate::model::service::{Exit, Fate, Refusal};
use crate::model::user::Finished;

/// Upper bounds of the attempts-per-request buckets: 1, 2, 3, 4, 5, 6-10,
/// more.
pub const ATTEMPT_BUCKETS: [(u32, &str); 7] = [
    (1, "1"),
    (2, "2"),
    (3, "3"),
    (4, "4"),
    (5, "5"),
    (10, "6-10"),
    (u32::MAX, "more"),
];

/// Counts of what the client saw during one interval (or a whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Attempts that succeeded.
    pub ok: u64,
    /// Attempts that failed with an error (including attempts a throttle
    /// refused locally).
    pub errors: u64,
    /// Attempts that timed out.
    pub timeouts: u64,
    /// Attempts cancelled in flight because another attempt of their
    /// request won (hedges that lost).
    pub cancelled: u64,
    /// Attempts that were retries (not the first of a logical request).
    pub retries: u64,
    /// Logical requests started (first attempts).
    pub started: u64,
    /// Logical requests given up (attempt limit, deadline, throttle).
    pub gave_up: u64,
    /// Attempts refused by a throttle: retries refused (the request then
    /// given up) and attempts rejected locally (counted as errors too).
    pub throttled: u64,
    /// Attempts rejected locally (never sent; counted as errors).
    pub rejected: u64,
    /// Finished logical requests (succeeded or given up) by attempts made,
    /// in the buckets of [`ATTEMPT_BUCKETS`].
    pub attempts_per_request: [u64; 7],
    /// Sessions of open traffic that arrived and were admitted (absent
    /// from a closed population's output).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub arrived: u64,
    /// Arrivals refused at the source: the process held its bound of
    /// sessions (`--max-outstanding`). Never sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: u64,
    /// A tier's calls whose caller had gone before their answer (absent
    /// from a client's output).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gone: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Tally {
    /// Total attempts (cancelled hedges included).
    pub fn attempts(&self) -> u64 {
        self.ok + self.errors + self.timeouts + self.cancelled
    }

    /// Attempts sent over the network (local rejections excluded).
    pub fn sent(&self) -> u64 {
        self.attempts() - self.rejected
    }

    /// Attempts sent per logical request started (amplification: the load
    /// the server sees per unit of demand), if any started.
    pub fn amplification(&self) -> Option<f64> {
        (self.started > 0).then(|| self.sent() as f64 / self.started as f64)
    }

    /// Adds another tally to this one.
    pub fn add(&mut self, other: &Tally) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.timeouts += other.timeouts;
        self.cancelled += other.cancelled;
        self.retries += other.retries;
        self.started += other.started;
        self.gave_up += other.gave_up;
        self.throttled += other.throttled;
        self.rejected += other.rejected;
        self.arrived += other.arrived;
        self.refused += other.refused;
        self.gone += other.gone;
        for (mine, theirs) in self
            .attempts_per_request
            .iter_mut()
            .zip(other.attempts_per_request)
        {
            *mine += theirs;
        }
    }
}

/// What the client saw during one interval (or, merged, a whole run).
#[derive(Debug, Clone)]
pub struct ClientCounts {
    /// The counts.
    pub tally: Tally,
    /// Latency of successful attempts, from their intended start.
    pub attempt_latency: Histogram<u64>,
    /// Latency of logical requests that succeeded, from the intended start of
    /// their first attempt to the end of the successful one.
    pub request_latency: Histogram<u64>,
    /// How late every attempt started against its intended instant.
    pub lateness: Histogram<u64>,
}

impl Default for ClientCounts {
    fn default() -> Self {
        ClientCounts {
            tally: Tally::default(),
            attempt_latency: latency_histogram(),
            request_latency: latency_histogram(),
            lateness: latency_histogram(),
        }
    }
}

impl ClientCounts {
    /// Adds an interval's counts and latencies to these: each latency
    /// lands in the bucket it would have had recorded here.
    pub fn add(&mut self, interval: &Interval) {
        self.tally.add(&interval.tally);
        record_all(&mut self.attempt_latency, &interval.attempt_latency);
        record_all(&mut self.request_latency, &interval.request_latency);
        record_all(&mut self.lateness, &interval.lateness);
    }
}

/// What the client saw during one interval, as it was recorded: the
/// counts, and each latency in microseconds, clamped as a latency
/// histogram records it. A histogram of the 1 us-1 h range has some
/// 20,000 buckets to clear and scan per interval, which cost short
/// virtual-time runs more than their events; an interval's samples are
/// cheap to keep, and give the same histograms and percentiles.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    /// The counts.
    pub tally: Tally,
    /// Latency of successful attempts, from their intended start.
    pub attempt_latency: Vec<u64>,
    /// Latency of logical requests that succeeded.
    pub request_latency: Vec<u64>,
    /// How late every attempt started against its intended instant.
    pub lateness: Vec<u64>,
}

impl Interval {
    /// Empties the interval, keeping its memory.
    fn clear(&mut self) {
        self.tally = Tally::default();
        self.attempt_latency.clear();
        self.request_latency.clear();
        self.lateness.clear();
    }

    /// Counts how an attempt ended.
    fn attempt(&mut self, record: &AttemptRecord) {
        let t = &mut self.tally;
        match record.outcome {
            Outcome::Ok => t.ok += 1,
            Outcome::Error => t.errors += 1,
            Outcome::Timeout => t.timeouts += 1,
            Outcome::Cancelled => t.cancelled += 1,
        }
        if record.is_retry {
            t.retries += 1;
        } else {
            t.started += 1;
        }
        if record.rejected_locally {
            t.throttled += 1;
            t.rejected += 1;
        }
        if record.outcome == Outcome::Ok {
            self.attempt_latency.push(latency_us(record.latency));
        }
        self.lateness.push(lateness_us(record.lateness));
    }

    /// Counts how a logical request ended.
    fn request(&mut self, record: &RequestRecord) {
        match record.latency {
            Some(d) => self.request_latency.push(latency_us(d)),
            None => self.tally.gave_up += 1,
        }
        if record.throttled {
            self.tally.throttled += 1;
        }
        let bucket = ATTEMPT_BUCKETS
            .iter()
            .position(|&(max, _)| record.attempts <= max)
            .expect("the last bucket takes everything");
        self.tally.attempts_per_request[bucket] += 1;
    }
}

/// Collects attempt outcomes from every simulated client of a process.
#[derive(Debug, Default)]
pub struct ClientRecorder {
    current: Mutex<Interval>,
    in_flight: AtomicU64,
    /// Sessions of open traffic held now.
    outstanding: AtomicU64,
    /// Connections held open now, for a client whose connections carry
    /// many attempts each (HTTP/2's streams).
    connections: AtomicU64,
    /// Prometheus metrics fed as events come, if a program serves them.
    metrics: Option<Arc<ClientMetrics>>,
}

impl Clone for ClientRecorder {
    /// A recorder holding what this one holds now, feeding the same
    /// metrics.
    fn clone(&self) -> Self {
        ClientRecorder {
            current: Mutex::new(self.current.lock().expect("recorder lock poisoned").clone()),
            in_flight: AtomicU64::new(self.in_flight()),
            outstanding: AtomicU64::new(self.outstanding()),
            connections: AtomicU64::new(self.connections()),
            metrics: self.metrics.clone(),
        }
    }
}

impl ClientRecorder {
    /// A recorder with empty counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder that feeds `metrics` too, as events come.
    pub fn with_metrics(metrics: Option<Arc<ClientMetrics>>) -> Self {
        ClientRecorder {
            metrics,
            ..Self::default()
        }
    }

    /// Marks an attempt as started (for the in-flight gauge).
    pub fn attempt_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.attempt_started();
        }
    }

    /// Records how an attempt ended.
    pub fn attempt_finished(&self, record: AttemptRecord) {
        if !record.rejected_locally {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(m) = &self.metrics {
            m.attempt_finished(&record);
        }
        let mut c = self.current.lock().expect("recorder lock poisoned");
        c.attempt(&record);
    }

    /// Records how a logical request ended.
    pub fn request_finished(&self, record: RequestRecord) {
        if let Some(m) = &self.metrics {
            m.request_finished(&record);
        }
        let mut c = self.current.lock().expect("recorder lock poisoned");
        c.request(&record);
    }

    /// Records what an ended attempt produced: the attempt, and the
    /// logical request if the attempt ended it.
    pub fn finished(&self, finished: Finished) {
        self.attempt_finished(finished.attempt);
        if let Some(request) = finished.request {
            self.request_finished(request);
        }
    }

    /// [`ClientRecorder::attempt_started`] for a recorder held by one
    /// owner (the virtual engine's): no atomic operation (each attempt
    /// took several, and a lock or two).
    pub fn attempt_started_mut(&mut self) {
        *self.in_flight.get_mut() += 1;
        if let Some(m) = &self.metrics {
            m.attempt_started();
        }
    }

    /// [`ClientRecorder::attempt_finished`] for a recorder held by one
    /// owner: no lock, no atomic operation.
    pub fn attempt_finished_mut(&mut self, record: AttemptRecord) {
        if !record.rejected_locally {
            *self.in_flight.get_mut() -= 1;
        }
        if let Some(m) = &self.metrics {
            m.attempt_finished(&record);
        }
        self.current_mut().attempt(&record);
    }

    /// [`ClientRecorder::request_finished`] for a recorder held by one
    /// owner: no lock.
    pub fn request_finished_mut(&mut self, record: RequestRecord) {
        if let Some(m) = &self.metrics {
            m.request_finished(&record);
        }
        self.current_mut().request(&record);
    }

    /// [`ClientRecorder::finished`] for a recorder held by one owner: no
    /// lock, no atomic operation.
    pub fn finished_mut(&mut self, finished: Finished) {
        self.attempt_finished_mut(finished.attempt);
        if let Some(request) = finished.request {
            self.request_finished_mut(request);
        }
    }

    fn current_mut(&mut self) -> &mut Interval {
        self.current.get_mut().expect("recorder lock poisoned")
    }

    /// A session of open traffic arrived and was admitted.
    pub fn session_arrived(&self) {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.session_arrived();
        }
        self.current
            .lock()
            .expect("recorder lock poisoned")
            .tally
            .arrived += 1;
    }

    /// A session of open traffic made its last request and left.
    pub fn session_left(&self) {
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.session_left();
        }
    }

    /// An arrival was refused at the source.
    pub fn arrival_refused(&self) {
        if let Some(m) = &self.metrics {
            m.arrival_refused();
        }
        self.current
            .lock()
            .expect("recorder lock poisoned")
            .tally
            .refused += 1;
    }

    /// A tier's call whose caller had gone before its answer.
    pub fn caller_gone(&self) {
        self.current
            .lock()
            .expect("recorder lock poisoned")
            .tally
            .gone += 1;
        if let Some(m) = &self.metrics {
            m.caller_gone();
        }
    }

    /// [`ClientRecorder::caller_gone`] for a recorder held by one owner.
    pub fn caller_gone_mut(&mut self) {
        self.current_mut().tally.gone += 1;
        if let Some(m) = &self.metrics {
            m.caller_gone();
        }
    }

    /// [`ClientRecorder::session_arrived`] for a recorder held by one
    /// owner.
    pub fn session_arrived_mut(&mut self) {
        *self.outstanding.get_mut() += 1;
        if let Some(m) = &self.metrics {
            m.session_arrived();
        }
        self.current_mut().tally.arrived += 1;
    }

    /// [`ClientRecorder::session_left`] for a recorder held by one owner.
    pub fn session_left_mut(&mut self) {
        *self.outstanding.get_mut() -= 1;
        if let Some(m) = &self.metrics {
            m.session_left();
        }
    }

    /// [`ClientRecorder::arrival_refused`] for a recorder held by one
    /// owner.
    pub fn arrival_refused_mut(&mut self) {
        if let Some(m) = &self.metrics {
            m.arrival_refused();
        }
        self.current_mut().tally.refused += 1;
    }

    /// Attempts in flight right now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Sessions of open traffic held right now.
    pub fn outstanding(&self) -> u64 {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// Records how many connections the client holds open now (HTTP/2:
    /// each carries many of the attempts in flight).
    pub fn set_connections(&self, n: u64) {
        self.connections.store(n, Ordering::Relaxed);
    }

    /// Records a connection opened (`true`) or closed (`false`), for an
    /// engine whose connections are held by several pools at once (the
    /// networked client's lanes).
    pub fn connection(&self, opened: bool) {
        if opened {
            self.connections.fetch_add(1, Ordering::Relaxed);
        } else {
            self.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Connections held open right now, as last recorded.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Moves the counts gathered since the last call into `into` (which is
    /// cleared first), so the caller can report an interval.
    pub fn take_interval(&self, into: &mut Interval) {
        into.clear();
        let mut c = self.current.lock().expect("recorder lock poisoned");
        std::mem::swap(&mut *c, into);
    }
}

/// What the server counted during one interval (or, summed, a run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Requests answered to a waiting client.
    pub completed: u64,
    /// Requests whose client went away before the answer: completed for
    /// nobody, or dropped when the server noticed.
    pub abandoned: u64,
    /// Requests refused at once because the server was over its shedding
    /// threshold.
    pub shed: u64,
    /// Requests refused at once because a pool's queue was full.
    pub refused: u64,
    /// Requests refused at once by the concurrency limiter.
    pub limited: u64,
    /// Requests refused at once by admission control.
    pub rejected: u64,
    /// Requests dropped from the queue by the queue timeout.
    pub dropped: u64,
    /// Requests a failing backend answered at once with its error.
    pub failed: u64,
    /// How long the model held the `abandoned` requests, from admission to
    /// completion or drop: the server's time spent on clients that had
    /// gone.
    pub abandoned_time: Duration,
    /// The highest concurrency within the interval, at any admission.
    pub max_concurrency: u64,
    /// The longest a pool's queue was within the interval.
    pub max_queue: u64,
}

impl ServerCounts {
    /// Empty counts for an interval that starts with `concurrency` requests
    /// in flight, `queue` of them waiting.
    pub fn starting_at(concurrency: u64, queue: u64) -> Self {
        ServerCounts {
            max_concurrency: concurrency,
            max_queue: queue,
            ..ServerCounts::default()
        }
    }

    /// A request was admitted, bringing the concurrency to `concurrency`
    /// and the queue to `queue`.
    pub fn admitted(&mut self, concurrency: u64, queue: u64) {
        self.max_concurrency = self.max_concurrency.max(concurrency);
        self.max_queue = self.max_queue.max(queue);
    }

    /// A request was refused at the door, or dropped from the queue.
    pub fn refused(&mut self, why: Refusal) {
        match why {
            Refusal::Failed => self.failed += 1,
            Refusal::Shed => self.shed += 1,
            Refusal::Full => self.refused += 1,
            Refusal::Limited => self.limited += 1,
            Refusal::Rejected => self.rejected += 1,
            Refusal::Expired => self.dropped += 1,
            // A dropped connection attempt is the kernel's: the server
            // never sees it, and neither engine counts it here.
            Refusal::Unaccepted => {}
        }
    }

    /// A request left the model after `held` in it, its answer received
    /// by a waiting client or not: served, or wasted work; or dropped from
    /// the queue, whoever waited.
    pub fn departed(&mut self, exit: Exit, received: bool, held: Duration) {
        match exit.fate(received) {
            Fate::Dropped => self.refused(Refusal::Expired),
            Fate::Completed => self.completed += 1,
            Fate::Abandoned => self.abandon(held),
        }
    }

    /// A request whose client had gone left the model after `held` in it.
    pub fn abandon(&mut self, held: Duration) {
        self.abandoned += 1;
        self.abandoned_time += held;
    }
}

/// The requests in the model for clients that have gone, at a report:
/// work the server still holds for nobody.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// How many.
    pub count: u64,
    /// Their time in the model so far, summed.
    pub time: Duration,
}

#[cfg(test)]
mod tests;
