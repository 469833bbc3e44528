//! The fault proxy's metrics, fed by its recorder as requests pass.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::family::{Exposition, Labelled, latency_histogram, registry, render, seconds};

/// The status classes the proxy counts the target's answers by, in the
/// order of the report's counts and of the metrics' `class` label.
pub const ANSWER_CLASSES: [&str; 4] = ["2xx", "4xx", "5xx", "other"];

/// A fault proxy's metrics, counted as requests pass through it.
#[derive(Debug)]
pub struct ProxyMetrics {
    registry: Registry,
    requests: Counter,
    answers: Labelled<Counter>,
    injected: Counter,
    resets: Counter,
    upstream_errors: Counter,
    gone: Counter,
    connections: Gauge,
    queued: Gauge,
    in_flight: Gauge,
    held: Gauge,
    faulted: Gauge,
    latency: Histogram,
}

impl Default for ProxyMetrics {
    fn default() -> Self {
        ProxyMetrics::new()
    }
}

impl ProxyMetrics {
    /// Every metric of the proxy, at zero.
    pub fn new() -> Self {
        let mut m = ProxyMetrics {
            registry: registry("retry_storm_proxy", None),
            requests: Counter::default(),
            answers: Labelled::new("class", &ANSWER_CLASSES),
            injected: Counter::default(),
            resets: Counter::default(),
            upstream_errors: Counter::default(),
            gone: Counter::default(),
            connections: Gauge::default(),
            queued: Gauge::default(),
            in_flight: Gauge::default(),
            held: Gauge::default(),
            faulted: Gauge::default(),
            latency: latency_histogram(),
        };
        let r = &mut m.registry;
        for (name, help, counter) in [
            ("requests", "Requests read from clients", &m.requests),
            (
                "injected",
                "Requests the proxy answered itself, unforwarded, by the fault (status=CODE)",
                &m.injected,
            ),
            (
                "resets",
                "Client connections the proxy reset by the fault (reset)",
                &m.resets,
            ),
            (
                "upstream_errors",
                "Requests the target did not answer (refused, reset or closed): answered 502",
                &m.upstream_errors,
            ),
            (
                "gone",
                "Requests whose client had gone before their answer",
                &m.gone,
            ),
        ] {
            r.register(name, help, counter.clone());
        }
        r.register(
            "answers",
            "The target's answers passed back to clients, by status class: 2xx, 4xx, 5xx, \
             other (1xx, 3xx)",
            m.answers.clone(),
        );
        for (name, help, gauge) in [
            ("connections", "Client connections open now", &m.connections),
            (
                "queued",
                "Connections in the proxy's listen queue, not yet accepted, at the last report",
                &m.queued,
            ),
            (
                "in_flight",
                "Requests forwarded to the target and not yet answered by it, now",
                &m.in_flight,
            ),
            (
                "held",
                "Requests held by the fault (stalled, delayed or swallowed), not yet forwarded, \
                 now",
                &m.held,
            ),
            (
                "faulted",
                "1 while the fault is on, 0 while it is off",
                &m.faulted,
            ),
        ] {
            r.register(name, help, gauge.clone());
        }
        r.register_with_unit(
            "answer_duration",
            "Latency through the proxy of the target's answers passed back, from the request \
             read to its answer's head written",
            Unit::Seconds,
            m.latency.clone(),
        );
        m
    }

    /// A request was read.
    pub fn request(&self) {
        self.requests.inc();
    }

    /// A request was answered by the fault.
    pub fn injected(&self) {
        self.injected.inc();
    }

    /// A connection was reset by the fault.
    pub fn reset(&self) {
        self.resets.inc();
    }

    /// A request was not answered by the target.
    pub fn upstream_error(&self) {
        self.upstream_errors.inc();
    }

    /// A request's client went before its answer.
    pub fn gone(&self) {
        self.gone.inc();
    }

    /// An answer of the target in `class` (of [`ANSWER_CLASSES`]) was
    /// passed back after `latency`.
    pub fn answered(&self, class: usize, latency: Duration) {
        self.answers.at(class).inc();
        self.latency.observe(seconds(latency));
    }

    /// `now` client connections are open.
    pub fn connections(&self, now: u64) {
        set(&self.connections, now);
    }

    /// `now` requests are in flight to the target.
    pub fn in_flight(&self, now: u64) {
        set(&self.in_flight, now);
    }

    /// `now` requests are held by the fault.
    pub fn held(&self, now: u64) {
        set(&self.held, now);
    }

    /// The listen queue holds `now` connections.
    pub fn queued(&self, now: u64) {
        set(&self.queued, now);
    }

    /// The fault is on, or off.
    pub fn faulted(&self, on: bool) {
        self.faulted.set(i64::from(on));
    }
}

fn set(gauge: &Gauge, now: u64) {
    gauge.set(i64::try_from(now).unwrap_or(i64::MAX));
}

impl Exposition for ProxyMetrics {
    fn render(&self) -> String {
        render(&self.registry)
    }
}
