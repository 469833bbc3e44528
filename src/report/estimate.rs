//! Answers with their uncertainty: a proportion with its 95 % Wilson
//! interval, quantiles over runs where some never reach the event, a
//! median and range, and the pause at which a system stops recovering,
//! estimated from how often it recovered at each pause tried.
//!
//! The critical pause is estimated with isotonic regression: the recovery
//! rates at the pauses tried, pooled into the closest curve that never
//! rises with the pause (pool-adjacent-violators, weighted by runs). Near a
//! knife edge the runs separate completely (all recover below some pause,
//! none above), where a logistic fit has no maximum; the isotonic fit is
//! the observed step. Between the pauses tried the curve is linear.

use serde::Serialize;

/// The normal quantile of a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A proportion `k / n` with its 95 % Wilson score interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportion {
    /// Successes.
    pub k: u32,
    /// Trials.
    pub n: u32,
    /// `k / n` (0 when there was no trial).
    pub p: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
}

impl Proportion {
    /// `k` of `n`, with the Wilson score interval at `z` (1.96 for 95 %):
    /// centre `(p + z²/2n) / (1 + z²/n)`, half-width
    /// `z √(p(1-p)/n + z²/4n²) / (1 + z²/n)`. No trial gives `[0, 1]`.
    pub fn wilson(k: u32, n: u32, z: f64) -> Proportion {
        if n == 0 {
            return Proportion {
                k,
                n,
                p: 0.0,
                low: 0.0,
                high: 1.0,
            };
        }
        let nf = f64::from(n);
        let p = f64::from(k.min(n)) / nf;
        let z2 = z * z;
        let d = 1.0 + z2 / nf;
        let centre = (p + z2 / (2.0 * nf)) / d;
        let half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / d;
        // At none or all the interval's end is exactly 0 or 1; the formula
        // gets there only to rounding.
        Proportion {
            k,
            n,
            p,
            low: if k == 0 {
                0.0
            } else {
                (centre - half).max(0.0)
            },
            high: if k >= n {
                1.0
            } else {
                (centre + half).min(1.0)
            },
        }
    }

    /// `k` of `n` with its 95 % interval.
    pub fn of(k: u32, n: u32) -> Proportion {
        Proportion::wilson(k, n, Z95)
    }
}

/// The quantile `q` (0 to 1) of `values`, where `None` is an event that
/// never happened and counts as the slowest: linear between order
/// statistics (as numpy's default), `None` where the quantile reaches a
/// run that never got there.
pub fn quantile(values: &[Option<f64>], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = values.iter().map(|v| v.unwrap_or(f64::INFINITY)).collect();
    sorted.sort_by(f64::total_cmp);
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    let low = sorted[lo];
    let value = if frac == 0.0 {
        low
    } else {
        low + frac * (sorted[lo + 1] - low)
    };
    value.is_finite().then_some(value)
}

/// The 10th, 50th and 90th percentiles of a time over runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles3 {
    /// 10th percentile.
    pub p10: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
}

impl Percentiles3 {
    /// Of `values`, `None` counting as never.
    pub fn of(values: &[Option<f64>]) -> Percentiles3 {
        Percentiles3 {
            p10: quantile(values, 0.1),
            p50: quantile(values, 0.5),
            p90: quantile(values, 0.9),
        }
    }
}

/// A figure over several runs: its median and range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// Of the values that exist; `None` if none does.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let present: Vec<Option<f64>> = values.into_iter().filter(Option::is_some).collect();
        Some(Spread {
            median: quantile(&present, 0.5)?,
            min: quantile(&present, 0.0)?,
            max: quantile(&present, 1.0)?,
        })
    }
}

/// Runs at one pause: how many, and how many recovered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trials {
    /// The pause, seconds.
    pub pause_s: f64,
    /// Runs made.
    pub runs: u32,
    /// Runs that recovered.
    pub recovered: u32,
}

