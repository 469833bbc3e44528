//! Think times: how long a simulated user waits before its next request.
//!
//! Each user draws independent exponential think times, so N users together
//! send Poisson traffic at about `N / mean` requests per second.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::Exp1;

/// The random generator of simulated user `user` in a run seeded with `seed`.
///
/// Each user has its own stream, so a user's think times and jitter depend
/// only on the seed and its index, never on how tasks were scheduled.
pub fn user_rng(seed: u64, user: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed ^ user.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Exponentially distributed think times with a given mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThinkTime {
    mean: Duration,
}

impl ThinkTime {
    /// Think times with mean `mean` (the original's `lambda`, in seconds).
    pub fn new(mean: Duration) -> Self {
        ThinkTime { mean }
    }

    /// The mean think time.
    pub fn mean(&self) -> Duration {
        self.mean
    }

    /// Draws one think time.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let unit: f64 = rng.sample(Exp1);
        // Exp1 is finite and non-negative; the product saturates only for
        // absurd means, which the cap keeps representable.
        Duration::try_from_secs_f64(unit * self.mean.as_secs_f64()).unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(mean: Duration, n: usize, seed: u64) -> Vec<f64> {
        let think = ThinkTime::new(mean);
        let mut rng = user_rng(seed, 0);
        (0..n)
            .map(|_| think.sample(&mut rng).as_secs_f64())
            .collect()
    }

    #[test]
    fn mean_and_coefficient_of_variation_match_the_exponential() {
        let xs = samples(Duration::from_secs(10), 200_000, 42);
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let cv = var.sqrt() / mean;
        // Standard error of the mean is 10/sqrt(200k), about 0.022 s.
        assert!((mean - 10.0).abs() < 0.1, "mean {mean}");
        assert!((cv - 1.0).abs() < 0.02, "cv {cv}");
        assert!(xs.iter().all(|&x| x >= 0.0));
    }

    #[test]
    fn kolmogorov_smirnov_against_the_exponential_at_the_1_percent_level() {
        let n = 100_000;
        let mean = 2.0;
        let mut xs = samples(Duration::from_secs(2), n, 2014);
        xs.sort_by(f64::total_cmp);
        // D = sup |F_n(x) - F(x)|, checked on both sides of every step.
        let d = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = 1.0 - (-x / mean).exp();
                let below = i as f64 / n as f64;
                let above = (i + 1) as f64 / n as f64;
                (f - below).abs().max((above - f).abs())
            })
            .fold(0.0, f64::max);
        // Asymptotic critical value at the 1 % level: 1.628 / sqrt(n).
        let critical = 1.628 / (n as f64).sqrt();
        assert!(d < critical, "D = {d}, critical {critical}");
        // The test can fail: a uniform sample of the same mean is rejected.
        let uniform_d = xs
            .iter()
            .enumerate()
            .map(|(i, _)| {
                let x = 2.0 * mean * (i as f64 + 0.5) / n as f64;
                let f = 1.0 - (-x / mean).exp();
                (f - (i as f64 + 0.5) / n as f64).abs()
            })
            .fold(0.0, f64::max);
        assert!(uniform_d > critical);
    }

    #[test]
    fn memoryless_tail() {
        // P(X > mean) = 1/e for the exponential.
        let xs = samples(Duration::from_millis(500), 100_000, 3);
        let above = xs.iter().filter(|&&x| x > 0.5).count() as f64 / xs.len() as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.01, "{above}");
    }

    #[test]
    fn users_draw_distinct_streams() {
        let think = ThinkTime::new(Duration::from_secs(1));
        let a: Vec<_> = (0..10).map(|u| think.sample(&mut user_rng(5, u))).collect();
        let mut dedup = a.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), a.len());
    }

    #[test]
    fn same_seed_same_sequence() {
        assert_eq!(
            samples(Duration::from_secs(1), 100, 9),
            samples(Duration::from_secs(1), 100, 9)
        );
        assert_ne!(
            samples(Duration::from_secs(1), 100, 9),
            samples(Duration::from_secs(1), 100, 10)
        );
    }
}
