//! Latency histograms (HDR, microseconds, three significant figures) and
//! the percentiles read from them.

use std::fmt;
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

/// Adds `from`'s counts to `into`, visiting only the values `from` holds
/// (`Histogram::add` walks every bucket of the range, about 20,000, which
/// dominated short virtual-time runs). Each value lands in the bucket it
/// came from.
pub fn add_recorded(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    for v in from.iter_recorded() {
        into.saturating_record_n(v.value_iterated_to(), v.count_at_value());
    }
}

/// Records a lateness: like a latency, but on time (zero) counts too.
pub(crate) fn record_lateness(h: &mut Histogram<u64>, d: Duration) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_latencies_saturate() {
        let mut h = latency_histogram();
        record_latency(&mut h, Duration::from_secs(100_000));
        record_latency(&mut h, Duration::ZERO);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= MAX_LATENCY_US);
    }
}
