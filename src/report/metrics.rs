//! Prometheus metrics of a running client or server: counters that move as
//! each event happens (cumulative from the start), gauges of the state
//! now, and latency histograms, encoded by the `prometheus-client` crate
//! (Prometheus's official Rust client) in the OpenMetrics text format,
//! which Prometheus asks for first, or in Prometheus's text format 0.0.4
//! for whoever does not ([`Format`]). Names start with
//! `retry_storm_client_` or `retry_storm_server_` and carry their unit
//! (`_seconds`) and, for counters, `_total` (docs/metrics.md lists them
//! all).
//!
//! The client's metrics are fed by [`ClientRecorder`] as it records, when
//! it is given them; the server's by the real server's model task. A tier
//! of a chain serves both, its server's and its calls', every series
//! labelled `tier` ([`ServerExposition`]); a plain server or client carries no
//! such label. No runtime here: the endpoint that serves them is
//! `net::metrics`.
//!
//! [`ClientRecorder`]: super::counts::ClientRecorder

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

use crate::model::outcome::{AttemptRecord, Outcome, RequestRecord};

mod server;

pub use server::{DROP_REASONS, MODEL_OUTCOMES, ServerExposition, ServerMetrics};

/// The label every series of a tier's process carries, its value the
/// tier's name (`server --tier-name`, by default the address it listens
/// on): its server's metrics and its calls' alike.
pub const TIER_LABEL: &str = "tier";

/// Upper bounds of the latency histograms' buckets, in seconds: 1 ms to 10
/// minutes (the default cap on the modelled delay) in steps of 1, 2, 5,
/// so that quick runs (every time divided by 10) and full ones both fall
/// inside.
pub const LATENCY_BUCKETS: [f64; 19] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
];

/// Metrics a program serves: the exposition, rendered at each scrape.
pub trait Exposition: Send + Sync {
    /// The whole exposition in the OpenMetrics text format, `# EOF`
    /// included.
    fn render(&self) -> String;
}

/// The text formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0, what Prometheus asks for first.
    OpenMetrics,
    /// Prometheus's text format 0.0.4, for whoever does not ask for
    /// OpenMetrics (curl, `promtool check metrics`, older scrapers).
    Prometheus,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics if it names it
    /// (with a weight above zero), else Prometheus's text format.
    pub fn accepted(accept: Option<&str>) -> Format {
        let wants = |range: &str| {
            let mut parts = range.split(';').map(str::trim);
            parts.next() == Some("application/openmetrics-text")
                && parts.all(|p| {
                    p.strip_prefix("q=")
                        .is_none_or(|q| q.parse::<f64>().is_ok_and(|q| q > 0.0))
                })
        };
        match accept {
            Some(accept) if accept.split(',').any(wants) => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The media type of an exposition in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// An exposition rendered as OpenMetrics, in this format. For
    /// Prometheus's: a counter's HELP and TYPE name its samples (with
    /// `_total`), and there is no `# UNIT` or `# EOF` line.
    pub fn encode(self, openmetrics: String) -> String {
        if self == Format::OpenMetrics {
            return openmetrics;
        }
        let counters: Vec<&str> = openmetrics
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
            .collect();
        let mut text = String::with_capacity(openmetrics.len());
        for line in openmetrics.lines() {
            if line.starts_with("# UNIT ") || line == "# EOF" {
                continue;
            }
            let family = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
                let rest = line.strip_prefix(tag)?;
                let name = rest.split(' ').next()?;
                counters
                    .contains(&name)
                    .then(|| (tag, name, &rest[name.len()..]))
            });
            match family {
                Some((tag, name, rest)) => {
                    text.push_str(&format!("{tag}{name}_total{rest}"));
                }
                None => text.push_str(line),
            }
            text.push('\n');
        }
        text
    }
}

