//! The fault proxy's report row: what passes through it each interval
//! (requests in flight to the target, held by the fault, waiting to be
//! accepted), answers by status class, and latency through it. One line
//! on the terminal, a CSV row and a status line per interval, as the
//! server's and the client's. What the proxy counts as requests pass
//! ([`ProxyRecorder`]), and its totals when it stops.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histogram::{Percentiles, latency_histogram, record_latency};
pub use super::metrics::ANSWER_CLASSES;
use super::metrics::ProxyMetrics;
use super::output::CsvRow;
use super::rows::{per_sec, round2, round3};

/// One row of the fault proxy's report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProxyRow {
    /// Wall-clock time of the report, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the proxy started.
    pub elapsed_s: f64,
    /// Whether the fault was on at the report.
    pub faulted: bool,
    /// Client connections open through the proxy at the report.
    pub connections: u64,
    /// Connections the kernel has completed into the proxy's listen queue
    /// and the proxy has not accepted, at the report.
    pub queued: u64,
    /// Requests forwarded to the target and not yet answered by it, at the
    /// report.
    pub in_flight: u64,
    /// Requests read and held by the fault (stalled, delayed or
    /// swallowed), not yet forwarded, at the report.
    pub held: u64,
    /// Requests read from clients per second.
    pub requests_per_s: f64,
    /// The target's answers passed back per second, 2xx.
    pub answers_2xx_per_s: f64,
    /// The same, 4xx.
    pub answers_4xx_per_s: f64,
    /// The same, 5xx.
    pub answers_5xx_per_s: f64,
    /// The same, any other status (1xx, 3xx).
    pub answers_other_per_s: f64,
    /// Requests the proxy answered itself per second, by the fault
    /// (`status=CODE`).
    pub injected_per_s: f64,
    /// Connections the proxy reset per second, by the fault (`reset`).
    pub resets_per_s: f64,
    /// Requests the target did not answer per second (refused, reset or
    /// closed): the proxy answered them 502.
    pub upstream_errors_per_s: f64,
    /// Requests whose client had gone before their answer, per second.
    pub gone_per_s: f64,
    /// Median latency through the proxy of the interval's answers passed
    /// back from the target, milliseconds, from the request read to its
    /// answer's head written.
    pub p50_ms: Option<f64>,
    /// 99th percentile of the same.
    pub p99_ms: Option<f64>,
    /// Largest of the same.
    pub max_ms: Option<f64>,
}

/// Which of [`ANSWER_CLASSES`] a status is in: 1xx and 3xx are `other`.
pub fn answer_class(status: u16) -> usize {
    match status {
        200..=299 => 0,
        400..=499 => 1,
        500..=599 => 2,
        _ => 3,
    }
}

/// What the proxy counts, over an interval or its whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyTally {
    /// Requests read from clients.
    pub requests: u64,
    /// The target's answers passed back, by [`ANSWER_CLASSES`].
    pub answers: [u64; 4],
    /// Requests the proxy answered itself, by the fault.
    pub injected: u64,
    /// Connections the proxy reset, by the fault.
    pub resets: u64,
    /// Requests the target did not answer (the proxy answered 502).
    pub upstream_errors: u64,
    /// Requests whose client had gone before their answer.
    pub gone: u64,
}

impl ProxyTally {
    fn add(&mut self, other: &ProxyTally) {
        self.requests += other.requests;
        for (mine, theirs) in self.answers.iter_mut().zip(other.answers) {
            *mine += theirs;
        }
        self.injected += other.injected;
        self.resets += other.resets;
        self.upstream_errors += other.upstream_errors;
        self.gone += other.gone;
    }
}

/// One interval's counts and the latency of its answers passed back.
#[derive(Debug, Clone)]
pub struct ProxyCounts {
    /// The counts.
    pub tally: ProxyTally,
    /// Latency through the proxy of the target's answers passed back,
    /// microseconds.
    pub latency: Histogram<u64>,
}

impl Default for ProxyCounts {
    fn default() -> Self {
        ProxyCounts {
            tally: ProxyTally::default(),
            latency: latency_histogram(),
        }
    }
}

/// The proxy's state at a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyState {
    /// Whether the fault is on.
    pub faulted: bool,
    /// Client connections open.
    pub connections: u64,
    /// Connections waiting in the listen queue.
    pub queued: u64,
    /// Requests forwarded and not yet answered by the target.
    pub in_flight: u64,
    /// Requests held by the fault.
    pub held: u64,
}

