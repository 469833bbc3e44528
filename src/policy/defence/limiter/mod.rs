//! Adaptive concurrency limits, as Netflix's concurrency-limits library
//! computes them: a server admits a request while fewer than `limit` are
//! in flight and refuses it (503) otherwise; each admitted request, when it
//! leaves, gives the algorithm a sample of its round-trip time, the
//! in-flight count at its admission (itself included) and whether it was
//! dropped, and the algorithm moves the limit.
//!
//! The bookkeeping follows the library's `SimpleLimiter` and
//! `AbstractLimiter`: a success or a drop is a sample; a request that is
//! ignored (its client went away and it was never served) only releases
//! its place.

mod aimd;
mod gradient2;
mod sample;
mod vegas;

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::model::timescale::compress;
use crate::model::units::nanos;
use aimd::Aimd;
use gradient2::Gradient2;
use sample::Sample;
use vegas::Vegas;

/// Which of the library's limit algorithms, each with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimiterKind {
    /// Additive increase, multiplicative decrease (`AIMDLimit`).
    Aimd,
    /// The gradient of a long-term against the latest round-trip time
    /// (`Gradient2Limit`).
    Gradient2,
    /// TCP Vegas' queue estimate (`VegasLimit`, the library's default).
    Vegas,
}

impl LimiterKind {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LimiterKind::Aimd => "aimd",
            LimiterKind::Gradient2 => "gradient2",
            LimiterKind::Vegas => "vegas",
        }
    }
}

/// A limiter as configured: its algorithm, and AIMD's timeout (a round
/// trip longer than it counts as a drop; 5 s, compressed with time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimiterConfig {
    /// The algorithm.
    pub kind: LimiterKind,
    /// AIMD's timeout.
    pub timeout: Duration,
}

impl LimiterConfig {
    /// `kind` with the library's defaults.
    pub fn new(kind: LimiterKind) -> Self {
        LimiterConfig {
            kind,
            timeout: Duration::from_secs(5),
        }
    }

    /// The same limiter with time compressed `k` times.
    pub fn scaled(self, k: f64) -> LimiterConfig {
        LimiterConfig {
            timeout: compress(self.timeout, k),
            ..self
        }
    }
}

#[derive(Debug, Clone)]
enum Algorithm {
    Aimd(Aimd),
    Gradient2(Gradient2),
    Vegas(Vegas),
}

/// An adaptive concurrency limiter: the limit, the requests it has let in,
/// and the algorithm that moves the limit.
#[derive(Debug, Clone)]
pub struct Limiter {
    kind: LimiterKind,
    algorithm: Algorithm,
    inflight: u64,
}

impl Limiter {
    /// A limiter as `config` says, drawing (Vegas' probe jitter) from a
    /// generator seeded with `seed`.
    pub fn new(config: LimiterConfig, seed: u64) -> Self {
        let kind = config.kind;
        let algorithm = match kind {
            LimiterKind::Aimd => Algorithm::Aimd(Aimd::new(config.timeout)),
            LimiterKind::Gradient2 => Algorithm::Gradient2(Gradient2::default()),
            LimiterKind::Vegas => {
                Algorithm::Vegas(Vegas::new(Xoshiro256PlusPlus::seed_from_u64(seed)))
            }
        };
        Limiter {
            kind,
            algorithm,
            inflight: 0,
        }
    }

    /// Which algorithm this is.
    pub fn kind(&self) -> LimiterKind {
        self.kind
    }

    /// The current limit.
    pub fn limit(&self) -> u64 {
        match &self.algorithm {
            Algorithm::Aimd(a) => a.limit,
            Algorithm::Gradient2(g) => g.limit(),
            Algorithm::Vegas(v) => v.limit(),
        }
    }

    /// Requests let in and not yet gone.
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// Lets a request in if fewer than the limit are in flight, returning
    /// the in-flight count with it (its sample's `inflight`); `None` means
    /// refuse it.
    pub fn try_acquire(&mut self) -> Option<u64> {
        if self.inflight >= self.limit() {
            return None;
        }
        self.inflight += 1;
        Some(self.inflight)
    }

    /// A request let in with `inflight` was served after `rtt`.
    pub fn on_success(&mut self, rtt: Duration, inflight: u64) {
        self.release();
        self.sample(rtt, inflight, false);
    }

    /// A request let in with `inflight` was dropped after `rtt`.
    pub fn on_dropped(&mut self, rtt: Duration, inflight: u64) {
        self.release();
        self.sample(rtt, inflight, true);
    }

    /// A request left without a sample (its client went away unserved).
    pub fn on_ignore(&mut self) {
        self.release();
    }

    fn release(&mut self) {
        self.inflight = self.inflight.saturating_sub(1);
    }

    fn sample(&mut self, rtt: Duration, inflight: u64, dropped: bool) {
        let sample = Sample {
            rtt_ns: nanos(rtt),
            inflight,
            dropped,
        };
        match &mut self.algorithm {
            Algorithm::Aimd(a) => a.update(sample),
            Algorithm::Gradient2(g) => g.update(sample),
            Algorithm::Vegas(v) => v.update(sample),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_at_the_limit_and_lets_in_again_when_one_leaves() {
        let mut l = Limiter::new(LimiterConfig::new(LimiterKind::Aimd), 0);
        assert_eq!(l.limit(), 20);
        for i in 1..=20 {
            assert_eq!(l.try_acquire(), Some(i));
        }
        assert_eq!(l.try_acquire(), None, "the 21st is refused");
        l.on_ignore();
        assert_eq!(l.inflight(), 19);
        assert_eq!(l.limit(), 20, "an ignored request is no sample");
        assert_eq!(l.try_acquire(), Some(20));
        // A success at 20 in flight grows the limit by one.
        l.on_success(Duration::from_millis(100), 20);
        assert_eq!((l.inflight(), l.limit()), (19, 21));
    }
}