/// An empty registry of metrics named `prefix`, each of whose series
/// carries the label `tier="NAME"` when a tier's name is given.
fn registry(prefix: &'static str, tier: Option<&str>) -> Registry {
    match tier {
        None => Registry::with_prefix(prefix),
        Some(name) => Registry::with_prefix_and_labels(
            prefix,
            std::iter::once((Cow::Borrowed(TIER_LABEL), Cow::Owned(name.to_string()))),
        ),
    }
}

/// A registry's exposition.
fn render(registry: &Registry) -> String {
    let mut text = String::with_capacity(8 * 1024);
    encode(&mut text, registry).expect("writing to a String does not fail");
    text
}

/// One metric family with one label and a fixed set of its values, each
/// with its own metric: every series exists from the start (at zero, so
/// that `rate()` sees the first event) and is written in a fixed order.
#[derive(Debug, Clone)]
struct Labelled<M> {
    key: &'static str,
    series: Vec<(&'static str, M)>,
}

impl<M: Default> Labelled<M> {
    fn new(key: &'static str, values: &[&'static str]) -> Self {
        Labelled::with(key, values, M::default)
    }
}

impl<M> Labelled<M> {
    fn with(key: &'static str, values: &[&'static str], make: impl Fn() -> M) -> Self {
        Labelled {
            key,
            series: values.iter().map(|&v| (v, make())).collect(),
        }
    }

    /// The metric of the `at`th value.
    fn at(&self, at: usize) -> &M {
        &self.series[at].1
    }
}

impl<M: EncodeMetric + TypedMetric> EncodeMetric for Labelled<M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        for (value, metric) in &self.series {
            let labels = [(self.key, *value)];
            metric.encode(encoder.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The values of `outcome` on the client's attempts, in the order of
/// [`Outcome`].
pub const ATTEMPT_OUTCOMES: [&str; 4] = ["ok", "error", "timeout", "cancelled"];

fn outcome_index(outcome: Outcome) -> usize {
    match outcome {
        Outcome::Ok => 0,
        Outcome::Error => 1,
        Outcome::Timeout => 2,
        Outcome::Cancelled => 3,
    }
}

/// A client's metrics, counted as its users' attempts and requests end.
#[derive(Debug)]
pub struct ClientMetrics {
    registry: Registry,
    attempts: Labelled<Counter>,
    retries: Counter,
    started: Counter,
    given_up: Counter,
    throttled: Counter,
    rejected: Counter,
    in_flight: Gauge,
    arrived: Counter,
    refused: Counter,
    outstanding: Gauge,
    attempt_latency: Histogram,
    request_latency: Histogram,
    /// A tier's calls whose caller had gone (served by a tier only).
    gone: Counter,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        ClientMetrics::new()
    }
}

impl ClientMetrics {
    /// Every client metric, at zero.
    pub fn new() -> Self {
        ClientMetrics::labelled(None)
    }

    /// The metrics of a tier's calls inward, at zero: the client's, and
    /// the calls whose caller had gone (`callers_gone`), every series
    /// labelled with the tier's `name` ([`TIER_LABEL`]).
    pub fn of_tier_calls(name: &str) -> Self {
        let mut m = ClientMetrics::labelled(Some(name));
        m.registry.register(
            "callers_gone",
            "A tier's calls whose caller had gone before their answer (its connection \
             closed): the call went on for nobody, unless cancellation is passed on",
            m.gone.clone(),
        );
        m
    }

