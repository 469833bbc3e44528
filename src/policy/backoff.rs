//! Delay schedules between the attempts of one logical request.

use std::time::Duration;

use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

pub use super::failure::Failure;
use super::shipped::ShippedBackoff;
use crate::model::timescale::compress;

/// The original client's growth factor (Euler's number).
const E_2014: f64 = std::f64::consts::E;

/// A delay schedule: which sleep precedes each retry. `n` below is the
/// retry number, 1 for the first retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// The same delay before every retry.
    Fixed {
        /// The delay.
        delay: Duration,
    },
    /// The textbook exponential backoff of the original article: the n-th
    /// retry waits `b_n = min(min * factor^(n-1), max)` plus normal jitter
    /// with standard deviation `jitter * b_n`, clamped at zero. With
    /// `jitter` 0 it is the geometric schedule `min * factor^(n-1)`.
    Exponential {
        /// First delay.
        min: Duration,
        /// Cap on the delay before jitter.
        max: Duration,
        /// Growth factor per retry.
        factor: f64,
        /// Jitter as a fraction of the delay (standard deviation).
        jitter: f64,
    },
    /// The 2014 original client, exactly: each retry waits `e` times the
    /// sleep that preceded the failed attempt (for the first retry, the think
    /// time), capped at `cap`, plus normal jitter with standard deviation
    /// `jitter`, clamped at zero. The original's constants, 5 minutes and
    /// 0.1 s, are [`Strategy::exponential_2014`]; other values serve only
    /// time-compressed runs.
    Exponential2014 {
        /// Cap on a sleep before jitter (the original: 5 minutes).
        cap: Duration,
        /// Standard deviation of the jitter (the original: 0.1 s).
        jitter: Duration,
    },
    /// "Full jitter": `U(0, min(cap, base * factor^n))`.
    FullJitter {
        /// Base delay.
        base: Duration,
        /// Cap.
        cap: Duration,
        /// Growth factor per retry (2 in the usual formula).
        factor: f64,
    },
    /// "Equal jitter": `v/2 + U(0, v/2)` with `v = min(cap, base * factor^n)`.
    EqualJitter {
        /// Base delay.
        base: Duration,
        /// Cap.
        cap: Duration,
        /// Growth factor per retry (2 in the usual formula).
        factor: f64,
    },
    /// "Decorrelated jitter": `min(cap, U(base, factor * prev))`, where prev
    /// is the previous sleep (`base` before the first retry).
    DecorrelatedJitter {
        /// Base delay, also the smallest sleep.
        base: Duration,
        /// Cap.
        cap: Duration,
        /// Spread of the next sleep over the previous one (3 in the usual
        /// formula).
        factor: f64,
    },
    /// Truncated binary exponential backoff (Ethernet; Akka's backoff
    /// supervisor): `slot * (2^k - 1)` with `k` uniform in `0..=c`, where the
    /// collision count `c` grows by one per failure up to `ceiling`; at the
    /// ceiling it either stays or starts again at 1.
    TruncatedBinary {
        /// Slot time.
        slot: Duration,
        /// Largest collision count.
        ceiling: u32,
        /// At the ceiling, stay there (true) or start again at 1 (false).
        stay_at_ceiling: bool,
    },
    /// Google Cloud's documented algorithm: `min(first * factor^(n-1) +
    /// U(0, 1000 ms), max)`: with the defaults 1 s, 2, 32 s that is Google's
    /// "1, 2, 4, ... seconds plus up to 1000 ms, at most 32 s".
    Google {
        /// First delay (Google: 1 s).
        first: Duration,
        /// Growth factor (Google: 2).
        factor: f64,
        /// Maximum backoff (Google: 32 or 64 s).
        max: Duration,
        /// Upper bound of the random addition (Google: 1000 ms).
        random: Duration,
    },
    /// The backoff of a client that ships its own
    /// ([`crate::policy::shipped`]).
    Shipped(ShippedBackoff),
}

impl Strategy {
    /// The 2014 original client with its constants: 5-minute cap, 0.1 s of
    /// jitter.
    pub fn exponential_2014() -> Strategy {
        Strategy::Exponential2014 {
            cap: Duration::from_secs(300),
            jitter: Duration::from_millis(100),
        }
    }

