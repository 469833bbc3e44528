//! Counters, latency histograms and the report rows built from them.
//!
//! Rates are counts divided by the *measured* length of an interval, so a
//! late or stretched interval (a stopped process, a loaded machine) still
//! reports true rates.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency a histogram records exactly (one hour); longer ones are
/// recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, three significant figures.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid")
}

/// Adds `from`'s counts to `into`, visiting only the values `from` holds
/// (`Histogram::add` walks every bucket of the range, about 20,000, which
/// dominated short virtual-time runs). Each value lands in the bucket it
/// came from.
fn add_recorded(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    for v in from.iter_recorded() {
        into.saturating_record_n(v.value_iterated_to(), v.count_at_value());
    }
}

/// Records a lateness: like a latency, but on time (zero) counts too.
fn record_lateness(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(us.min(MAX_LATENCY_US));
}

/// Records `d` into a microsecond histogram, saturating at its range.
pub fn record_latency(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(us.clamp(1, MAX_LATENCY_US));
}

/// Latency percentiles in milliseconds, `None` when nothing was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Largest value.
    pub max_ms: Option<f64>,
}

impl Percentiles {
    /// Reads the percentiles of a microsecond histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| Some(us as f64 / 1000.0);
        Percentiles {
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

impl fmt::Display for Percentiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<f64>| v.map_or("-".to_string(), |ms| format!("{ms:.1}ms"));
        write!(
            f,
            "p50: {}, p99: {}, max: {}",
            show(self.p50_ms),
            show(self.p99_ms),
            show(self.max_ms)
        )
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx response arrived in time.
    Ok,
    /// Connect failure, reset, or a non-2xx status.
    Error,
    /// No full response within the timeout.
    Timeout,
}

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Attempts that succeeded.
    pub ok: u64,
    /// Attempts that failed with an error (including attempts a throttle
    /// refused locally).
    pub errors: u64,
    /// Attempts that timed out.
    pub timeouts: u64,
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
}

impl Tally {
    /// Total attempts.
    pub fn attempts(&self) -> u64 {
        self.ok + self.errors + self.timeouts
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
        self.retries += other.retries;
        self.started += other.started;
        self.gave_up += other.gave_up;
        self.throttled += other.throttled;
        self.rejected += other.rejected;
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
    /// Adds another interval's counts to these.
    pub fn merge(&mut self, other: &ClientCounts) {
        self.tally.add(&other.tally);
        add_recorded(&mut self.attempt_latency, &other.attempt_latency);
        add_recorded(&mut self.request_latency, &other.request_latency);
        add_recorded(&mut self.lateness, &other.lateness);
    }

    /// Empties the counts, keeping the histograms' memory.
    fn clear(&mut self) {
        self.tally = Tally::default();
        self.attempt_latency.reset();
        self.request_latency.reset();
        self.lateness.reset();
    }
}

/// How one attempt went, for [`ClientRecorder::attempt_finished`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttemptRecord {
    /// How it ended.
    pub outcome: Outcome,
    /// A retry (not the first attempt of its logical request).
    pub is_retry: bool,
    /// Refused locally by a throttle (never sent).
    pub rejected_locally: bool,
    /// Time from its intended start to its end.
    pub latency: Duration,
    /// How late it started against its intended instant (the load
    /// generator's own lag).
    pub lateness: Duration,
}

/// How a logical request ended, for [`ClientRecorder::request_finished`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRecord {
    /// Attempts it made, local rejections included.
    pub attempts: u32,
    /// Time from its first attempt's intended start to its success, or
    /// `None` if it was given up.
    pub latency: Option<Duration>,
    /// Given up because a throttle refused a retry.
    pub throttled: bool,
}

/// Collects attempt outcomes from every simulated client of a process.
#[derive(Debug, Default)]
pub struct ClientRecorder {
    current: Mutex<ClientCounts>,
    in_flight: AtomicU64,
}