    /// Every client metric, at zero, labelled with `tier`'s name if given.
    fn labelled(tier: Option<&str>) -> Self {
        let mut m = ClientMetrics {
            registry: registry("retry_storm_client", tier),
            attempts: Labelled::new("outcome", &ATTEMPT_OUTCOMES),
            retries: Counter::default(),
            started: Counter::default(),
            given_up: Counter::default(),
            throttled: Counter::default(),
            rejected: Counter::default(),
            in_flight: Gauge::default(),
            arrived: Counter::default(),
            refused: Counter::default(),
            outstanding: Gauge::default(),
            attempt_latency: latency_histogram(),
            request_latency: latency_histogram(),
            gone: Counter::default(),
        };
        m.registry.register(
            "attempts",
            "Attempts ended, by outcome: ok (2xx in time), error (connect failure, reset, \
             non-2xx, or rejected locally by a throttle), timeout, cancelled (a hedge that lost)",
            m.attempts.clone(),
        );
        m.registry.register(
            "retries",
            "Attempts that were retries (not the first of their request)",
            m.retries.clone(),
        );
        m.registry.register(
            "requests_started",
            "Logical requests started (first attempts)",
            m.started.clone(),
        );
        m.registry.register(
            "requests_given_up",
            "Logical requests given up (attempt limit, deadline or throttle)",
            m.given_up.clone(),
        );
        m.registry.register(
            "throttled",
            "Attempts a throttle refused: retries refused (the request given up) and attempts \
             rejected locally",
            m.throttled.clone(),
        );
        m.registry.register(
            "rejected_locally",
            "Attempts rejected locally by a throttle, never sent (counted as errors too)",
            m.rejected.clone(),
        );
        m.registry
            .register("in_flight", "Attempts in flight now", m.in_flight.clone());
        m.registry.register(
            "sessions_arrived",
            "Sessions of open traffic that arrived and were admitted (0 for a closed population)",
            m.arrived.clone(),
        );
        m.registry.register(
            "arrivals_refused",
            "Arrivals of open traffic refused at the source, never sent: the process held \
             --max-outstanding sessions",
            m.refused.clone(),
        );
        m.registry.register(
            "outstanding",
            "Sessions of open traffic held now (0 for a closed population)",
            m.outstanding.clone(),
        );
        m.registry.register_with_unit(
            "attempt_duration",
            "Latency of successful attempts, from their intended start",
            Unit::Seconds,
            m.attempt_latency.clone(),
        );
        m.registry.register_with_unit(
            "request_duration",
            "Latency of successful logical requests, from the intended start of their first \
             attempt to the end of the successful one",
            Unit::Seconds,
            m.request_latency.clone(),
        );
        m
    }

    /// An attempt went on the network.
    pub fn attempt_started(&self) {
        self.in_flight.inc();
    }

    /// An attempt ended (as `ClientRecorder::attempt_finished` counts it).
    pub fn attempt_finished(&self, record: &AttemptRecord) {
        if !record.rejected_locally {
            self.in_flight.dec();
        }
        self.attempts.at(outcome_index(record.outcome)).inc();
        if record.is_retry {
            self.retries.inc();
        } else {
            self.started.inc();
        }
        if record.rejected_locally {
            self.throttled.inc();
            self.rejected.inc();
        }
        if record.outcome == Outcome::Ok {
            self.attempt_latency.observe(seconds(record.latency));
        }
    }

    /// A session of open traffic arrived and was admitted.
    pub fn session_arrived(&self) {
        self.arrived.inc();
        self.outstanding.inc();
    }

    /// A session of open traffic left.
    pub fn session_left(&self) {
        self.outstanding.dec();
    }

    /// An arrival was refused at the source.
    pub fn arrival_refused(&self) {
        self.refused.inc();
    }

    /// A tier's call lost its caller before its answer.
    pub fn caller_gone(&self) {
        self.gone.inc();
    }

    /// A logical request ended (as `ClientRecorder::request_finished`
    /// counts it).
    pub fn request_finished(&self, record: &RequestRecord) {
        match record.latency {
            Some(d) => self.request_latency.observe(seconds(d)),
            None => {
                self.given_up.inc();
            }
        }
        if record.throttled {
            self.throttled.inc();
        }
    }
}

impl Exposition for ClientMetrics {
    fn render(&self) -> String {
        render(&self.registry)
    }
}

#[cfg(test)]
mod tests;
