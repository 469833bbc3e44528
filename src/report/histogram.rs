//! Latency histograms (HDR, microseconds, three significant figures) and
//! the percentiles read from them.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::model::units::micros;

/// Largest latency a histogram records exactly (one hour); longer ones are
/// recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

thread_local! {
    /// An empty latency histogram to copy: building one writes its some
    /// 23,000 buckets one by one, where a copy is one `memcpy` (a sweep
    /// builds three for each of its thousands of short runs).
    static EMPTY: Histogram<u64> =
        Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid");
}

/// A latency histogram in microseconds, three significant figures.
pub fn latency_histogram() -> Histogram<u64> {
    EMPTY.with(Histogram::clone)
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

/// A lateness in microseconds as a histogram records it: like a latency,
/// but on time (zero) counts too.
pub(crate) fn lateness_us(d: Duration) -> u64 {
    micros(d).min(MAX_LATENCY_US)
}

/// A latency in microseconds as a histogram records it, saturating at its
/// range.
pub(crate) fn latency_us(d: Duration) -> u64 {
    micros(d).clamp(1, MAX_LATENCY_US)
}

/// Records latencies already in microseconds (as [`latency_us`] and
/// [`lateness_us`] give them) into `h`, each run of equal values at once
/// (in virtual time every attempt starts on time: an interval's
/// latenesses are one run of zeros).
pub(crate) fn record_all(h: &mut Histogram<u64>, values: &[u64]) {
    for run in values.chunk_by(|a, b| a == b) {
        h.saturating_record_n(run[0], run.len() as u64);
    }
}

/// Records `d` into a microsecond histogram, saturating at its range.
pub fn record_latency(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(latency_us(d));
}

/// Latency percentiles in milliseconds, `None` when nothing was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
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

impl Percentiles {
    /// The percentiles [`Percentiles::of`] reads from a histogram like
    /// `like` (same bounds and precision) holding exactly `values`, read
    /// from the values themselves: the value at a quantile is the highest
    /// equivalent of the sample of that rank, as the histogram's scan of
    /// its buckets finds it. Sorts `values`. An interval holds a few
    /// thousand samples at most, where a histogram has some 20,000
    /// buckets to clear, merge and scan.
    pub fn of_values(values: &mut [u64], like: &Histogram<u64>) -> Self {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_unstable();
        let total = values.len() as u64;
        let at = |quantile: f64| {
            // As `Histogram::value_at_quantile` counts: at least the first.
            let rank = ((quantile * total as f64).ceil() as u64).clamp(1, total);
            like.highest_equivalent(values[rank as usize - 1])
        };
        let ms = |us: u64| Some(us as f64 / 1000.0);
        Percentiles {
            p50_ms: ms(at(0.5)),
            p99_ms: ms(at(0.99)),
            max_ms: ms(like.highest_equivalent(values[values.len() - 1])),
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
    fn percentiles_of_values_are_those_of_their_histogram() {
        use rand::{RngExt, SeedableRng, rngs::Xoshiro256PlusPlus};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for n in [0, 1, 2, 3, 99, 100, 101, 1000, 4321] {
            let mut h = latency_histogram();
            let mut values: Vec<u64> = (0..n)
                .map(|i| match i % 3 {
                    0 => rng.random_range(1..3_000),
                    1 => rng.random_range(90_000..2_100_000),
                    _ => latency_us(Duration::from_micros(rng.random_range(0..u64::MAX / 2))),
                })
                .collect();
            for &v in &values {
                h.saturating_record(v);
            }
            assert_eq!(
                Percentiles::of_values(&mut values, &latency_histogram()),
                Percentiles::of(&h),
                "{n} values"
            );
        }
    }

    #[test]
    fn recording_runs_at_once_records_each_value() {
        let values = [0, 0, 0, 7, 7, 0, 1_000, 1_001, 1_001, MAX_LATENCY_US, 0];
        let mut one_by_one = latency_histogram();
        values.iter().for_each(|&v| one_by_one.saturating_record(v));
        let mut h = latency_histogram();
        record_all(&mut h, &values);
        assert_eq!(h.len(), 11);
        assert_eq!(h.count_at(0), 5);
        assert_eq!(h.count_at(1_001), 2);
        assert_eq!(h, one_by_one);
    }

    #[test]
    fn huge_latencies_saturate() {
        let mut h = latency_histogram();
        record_latency(&mut h, Duration::from_secs(100_000));
        record_latency(&mut h, Duration::ZERO);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= MAX_LATENCY_US);
    }
}