/// The recovery rates at `points` (sorted by pause), pooled into the
/// closest curve that never rises with the pause, weighted by runs.
pub fn isotonic_decreasing(points: &[Trials]) -> Vec<f64> {
    // Blocks of pooled points: (rate, weight, how many points).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for t in points {
        let weight = f64::from(t.runs.max(1));
        let rate = if t.runs == 0 {
            0.0
        } else {
            f64::from(t.recovered) / f64::from(t.runs)
        };
        blocks.push((rate, weight, 1));
        // A later block above an earlier one violates the order: pool them.
        while blocks.len() > 1 && blocks[blocks.len() - 1].0 > blocks[blocks.len() - 2].0 {
            let (r2, w2, c2) = blocks.pop().expect("two blocks");
            let (r1, w1, c1) = blocks.pop().expect("two blocks");
            blocks.push(((r1 * w1 + r2 * w2) / (w1 + w2), w1 + w2, c1 + c2));
        }
    }
    blocks
        .into_iter()
        .flat_map(|(rate, _, count)| std::iter::repeat_n(rate, count))
        .collect()
}

/// Where a fitted curve crosses a level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crossing {
    /// Already below the level at the shortest pause tried.
    Below,
    /// At this pause, seconds.
    At(f64),
    /// Still at or above the level at the longest pause tried.
    Above,
}

impl Crossing {
    /// The pause, if the curve crosses within the pauses tried.
    pub fn pause(self) -> Option<f64> {
        match self {
            Crossing::At(t) => Some(t),
            _ => None,
        }
    }
}

/// The longest pause at which the curve through `(pause, rate)` (rates not
/// rising) is still at `level` or above, linear between the points.
pub fn crossing(pauses: &[f64], rates: &[f64], level: f64) -> Crossing {
    let Some(first) = rates.first() else {
        return Crossing::Below;
    };
    if *first < level {
        return Crossing::Below;
    }
    for i in 1..rates.len() {
        if rates[i] < level {
            // rates[i - 1] >= level > rates[i]
            let (r0, r1) = (rates[i - 1], rates[i]);
            let (t0, t1) = (pauses[i - 1], pauses[i]);
            return Crossing::At(t0 + (t1 - t0) * (r0 - level) / (r0 - r1));
        }
    }
    Crossing::Above
}

/// The pauses at which a system stops recovering, estimated from runs at
/// several pauses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edge {
    /// Where half the runs recover.
    pub t50: Crossing,
    /// The interval around T50: from the longest pause whose recovery
    /// rate is above one half at 95 % confidence (Wilson) to the shortest
    /// pause whose rate is below it; `None` at an end the pauses tried do
    /// not bound.
    pub t50_ci: (Option<f64>, Option<f64>),
    /// Where 90 % of the runs still recover: the start of the edge.
    pub t90: Crossing,
    /// Where only 10 % of the runs recover: the end of the edge.
    pub t10: Crossing,
}

