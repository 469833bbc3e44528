//! `AIMDLimit`: on a drop or a round trip over the timeout the limit falls
//! to `floor(limit * 0.9)`; otherwise, when at least half of it was in use,
//! it grows by one; always within [20, 200].

use std::time::Duration;

use super::sample::Sample;
use crate::model::units::nanos;

/// The library's defaults.
const INITIAL: u64 = 20;
const MIN: u64 = 20;
const MAX: u64 = 200;
const BACKOFF_RATIO: f64 = 0.9;

#[derive(Debug, Clone)]
pub(super) struct Aimd {
    pub(super) limit: u64,
    timeout_ns: u64,
}

impl Aimd {
    /// The defaults, with `timeout` (5 s by default).
    pub(super) fn new(timeout: Duration) -> Self {
        Aimd {
            limit: INITIAL,
            timeout_ns: nanos(timeout),
        }
    }

    pub(super) fn update(&mut self, s: Sample) {
        let mut limit = self.limit;
        if s.dropped || s.rtt_ns > self.timeout_ns {
            // Java's (int) cast truncates: floor for a positive limit.
            limit = (limit as f64 * BACKOFF_RATIO) as u64;
        } else if s.inflight * 2 >= limit {
            limit += 1;
        }
        self.limit = limit.clamp(MIN, MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::defence::limiter::sample::sample;

    #[test]
    fn grows_by_one_when_half_used_and_falls_by_a_tenth_on_a_drop() {
        let mut a = Aimd::new(Duration::from_secs(5));
        // 10 in flight of 20 is half: 21. Then 10 of 21 is less than
        // half: no change.
        a.update(sample(100, 10, false));
        assert_eq!(a.limit, 21);
        a.update(sample(100, 10, false));
        assert_eq!(a.limit, 21);
        // Grow to 100, then a drop: floor(100 * 0.9) = 90, then 81, 72.
        for _ in 21..100 {
            a.update(sample(100, 100, false));
        }
        assert_eq!(a.limit, 100);
        a.update(sample(100, 100, true));
        assert_eq!(a.limit, 90);
        a.update(sample(100, 1, true));
        assert_eq!(a.limit, 81);
        // A round trip over 5 s counts as a drop; exactly 5 s does not.
        a.update(sample(5001, 1, false));
        assert_eq!(a.limit, 72);
        a.update(sample(5000, 72, false));
        assert_eq!(a.limit, 73);
    }

    #[test]
    fn stays_within_its_bounds() {
        let mut a = Aimd::new(Duration::from_secs(5));
        a.update(sample(1, 1, true));
        assert_eq!(a.limit, 20, "floor(20 * 0.9) = 18, held at the minimum");
        for _ in 0..500 {
            a.update(sample(1, 1000, false));
        }
        assert_eq!(a.limit, 200);
    }

    #[test]
    fn a_shorter_timeout_counts_shorter_round_trips_as_drops() {
        let mut a = Aimd::new(Duration::from_millis(500));
        a.update(sample(501, 20, false));
        assert_eq!(a.limit, 20, "over 0.5 s: a drop");
        a.update(sample(500, 20, false));
        assert_eq!(a.limit, 21);
    }
}
