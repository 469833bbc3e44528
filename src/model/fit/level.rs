//! What a probe measured at one concurrency, checked before any fit, and
//! how far a prediction is from it.
//!
//! Every error the fits minimise and report is a log ratio: `ln(predicted
//! / measured)`, which is about the relative error for small errors
//! (0.05 is 5 %), weighs a level at 1 ms like one at 1 s, and treats a
//! prediction twice too high like one twice too low.

use serde::{Deserialize, Serialize};

/// One level of a closed-loop probe: `concurrency` clients with no think
/// time, each sending its next request when its answer arrives, held past
/// a warm-up. Times in seconds, so that throughput, latency and
/// concurrency obey Little's law, `N = X R`, without a unit between them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Clients in the closed loop, N (at least 1).
    pub concurrency: u32,
    /// Successful answers a second, X.
    pub throughput: f64,
    /// Mean latency of the successful answers in seconds, R.
    pub latency_mean_s: f64,
    /// Median latency of the successful answers in seconds.
    pub latency_p50_s: f64,
    /// 99th percentile of latency of the successful answers in seconds.
    pub latency_p99_s: f64,
    /// The share of attempts that failed (refused, timed out, broken),
    /// from 0 to 1.
    pub error_share: f64,
}

impl Level {
    /// The concurrency Little's law gives from the measured throughput and
    /// latency, `X R`: the probe's own concurrency where the service, not
    /// the prober, set the pace.
    pub fn little_concurrency(&self) -> f64 {
        self.throughput * self.latency_mean_s
    }
}

/// Why a set of levels cannot be fitted.
#[derive(Debug, Clone, PartialEq)]
pub enum FitError {
    /// A level holds a value no probe can measure.
    InvalidLevel {
        /// The level's concurrency.
        concurrency: u32,
        /// What is wrong with it.
        reason: String,
    },
    /// Two levels at one concurrency.
    RepeatedConcurrency(u32),
    /// Every level failed more often than the fit accepts.
    AllFailed {
        /// Levels given.
        levels: usize,
        /// The largest error share a level may have to be fitted.
        max_error_share: f64,
    },
    /// Fewer levels than a fit needs to say more than its parameters.
    TooFewLevels {
        /// Levels that can be fitted.
        usable: usize,
        /// Levels left out for their errors.
        failing: usize,
        /// Levels needed.
        needed: usize,
    },
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::InvalidLevel {
                concurrency,
                reason,
            } => write!(f, "the level at concurrency {concurrency}: {reason}"),
            FitError::RepeatedConcurrency(n) => {
                write!(f, "two levels at concurrency {n}: give one level each")
            }
            FitError::AllFailed {
                levels,
                max_error_share,
            } => write!(
                f,
                "every one of the {levels} levels failed more than {} % of its attempts: \
                 nothing to fit (probe lower concurrencies, or check the target answers)",
                max_error_share * 100.0
            ),
            FitError::TooFewLevels {
                usable,
                failing,
                needed,
            } => {
                write!(f, "{usable} levels to fit, {needed} needed")?;
                if *failing > 0 {
                    write!(f, " ({failing} more left out for their errors)")?;
                }
                write!(f, ": probe more concurrencies (1, 2, 4, 8, ...)")
            }
        }
    }
}

impl std::error::Error for FitError {}

/// Levels fewer than this cannot be fitted: the most parameters a fit has
/// is three (the exponential curve, the Universal Scalability Law), and a
/// fit through as many points as it has parameters says nothing of how
/// well it fits.
pub const MIN_LEVELS: usize = 4;

/// The levels a fit works on, ordered by concurrency.
#[derive(Debug, Clone)]
pub(crate) struct Targets {
    /// The concurrency of each level.
    pub n: Vec<f64>,
    /// `ln R`, the measured mean latency.
    pub ln_r: Vec<f64>,
    /// `ln(N / X)`, the latency Little's law gives from the throughput.
    pub ln_little: Vec<f64>,
    /// `(ln R + ln(N / X)) / 2`: what the fitted `ln R` is pulled towards
    /// (see [`Targets::score`]).
    pub middle: Vec<f64>,
    /// The levels themselves.
    pub levels: Vec<Level>,
    /// Levels left out for their errors.
    pub failing: usize,
}

