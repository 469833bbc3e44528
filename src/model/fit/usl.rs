//! The Universal Scalability Law (Gunther), for comparison: `X(N) = λ N /
//! (1 + σ (N - 1) + κ N (N - 1))`, and by Little's law `R(N) = N / X(N)
//! = (1 + σ (N - 1) + κ N (N - 1)) / λ`. σ is contention (the share of
//! work that queues), κ coherency (the cost of keeping N workers
//! consistent, which makes throughput fall past its peak at
//! `N* = sqrt((1 - σ) / κ)`), λ the throughput of one client. It is no
//! shape the project's server can take, so it is never chosen as the
//! twin.
//!
//! The fit minimises the same sum as the shapes' ([`super::level`]):
//! `Σ (ln R̂_i - m_i)²`. For given σ and κ, `ln λ` is the mean of `ln(1 +
//! σ (N_i - 1) + κ N_i (N_i - 1)) - m_i`, so only σ in `[0, 1]` and κ
//! `>= 0` are searched: a log-spaced grid, then Nelder-Mead's simplex
//! from its best point (twice, the second from where the first stopped),
//! every point projected onto those bounds.
//!
//! Why not the `usl` crate (0.3.0, codahale/usl-rs), which follows
//! Schwartz's book: its `Model::build` fits throughput alone, by absolute
//! errors (the deviates are `x - X̂(n)`, so the levels of highest
//! throughput weigh most), unconstrained (σ and κ may come out negative,
//! as its doc says), and panics where this fit must return an error
//! (fewer than 6 measurements, or a failed fit). Its code also truncates
//! each measurement's concurrency to an integer before predicting (`m.n
//! as u32`), which its doc does not say: a concurrency derived by
//! Little's law from throughput and latency is fractional. Its
//! `max_concurrency` floors the peak to an integer (and gives `u32::MAX`
//! where κ is 0), and its command-line program prints λ under κ's label
//! and κ under λ's (`src/main.rs`), which is why its README shows κ = 90
//! and λ = 0.0001. Its formulas agree with these: the tests here check
//! them against it, and that on the book's measurements each fit is the
//! better by its own sum.

use serde::{Deserialize, Serialize};

use super::level::{Score, Targets};
use super::search::nelder_mead;

/// A Universal Scalability Law model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Usl {
    /// Contention, σ, from 0 to 1.
    pub sigma: f64,
    /// Coherency, κ, at least 0.
    pub kappa: f64,
    /// Throughput of one client, λ (answers a second).
    pub lambda: f64,
}

impl Usl {
    /// `1 + σ (n - 1) + κ n (n - 1)`: how much longer a request takes
    /// with `n` clients than alone.
    fn slowdown(&self, n: f64) -> f64 {
        1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0)
    }

    /// Throughput with `n` clients, `X(n)`.
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / self.slowdown(n)
    }

    /// Mean latency in seconds with `n` clients, `R(n) = n / X(n)`.
    pub fn latency(&self, n: f64) -> f64 {
        self.slowdown(n) / self.lambda
    }

    /// The concurrency of highest throughput, `N* = sqrt((1 - σ) / κ)`;
    /// `None` where κ is 0 (throughput never falls).
    pub fn peak(&self) -> Option<f64> {
        (self.kappa > 0.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }

    /// The throughput at [`Usl::peak`].
    pub fn peak_throughput(&self) -> Option<f64> {
        self.peak().map(|n| self.throughput(n))
    }
}

/// A Universal Scalability Law fitted to the levels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Its coefficients.
    pub usl: Usl,
    /// How far it is from the measurements.
    pub score: Score,
}

/// σ and κ projected onto their bounds.
fn bounded(sigma: f64, kappa: f64) -> (f64, f64) {
    (sigma.clamp(0.0, 1.0), kappa.max(0.0))
}

/// `(ln λ, squared error)` of the law with `sigma` and `kappa`.
fn profile(targets: &Targets, sigma: f64, kappa: f64) -> (f64, f64) {
    let law = Usl {
        sigma,
        kappa,
        lambda: 1.0,
    };
    let ln_d: Vec<f64> = targets.n.iter().map(|&n| law.slowdown(n).ln()).collect();
    let count = ln_d.len() as f64;
    let ln_lambda = ln_d
        .iter()
        .zip(&targets.middle)
        .map(|(d, m)| d - m)
        .sum::<f64>()
        / count;
    let sse = ln_d
        .iter()
        .zip(&targets.middle)
        .map(|(d, m)| (d - ln_lambda - m).powi(2))
        .sum();
    (ln_lambda, sse)
}

