//! `Gradient2Limit`: the limit follows the ratio of a long-term average
//! round-trip time to the latest one. The long-term average is an
//! exponential moving average over 600 samples (a plain mean over the first
//! ten); when it is over twice the latest sample it is cut by 5 %, to come
//! back quickly after a long overload. While fewer than half the estimate
//! are in flight it stays put (the load, not the server, is the limit).
//! Otherwise `gradient = clamp(1.5 * long / rtt, 0.5, 1)`,
//! `new = estimate * gradient + 4`, and the estimate moves a fifth of the
//! way there, within [20, 200]. The limit is the estimate truncated. The
//! library ignores whether a request was dropped here. A round trip of
//! zero (a request refused at once) is no sample: the library's ratios
//! would divide by it and leave the estimate not a number, its limit 0.

use super::sample::Sample;

const INITIAL: f64 = 20.0;
const MIN: f64 = 20.0;
const MAX: f64 = 200.0;
const SMOOTHING: f64 = 0.2;
const QUEUE_SIZE: f64 = 4.0;
const LONG_WINDOW: f64 = 600.0;
const WARMUP: u32 = 10;
const TOLERANCE: f64 = 1.5;

/// The library's `ExpAvgMeasurement(600, 10)`: a plain mean over the first
/// ten samples, then an exponential moving average with factor 2 / 601.
/// As in the library, the mean is recomputed from its running sum while
/// warming up, so a cut made then is lost at the next sample.
#[derive(Debug, Clone, Default)]
struct LongRtt {
    value: f64,
    sum: f64,
    count: u32,
}

impl LongRtt {
    fn add(&mut self, sample: f64) -> f64 {
        if self.count < WARMUP {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            let factor = 2.0 / (LONG_WINDOW + 1.0);
            self.value = self.value * (1.0 - factor) + sample * factor;
        }
        self.value
    }
}

#[derive(Debug, Clone)]
pub(super) struct Gradient2 {
    estimate: f64,
    long: LongRtt,
}

impl Default for Gradient2 {
    fn default() -> Self {
        Gradient2 {
            estimate: INITIAL,
            long: LongRtt::default(),
        }
    }
}

impl Gradient2 {
    pub(super) fn limit(&self) -> u64 {
        self.estimate as u64
    }

    pub(super) fn update(&mut self, s: Sample) {
        if s.rtt_ns == 0 {
            return;
        }
        let short = s.rtt_ns as f64;
        let long = self.long.add(short);
        if long / short > 2.0 {
            self.long.value *= 0.95;
        }
        if (s.inflight as f64) < self.estimate / 2.0 {
            return;
        }
        let gradient = (TOLERANCE * long / short).clamp(0.5, 1.0);
        let new = self.estimate * gradient + QUEUE_SIZE;
        let new = self.estimate * (1.0 - SMOOTHING) + new * SMOOTHING;
        self.estimate = new.clamp(MIN, MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rtt_ms: u64, inflight: u64) -> Sample {
        Sample {
            rtt_ns: rtt_ms * 1_000_000,
            inflight,
            dropped: false,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn grows_by_the_queue_allowance_while_latency_holds() {
        let mut g = Gradient2::default();
        // long = rtt: gradient 1, new = 20 + 4, estimate 0.8*20 + 0.2*24.
        g.update(sample(100, 20));
        assert!(close(g.estimate, 20.8), "{}", g.estimate);
        assert_eq!(g.limit(), 20);
        g.update(sample(100, 20));
        assert!(close(g.estimate, 21.6), "{}", g.estimate);
        assert_eq!(g.limit(), 21);
    }

    #[test]
    fn slower_answers_pull_the_estimate_down() {
        let mut g = Gradient2::default();
        g.update(sample(100, 20));
        g.update(sample(100, 20));
        // long = mean(100, 100, 300) = 166.7 ms; gradient = 1.5 * 166.7 /
        // 300 = 5/6; new = 21.6 * 5/6 + 4 = 22; estimate = 0.8 * 21.6 +
        // 0.2 * 22 = 21.68.
        g.update(sample(300, 20));
        assert!(close(g.estimate, 21.68), "{}", g.estimate);
        // Far slower: the gradient is held at 0.5. long = mean(100, 100,
        // 300, 10000) = 2625; new = 21.68 * 0.5 + 4 = 14.84; estimate =
        // 0.8 * 21.68 + 0.2 * 14.84 = 20.312.
        g.update(sample(10_000, 20));
        assert!(close(g.estimate, 20.312), "{}", g.estimate);
        // Then the floor of 20 (new = 0.9 * 20.312 + 0.8 = 19.08, and
        // lower still while the long average lags far behind).
        for _ in 0..3 {
            g.update(sample(100_000, 20));
        }
        assert!(close(g.estimate, 20.0), "{}", g.estimate);
    }

    #[test]
    fn a_zero_round_trip_is_no_sample() {
        let mut g = Gradient2::default();
        g.update(sample(0, 20));
        assert!(close(g.estimate, 20.0) && g.long.count == 0);
        g.update(sample(100, 20));
        assert!(close(g.estimate, 20.8), "{}", g.estimate);
    }

    #[test]
    fn an_idle_server_keeps_its_estimate() {
        let mut g = Gradient2::default();
        g.update(sample(100, 9));
        assert!(close(g.estimate, 20.0), "9 < 20 / 2: app-limited");
        g.update(sample(100, 10));
        assert!(close(g.estimate, 20.8), "10 of 20 is half: it grows");
    }

    #[test]
    fn the_long_average_is_a_mean_then_an_ema_and_is_cut_after_an_overload() {
        let mut long = LongRtt::default();
        for i in 1..=10 {
            long.add(f64::from(i));
        }
        assert!(close(long.value, 5.5), "mean of 1..10");
        let ema = long.add(607.5);
        assert!(close(ema, 5.5 + (607.5 - 5.5) * 2.0 / 601.0), "{ema}");
        // After warm-up a fast sample under half the average cuts it by 5 %.
        let mut g = Gradient2::default();
        for _ in 0..10 {
            g.update(sample(1000, 1));
        }
        g.update(sample(100, 1));
        let expected = (1000.0 + (100.0 - 1000.0) * 2.0 / 601.0) * 0.95 * 1e6;
        assert!((g.long.value - expected).abs() < 1e-3, "{}", g.long.value);
    }
}
