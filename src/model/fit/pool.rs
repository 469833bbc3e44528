//! Fitting a pool: `R(N) = S max(1, N / W)` in a closed loop
//! ([`super::shapes`]), so `ln R̂ = ln S + ln max(1, N / W)`. For a given
//! number of workers the best `ln S` is the mean of `m_i - ln max(1, N_i
//! / W)`; every W from 1 to the largest concurrency probed is tried (a
//! pool with more workers than clients looks the same as one with
//! exactly as many).
//!
//! The distribution of service times leaves the mean latency alone and
//! shows in the spread: at the levels the pool does not saturate (`N <=
//! W`; the level at N = 1 always is one), `p99 / p50` is 1 for constant
//! service and `ln 100 / ln 2 = 6.64` for exponential. The median of the
//! measured ratios there picks the family whose ratio is nearer on a log
//! scale: constant below `sqrt(6.64) = 2.58`, exponential from it.
//!
//! The queue's length does not show in a probe that nothing refused: the
//! fit says only that it held every client beyond the workers.

use super::ShapeFit;
use super::curves::{candidates, fit_of};
use super::level::{Level, Targets};
use super::shapes::{DEFAULT_QUEUE, Family, Twin, round_duration};

/// `(ln S, squared error)` of a pool of `workers`.
fn profile(targets: &Targets, workers: u32) -> (f64, f64) {
    let w = f64::from(workers);
    let ln_g: Vec<f64> = targets.n.iter().map(|n| (n / w).max(1.0).ln()).collect();
    let count = ln_g.len() as f64;
    let ln_s = targets
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
        .map(|(m, g)| (m - ln_s - g).powi(2))
        .sum();
    (ln_s, sse)
}

/// The family of service times the levels a pool of `workers` does not
/// saturate show, with the median of their `p99 / p50` (module doc), or
/// `None` if no level has at most `workers` clients.
pub fn family(levels: &[Level], workers: u32) -> Option<(Family, f64)> {
    let mut spreads: Vec<f64> = levels
        .iter()
        .filter(|l| l.concurrency <= workers)
        .map(|l| l.latency_p99_s / l.latency_p50_s)
        .collect();
    if spreads.is_empty() {
        return None;
    }
    spreads.sort_by(f64::total_cmp);
    let mid = spreads.len() / 2;
    let median = if spreads.len() % 2 == 1 {
        spreads[mid]
    } else {
        (spreads[mid - 1] * spreads[mid]).sqrt()
    };
    let threshold = (Family::Constant.spread() * Family::Exponential.spread()).sqrt();
    let family = if median < threshold {
        Family::Constant
    } else {
        Family::Exponential
    };
    Some((family, median))
}

/// The pool that fits the levels best.
pub(crate) fn pool(targets: &Targets) -> ShapeFit {
    let max = targets.max_concurrency();
    // The fewest workers among those that fit alike.
    let mut best: Option<(f64, u32, f64)> = None;
    for workers in candidates(1, max) {
        let (ln_s, sse) = profile(targets, workers);
        if best.is_none_or(|b| sse < b.0) {
            best = Some((sse, workers, ln_s));
        }
    }
    let (_, workers, ln_s) = best.expect("at least one worker");
    let mut notes = Vec::new();
    if workers == max {
        notes.push(format!(
            "no level saturated the pool: it has at least {max} workers"
        ));
    }
    let (distribution, spread) =
        family(&targets.levels, workers).expect("the level at the least concurrency");
    notes.push(format!(
        "p99/p50 where the pool is not saturated: {spread:.2} (constant 1, \
         exponential 6.64): {}",
        distribution.distribution().name()
    ));
    let held = max.saturating_sub(workers);
    let queue = DEFAULT_QUEUE.max(held);
    if held > 0 {
        notes.push(format!(
            "the queue held {held} waiting requests without refusing; its length is \
             the burst probe's to tell (without it, --queue {queue})"
        ));
    }
    let twin = Twin::Pool {
        workers,
        service_time: round_duration(ln_s.exp()),
        distribution,
        queue,
    };
    fit_of(targets, twin, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn level(n: u32, r: f64, p50: f64, p99: f64) -> Level {
        Level {
            concurrency: n,
            throughput: f64::from(n) / r,
            latency_mean_s: r,
            latency_p50_s: p50,
            latency_p99_s: p99,
            error_share: 0.0,
        }
    }

    #[test]
    fn exact_levels_give_back_the_pool() {
        // 20 workers of 50 ms: 50 ms up to 20 clients, N x 2.5 ms beyond.
        let levels: Vec<Level> = [1, 2, 4, 8, 16, 32, 64, 128, 256]
            .into_iter()
            .map(|n| {
                let r = 0.05 * (f64::from(n) / 20.0).max(1.0);
                level(n, r, r, r)
            })
            .collect();
        let fit = pool(&Targets::new(&levels, 0.0).unwrap());
        assert_eq!(
            fit.twin,
            Twin::Pool {
                workers: 20,
                service_time: Duration::from_millis(50),
                distribution: Family::Constant,
                queue: 1000,
            }
        );
        assert!(fit.score.error < 1e-12);
        assert!(
            fit.notes.iter().any(|n| n.contains("held 236")),
            "{:?}",
            fit.notes
        );
    }

    #[test]
    fn the_spread_below_the_workers_picks_the_family() {
        let ln2 = 2f64.ln();
        let exponential = |n| level(n, 0.05, 0.05 * ln2, 0.05 * 100f64.ln());
        let constant = |n| level(n, 0.05, 0.05, 0.0505);
        let levels = [exponential(1), exponential(2), exponential(4), constant(64)];
        let (family, spread) = family(&levels, 4).unwrap();
        assert_eq!(family, Family::Exponential);
        assert!((spread - 6.643_856).abs() < 1e-5);
        let levels = [constant(1), constant(2), exponential(64)];
        assert_eq!(super::family(&levels, 2).unwrap().0, Family::Constant);
        // Between the two, by their geometric mean 2.58.
        let between = |ratio: f64| [level(1, 0.05, 0.05, 0.05 * ratio)];
        assert_eq!(super::family(&between(2.5), 1).unwrap().0, Family::Constant);
        assert_eq!(
            super::family(&between(2.6), 1).unwrap().0,
            Family::Exponential
        );
        assert_eq!(super::family(&between(2.6), 0), None);
    }
}
