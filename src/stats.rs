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
use serde::Serialize;

/// Largest latency a histogram records exactly (one hour); longer ones are
/// recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, three significant figures.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid")
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

/// What the client saw during one interval (or, merged, a whole run).
#[derive(Debug, Clone)]
pub struct ClientCounts {
    /// Attempts that succeeded.
    pub ok: u64,
    /// Attempts that failed with an error.
    pub errors: u64,
    /// Attempts that timed out.
    pub timeouts: u64,
    /// Attempts that were retries (not the first of a logical request).
    pub retries: u64,
    /// Latency of successful attempts, from their intended start.
    pub attempt_latency: Histogram<u64>,
    /// Latency of logical requests that succeeded, from the intended start of
    /// their first attempt to the end of the successful one.
    pub request_latency: Histogram<u64>,
}

impl Default for ClientCounts {
    fn default() -> Self {
        ClientCounts {
            ok: 0,
            errors: 0,
            timeouts: 0,
            retries: 0,
            attempt_latency: latency_histogram(),
            request_latency: latency_histogram(),
        }
    }
}

impl ClientCounts {
    /// Adds another interval's counts to these.
    pub fn merge(&mut self, other: &ClientCounts) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.timeouts += other.timeouts;
        self.retries += other.retries;
        self.attempt_latency
            .add(&other.attempt_latency)
            .expect("histograms share their bounds");
        self.request_latency
            .add(&other.request_latency)
            .expect("histograms share their bounds");
    }

    /// Empties the counts, keeping the histograms' memory.
    fn clear(&mut self) {
        self.ok = 0;
        self.errors = 0;
        self.timeouts = 0;
        self.retries = 0;
        self.attempt_latency.reset();
        self.request_latency.reset();
    }

    /// Total attempts.
    pub fn attempts(&self) -> u64 {
        self.ok + self.errors + self.timeouts
    }
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

    /// Records how an attempt ended; `latency` is measured from its intended
    /// start. `request_latency` is set when it completed a logical request.
    pub fn attempt_finished(
        &self,
        outcome: Outcome,
        is_retry: bool,
        latency: Duration,
        request_latency: Option<Duration>,
    ) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let mut c = self.current.lock().expect("recorder lock poisoned");
        match outcome {
            Outcome::Ok => {
                c.ok += 1;
                record_latency(&mut c.attempt_latency, latency);
            }
            Outcome::Error => c.errors += 1,
            Outcome::Timeout => c.timeouts += 1,
        }
        if is_retry {
            c.retries += 1;
        }
        if let Some(d) = request_latency {
            record_latency(&mut c.request_latency, d);
        }
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        ClientRow {
            unix_ms,
            elapsed_s: round3(elapsed.as_secs_f64()),
            ok_per_s: round2(per_sec(counts.ok, secs)),
            errors_per_s: round2(per_sec(counts.errors, secs)),
            timeouts_per_s: round2(per_sec(counts.timeouts, secs)),
            retries_per_s: round2(per_sec(counts.retries, secs)),
            in_flight,
            p50_ms: latency.p50_ms,
            p99_ms: latency.p99_ms,
            max_ms: latency.max_ms,
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
        )
    }
}

/// One row of the server's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

/// What the server counted during one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Requests answered to a waiting client.
    pub completed: u64,
    /// Requests whose client went away before the answer.
    pub abandoned: u64,
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
        )
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

    #[test]
    fn rates_use_the_measured_interval() {
        let r = ClientRecorder::new();
        for _ in 0..300 {
            r.attempt_started();
            r.attempt_finished(Outcome::Ok, false, Duration::from_millis(100), None);
        }
        for _ in 0..30 {
            r.attempt_started();
            r.attempt_finished(Outcome::Timeout, true, Duration::from_secs(2), None);
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
        let p50 = row.p50_ms.unwrap();
        assert!((p50 - 100.0).abs() < 0.1, "{p50}");
        assert!(
            row.to_string()
                .starts_with("OK: 50.00 req/sec, errors: 0.00 req/sec, timedout: 5.00 req/sec")
        );
    }

    #[test]
    fn taking_an_interval_resets_counts_but_not_in_flight() {
        let r = ClientRecorder::new();
        r.attempt_started();
        r.attempt_started();
        r.attempt_finished(Outcome::Error, false, Duration::from_millis(1), None);
        let mut c = ClientCounts::default();
        r.take_interval(&mut c);
        assert_eq!(c.errors, 1);
        r.take_interval(&mut c);
        assert_eq!(c.attempts(), 0);
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
        assert!(row.to_string().ends_with("p50: -, p99: -, max: -"));
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