impl ProxyRow {
    /// Builds a row from an interval's counts, its measured length and
    /// the proxy's state at the report.
    pub fn new(
        counts: &ProxyCounts,
        interval: Duration,
        state: ProxyState,
        unix_ms: u64,
        elapsed: Duration,
    ) -> ProxyRow {
        let secs = interval.as_secs_f64();
        let rate = |n: u64| round2(per_sec(n, secs));
        let t = &counts.tally;
        let latency = Percentiles::of(&counts.latency);
        ProxyRow {
            unix_ms,
            elapsed_s: round3(elapsed.as_secs_f64()),
            faulted: state.faulted,
            connections: state.connections,
            queued: state.queued,
            in_flight: state.in_flight,
            held: state.held,
            requests_per_s: rate(t.requests),
            answers_2xx_per_s: rate(t.answers[0]),
            answers_4xx_per_s: rate(t.answers[1]),
            answers_5xx_per_s: rate(t.answers[2]),
            answers_other_per_s: rate(t.answers[3]),
            injected_per_s: rate(t.injected),
            resets_per_s: rate(t.resets),
            upstream_errors_per_s: rate(t.upstream_errors),
            gone_per_s: rate(t.gone),
            p50_ms: latency.p50_ms,
            p99_ms: latency.p99_ms,
            max_ms: latency.max_ms,
        }
    }

    /// The row's latency percentiles.
    pub fn latency(&self) -> Percentiles {
        Percentiles {
            p50_ms: self.p50_ms,
            p99_ms: self.p99_ms,
            max_ms: self.max_ms,
        }
    }
}

impl fmt::Display for ProxyRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fault: {}, connections: {}, queued: {}, in flight: {}, held: {}, \
             requests: {:.2} req/sec, 2xx: {:.2} req/sec, 4xx: {:.2} req/sec, \
             5xx: {:.2} req/sec",
            if self.faulted { "on" } else { "off" },
            self.connections,
            self.queued,
            self.in_flight,
            self.held,
            self.requests_per_s,
            self.answers_2xx_per_s,
            self.answers_4xx_per_s,
            self.answers_5xx_per_s,
        )?;
        if self.answers_other_per_s > 0.0 {
            write!(f, ", other: {:.2} req/sec", self.answers_other_per_s)?;
        }
        write!(
            f,
            ", injected: {:.2} req/sec, resets: {:.2} req/sec, upstream errors: {:.2} req/sec, \
             gone: {:.2} req/sec, {}",
            self.injected_per_s,
            self.resets_per_s,
            self.upstream_errors_per_s,
            self.gone_per_s,
            self.latency()
        )
    }
}

impl CsvRow for ProxyRow {
    const HEADER: &'static [&'static str] = &[
        "unix_ms",
        "elapsed_s",
        "faulted",
        "connections",
        "queued",
        "in_flight",
        "held",
        "requests_per_s",
        "answers_2xx_per_s",
        "answers_4xx_per_s",
        "answers_5xx_per_s",
        "answers_other_per_s",
        "injected_per_s",
        "resets_per_s",
        "upstream_errors_per_s",
        "gone_per_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
    ];
}

/// Something the proxy counts as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyEvent {
    /// A request read from a client.
    Request,
    /// A request answered by the proxy itself, by the fault.
    Injected,
    /// A connection reset by the fault.
    Reset,
    /// A request the target did not answer (answered 502).
    UpstreamError,
    /// A request whose client had gone before its answer.
    Gone,
}

/// What the proxy holds now, each counted while a guard of it lives
/// ([`ProxyRecorder::enter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occupancy {
    /// A client connection open.
    Connection,
    /// A request forwarded to the target, not yet answered by it.
    InFlight,
    /// A request held by the fault, not yet forwarded.
    Held,
}

/// Counts what passes through the proxy, for its report rows and its
/// metrics (fed as events happen, when it serves them). Shared by every
/// connection's task and the reporter.
#[derive(Debug, Default)]
pub struct ProxyRecorder {
    interval: Mutex<ProxyCounts>,
    totals: Mutex<ProxyTally>,
    occupancy: [AtomicU64; 3],
    faulted: AtomicBool,
    metrics: Option<Arc<ProxyMetrics>>,
}