/// The Universal Scalability Law that fits the levels best.
pub(crate) fn usl(targets: &Targets) -> UslFit {
    let sigmas =
        std::iter::once(0.0).chain((0..=16).map(|j| 10f64.powf(-4.0 + 0.25 * f64::from(j))));
    let kappas: Vec<f64> = std::iter::once(0.0)
        .chain((0..=40).map(|j| 10f64.powf(-10.0 + 0.25 * f64::from(j))))
        .collect();
    let (mut sigma, mut kappa, _) = sigmas
        .flat_map(|s| kappas.iter().map(move |&k| (s, k)))
        .map(|(s, k)| (s, k, profile(targets, s, k).1))
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .expect("a grid");
    // Steps in units that matter at the largest concurrency probed.
    let top = f64::from(targets.max_concurrency());
    let unit_sigma = sigma.max(1e-3 / top);
    let unit_kappa = kappa.max(1e-3 / (top * top));
    let objective = |p: &[f64]| {
        let (s, k) = bounded(p[0] * unit_sigma, p[1] * unit_kappa);
        profile(targets, s, k).1
    };
    for _ in 0..2 {
        let start = [sigma / unit_sigma, kappa / unit_kappa];
        let (p, _) = nelder_mead(objective, &start, &[0.5, 0.5], 1e-14, 4_000);
        (sigma, kappa) = bounded(p[0] * unit_sigma, p[1] * unit_kappa);
    }
    let (ln_lambda, _) = profile(targets, sigma, kappa);
    let usl = Usl {
        sigma,
        kappa,
        lambda: ln_lambda.exp(),
    };
    let ln_pred: Vec<f64> = targets.n.iter().map(|&n| usl.latency(n).ln()).collect();
    UslFit {
        usl,
        score: targets.score(&ln_pred),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fit::level::Level;

    #[test]
    fn the_law_by_hand() {
        let law = Usl {
            sigma: 0.1,
            kappa: 0.01,
            lambda: 100.0,
        };
        // N = 1: one client alone, λ a second and 10 ms.
        assert!((law.throughput(1.0) - 100.0).abs() < 1e-12);
        assert!((law.latency(1.0) - 0.01).abs() < 1e-15);
        // N = 10: slowdown 1 + 0.9 + 0.9 = 2.8; X = 1000 / 2.8.
        assert!((law.throughput(10.0) - 1000.0 / 2.8).abs() < 1e-9);
        assert!((law.latency(10.0) - 0.028).abs() < 1e-15);
        // Peak at sqrt(0.9 / 0.01) = 9.487.
        let peak = law.peak().unwrap();
        assert!((peak - 90f64.sqrt()).abs() < 1e-12);
        assert!(law.throughput(peak) > law.throughput(9.0));
        assert!(law.throughput(peak) > law.throughput(10.0));
        assert_eq!(Usl { kappa: 0.0, ..law }.peak(), None);
    }

    #[test]
    fn exact_levels_give_back_the_law() {
        let truth = Usl {
            sigma: 0.05,
            kappa: 2e-4,
            lambda: 100.0,
        };
        let levels: Vec<Level> = [1, 2, 4, 8, 16, 32, 64, 128, 256]
            .into_iter()
            .map(|n| {
                let r = truth.latency(f64::from(n));
                Level {
                    concurrency: n,
                    throughput: truth.throughput(f64::from(n)),
                    latency_mean_s: r,
                    latency_p50_s: r,
                    latency_p99_s: r,
                    error_share: 0.0,
                }
            })
            .collect();
        let fit = usl(&Targets::new(&levels, 0.0).unwrap());
        let got = fit.usl;
        assert!((got.sigma / truth.sigma - 1.0).abs() < 1e-4, "{got:?}");
        assert!((got.kappa / truth.kappa - 1.0).abs() < 1e-4, "{got:?}");
        assert!((got.lambda / truth.lambda - 1.0).abs() < 1e-6, "{got:?}");
        assert!(fit.score.error < 1e-6);
    }

    /// The measurements of the `usl` crate's own test (from Schwartz's
    /// book): concurrency and throughput.
    const BOOK: [(u32, f64); 32] = [
        (1, 955.16),
        (2, 1878.91),
        (3, 2688.01),
        (4, 3548.68),
        (5, 4315.54),
        (6, 5130.43),
        (7, 5931.37),
        (8, 6531.08),
        (9, 7219.8),
        (10, 7867.61),
        (11, 8278.71),
        (12, 8646.7),
        (13, 9047.84),
        (14, 9426.55),
        (15, 9645.37),
        (16, 9897.24),
        (17, 10097.6),
        (18, 10240.5),
        (19, 10532.39),
        (20, 10798.52),
        (21, 11151.43),
        (22, 11518.63),
        (23, 11806.0),
        (24, 12089.37),
        (25, 12075.41),
        (26, 12177.29),
        (27, 12211.41),
        (28, 12158.93),
        (29, 12155.27),
        (30, 12118.04),
        (31, 12140.4),
        (32, 12074.39),
    ];

    #[test]
    fn the_law_agrees_with_the_usl_crate() {
        for (sigma, kappa, lambda) in [(0.0, 0.0, 1.0), (0.05, 2e-4, 100.0), (0.9, 0.1, 7.5)] {
            let ours = Usl {
                sigma,
                kappa,
                lambda,
            };
            let theirs = ::usl::Model {
                sigma,
                kappa,
                lambda,
            };
            for n in [1u32, 2, 7, 64, 1000] {
                let x = theirs.throughput_at_concurrency(n);
                let r = theirs.latency_at_concurrency(n);
                assert!((ours.throughput(f64::from(n)) / x - 1.0).abs() < 1e-12);
                assert!((ours.latency(f64::from(n)) / r - 1.0).abs() < 1e-12);
            }
            if kappa > 0.0 {
                // The crate floors the peak to a whole concurrency.
                assert_eq!(
                    ours.peak().unwrap().floor() as u32,
                    theirs.max_concurrency()
                );
            }
        }
    }

    #[test]
    fn the_books_measurements_give_the_crates_law_give_or_take_the_sum() {
        let theirs = ::usl::Model::build(
            &BOOK
                .iter()
                .map(|&(n, x)| ::usl::Measurement::concurrency_and_throughput(n, x))
                .collect::<Vec<_>>(),
        );
        // The crate's own figures (absolute throughput errors).
        assert!((theirs.sigma - 0.02671591).abs() < 1e-6, "{theirs:?}");
        let levels: Vec<Level> = BOOK
            .iter()
            .map(|&(n, x)| {
                let r = f64::from(n) / x;
                Level {
                    concurrency: n,
                    throughput: x,
                    latency_mean_s: r,
                    latency_p50_s: r,
                    latency_p99_s: r,
                    error_share: 0.0,
                }
            })
            .collect();
        let targets = Targets::new(&levels, 0.0).unwrap();
        let ours = usl(&targets).usl;
        // Relative errors weigh the small levels more (λ follows the
        // throughput at N = 1, 955, more closely): close, not equal.
        let both = format!("{ours:?} {theirs:?}");
        assert!((ours.sigma - theirs.sigma).abs() < 0.01, "{both}");
        assert!((ours.kappa / theirs.kappa - 1.0).abs() < 0.25, "{both}");
        assert!((ours.lambda / theirs.lambda - 1.0).abs() < 0.05, "{both}");
        // Each is the better by its own sum: log ratios here, absolute
        // throughput there.
        let theirs_here = Usl {
            sigma: theirs.sigma,
            kappa: theirs.kappa,
            lambda: theirs.lambda,
        };
        let score = |law: &Usl| {
            let ln_pred: Vec<f64> = targets.n.iter().map(|&n| law.latency(n).ln()).collect();
            targets.score(&ln_pred).error
        };
        assert!(score(&ours) < score(&theirs_here), "{both}");
        let absolute = |law: &Usl| {
            BOOK.iter()
                .map(|&(n, x)| (x - law.throughput(f64::from(n))).powi(2))
                .sum::<f64>()
        };
        assert!(absolute(&theirs_here) < absolute(&ours), "{both}");
        let peak = ours.peak().unwrap() / f64::from(theirs.max_concurrency());
        assert!((peak - 1.0).abs() < 0.1, "{ours:?} {theirs:?}");
    }
}
