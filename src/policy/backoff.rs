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
    /// an AWS throttling error code, and gRPC retries only what it maps to
    /// `UNAVAILABLE` ([`crate::policy::shipped::grpc_retryable`]).
    pub fn retries(&self, failure: &Failure) -> bool {
        match self {
            Strategy::Shipped(ShippedBackoff::Aws { variant_2026, .. }) => {
                crate::policy::shipped::aws_retries(*variant_2026, failure)
            }
            Strategy::Shipped(ShippedBackoff::Grpc { .. }) => {
                crate::policy::shipped::grpc_retryable(failure.status)
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

    /// Whether a client with this strategy tells its throttle of
    /// `failure`: gRPC counts only the failures its policy retries (a
    /// status it does not retry takes no token, in every implementation);
    /// the others tell every answer.
    pub fn tells_throttle(&self, failure: &Failure) -> bool {
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
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::Xoshiro256PlusPlus};

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(2014)
    }

    fn schedule(strategy: &Strategy, think: Duration, n: usize, seed: u64) -> Vec<Duration> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut b = Backoff::new(think);
        (0..n).map(|_| b.next_delay(strategy, &mut rng)).collect()
    }

    /// `draws` schedules of `n` retries each: `out[i]` holds every draw of
    /// retry i + 1, in seconds.
    fn draws(strategy: &Strategy, n: usize, draws: usize) -> Vec<Vec<f64>> {
        let mut rng = rng();
        let mut out = vec![Vec::with_capacity(draws); n];
        for _ in 0..draws {
            let mut b = Backoff::new(Duration::from_secs(1));
            for column in out.iter_mut() {
                column.push(b.next_delay(strategy, &mut rng).as_secs_f64());
            }
        }
        out
    }

    fn mean(xs: &[f64]) -> f64 {
        xs.iter().sum::<f64>() / xs.len() as f64
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fixed_is_constant() {
        let d = ms(100);
        let s = schedule(&Strategy::Fixed { delay: d }, Duration::from_secs(7), 20, 1);
        assert!(s.iter().all(|&x| x == d));
    }

    #[test]
    fn exponential_without_jitter_is_geometric_and_capped() {
        let s = Strategy::Exponential {
            min: Duration::from_secs(1),
            max: Duration::from_secs(10),
            factor: 2.0,
            jitter: 0.0,
        };
        let got: Vec<u64> = schedule(&s, Duration::ZERO, 6, 1)
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(got, vec![1000, 2000, 4000, 8000, 10_000, 10_000]);
        assert!(s.is_deterministic());
    }

    #[test]
    fn exponential_jitter_is_centred_on_the_schedule() {
        let s = Strategy::Exponential {
            min: ms(100),
            max: Duration::from_secs(300),
            factor: 2.7,
            jitter: 0.1,
        };
        let d = draws(&s, 3, 20_000);
        // Jitter compounds nothing: b_3 = 0.1 * 2.7^2 whatever the noise.
        assert!(d[0].iter().all(|x| (0.0..0.16).contains(x)));
        assert!(d[2].iter().all(|x| (0.0..0.729 * 1.6).contains(x)));
        // Standard error: 0.1 * 0.1 / sqrt(20k) = 7e-5 s for the first.
        assert!((mean(&d[0]) - 0.1).abs() < 5e-4, "{}", mean(&d[0]));
        assert!((mean(&d[2]) - 0.729).abs() < 4e-3, "{}", mean(&d[2]));
        assert!(!s.is_deterministic());
    }

    #[test]
    fn exponential_jitter_never_goes_negative() {
        let s = Strategy::Exponential {
            min: ms(100),
            max: Duration::from_secs(1),
            factor: 2.0,
            jitter: 5.0,
        };
        let got = schedule(&s, Duration::ZERO, 5_000, 3);
        assert!(
            got.contains(&Duration::ZERO),
            "large jitter must clamp some to zero"
        );
    }

    #[test]
    fn exponential_2014_multiplies_the_think_time_by_e() {
        let think = Duration::from_secs(10);
        let n = 20_000;
        let mut rng = rng();
        let (mut first, mut second) = (0.0, 0.0);
        for _ in 0..n {
            let mut b = Backoff::new(think);
            first += b
                .next_delay(&Strategy::exponential_2014(), &mut rng)
                .as_secs_f64();
            second += b
                .next_delay(&Strategy::exponential_2014(), &mut rng)
                .as_secs_f64();
        }
        let e = std::f64::consts::E;
        // Mean of e * 10 + N(0, 0.1): e * 10; the jitter of the first is
        // multiplied into the second: mean e^2 * 10.
        assert!((first / n as f64 - e * 10.0).abs() < 0.005);
        assert!((second / n as f64 - e * e * 10.0).abs() < 0.01);
    }

    #[test]
    fn exponential_2014_caps_at_five_minutes_plus_jitter() {
        let s = schedule(
            &Strategy::exponential_2014(),
            Duration::from_secs(200),
            10,
            5,
        );
        for d in &s[1..] {
            assert!((d.as_secs_f64() - 300.0).abs() < 1.0, "{d:?}");
        }
    }

    #[test]
    fn exponential_2014_jitter_is_clamped_at_zero() {
        // After a zero think time the first retry is pure jitter, N(0, 0.1 s):
        // half the draws are negative and must become zero, not negative.
        let mut rng = rng();
        let n = 10_000;
        let mut zeros = 0;
        for _ in 0..n {
            let d =
                Backoff::new(Duration::ZERO).next_delay(&Strategy::exponential_2014(), &mut rng);
            assert!(d < ms(600), "{d:?}");
            zeros += usize::from(d.is_zero());
        }
        let share = zeros as f64 / n as f64;
        assert!((share - 0.5).abs() < 0.03, "{share}");
    }

    #[test]
    fn full_jitter_is_uniform_below_the_capped_exponential() {
        let s = Strategy::FullJitter {
            base: ms(100),
            cap: Duration::from_secs(1),
            factor: 2.0,
        };
        let d = draws(&s, 5, 20_000);
        // v_n = min(1 s, 0.1 * 2^n): 0.2, 0.4, 0.8, 1, 1.
        for (i, v) in [0.2, 0.4, 0.8, 1.0, 1.0].into_iter().enumerate() {
            assert!(d[i].iter().all(|x| (0.0..v).contains(x)), "retry {}", i + 1);
            // Uniform mean v/2, standard error v / sqrt(12 * 20k) = v * 0.002.
            assert!((mean(&d[i]) - v / 2.0).abs() < v * 0.01, "retry {}", i + 1);
        }
    }

    #[test]
    fn equal_jitter_keeps_half_the_delay() {
        let s = Strategy::EqualJitter {
            base: ms(100),
            cap: Duration::from_secs(1),
            factor: 2.0,
        };
        let d = draws(&s, 5, 20_000);
        for (i, v) in [0.2, 0.4, 0.8, 1.0, 1.0].into_iter().enumerate() {
            assert!(
                d[i].iter().all(|x| (v / 2.0..v).contains(x)),
                "retry {}",
                i + 1
            );
            assert!(
                (mean(&d[i]) - 0.75 * v).abs() < v * 0.005,
                "retry {}",
                i + 1
            );
        }
    }

    #[test]
    fn decorrelated_jitter_spreads_from_the_previous_sleep() {
        let s = Strategy::DecorrelatedJitter {
            base: ms(100),
            cap: Duration::from_secs(2),
            factor: 3.0,
        };
        let mut rng = rng();
        let mut firsts = Vec::new();
        for _ in 0..20_000 {
            let mut b = Backoff::new(Duration::from_secs(9));
            let mut prev: f64 = 0.1;
            for n in 0..12 {
                let d = b.next_delay(&s, &mut rng).as_secs_f64();
                assert!(
                    d >= 0.1 - 1e-9 && d <= (3.0 * prev).min(2.0) + 1e-9,
                    "{d} after {prev}"
                );
                if n == 0 {
                    firsts.push(d);
                }
                prev = d;
            }
        }
        // First retry: U(0.1, 0.3), mean 0.2.
        assert!((mean(&firsts) - 0.2).abs() < 0.002, "{}", mean(&firsts));
    }

    #[test]
    fn truncated_binary_draws_from_a_growing_then_reset_window() {
        let s = Strategy::TruncatedBinary {
            slot: ms(10),
            ceiling: 3,
            stay_at_ceiling: false,
        };
        let d = draws(&s, 6, 40_000);
        // Collisions 1, 2, 3, then reset: 1, 2, 3. With c collisions the wait
        // is 10 ms * (2^k - 1), k uniform in 0..=c: mean 10 * ((2^(c+1) - 1)
        // / (c + 1) - 1) ms.
        let expected = |c: i32| 0.01 * ((2f64.powi(c + 1) - 1.0) / f64::from(c + 1) - 1.0);
        for (i, c) in [1, 2, 3, 1, 2, 3].into_iter().enumerate() {
            let allowed: Vec<f64> = (0..=c).map(|k| 0.01 * (2f64.powi(k) - 1.0)).collect();
            assert!(
                d[i].iter()
                    .all(|x| allowed.iter().any(|a| (a - x).abs() < 1e-9)),
                "retry {}",
                i + 1
            );
            assert!(
                (mean(&d[i]) - expected(c)).abs() < expected(c) * 0.03,
                "retry {}",
                i + 1
            );
        }
        let largest = d[2].iter().cloned().fold(0.0, f64::max);
        assert!((largest - 0.07).abs() < 1e-9);
    }

    #[test]
    fn truncated_binary_can_stay_at_the_ceiling() {
        let s = Strategy::TruncatedBinary {
            slot: ms(10),
            ceiling: 2,
            stay_at_ceiling: true,
        };
        let d = draws(&s, 8, 5_000);
        for column in &d[1..] {
            let largest = column.iter().cloned().fold(0.0, f64::max);
            assert!((largest - 0.03).abs() < 1e-9, "{largest}");
        }
    }

    #[test]
    fn google_doubles_from_one_second_plus_up_to_a_second_capped() {
        let s = Strategy::Google {
            first: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(32),
            random: ms(1000),
        };
        let d = draws(&s, 8, 20_000);
        for (i, base) in [1.0, 2.0, 4.0, 8.0, 16.0].into_iter().enumerate() {
            assert!(
                d[i].iter().all(|x| (base..base + 1.0).contains(x)),
                "retry {}",
                i + 1
            );
            assert!((mean(&d[i]) - (base + 0.5)).abs() < 0.01, "retry {}", i + 1);
        }
        // 32 + U(0, 1) is capped at 32.
        for column in &d[5..] {
            assert!(column.iter().all(|&x| x == 32.0));
        }
    }

    #[test]
    fn scaling_divides_every_duration_and_keeps_factors() {
        let s = Strategy::Google {
            first: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(32),
            random: ms(1000),
        };
        assert_eq!(
            s.scaled(10.0),
            Strategy::Google {
                first: ms(100),
                factor: 2.0,
                max: Duration::from_millis(3200),
                random: ms(100),
            }
        );
        assert_eq!(
            Strategy::exponential_2014().scaled(10.0),
            Strategy::Exponential2014 {
                cap: Duration::from_secs(30),
                jitter: ms(10),
            }
        );
        // A scaled schedule is the original one, ten times faster.
        let e = Strategy::Exponential {
            min: ms(100),
            max: Duration::from_secs(300),
            factor: 2.7,
            jitter: 0.1,
        };
        let full = schedule(&e, Duration::ZERO, 8, 4);
        let fast = schedule(&e.scaled(10.0), Duration::ZERO, 8, 4);
        for (a, b) in full.iter().zip(&fast) {
            assert!((a.as_secs_f64() / 10.0 - b.as_secs_f64()).abs() < 1e-6);
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let s = Strategy::Exponential {
            min: ms(100),
            max: Duration::from_secs(300),
            factor: 2.7,
            jitter: 0.1,
        };
        assert_eq!(
            schedule(&s, Duration::ZERO, 10, 77),
            schedule(&s, Duration::ZERO, 10, 77)
        );
    }
}
