//! The fault proxy's report row: what passes through it each interval
//! (requests in flight to the target, held by the fault, waiting to be
//! accepted), answers by status class, and latency through it. One line
//! on the terminal, a CSV row and a status line per interval, as the
//! server's and the client's.

use serde::{Deserialize, Serialize};

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