impl Targets {
    /// Checks `levels` and keeps those whose error share is at most
    /// `max_error_share`.
    pub fn new(levels: &[Level], max_error_share: f64) -> Result<Targets, FitError> {
        let mut kept: Vec<Level> = Vec::new();
        let mut failing = 0;
        for level in levels {
            let invalid = |reason: &str| FitError::InvalidLevel {
                concurrency: level.concurrency,
                reason: reason.to_string(),
            };
            if level.concurrency == 0 {
                return Err(invalid(
                    "a concurrency of 0: a probe holds at least one client",
                ));
            }
            if !(0.0..=1.0).contains(&level.error_share) {
                return Err(invalid("an error share outside 0 to 1"));
            }
            if levels
                .iter()
                .filter(|l| l.concurrency == level.concurrency)
                .count()
                > 1
            {
                return Err(FitError::RepeatedConcurrency(level.concurrency));
            }
            if level.error_share > max_error_share {
                failing += 1;
                continue;
            }
            if !(level.throughput.is_finite() && level.throughput > 0.0) {
                return Err(invalid(
                    "no throughput: nothing completed, so there is no latency to fit",
                ));
            }
            let times = [
                level.latency_mean_s,
                level.latency_p50_s,
                level.latency_p99_s,
            ];
            if times.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
                return Err(invalid(
                    "a latency that is not a positive number of seconds",
                ));
            }
            if level.latency_p50_s > level.latency_p99_s {
                return Err(invalid("a median above the 99th percentile"));
            }
            kept.push(*level);
        }
        if kept.is_empty() && failing > 0 {
            return Err(FitError::AllFailed {
                levels: levels.len(),
                max_error_share,
            });
        }
        if kept.len() < MIN_LEVELS {
            return Err(FitError::TooFewLevels {
                usable: kept.len(),
                failing,
                needed: MIN_LEVELS,
            });
        }
        kept.sort_by_key(|l| l.concurrency);
        let n: Vec<f64> = kept.iter().map(|l| f64::from(l.concurrency)).collect();
        let ln_r: Vec<f64> = kept.iter().map(|l| l.latency_mean_s.ln()).collect();
        let ln_little: Vec<f64> = kept
            .iter()
            .map(|l| (f64::from(l.concurrency) / l.throughput).ln())
            .collect();
        let middle = ln_r
            .iter()
            .zip(&ln_little)
            .map(|(a, b)| (a + b) / 2.0)
            .collect();
        Ok(Targets {
            n,
            ln_r,
            ln_little,
            middle,
            levels: kept,
            failing,
        })
    }

    /// The largest concurrency fitted.
    pub fn max_concurrency(&self) -> u32 {
        self.levels.last().map_or(0, |l| l.concurrency)
    }

    /// How far predicted latencies are from the measurements: `ln_pred[i]`
    /// is `ln R̂(N_i)`, and the throughput predicted is `N_i / R̂(N_i)`
    /// (Little's law, true of every shape fitted here).
    ///
    /// Each fit minimises `Σ_i [ln(R̂_i / R_i)² + ln(X̂_i / X_i)²]`. As
    /// `ln X̂_i = ln N_i - ln R̂_i`, the second term is `(ln R̂_i - ln(N_i /
    /// X_i))²`, and the sum is `2 Σ_i (ln R̂_i - m_i)² + Σ_i (ln R_i -
    /// ln(N_i / X_i))² / 2` with `m_i` their middle: the fit pulls `ln R̂`
    /// towards `m_i`, and the last sum, how far the measurements miss
    /// Little's law, no fit can lower.
    pub fn score(&self, ln_pred: &[f64]) -> Score {
        let count = ln_pred.len() as f64;
        let rms = |measured: &[f64]| {
            (ln_pred
                .iter()
                .zip(measured)
                .map(|(p, m)| (p - m).powi(2))
                .sum::<f64>()
                / count)
                .sqrt()
        };
        let latency = rms(&self.ln_r);
        let throughput = rms(&self.ln_little);
        Score {
            latency,
            throughput,
            error: ((latency.powi(2) + throughput.powi(2)) / 2.0).sqrt(),
        }
    }

    /// The root mean square of `ln(N / (X R))` over the levels: how far the
    /// measurements miss Little's law (0 where the service set the pace).
    pub fn little_error(&self) -> f64 {
        let sum: f64 = self
            .ln_r
            .iter()
            .zip(&self.ln_little)
            .map(|(r, l)| (l - r).powi(2))
            .sum();
        (sum / self.n.len() as f64).sqrt()
    }
}