impl ClientRecorder {
    /// A recorder with empty counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks an attempt as started (for the in-flight gauge).
    pub fn attempt_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Records how an attempt ended.
    pub fn attempt_finished(&self, record: AttemptRecord) {
        if !record.rejected_locally {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        let mut c = self.current.lock().expect("recorder lock poisoned");
        let t = &mut c.tally;
        match record.outcome {
            Outcome::Ok => t.ok += 1,
            Outcome::Error => t.errors += 1,
            Outcome::Timeout => t.timeouts += 1,
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
            record_latency(&mut c.attempt_latency, record.latency);
        }
        record_lateness(&mut c.lateness, record.lateness);
    }

    /// Records how a logical request ended.
    pub fn request_finished(&self, record: RequestRecord) {
        let mut c = self.current.lock().expect("recorder lock poisoned");
        match record.latency {
            Some(d) => record_latency(&mut c.request_latency, d),
            None => c.tally.gave_up += 1,
        }
        if record.throttled {
            c.tally.throttled += 1;
        }
        let bucket = ATTEMPT_BUCKETS
            .iter()
            .position(|&(max, _)| record.attempts <= max)
            .expect("the last bucket takes everything");
        c.tally.attempts_per_request[bucket] += 1;
    }

    /// Attempts in flight right now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Moves the counts gathered since the last call into `into` (which is
    /// cleared first), so the caller can report an interval.
    pub fn take_interval(&self, into: &mut ClientCounts) {
        into.clear();
        let mut c = self.current.lock().expect("recorder lock poisoned");
        std::mem::swap(&mut *c, into);
    }
}

fn per_sec(count: u64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// One row of the client's report: a line on the terminal, a row of its CSV.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRow {
    /// Wall-clock time of the report, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the client started.
    pub elapsed_s: f64,
    /// Successful attempts per second.
    pub ok_per_s: f64,
    /// Failed attempts per second.
    pub errors_per_s: f64,
    /// Timed-out attempts per second.
    pub timeouts_per_s: f64,
    /// Retries per second.
    pub retries_per_s: f64,
    /// Attempts in flight at the report.
    pub in_flight: u64,
    /// Median latency of the interval's successful attempts, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile of the same.
    pub p99_ms: Option<f64>,
    /// Largest of the same.
    pub max_ms: Option<f64>,
    /// Logical requests given up per second.
    pub gave_up_per_s: f64,
    /// Attempts refused by a throttle per second.
    pub throttled_per_s: f64,
    /// Attempts sent per logical request started in the interval
    /// (amplification; local rejections are not sent).
    pub attempts_per_request: Option<f64>,
    /// Logical requests started per second (the demand).
    pub requests_per_s: f64,
    /// Attempts sent over the network per second (local rejections are
    /// not sent): the load the server sees.
    pub sent_per_s: f64,
}

impl ClientRow {
    /// Builds a row from an interval's counts and its measured length.
    pub fn new(
        counts: &ClientCounts,
        interval: Duration,
        in_flight: u64,
        unix_ms: u64,
        elapsed: Duration,
    ) -> Self {
        let secs = interval.as_secs_f64();
        let latency = Percentiles::of(&counts.attempt_latency);
        let t = &counts.tally;
        ClientRow {
            unix_ms,
            elapsed_s: round3(elapsed.as_secs_f64()),
            ok_per_s: round2(per_sec(t.ok, secs)),
            errors_per_s: round2(per_sec(t.errors, secs)),
            timeouts_per_s: round2(per_sec(t.timeouts, secs)),
            retries_per_s: round2(per_sec(t.retries, secs)),
            in_flight,
            p50_ms: latency.p50_ms,
            p99_ms: latency.p99_ms,
            max_ms: latency.max_ms,
            gave_up_per_s: round2(per_sec(t.gave_up, secs)),
            throttled_per_s: round2(per_sec(t.throttled, secs)),
            attempts_per_request: t.amplification().map(round2),
            requests_per_s: round2(per_sec(t.started, secs)),
            sent_per_s: round2(per_sec(t.sent(), secs)),
        }
    }
}

impl ClientRow {
    /// The row's latency percentiles.
    pub fn latency(&self) -> Percentiles {
        Percentiles {
            p50_ms: self.p50_ms,
            p99_ms: self.p99_ms,
            max_ms: self.max_ms,
        }
    }
}

impl fmt::Display for ClientRow {
    /// Begins exactly like the 2014 original's line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "OK: {:.2} req/sec, errors: {:.2} req/sec, timedout: {:.2} req/sec, \
             retries: {:.2} req/sec, in-flight: {}, {}",
            self.ok_per_s,
            self.errors_per_s,
            self.timeouts_per_s,
            self.retries_per_s,
            self.in_flight,
            self.latency()
        )?;
        write!(
            f,
            ", gave up: {:.2} req/sec, throttled: {:.2} req/sec",
            self.gave_up_per_s, self.throttled_per_s
        )?;
        match self.attempts_per_request {
            Some(a) => write!(f, ", attempts/request: {a:.2}"),
            None => write!(f, ", attempts/request: -"),
        }
    }
}

