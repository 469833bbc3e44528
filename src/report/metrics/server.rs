//! A server's metrics, and a tier's: its own server metrics beside its
//! calls' client metrics, every series labelled with the tier's name.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::client::ClientMetrics;
use super::family::{Exposition, Labelled, latency_histogram, registry, render, seconds};
use crate::model::server::{ServerConfig, Shape};
use crate::model::service::{Exit, Fate, Gauges, Refusal};
use crate::model::units::nanos;

/// The values of `reason` on the server's dropped requests, in the order
/// of [`Refusal`] after shedding (which has its own counter), a failing
/// backend's failures last.
pub const DROP_REASONS: [&str; 5] = [
    "queue_full",
    "limiter",
    "admission_control",
    "queue_timeout",
    "failed",
];

/// The values of `outcome` on the server's time in the model, in the
/// order of [`Fate`].
pub const MODEL_OUTCOMES: [&str; 3] = ["completed", "abandoned", "dropped"];

/// A server's metrics, counted by its model as requests come and go.
#[derive(Debug)]
pub struct ServerMetrics {
    registry: Registry,
    admitted: Counter,
    completed: Counter,
    abandoned: Counter,
    shed: Counter,
    dropped: Labelled<Counter>,
    time_in_model: Labelled<Histogram>,
    concurrency: Gauge,
    /// The concurrency integrated over time, in request-seconds.
    concurrency_seconds: Counter<f64, AtomicU64>,
    /// When the concurrency was last set, in nanoseconds of the server's
    /// clock.
    changed_at: AtomicU64,
    queue: Gauge,
    busy: Gauge,
    limit: Gauge,
    delay: Gauge<f64, AtomicU64>,
}

impl ServerMetrics {
    /// Every metric of a server of `config`, at zero: a pool's busy
    /// workers and the limiter's limit only where there are such things.
    pub fn new(config: &ServerConfig) -> Self {
        ServerMetrics::labelled(config, None)
    }

    /// [`ServerMetrics::new`] with every series labelled `tier`'s name, if
    /// given ([`TIER_LABEL`](super::TIER_LABEL)).
    pub fn labelled(config: &ServerConfig, tier: Option<&str>) -> Self {
        let mut m = ServerMetrics {
            registry: registry("retry_storm_server", tier),
            admitted: Counter::default(),
            completed: Counter::default(),
            abandoned: Counter::default(),
            shed: Counter::default(),
            dropped: Labelled::new("reason", &DROP_REASONS),
            time_in_model: Labelled::with("outcome", &MODEL_OUTCOMES, latency_histogram),
            concurrency: Gauge::default(),
            concurrency_seconds: Counter::default(),
            changed_at: AtomicU64::new(0),
            queue: Gauge::default(),
            busy: Gauge::default(),
            limit: Gauge::default(),
            delay: Gauge::default(),
        };
        m.registry.register(
            "admitted",
            "Requests admitted into the model",
            m.admitted.clone(),
        );
        m.registry.register(
            "completed",
            "Requests answered to a waiting client",
            m.completed.clone(),
        );
        m.registry.register(
            "abandoned",
            "Requests whose client had gone before the answer: completed for nobody, or \
             dropped when the server noticed (wasted work)",
            m.abandoned.clone(),
        );
        m.registry.register(
            "shed",
            "Requests refused at once over the shedding threshold (--shed-above)",
            m.shed.clone(),
        );
        m.registry.register(
            "dropped",
            "Requests turned away by a defence, by reason: queue_full (a pool's queue), \
             limiter (the concurrency limiter), admission_control, queue_timeout (dropped \
             from the queue); or failed (a failing backend's error, --fail-rate)",
            m.dropped.clone(),
        );
        m.registry.register(
            "concurrency",
            "Requests in the model now (for a pool: in service and waiting)",
            m.concurrency.clone(),
        );
        m.registry.register(
            "concurrency_seconds",
            "Requests in the model integrated over time, in request-seconds: its rate() is \
             the mean concurrency over the window, bursts between scrapes included",
            m.concurrency_seconds.clone(),
        );
        m.registry.register(
            "queue_length",
            "Requests waiting in a pool's queue now (0 for a delay curve)",
            m.queue.clone(),
        );
        if let Shape::Pool(_) = config.shape {
            m.registry
                .register("busy_workers", "A pool's busy workers now", m.busy.clone());
        }
        if config.limiter.is_some() {
            m.registry.register(
                "concurrency_limit",
                "The concurrency limiter's limit now",
                m.limit.clone(),
            );
        }
        m.registry.register_with_unit(
            "modelled_delay",
            "The delay now: the curve's at the current concurrency, or the time in the pool \
             of the last request served",
            Unit::Seconds,
            m.delay.clone(),
        );
        m.registry.register_with_unit(
            "time_in_model",
            "Time requests spent in the model, from admission to leaving it, by outcome: \
             completed, abandoned, dropped (by the queue timeout)",
            Unit::Seconds,
            m.time_in_model.clone(),
        );
        m
    }