/// How far a fit's predictions are from the measurements, as root mean
/// squares of log ratios over the levels fitted (0.05 is about 5 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// RMS of `ln(R̂ / R)`: mean latency.
    pub latency: f64,
    /// RMS of `ln(X̂ / X)`: throughput.
    pub throughput: f64,
    /// `sqrt((latency² + throughput²) / 2)`: what the fit minimised,
    /// and what the shapes are compared by.
    pub error: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A level whose latencies are all `r` and throughput `n / r`.
    fn level(n: u32, r: f64) -> Level {
        Level {
            concurrency: n,
            throughput: f64::from(n) / r,
            latency_mean_s: r,
            latency_p50_s: r,
            latency_p99_s: r,
            error_share: 0.0,
        }
    }

    #[test]
    fn levels_are_sorted_and_failing_ones_left_out() {
        let mut levels = vec![level(8, 0.1), level(1, 0.1), level(4, 0.1), level(2, 0.1)];
        levels.push(Level {
            error_share: 0.5,
            throughput: 0.0,
            ..level(16, 0.1)
        });
        let t = Targets::new(&levels, 0.01).unwrap();
        assert_eq!(t.n, vec![1.0, 2.0, 4.0, 8.0]);
        assert_eq!(t.failing, 1);
        assert_eq!(t.max_concurrency(), 8);
        assert!(t.little_error() < 1e-12);
    }

    #[test]
    fn a_score_by_hand() {
        // Two levels; R measured 0.1 at both, X measured so that N / X is
        // 0.1 and 0.2. Predicted ln R̂ = ln 0.1 at both: latency off by 0,
        // throughput by 0 and ln 2.
        let levels = [
            level(1, 0.1),
            Level {
                throughput: 10.0,
                ..level(2, 0.1)
            },
            level(3, 0.1),
            level(4, 0.1),
        ];
        let t = Targets::new(&levels, 0.0).unwrap();
        let s = t.score(&[0.1f64.ln(); 4]);
        assert!(s.latency.abs() < 1e-12);
        let ln2 = 2f64.ln();
        assert!((s.throughput - (ln2 * ln2 / 4.0).sqrt()).abs() < 1e-12);
        assert!((s.error - s.throughput / 2f64.sqrt()).abs() < 1e-12);
        assert!((t.little_error() - ln2 / 2.0).abs() < 1e-12);
        // The middle is the geometric mean of R and N / X.
        assert!((t.middle[1] - (0.1f64 * 0.2).sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn degenerate_levels_are_refused_with_a_reason() {
        let ok = [level(1, 0.1), level(2, 0.1), level(4, 0.1), level(8, 0.1)];
        let err = |levels: &[Level]| Targets::new(levels, 0.01).unwrap_err();
        assert_eq!(
            err(&ok[..1]),
            FitError::TooFewLevels {
                usable: 1,
                failing: 0,
                needed: MIN_LEVELS
            }
        );
        let all_failing: Vec<Level> = ok
            .iter()
            .map(|l| Level {
                error_share: 1.0,
                throughput: 0.0,
                latency_mean_s: 0.0,
                ..*l
            })
            .collect();
        let e = err(&all_failing);
        assert!(matches!(e, FitError::AllFailed { levels: 4, .. }), "{e:?}");
        assert!(e.to_string().contains("every one of the 4 levels"), "{e}");
        let mut zero = ok;
        zero[2].throughput = 0.0;
        assert!(
            err(&zero).to_string().contains("no throughput"),
            "{}",
            err(&zero)
        );
        let mut nan = ok;
        nan[1].latency_p99_s = f64::NAN;
        assert!(matches!(
            err(&nan),
            FitError::InvalidLevel { concurrency: 2, .. }
        ));
        let mut repeated = ok;
        repeated[3].concurrency = 4;
        assert_eq!(err(&repeated), FitError::RepeatedConcurrency(4));
        let mut none = ok;
        none[0].concurrency = 0;
        assert!(matches!(
            err(&none),
            FitError::InvalidLevel { concurrency: 0, .. }
        ));
        let mut share = ok;
        share[0].error_share = 1.5;
        assert!(err(&share).to_string().contains("error share"));
        let mut upside_down = ok;
        upside_down[0].latency_p50_s = 1.0;
        assert!(err(&upside_down).to_string().contains("median"));
        let mut some_failing = ok.to_vec();
        some_failing[3].error_share = 0.2;
        let e = err(&some_failing);
        assert!(e.to_string().contains("1 more left out"), "{e}");
    }

    #[test]
    fn levels_read_and_write_as_json_and_csv() {
        let levels = [level(1, 0.1), level(2, 0.125)];
        let json = serde_json::to_string(&levels).unwrap();
        let back: Vec<Level> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, levels);
        let mut writer = csv::Writer::from_writer(Vec::new());
        for l in &levels {
            writer.serialize(l).unwrap();
        }
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert!(text.starts_with(
            "concurrency,throughput,latency_mean_s,latency_p50_s,latency_p99_s,error_share\n"
        ));
        let back: Vec<Level> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, levels);
    }
}