impl Edge {
    /// Estimates the edge from `points`, in any order; a pause without
    /// runs says nothing and is left out.
    pub fn estimate(points: &[Trials]) -> Edge {
        let mut points: Vec<Trials> = points.iter().copied().filter(|t| t.runs > 0).collect();
        points.sort_by(|a, b| a.pause_s.total_cmp(&b.pause_s));
        let pauses: Vec<f64> = points.iter().map(|t| t.pause_s).collect();
        let fit = isotonic_decreasing(&points);
        let above = points
            .iter()
            .filter(|t| Proportion::of(t.recovered, t.runs).low > 0.5)
            .map(|t| t.pause_s)
            .reduce(f64::max);
        let below = points
            .iter()
            .filter(|t| Proportion::of(t.recovered, t.runs).high < 0.5)
            .map(|t| t.pause_s)
            .reduce(f64::min);
        // Runs that contradict the order (above one half after below it)
        // widen the interval to hold both, and the fitted T50 too.
        let t50 = crossing(&pauses, &fit, 0.5);
        let (low, high) = match (above, below) {
            (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
            ends => ends,
        };
        let t50_ci = match t50 {
            Crossing::At(t) => (low.map(|l| l.min(t)), high.map(|h| h.max(t))),
            _ => (low, high),
        };
        Edge {
            t50,
            t50_ci,
            t90: crossing(&pauses, &fit, 0.9),
            t10: crossing(&pauses, &fit, 0.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    fn round4(x: f64) -> f64 {
        (x * 1e4).round() / 1e4
    }

    #[test]
    fn wilson_intervals_match_newcombes_published_values() {
        // Newcombe (1998), Statistics in Medicine 17:857-872, table II,
        // method 3 (score interval without continuity correction).
        for (k, n, low, high) in [
            (81, 263, 0.2553, 0.3662),
            (15, 148, 0.0624, 0.1605),
            (0, 20, 0.0, 0.1611),
            (1, 29, 0.0061, 0.1718),
        ] {
            let p = Proportion::of(k, n);
            assert_eq!((round4(p.low), round4(p.high)), (low, high), "{k}/{n}");
        }
        let all = Proportion::of(29, 29);
        assert_eq!((round4(all.low), all.high), (0.883, 1.0));
        for n in 1..50 {
            assert_eq!(Proportion::of(0, n).low, 0.0, "0 of {n}, exactly");
            assert_eq!(Proportion::of(n, n).high, 1.0, "{n} of {n}, exactly");
        }
        assert_eq!(Proportion::of(0, 0).high, 1.0, "no trial says nothing");
    }

    #[test]
    fn quantiles_count_never_as_the_slowest() {
        let v = |xs: &[f64]| xs.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        // 1..=10: p10 = 1 + 0.9, p50 = 5.5, p90 = 9.1 (linear).
        let q = Percentiles3::of(&v(&[10.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]));
        assert_eq!((q.p10, q.p50), (Some(1.9), Some(5.5)));
        assert!((q.p90.unwrap() - 9.1).abs() < 1e-9);
        // Four of ten never recover: the median is still a time (between
        // the 5th and 6th), the 90th percentile is not.
        let mut runs = v(&[40.0, 45.0, 50.0, 55.0, 60.0, 65.0]);
        runs.extend([None; 4]);
        let q = Percentiles3::of(&runs);
        assert_eq!(q.p50, Some(62.5));
        assert_eq!(q.p90, None);
        // One of three never: p10 between the two times, the median on the
        // second, p90 between it and never.
        let q = Percentiles3::of(&[Some(2.0), None, Some(1.0)]);
        assert_eq!((q.p10, q.p50, q.p90), (Some(1.2), Some(2.0), None));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn spread_is_median_and_range_of_what_exists() {
        let s = Spread::of([Some(3.0), None, Some(1.0), Some(10.0)]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 10.0));
        assert_eq!(Spread::of([None, None]), None);
    }

    fn trials(rows: &[(f64, u32, u32)]) -> Vec<Trials> {
        rows.iter()
            .map(|&(pause_s, runs, recovered)| Trials {
                pause_s,
                runs,
                recovered,
            })
            .collect()
    }

    #[test]
    fn isotonic_regression_pools_what_rises() {
        // Rates 1, 0.5, 0.7, 0.2 with equal weights: 0.5 and 0.7 pool to
        // 0.6.
        let fit = isotonic_decreasing(&trials(&[
            (0.0, 10, 10),
            (1.0, 10, 5),
            (2.0, 10, 7),
            (3.0, 10, 2),
        ]));
        assert_eq!(fit, vec![1.0, 0.6, 0.6, 0.2]);
        // Weights count: 1 of 2 then 9 of 10 pool to 10 / 12.
        let fit = isotonic_decreasing(&trials(&[(0.0, 2, 1), (1.0, 10, 9)]));
        assert!((fit[0] - 10.0 / 12.0).abs() < 1e-12 && fit[0] == fit[1]);
    }

    #[test]
    fn crossings_are_linear_between_the_pauses_tried() {
        let pauses = [0.0, 10.0, 20.0];
        assert_eq!(
            crossing(&pauses, &[1.0, 0.8, 0.0], 0.5),
            Crossing::At(13.75)
        );
        assert_eq!(crossing(&pauses, &[0.4, 0.2, 0.0], 0.5), Crossing::Below);
        assert_eq!(crossing(&pauses, &[1.0, 1.0, 0.6], 0.5), Crossing::Above);
        // Exactly at the level at 10 s, below it after.
        assert_eq!(crossing(&pauses, &[1.0, 0.5, 0.0], 0.5), Crossing::At(10.0));
    }

    #[test]
    fn a_knife_edge_is_found_between_the_pauses_that_show_it() {
        // 20 runs each: all recover up to 12 s, none from 13 s on.
        let points: Vec<(f64, u32, u32)> = (0..=30)
            .map(|t| (f64::from(t), 20, if t <= 12 { 20 } else { 0 }))
            .collect();
        let edge = Edge::estimate(&trials(&points));
        assert_eq!(edge.t50, Crossing::At(12.5));
        assert_eq!(edge.t90, Crossing::At(12.1));
        assert_eq!(edge.t10, Crossing::At(12.9));
        assert_eq!(edge.t50_ci, (Some(12.0), Some(13.0)));
    }

    #[test]
    fn a_logistic_edge_is_recovered_from_seeded_runs() {
        // P(recover | t) = 1 / (1 + exp((t - 20) / 2)): T50 = 20,
        // T90 = 20 - 2 ln 9 = 15.61, T10 = 24.39. 50 runs at every second
        // from 0 to 40, drawn from a seeded generator.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(16);
        let truth = |t: f64| 1.0 / (1.0 + ((t - 20.0) / 2.0).exp());
        let points: Vec<Trials> = (0..=40)
            .map(|t| {
                let t = f64::from(t);
                let recovered = (0..50).filter(|_| rng.random::<f64>() < truth(t)).count();
                Trials {
                    pause_s: t,
                    runs: 50,
                    recovered: recovered as u32,
                }
            })
            .collect();
        let edge = Edge::estimate(&points);
        let t50 = edge.t50.pause().unwrap();
        assert!((t50 - 20.0).abs() < 1.5, "T50 {t50}");
        let (low, high) = edge.t50_ci;
        let (low, high) = (low.unwrap(), high.unwrap());
        assert!(
            low < 20.0 && 20.0 < high && high - low <= 8.0,
            "{low}..{high}"
        );
        let (t90, t10) = (edge.t90.pause().unwrap(), edge.t10.pause().unwrap());
        assert!((t90 - 15.61).abs() < 2.0, "T90 {t90}");
        assert!((t10 - 24.39).abs() < 2.0, "T10 {t10}");
    }

    #[test]
    fn runs_against_the_order_widen_the_interval_to_hold_t50() {
        // The fit pools 1 of 20 at 5 s with 15 of 20 at 10 s (0.4 each):
        // T50 = 5 * 0.5 / 0.6 = 4.17 s, before the pause (5 s) whose share
        // is clearly below one half, so the interval stretches to it. A
        // pause without runs changes nothing.
        let points = trials(&[
            (0.0, 20, 20),
            (5.0, 20, 1),
            (7.0, 0, 0),
            (10.0, 20, 15),
            (15.0, 20, 0),
        ]);
        let edge = Edge::estimate(&points);
        let t50 = edge.t50.pause().unwrap();
        assert!((t50 - 25.0 / 6.0).abs() < 1e-9, "{t50}");
        assert_eq!(edge.t50_ci, (Some(t50), Some(10.0)));
    }

    #[test]
    fn an_edge_beyond_the_pauses_tried_is_said_so() {
        let always = trials(&[(0.0, 10, 10), (10.0, 10, 10)]);
        let edge = Edge::estimate(&always);
        assert_eq!(edge.t50, Crossing::Above);
        assert_eq!(edge.t50_ci, (Some(10.0), None));
        let never = trials(&[(0.0, 10, 0), (10.0, 10, 0)]);
        let edge = Edge::estimate(&never);
        assert_eq!(
            (edge.t50, edge.t50_ci),
            (Crossing::Below, (None, Some(0.0)))
        );
    }
}
