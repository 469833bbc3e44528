//! Fitting the two delay curves. Both give `R(N) = delay(N)` in a closed
//! loop ([`super::shapes`]), and the score to minimise is `Σ (ln R̂_i -
//! m_i)²` with `m_i` each level's middle ([`super::level::Targets::score`]):
//!
//! - exponential: `ln R̂ = ln base + k max(0, N - limit)` with `k =
//!   ln(factor) / scale`. For a given integer limit this is a straight
//!   line in `max(0, N - limit)`, fitted exactly by least squares with
//!   `k >= 0`; every limit from 0 to the largest concurrency probed is
//!   tried. Only `k` shows, so the scale is written as the project's
//!   default, 15, and the factor as `e^(15 k)`.
//! - linear: `ln R̂ = ln base + ln(1 + ρ N)` with `ρ = slope / base`. For
//!   a given `ρ` the best `ln base` is the mean of `m_i - ln(1 + ρ N_i)`;
//!   `ρ` is scanned from `1e-7` to `1e7` a request (log-spaced, then
//!   golden-section search), beside its ends: a flat curve (`ρ = 0`) and
//!   one with no base (`R = slope N`).

use super::ShapeFit;
use super::level::Targets;
use super::search::{line, scan_golden};
use super::shapes::{EXPONENTIAL_SCALE, Twin, round_duration, round_number};

/// The most candidates tried for an integer parameter (a limit, a
/// number of workers): every integer up to the largest concurrency
/// probed, or evenly spaced ones past this many.
pub(crate) const MOST_CANDIDATES: u32 = 100_000;

/// The integers `0..=max` (or `1..=max`), or evenly spaced ones among
/// them where there are more than [`MOST_CANDIDATES`].
pub(crate) fn candidates(from: u32, max: u32) -> impl Iterator<Item = u32> {
    let stride = (max / MOST_CANDIDATES).max(1);
    (from..=max)
        .step_by(stride as usize)
        .chain((!max.is_multiple_of(stride)).then_some(max))
}

/// The twin's score against the levels, from its own predictions.
pub(crate) fn fit_of(targets: &Targets, twin: Twin, notes: Vec<String>) -> ShapeFit {
    let ln_pred: Vec<f64> = targets
        .levels
        .iter()
        .map(|l| twin.latency(l.concurrency).ln())
        .collect();
    ShapeFit {
        twin,
        score: targets.score(&ln_pred),
        notes,
    }
}

/// The exponential curve that fits the levels best.
pub(crate) fn exponential(targets: &Targets) -> ShapeFit {
    let max = targets.max_concurrency();
    // (squared error, limit, ln base, k); from the top, so that where
    // several limits fit alike (no growth seen) the largest is kept.
    let mut best: Option<(f64, u32, f64, f64)> = None;
    let limits: Vec<u32> = candidates(0, max).collect();
    for &limit in limits.iter().rev() {
        let x: Vec<f64> = targets
            .n
            .iter()
            .map(|n| (n - f64::from(limit)).max(0.0))
            .collect();
        let (a, k, sse) = line(&x, &targets.middle);
        if best.is_none_or(|b| sse < b.0) {
            best = Some((sse, limit, a, k));
        }
    }
    let (_, limit, a, k) = best.expect("at least one limit");
    let mut notes = Vec::new();
    if k == 0.0 || limit == max {
        notes.push(format!(
            "latency did not grow up to {max} clients: the limit is at least {max}, \
             and how fast latency grows beyond it is unknown"
        ));
    }
    let twin = Twin::Exponential {
        base: round_duration(a.exp()),
        limit: u64::from(limit),
        factor: round_number((k * EXPONENTIAL_SCALE).exp()),
        scale: EXPONENTIAL_SCALE,
    };
    fit_of(targets, twin, notes)
}

/// `(ln base, squared error)` of the linear curve `base (1 + ρ N)`, or
/// of `slope N` where `rho` is infinite (then the first is `ln slope`).
fn linear_profile(targets: &Targets, rho: f64) -> (f64, f64) {
    let ln_g: Vec<f64> = targets
        .n
        .iter()
        .map(|n| {
            if rho.is_infinite() {
                n.ln()
            } else {
                (rho * n).ln_1p()
            }
        })
        .collect();
    let count = ln_g.len() as f64;
    let ln_base = targets
        .middle
        .iter()
        .zip(&ln_g)
        .map(|(m, g)| m - g)
        .sum::<f64>()
        / count;
    let sse = targets
        .middle
        .iter()
        .zip(&ln_g)
        .map(|(m, g)| (m - ln_base - g).powi(2))
        .sum();
    (ln_base, sse)
}

