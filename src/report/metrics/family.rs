//! What the client's and the server's metrics share: the exposition they
//! serve, their histograms' buckets, their families with one label, and
//! the `tier` label of a tier's process.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

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

/// An empty registry of metrics named `prefix`, each of whose series
/// carries the label `tier="NAME"` when a tier's name is given.
pub(super) fn registry(prefix: &'static str, tier: Option<&str>) -> Registry {
    match tier {
        None => Registry::with_prefix(prefix),
        Some(name) => Registry::with_prefix_and_labels(
            prefix,
            std::iter::once((Cow::Borrowed(TIER_LABEL), Cow::Owned(name.to_string()))),
        ),
    }
}

/// A registry's exposition.
pub(super) fn render(registry: &Registry) -> String {
    let mut text = String::with_capacity(8 * 1024);
    encode(&mut text, registry).expect("writing to a String does not fail");
    text
}

/// One metric family with one label and a fixed set of its values, each
/// with its own metric: every series exists from the start (at zero, so
/// that `rate()` sees the first event) and is written in a fixed order.
#[derive(Debug, Clone)]
pub(super) struct Labelled<M> {
    key: &'static str,
    series: Vec<(&'static str, M)>,
}

impl<M: Default> Labelled<M> {
    pub(super) fn new(key: &'static str, values: &[&'static str]) -> Self {
        Labelled::with(key, values, M::default)
    }
}

impl<M> Labelled<M> {
    pub(super) fn with(key: &'static str, values: &[&'static str], make: impl Fn() -> M) -> Self {
        Labelled {
            key,
            series: values.iter().map(|&v| (v, make())).collect(),
        }
    }

    /// The metric of the `at`th value.
    pub(super) fn at(&self, at: usize) -> &M {
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

pub(super) fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

pub(super) fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}