/// One row of the server's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRow {
    /// Wall-clock time of the report, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the server started.
    pub elapsed_s: f64,
    /// Requests in flight in the latency model.
    pub concurrency: u64,
    /// The modelled delay at that concurrency, in milliseconds.
    pub last_delay_ms: f64,
    /// Requests answered per second.
    pub completed_per_s: f64,
    /// Requests whose client had gone (wasted work) per second.
    pub abandoned_per_s: f64,
    /// Requests refused at once by `--shed-above` per second.
    pub shed_per_s: f64,
}

/// What the server counted during one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Requests answered to a waiting client.
    pub completed: u64,
    /// Requests whose client went away before the answer.
    pub abandoned: u64,
    /// Requests refused at once because the server was over its shedding
    /// threshold.
    pub shed: u64,
}

impl ServerRow {
    /// Builds a row from an interval's counts, its measured length and the
    /// model's state at the report.
    pub fn new(
        counts: ServerCounts,
        interval: Duration,
        concurrency: u64,
        delay: Duration,
        unix_ms: u64,
        elapsed: Duration,
    ) -> Self {
        let secs = interval.as_secs_f64();
        ServerRow {
            unix_ms,
            elapsed_s: round3(elapsed.as_secs_f64()),
            concurrency,
            last_delay_ms: round3(delay.as_secs_f64() * 1e3),
            completed_per_s: round2(per_sec(counts.completed, secs)),
            abandoned_per_s: round2(per_sec(counts.abandoned, secs)),
            shed_per_s: round2(per_sec(counts.shed, secs)),
        }
    }
}

impl fmt::Display for ServerRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "concurrency: {}, last delay: {}, completed: {:.2} req/sec, abandoned: {:.2} req/sec",
            self.concurrency,
            format_delay(Duration::from_secs_f64(self.last_delay_ms / 1e3)),
            self.completed_per_s,
            self.abandoned_per_s
        )?;
        if self.shed_per_s > 0.0 {
            write!(f, ", shed: {:.2} req/sec", self.shed_per_s)?;
        }
        Ok(())
    }
}