/// The linear curve that fits the levels best.
pub(crate) fn linear(targets: &Targets) -> ShapeFit {
    let sse = |t: f64| linear_profile(targets, 10f64.powf(t)).1;
    let (t, _) = scan_golden(sse, -7.0, 7.0, 280, 1e-6);
    let rho = [0.0, 10f64.powf(t), f64::INFINITY]
        .into_iter()
        .min_by(|a, b| {
            linear_profile(targets, *a)
                .1
                .total_cmp(&linear_profile(targets, *b).1)
        })
        .expect("three candidates");
    let (ln_base, _) = linear_profile(targets, rho);
    let mut notes = Vec::new();
    let (base, slope) = if rho.is_infinite() {
        notes.push("no base latency: every request waits slope x N".to_string());
        (0.0, ln_base.exp())
    } else {
        (ln_base.exp(), ln_base.exp() * rho)
    };
    if rho == 0.0 {
        notes.push("latency did not grow: the slope is the least a flag takes".to_string());
    }
    let twin = Twin::Linear {
        base: round_duration(base),
        slope: round_duration(slope),
    };
    fit_of(targets, twin, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fit::level::Level;
    use std::time::Duration;

    /// Levels measured exactly as `twin` predicts.
    fn exact(twin: &Twin, ns: &[u32]) -> Targets {
        let levels: Vec<Level> = ns
            .iter()
            .map(|&n| {
                let r = twin.latency(n);
                Level {
                    concurrency: n,
                    throughput: twin.throughput(n),
                    latency_mean_s: r,
                    latency_p50_s: r,
                    latency_p99_s: r,
                    error_share: 0.0,
                }
            })
            .collect();
        Targets::new(&levels, 0.0).unwrap()
    }

    const PROBE: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

    #[test]
    fn candidates_are_every_integer_or_evenly_spaced_ones() {
        assert_eq!(candidates(0, 3).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        let many: Vec<u32> = candidates(1, 250_001).collect();
        assert_eq!(many.len(), 125_001 + 1);
        assert_eq!((many[0], many[1]), (1, 3));
        assert_eq!(*many.last().unwrap(), 250_001);
    }

    #[test]
    fn exact_levels_give_back_the_exponential_curve() {
        let truth = Twin::Exponential {
            base: Duration::from_millis(20),
            limit: 30,
            factor: 2f64.powf(EXPONENTIAL_SCALE / 40.0),
            scale: EXPONENTIAL_SCALE,
        };
        let fit = exponential(&exact(&truth, &PROBE));
        let Twin::Exponential {
            base,
            limit,
            factor,
            ..
        } = fit.twin
        else {
            panic!("{:?}", fit.twin)
        };
        assert_eq!(base, Duration::from_millis(20));
        assert_eq!(limit, 30);
        assert!(
            (factor / 2f64.powf(15.0 / 40.0) - 1.0).abs() < 1e-5,
            "{factor}"
        );
        assert!(fit.score.error < 1e-4, "{:?}", fit.score);
        assert!(fit.notes.is_empty());
    }

    #[test]
    fn exact_levels_give_back_the_linear_curve() {
        let truth = Twin::Linear {
            base: Duration::from_millis(20),
            slope: Duration::from_millis(1),
        };
        let fit = linear(&exact(&truth, &PROBE));
        assert_eq!(fit.twin, truth, "{:?}", fit.score);
        assert!(fit.score.error < 1e-6);
        // No base at all: slope x N.
        let steep = Twin::Linear {
            base: Duration::from_nanos(1),
            slope: Duration::from_millis(3),
        };
        let fit = linear(&exact(&steep, &PROBE));
        let Twin::Linear { base, slope } = fit.twin else {
            panic!()
        };
        assert!(base < Duration::from_micros(10), "{base:?}");
        assert_eq!(slope, Duration::from_millis(3));
    }

    #[test]
    fn flat_levels_say_no_growth_was_seen() {
        let flat = Twin::Exponential {
            base: Duration::from_millis(10),
            limit: 0,
            factor: 1.0,
            scale: EXPONENTIAL_SCALE,
        };
        let targets = exact(&flat, &PROBE);
        let fit = exponential(&targets);
        let Twin::Exponential { limit, factor, .. } = fit.twin else {
            panic!()
        };
        assert_eq!((limit, factor), (256, 1.0));
        assert!(fit.notes[0].contains("at least 256"), "{:?}", fit.notes);
        let fit = linear(&targets);
        assert!(fit.score.error < 1e-4);
    }
}
