//! A client's metrics, fed by its recorder as attempts and requests end;
//! a tier's calls' too.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::family::{Exposition, Labelled, latency_histogram, registry, render, seconds};
use crate::model::outcome::{AttemptRecord, Outcome, RequestRecord};

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
    pub(super) registry: Registry,
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
            "Sessions of open traffic held now: a request in progress, or thinking between \
             two (0 for a closed population)",
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