/// Formats a delay compactly: `100ms`, `2.35s`, `1h 3m 20s`.
pub fn format_delay(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// Milliseconds since the Unix epoch, for report rows.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(outcome: Outcome, is_retry: bool, ms: u64) -> AttemptRecord {
        AttemptRecord {
            outcome,
            is_retry,
            rejected_locally: false,
            latency: Duration::from_millis(ms),
            lateness: Duration::from_micros(ms),
        }
    }

    #[test]
    fn rates_use_the_measured_interval() {
        let r = ClientRecorder::new();
        for _ in 0..300 {
            r.attempt_started();
            r.attempt_finished(attempt(Outcome::Ok, false, 100));
        }
        for _ in 0..30 {
            r.attempt_started();
            r.attempt_finished(attempt(Outcome::Timeout, true, 2000));
        }
        r.attempt_started();
        let mut c = ClientCounts::default();
        r.take_interval(&mut c);
        // A 5 s interval that really lasted 6 s.
        let row = ClientRow::new(&c, Duration::from_secs(6), r.in_flight(), 0, Duration::ZERO);
        assert_eq!(row.ok_per_s, 50.0);
        assert_eq!(row.timeouts_per_s, 5.0);
        assert_eq!(row.retries_per_s, 5.0);
        assert_eq!(row.in_flight, 1);
        assert_eq!(row.attempts_per_request, Some(1.1));
        let p50 = row.p50_ms.unwrap();
        assert!((p50 - 100.0).abs() < 0.1, "{p50}");
        assert!(
            row.to_string()
                .starts_with("OK: 50.00 req/sec, errors: 0.00 req/sec, timedout: 5.00 req/sec")
        );
    }

    #[test]
    fn requests_fill_the_attempt_buckets_and_count_give_ups() {
        let r = ClientRecorder::new();
        for attempts in [1, 1, 2, 5, 6, 10, 11, 400] {
            r.request_finished(RequestRecord {
                attempts,
                latency: Some(Duration::from_millis(5)),
                throttled: false,
            });
        }
        r.request_finished(RequestRecord {
            attempts: 3,
            latency: None,
            throttled: true,
        });
        r.attempt_started();
        r.attempt_finished(AttemptRecord {
            rejected_locally: true,
            ..attempt(Outcome::Error, true, 0)
        });
        let mut c = ClientCounts::default();
        r.take_interval(&mut c);
        assert_eq!(c.tally.attempts_per_request, [2, 1, 1, 0, 1, 2, 2]);
        assert_eq!(c.tally.gave_up, 1);
        assert_eq!(c.tally.throttled, 2);
        assert_eq!(c.tally.errors, 1);
        assert_eq!(c.tally.rejected, 1);
        assert_eq!(c.tally.sent(), 0);
        assert_eq!(c.request_latency.len(), 8);
        let row = ClientRow::new(&c, Duration::from_secs(1), 0, 0, Duration::ZERO);
        assert!(
            row.to_string()
                .contains("gave up: 1.00 req/sec, throttled: 2.00 req/sec")
        );
    }

    #[test]
    fn taking_an_interval_resets_counts_but_not_in_flight() {
        let r = ClientRecorder::new();
        r.attempt_started();
        r.attempt_started();
        r.attempt_finished(attempt(Outcome::Error, false, 1));
        let mut c = ClientCounts::default();
        r.take_interval(&mut c);
        assert_eq!(c.tally.errors, 1);
        r.take_interval(&mut c);
        assert_eq!(c.tally.attempts(), 0);
        assert_eq!(r.in_flight(), 1);
    }

    #[test]
    fn empty_interval_has_no_percentiles() {
        let row = ClientRow::new(
            &ClientCounts::default(),
            Duration::from_secs(5),
            0,
            0,
            Duration::ZERO,
        );
        assert_eq!(row.latency(), Percentiles::default());
        assert!(row.to_string().ends_with(
            "p50: -, p99: -, max: -, gave up: 0.00 req/sec, throttled: 0.00 req/sec, \
             attempts/request: -"
        ));
    }

    #[test]
    fn huge_latencies_saturate() {
        let mut h = latency_histogram();
        record_latency(&mut h, Duration::from_secs(100_000));
        record_latency(&mut h, Duration::ZERO);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= MAX_LATENCY_US);
    }

    #[test]
    fn server_row_line_matches_the_original_prefix() {
        let row = ServerRow::new(
            ServerCounts {
                completed: 100,
                abandoned: 3,
                shed: 0,
            },
            Duration::from_millis(500),
            42,
            Duration::from_millis(110),
            0,
            Duration::ZERO,
        );
        assert_eq!(row.completed_per_s, 200.0);
        assert_eq!(
            row.to_string(),
            "concurrency: 42, last delay: 110ms, completed: 200.00 req/sec, abandoned: 6.00 req/sec"
        );
    }

    #[test]
    fn delays_format_compactly() {
        assert_eq!(format_delay(Duration::from_millis(100)), "100ms");
        assert_eq!(format_delay(Duration::from_millis(2346)), "2.35s");
        assert_eq!(format_delay(Duration::from_secs(3800)), "1h 3m 20s");
    }
}