    /// The same strategy with every duration divided by `k`, for an
    /// experiment compressed in time (factors are unchanged).
    pub fn scaled(&self, k: f64) -> Strategy {
        let s = |d: Duration| compress(d, k);
        match *self {
            Strategy::Fixed { delay } => Strategy::Fixed { delay: s(delay) },
            Strategy::Exponential {
                min,
                max,
                factor,
                jitter,
            } => Strategy::Exponential {
                min: s(min),
                max: s(max),
                factor,
                jitter,
            },
            Strategy::Exponential2014 { cap, jitter } => Strategy::Exponential2014 {
                cap: s(cap),
                jitter: s(jitter),
            },
            Strategy::FullJitter { base, cap, factor } => Strategy::FullJitter {
                base: s(base),
                cap: s(cap),
                factor,
            },
            Strategy::EqualJitter { base, cap, factor } => Strategy::EqualJitter {
                base: s(base),
                cap: s(cap),
                factor,
            },
            Strategy::DecorrelatedJitter { base, cap, factor } => Strategy::DecorrelatedJitter {
                base: s(base),
                cap: s(cap),
                factor,
            },
            Strategy::TruncatedBinary {
                slot,
                ceiling,
                stay_at_ceiling,
            } => Strategy::TruncatedBinary {
                slot: s(slot),
                ceiling,
                stay_at_ceiling,
            },
            Strategy::Google {
                first,
                factor,
                max,
                random,
            } => Strategy::Google {
                first: s(first),
                factor,
                max: s(max),
                random: s(random),
            },
            Strategy::Shipped(b) => Strategy::Shipped(b.scaled(k)),
        }
    }

    /// Whether a client with this strategy obeys gRPC's pushback header
    /// (only gRPC's).
    pub fn honours_pushback(&self) -> bool {
        matches!(self, Strategy::Shipped(ShippedBackoff::Grpc { .. }))
    }

    /// Whether a client with this strategy retries `failure` at all: all
    /// do, but the AWS SDKs up to botocore 1.43 do not retry a 429 without
    /// an AWS throttling error code, and gRPC retries only its retryable
    /// codes ([`crate::policy::shipped::grpc_retryable`]).
    pub fn retries(&self, failure: &Failure) -> bool {
        match self {
            Strategy::Shipped(ShippedBackoff::Aws { variant_2026, .. }) => {
                crate::policy::shipped::aws_retries(*variant_2026, failure)
            }
            Strategy::Shipped(ShippedBackoff::Grpc { retryable, .. }) => {
                crate::policy::shipped::grpc_retryable(failure.status, failure.grpc, *retryable)
            }
            _ => true,
        }
    }

    /// Whether the throttle decides on a retry when its backoff ends
    /// rather than at the failure (grpc-js).
    pub fn throttle_decides_after_backoff(&self) -> bool {
        matches!(
            self,
            Strategy::Shipped(ShippedBackoff::Grpc { implementation, .. })
                if implementation.decides_after_backoff()
        )
    }

    /// Whether gRPC's retry throttling takes a token for `failure` from a
    /// client with this strategy: gRPC counts only the failures its policy
    /// retries (a status it does not retry takes no token, in every
    /// implementation); the others count every failure.
    pub fn grpc_counts(&self, failure: &Failure) -> bool {
        match self {
            Strategy::Shipped(ShippedBackoff::Grpc { .. }) => self.retries(failure),
            _ => true,
        }
    }

    /// Whether a client with this strategy takes `failure` for throttling
    /// (what its throttle is told): a 429, or as the AWS SDKs see it (an
    /// AWS throttling code; from botocore 1.44 a bare 429 too).
    pub fn throttling(&self, failure: &Failure) -> bool {
        match self {
            Strategy::Shipped(ShippedBackoff::Aws { variant_2026, .. }) => {
                crate::policy::shipped::aws_throttling(*variant_2026, failure)
            }
            _ => failure.throttled,
        }
    }

    /// True when the schedule involves no random draw (so a single run of
    /// it is the whole story).
    pub fn is_deterministic(&self) -> bool {
        match self {
            Strategy::Fixed { .. } => true,
            Strategy::Exponential { jitter, .. } => *jitter == 0.0,
            _ => false,
        }
    }
}

/// Converts seconds to a [`Duration`], clamping negatives to zero and
/// saturating instead of panicking on overflow or NaN.
fn secs(s: f64) -> Duration {
    if s.is_nan() || s <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)
    }
}

