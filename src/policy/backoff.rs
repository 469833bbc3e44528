//! Delay schedules between the attempts of one logical request.

use std::time::Duration;

use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

use super::secs;

/// The original client's growth factor (Euler's number).
const E_2014: f64 = std::f64::consts::E;
/// The original client's cap on a backoff sleep, before jitter.
const CAP_2014: Duration = Duration::from_secs(300);
/// The original client's jitter: normal, standard deviation 0.1 s.
const JITTER_2014_S: f64 = 0.1;

/// A delay schedule: which sleep precedes each retry.
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
    /// time), capped at 5 minutes, plus normal jitter with a standard
    /// deviation of 0.1 s, clamped at zero.
    Exponential2014,
}

impl Strategy {
    /// The strategy's name as the command line spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Fixed { .. } => "fixed",
            Strategy::Exponential { .. } => "exponential",
            Strategy::Exponential2014 => "exponential-2014",
        }
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
}

impl Backoff {
    /// Starts the backoff state of a logical request whose first attempt was
    /// preceded by `think` (only `exponential-2014` looks at it).
    pub fn new(think: Duration) -> Self {
        Backoff {
            retries: 0,
            last_sleep: think,
            base: None,
        }
    }

    /// Number of retries scheduled so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Called after a failed attempt: the sleep before the next retry.
    pub fn next_delay<R: Rng + ?Sized>(&mut self, strategy: &Strategy, rng: &mut R) -> Duration {
        self.retries += 1;
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
            Strategy::Exponential2014 => {
                let grown = secs(self.last_sleep.as_secs_f64() * E_2014).min(CAP_2014);
                let noise: f64 = rng.sample(StandardNormal);
                secs(grown.as_secs_f64() + JITTER_2014_S * noise)
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

    #[test]
    fn fixed_is_constant() {
        let d = Duration::from_millis(100);
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
    }

    #[test]
    fn exponential_jitter_is_centred_on_the_schedule() {
        let s = Strategy::Exponential {
            min: Duration::from_millis(100),
            max: Duration::from_secs(300),
            factor: 2.7,
            jitter: 0.1,
        };
        let mut rng = rng();
        let n = 20_000;
        let (mut sum1, mut sum3) = (0.0, 0.0);
        for _ in 0..n {
            let mut b = Backoff::new(Duration::ZERO);
            let d1 = b.next_delay(&s, &mut rng).as_secs_f64();
            b.next_delay(&s, &mut rng);
            let d3 = b.next_delay(&s, &mut rng).as_secs_f64();
            // Jitter compounds nothing: b_3 = 0.1 * 2.7^2 whatever the noise.
            assert!((0.0..0.16).contains(&d1));
            assert!((0.0..0.729 * 1.6).contains(&d3));
            sum1 += d1;
            sum3 += d3;
        }
        // Standard error: 0.1 * 0.1 / sqrt(20k) = 7e-5 s for the first.
        assert!((sum1 / n as f64 - 0.1).abs() < 5e-4, "{}", sum1 / n as f64);
        assert!(
            (sum3 / n as f64 - 0.729).abs() < 4e-3,
            "{}",
            sum3 / n as f64
        );
    }

    #[test]
    fn exponential_jitter_never_goes_negative() {
        let s = Strategy::Exponential {
            min: Duration::from_millis(100),
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
                .next_delay(&Strategy::Exponential2014, &mut rng)
                .as_secs_f64();
            second += b
                .next_delay(&Strategy::Exponential2014, &mut rng)
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
        let s = schedule(&Strategy::Exponential2014, Duration::from_secs(200), 10, 5);
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
            let d = Backoff::new(Duration::ZERO).next_delay(&Strategy::Exponential2014, &mut rng);
            assert!(d < Duration::from_millis(600), "{d:?}");
            zeros += usize::from(d.is_zero());
        }
        let share = zeros as f64 / n as f64;
        assert!((share - 0.5).abs() < 0.03, "{share}");
    }

    #[test]
    fn same_seed_same_schedule() {
        let s = Strategy::Exponential {
            min: Duration::from_millis(100),
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