/// Counts one of [`Occupancy`] while it lives.
#[derive(Debug)]
pub struct Occupied {
    recorder: Arc<ProxyRecorder>,
    what: Occupancy,
}

impl Drop for Occupied {
    fn drop(&mut self) {
        let now = self.recorder.occupancy[self.what as usize].fetch_sub(1, Ordering::Relaxed) - 1;
        self.recorder.gauge(self.what, now);
    }
}

impl ProxyRecorder {
    /// A recorder that feeds `metrics` too, if given.
    pub fn with_metrics(metrics: Option<Arc<ProxyMetrics>>) -> ProxyRecorder {
        ProxyRecorder {
            metrics,
            ..ProxyRecorder::default()
        }
    }

    fn interval(&self) -> std::sync::MutexGuard<'_, ProxyCounts> {
        self.interval.lock().expect("proxy recorder lock poisoned")
    }

    /// Counts `event`.
    pub fn count(&self, event: ProxyEvent) {
        {
            let t = &mut self.interval().tally;
            *match event {
                ProxyEvent::Request => &mut t.requests,
                ProxyEvent::Injected => &mut t.injected,
                ProxyEvent::Reset => &mut t.resets,
                ProxyEvent::UpstreamError => &mut t.upstream_errors,
                ProxyEvent::Gone => &mut t.gone,
            } += 1;
        }
        if let Some(m) = &self.metrics {
            match event {
                ProxyEvent::Request => m.request(),
                ProxyEvent::Injected => m.injected(),
                ProxyEvent::Reset => m.reset(),
                ProxyEvent::UpstreamError => m.upstream_error(),
                ProxyEvent::Gone => m.gone(),
            }
        }
    }

    /// Counts an answer of the target with `status` passed back, `latency`
    /// after its request was read.
    pub fn answered(&self, status: u16, latency: Duration) {
        let class = answer_class(status);
        {
            let mut counts = self.interval();
            counts.tally.answers[class] += 1;
            record_latency(&mut counts.latency, latency);
        }
        if let Some(m) = &self.metrics {
            m.answered(class, latency);
        }
    }

    /// Counts `what` from now until the guard is dropped.
    pub fn enter(self: &Arc<Self>, what: Occupancy) -> Occupied {
        let now = self.occupancy[what as usize].fetch_add(1, Ordering::Relaxed) + 1;
        self.gauge(what, now);
        Occupied {
            recorder: self.clone(),
            what,
        }
    }

    /// Sets the metrics' gauge of `what`, if served, to `now`.
    fn gauge(&self, what: Occupancy, now: u64) {
        if let Some(m) = &self.metrics {
            match what {
                Occupancy::Connection => m.connections(now),
                Occupancy::InFlight => m.in_flight(now),
                Occupancy::Held => m.held(now),
            }
        }
    }

    /// How many of `what` there are now.
    pub fn occupied(&self, what: Occupancy) -> u64 {
        self.occupancy[what as usize].load(Ordering::Relaxed)
    }

    /// Notes whether the fault is on.
    pub fn set_faulted(&self, on: bool) {
        self.faulted.store(on, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.faulted(on);
        }
    }

    /// The interval's row, `measured` long, with `queued` connections in
    /// the listen queue: its counts start again from zero.
    pub fn row(
        &self,
        measured: Duration,
        queued: u64,
        unix_ms: u64,
        elapsed: Duration,
    ) -> ProxyRow {
        let counts = std::mem::take(&mut *self.interval());
        self.totals
            .lock()
            .expect("proxy recorder lock poisoned")
            .add(&counts.tally);
        if let Some(m) = &self.metrics {
            m.queued(queued);
        }
        let state = ProxyState {
            faulted: self.faulted.load(Ordering::Relaxed),
            connections: self.occupied(Occupancy::Connection),
            queued,
            in_flight: self.occupied(Occupancy::InFlight),
            held: self.occupied(Occupancy::Held),
        };
        ProxyRow::new(&counts, measured, state, unix_ms, elapsed)
    }

    /// The run's totals so far, up to the last row, and what is open now.
    pub fn summary(&self) -> ProxySummary {
        ProxySummary {
            totals: *self.totals.lock().expect("proxy recorder lock poisoned"),
            connections: self.occupied(Occupancy::Connection),
            in_flight: self.occupied(Occupancy::InFlight),
            held: self.occupied(Occupancy::Held),
        }
    }
}

