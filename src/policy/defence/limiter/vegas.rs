//! `VegasLimit`, the library's default: TCP Vegas' estimate of the queue,
//! `queue = ceil(limit * (1 - rtt_noload / rtt))`, against thresholds that
//! grow with the integer log10 of the limit, L (at least 1): at most L,
//! grow by 6L; under 3L, grow by L; over 6L, shrink by L; a drop shrinks by
//! L too. `rtt_noload` is the least round trip seen, re-probed (taken from
//! the next sample) after a random 15 to 30 times the limit in samples.
//! While fewer than half the limit are in flight it stays put. Limits
//! within [1, 1000], no smoothing. The library refuses a round trip of
//! zero (it throws), so such a sample changes nothing here.

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

use super::sample::Sample;

const INITIAL: f64 = 20.0;
const MAX: f64 = 1000.0;
const PROBE_MULTIPLIER: f64 = 30.0;

/// The library's `Log10RootIntFunction`: the integer log10, at least 1.
fn log10(x: u64) -> u64 {
    u64::from(x.checked_ilog10().unwrap_or(0).max(1))
}

#[derive(Debug, Clone)]
pub(super) struct Vegas {
    estimate: f64,
    rtt_noload: u64,
    probe_count: u64,
    probe_jitter: f64,
    rng: Xoshiro256PlusPlus,
}

impl Vegas {
    pub(super) fn new(mut rng: Xoshiro256PlusPlus) -> Self {
        let probe_jitter = rng.random_range(0.5..1.0);
        Vegas {
            estimate: INITIAL,
            rtt_noload: 0,
            probe_count: 0,
            probe_jitter,
            rng,
        }
    }

    pub(super) fn limit(&self) -> u64 {
        self.estimate as u64
    }

    pub(super) fn update(&mut self, s: Sample) {
        if s.rtt_ns == 0 {
            return;
        }
        self.probe_count += 1;
        if self.probe_jitter * PROBE_MULTIPLIER * self.estimate <= self.probe_count as f64 {
            self.probe_jitter = self.rng.random_range(0.5..1.0);
            self.probe_count = 0;
            self.rtt_noload = s.rtt_ns;
            return;
        }
        if self.rtt_noload == 0 || s.rtt_ns < self.rtt_noload {
            self.rtt_noload = s.rtt_ns;
            return;
        }
        let estimate = self.estimate;
        let queue = (estimate * (1.0 - self.rtt_noload as f64 / s.rtt_ns as f64)).ceil();
        let l = log10(estimate as u64) as f64;
        let new = if s.dropped {
            estimate - l
        } else if ((s.inflight * 2) as f64) < estimate {
            return;
        } else if queue <= l {
            estimate + 6.0 * l
        } else if queue < 3.0 * l {
            estimate + l
        } else if queue > 6.0 * l {
            estimate - l
        } else {
            return;
        };
        self.estimate = new.clamp(1.0, MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::defence::limiter::sample::sample;
    use rand::SeedableRng;

    fn vegas() -> Vegas {
        Vegas::new(Xoshiro256PlusPlus::seed_from_u64(1))
    }

    #[test]
    fn integer_log10_is_at_least_one() {
        for (x, l) in [(0, 1), (1, 1), (9, 1), (20, 1), (99, 1), (100, 2), (999, 2)] {
            assert_eq!(log10(x), l, "{x}");
        }
        assert_eq!(log10(1000), 3);
        assert_eq!(log10(12_345), 4);
    }

    #[test]
    fn follows_the_queue_estimate() {
        let mut v = vegas();
        // The first sample sets the no-load round trip.
        v.update(sample(100, 20, false));
        assert_eq!((v.rtt_noload, v.limit()), (100_000_000, 20));
        // No queue (0 <= L = 1): grow by 6L to 26.
        v.update(sample(100, 20, false));
        assert_eq!(v.limit(), 26);
        // Twice the no-load time: queue = ceil(26 * 0.5) = 13 > 6: 25.
        v.update(sample(200, 20, false));
        assert_eq!(v.limit(), 25);
        // queue = ceil(25 * (1 - 100/110)) = 3: between 3L and 6L, hold.
        v.update(sample(110, 20, false));
        assert_eq!(v.limit(), 25);
        // queue = ceil(25 * (1 - 100/105)) = 2: under 3L, grow by L.
        v.update(sample(105, 20, false));
        assert_eq!(v.limit(), 26);
        // A drop shrinks by L whatever the round trip.
        v.update(sample(100, 1, true));
        assert_eq!(v.limit(), 25);
        // App-limited: 12 * 2 < 25, no change.
        v.update(sample(500, 12, false));
        assert_eq!(v.limit(), 25);
        // A faster sample only lowers the no-load time.
        v.update(sample(50, 20, false));
        assert_eq!((v.rtt_noload, v.limit()), (50_000_000, 25));
        // A zero round trip is refused, as the library throws.
        let before = v.probe_count;
        v.update(sample(0, 20, true));
        assert_eq!((v.probe_count, v.limit()), (before, 25));
    }

    #[test]
    fn probes_the_no_load_time_after_15_to_30_limits_of_samples() {
        let mut v = vegas();
        v.update(sample(100, 1, false));
        // App-limited samples at 500 ms leave the limit at 20 until the
        // probe takes 500 ms as the new no-load time.
        let mut n = 1;
        while v.rtt_noload == 100_000_000 {
            v.update(sample(500, 1, false));
            n += 1;
            assert!(n <= 600, "a probe within 30 * 20 samples");
        }
        assert!(n >= 300, "no probe before 15 * 20 samples: {n}");
        assert_eq!(v.rtt_noload, 500_000_000);
        assert_eq!(v.probe_count, 0);
    }
}