/// `min(cap, base * factor^n)`, saturating.
fn capped_growth(base: Duration, factor: f64, n: u32, cap: Duration) -> Duration {
    let n = i32::try_from(n).unwrap_or(i32::MAX);
    secs(base.as_secs_f64() * factor.powi(n)).min(cap)
}

/// A uniform draw in `[lo, hi)` seconds (`lo` when the range is empty).
fn uniform<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    if hi > lo {
        lo + (hi - lo) * rng.random::<f64>()
    } else {
        lo
    }
}

/// The backoff state of one logical request: how many retries so far and
/// what the previous sleeps were. A success ends it; the next logical request
/// starts a new one.
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    retries: u32,
    /// The sleep that preceded the latest attempt (the think time before the
    /// first attempt).
    last_sleep: Duration,
    /// `b_n` of the exponential schedule, before jitter.
    base: Option<Duration>,
    /// Polly's `prev`, carried from one retry to the next.
    polly_prev: f64,
}

impl Backoff {
    /// Starts the backoff state of a logical request whose first attempt was
    /// preceded by `think` (only `exponential-2014` looks at it).
    pub fn new(think: Duration) -> Self {
        Backoff {
            retries: 0,
            last_sleep: think,
            base: None,
            polly_prev: 0.0,
        }
    }

    /// Starts the schedule over after a server's pushback: the next
    /// computed delay is the first retry's again.
    pub fn restart(&mut self) {
        self.retries = 0;
        self.base = None;
    }

    /// Number of retries scheduled so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Called after a failed attempt: the sleep before the next retry.
    pub fn next_delay<R: Rng + ?Sized>(&mut self, strategy: &Strategy, rng: &mut R) -> Duration {
        self.next_delay_after(strategy, Failure::default(), rng)
    }

    /// Called after `failure`: the sleep before the next retry (only the
    /// AWS SDKs' backoff reads the failure).
    pub fn next_delay_after<R: Rng + ?Sized>(
        &mut self,
        strategy: &Strategy,
        failure: Failure,
        rng: &mut R,
    ) -> Duration {
        self.retries += 1;
        let n = self.retries;
        let sleep = match *strategy {
            Strategy::Fixed { delay } => delay,
            Strategy::Exponential {
                min,
                max,
                factor,
                jitter,
            } => {
                let base = match self.base {
                    None => min.min(max),
                    Some(prev) => secs(prev.as_secs_f64() * factor).min(max),
                };
                self.base = Some(base);
                let noise: f64 = rng.sample(StandardNormal);
                secs(base.as_secs_f64() * (1.0 + jitter * noise))
            }
            Strategy::Exponential2014 { cap, jitter } => {
                let grown = secs(self.last_sleep.as_secs_f64() * E_2014).min(cap);
                let noise: f64 = rng.sample(StandardNormal);
                secs(grown.as_secs_f64() + jitter.as_secs_f64() * noise)
            }
            Strategy::FullJitter { base, cap, factor } => {
                let v = capped_growth(base, factor, n, cap).as_secs_f64();
                secs(uniform(rng, 0.0, v))
            }
            Strategy::EqualJitter { base, cap, factor } => {
                let v = capped_growth(base, factor, n, cap).as_secs_f64();
                secs(uniform(rng, v / 2.0, v))
            }
            Strategy::DecorrelatedJitter { base, cap, factor } => {
                let prev = if n == 1 { base } else { self.last_sleep };
                let hi = prev.as_secs_f64() * factor;
                secs(uniform(rng, base.as_secs_f64(), hi)).min(cap)
            }
            Strategy::TruncatedBinary {
                slot,
                ceiling,
                stay_at_ceiling,
            } => {
                let ceiling = ceiling.max(1);
                let collisions = if stay_at_ceiling {
                    n.min(ceiling)
                } else {
                    (n - 1) % ceiling + 1
                };
                let k = rng.random_range(0..=collisions);
                secs(slot.as_secs_f64() * (2f64.powi(k as i32) - 1.0))
            }
            Strategy::Google {
                first,
                factor,
                max,
                random,
            } => {
                let grown = capped_growth(first, factor, n - 1, Duration::MAX);
                let random = uniform(rng, 0.0, random.as_secs_f64());
                secs(grown.as_secs_f64() + random).min(max)
            }
            Strategy::Shipped(b) => {
                b.delay(n, failure, Some(self.last_sleep), &mut self.polly_prev, rng)
            }
        };
        self.last_sleep = sleep;
        sleep
    }
}

#[cfg(test)]
mod tests;