    /// A request was admitted.
    pub fn admitted(&self) {
        self.admitted.inc();
    }

    /// A request was refused at the door, or dropped from the queue.
    pub fn refused(&self, why: Refusal) {
        let reason = match why {
            Refusal::Shed => {
                self.shed.inc();
                return;
            }
            Refusal::Full => 0,
            Refusal::Limited => 1,
            Refusal::Rejected => 2,
            Refusal::Expired => 3,
            Refusal::Failed => 4,
            // The kernel's, unseen by the server (as in the counts).
            Refusal::Unaccepted => return,
        };
        self.dropped.at(reason).inc();
    }

    /// A request left the model after `held` in it, its answer received by
    /// a waiting client or not (as `ServerCounts::departed` counts it).
    pub fn departed(&self, exit: Exit, received: bool, held: Duration) {
        let at = match exit.fate(received) {
            Fate::Completed => {
                self.completed.inc();
                0
            }
            Fate::Abandoned => {
                self.abandoned.inc();
                1
            }
            Fate::Dropped => {
                self.refused(Refusal::Expired);
                2
            }
        };
        self.time_in_model.at(at).observe(seconds(held));
    }

    /// The state at `now` (on the server's clock, from its start):
    /// requests in the model, the modelled delay, a pool's queue and
    /// workers and the limiter's limit. The concurrency counts into its
    /// integral as it was since the last call.
    pub fn state(&self, now: Duration, concurrency: u64, delay: Duration, gauges: Gauges) {
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let now_ns = nanos(now);
        let since = now_ns.saturating_sub(self.changed_at.swap(now_ns, Ordering::Relaxed));
        let held = self.concurrency.get() as f64 * since as f64 / 1e9;
        if held > 0.0 {
            self.concurrency_seconds.inc_by(held);
        }
        self.concurrency.set(int(concurrency));
        self.queue.set(int(gauges.queue));
        self.busy.set(int(gauges.busy));
        self.limit.set(int(gauges.limit.unwrap_or(0)));
        self.delay.set(seconds(delay));
    }
}

impl Exposition for ServerMetrics {
    fn render(&self) -> String {
        render(&self.registry)
    }
}

/// What a server's metrics endpoint serves: its metrics, and, as a tier
/// of a chain, its calls' client metrics beside them (the
/// `retry_storm_client_*` families, fed by the recorder of its calls
/// inward), every series of both labelled with the tier's name.
#[derive(Debug)]
pub struct ServerExposition {
    /// The server's own metrics.
    pub server: Arc<ServerMetrics>,
    /// A tier's calls' metrics.
    pub calls: Option<Arc<ClientMetrics>>,
}

impl ServerExposition {
    /// The metrics of a server of `config` that calls nothing, at zero,
    /// without a `tier` label: exactly [`ServerMetrics::new`]'s.
    pub fn plain(config: &ServerConfig) -> Self {
        ServerExposition {
            server: Arc::new(ServerMetrics::new(config)),
            calls: None,
        }
    }

    /// The metrics of a tier named `name` whose server is `config`, at
    /// zero: its server's and its calls', labelled `tier="NAME"`.
    pub fn tier(config: &ServerConfig, name: &str) -> Self {
        ServerExposition {
            server: Arc::new(ServerMetrics::labelled(config, Some(name))),
            calls: Some(Arc::new(ClientMetrics::of_tier_calls(name))),
        }
    }
}

impl Exposition for ServerExposition {
    fn render(&self) -> String {
        let mut text = String::with_capacity(16 * 1024);
        let mut written = encode_registry(&mut text, &self.server.registry);
        if let Some(calls) = &self.calls {
            written = written.and_then(|()| encode_registry(&mut text, &calls.registry));
        }
        written
            .and_then(|()| encode_eof(&mut text))
            .expect("writing to a String does not fail");
        text
    }
}