/// What a whole proxy run passed through, printed when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxySummary {
    /// The counts of every row.
    pub totals: ProxyTally,
    /// Client connections open at the stop.
    pub connections: u64,
    /// Requests in flight to the target at the stop.
    pub in_flight: u64,
    /// Requests held by the fault at the stop.
    pub held: u64,
}

impl fmt::Display for ProxySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        write!(
            f,
            "proxy stopped: requests {}, answers passed back {} (2xx {}, 4xx {}, 5xx {}, other \
             {}), injected {}, resets {}, upstream errors {}, gone {}; at stop {} connections, \
             {} in flight, {} held",
            t.requests,
            t.answers.iter().sum::<u64>(),
            t.answers[0],
            t.answers[1],
            t.answers[2],
            t.answers[3],
            t.injected,
            t.resets,
            t.upstream_errors,
            t.gone,
            self.connections,
            self.in_flight,
            self.held
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::output::{CsvSink, read_rows};

    #[test]
    fn a_row_gives_rates_over_the_measured_interval_and_its_latency() {
        let recorder = Arc::new(ProxyRecorder::default());
        recorder.set_faulted(true);
        let connection = recorder.enter(Occupancy::Connection);
        let held = recorder.enter(Occupancy::Held);
        for _ in 0..4 {
            recorder.count(ProxyEvent::Request);
        }
        recorder.count(ProxyEvent::Injected);
        recorder.count(ProxyEvent::Gone);
        recorder.answered(200, Duration::from_millis(10));
        recorder.answered(404, Duration::from_millis(30));
        recorder.answered(103, Duration::from_millis(20));
        let row = recorder.row(Duration::from_millis(500), 7, 1_000, Duration::from_secs(3));
        assert_eq!(
            (
                row.faulted,
                row.connections,
                row.held,
                row.in_flight,
                row.queued
            ),
            (true, 1, 1, 0, 7)
        );
        assert_eq!(row.requests_per_s, 8.0);
        assert_eq!(
            (
                row.answers_2xx_per_s,
                row.answers_4xx_per_s,
                row.answers_other_per_s
            ),
            (2.0, 2.0, 2.0)
        );
        assert_eq!((row.injected_per_s, row.gone_per_s), (2.0, 2.0));
        // Three significant figures, as every histogram of the project.
        assert!((20.0..20.1).contains(&row.p50_ms.unwrap()), "{row:?}");
        assert!(row.max_ms.unwrap() >= 30.0);
        drop((connection, held));
        // The next interval starts from zero; the gauges follow the guards.
        let next = recorder.row(Duration::from_secs(1), 0, 2_000, Duration::from_secs(4));
        assert_eq!(
            (next.requests_per_s, next.connections, next.held),
            (0.0, 0, 0)
        );
        assert_eq!(next.p50_ms, None);
        let summary = recorder.summary();
        assert_eq!(summary.totals.requests, 4);
        assert_eq!(summary.totals.answers, [1, 1, 0, 1]);
        assert!(summary.to_string().starts_with("proxy stopped: requests 4"));
    }

    #[test]
    fn a_row_reads_back_from_its_csv_and_its_line_names_the_fault() {
        let row = ProxyRow {
            unix_ms: 5,
            elapsed_s: 1.5,
            faulted: true,
            p50_ms: Some(1.5),
            ..ProxyRow::default()
        };
        let path = std::env::temp_dir().join(format!("proxy-row-{}.csv", std::process::id()));
        let mut sink = CsvSink::<ProxyRow>::create(&path).unwrap();
        sink.write(&row).unwrap();
        let back: Vec<ProxyRow> = read_rows(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, vec![row.clone()]);
        let line = row.to_string();
        assert!(line.starts_with("fault: on, connections: 0"), "{line}");
        assert!(line.ends_with("p50: 1.5ms, p99: -, max: -"), "{line}");
        assert!(!line.contains("other"), "{line}");
    }

    #[test]
    fn statuses_fall_in_their_class() {
        let classes: Vec<&str> = [200, 204, 301, 404, 429, 503, 101]
            .map(|s| ANSWER_CLASSES[answer_class(s)])
            .to_vec();
        assert_eq!(
            classes,
            ["2xx", "2xx", "other", "4xx", "4xx", "5xx", "other"]
        );
    }
}
