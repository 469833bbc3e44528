//! First come, first served against processor sharing, from the order
//! probe: pure, the latencies of requests sent at once in, how the
//! service shared itself among them out.
//!
//! A closed loop cannot tell the two apart: with N clients and no think
//! time, a pool of c workers first come, first served and a service that
//! shares itself among every request it holds both answer each request
//! in `N S / c`. Requests that arrive together can: sent `k` at once to
//! an idle service,
//!
//! - a **pool** (first come, first served: gunicorn's and waitress's
//!   workers, an event loop running CPU work to completion; the project's
//!   `--model pool`) answers them in waves: the first `c` after one
//!   service time, the next `c` after two, the last after `k / c`;
//! - a service **sharing** itself among all it holds (a thread per
//!   connection on a few cores, handlers that await; the project's
//!   curves, whose one delay is shared by every request in flight and
//!   re-evaluated as it changes) answers them together, each slowed by
//!   the others alike.
//!
//! One batch's **spread** reads the times of its answers from the
//! batch's start, each less the lone request's on the idle service
//! (`b`, which holds what every request of the batch pays alike: the
//! connect, the round trip, one service): `(t25 - b) / (t90 - b)`, the
//! 25th and 90th percentiles by nearest rank, a request unanswered or
//! refused ranked as slow as the timeout. Waves give 0 to 1/4 (wave
//! `ceil(m / 4)` of `m` over wave `ceil(0.9 m)`, less the first); together
//! gives near 1. A batch tells nothing unless at least [`MIN_ANSWERS`]
//! and half of it were answered, and its 90th percentile took
//! [`SLOWED`] times the lone request or more: a batch that did not slow
//! the service (a pool with more workers than the batch, handlers that
//! await) shows neither waves nor sharing. The verdict ([`order`]) is
//! the median spread of the batches that told one: [`TOGETHER_FROM`] or
//! more is sharing, less is waves.
//!
//! The verdict chooses among shapes that fit about as well
//! (`super::choose_with`): it tells the kind where the closed loop fits a
//! pool and a curve alike, as an event loop running 5 ms of CPU a request
//! is fitted by a pool of one and by a linear curve within 3 %.

use serde::{Deserialize, Serialize};

/// A batch's spread at or above this is sharing: waves give 1/4 at most,
/// requests answered together 1 less their jitter.
pub const TOGETHER_FROM: f64 = 0.7;

/// Answers a batch needs for its percentiles to mean something.
pub const MIN_ANSWERS: usize = 8;

/// A batch whose 90th percentile took less than this many times the
/// lone request did not slow the service enough to tell.
pub const SLOWED: f64 = 2.0;

/// A batch is as large as the concurrency at which the service's latency
/// had grown this many times: four waves of a pool.
pub const WAVES: f64 = 4.0;

/// The smallest batch: 16 requests.
pub const MIN_BATCH: u32 = 16;

/// One batch as the probe saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The successes' times, seconds from the batch's start.
    pub answered: Vec<f64>,
    /// Requests sent.
    pub sent: usize,
}

/// How a service answered requests sent at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// In waves, first come, first served: a pool.
    Waves,
    /// Together, the service shared among them: a curve.
    Together,
}

impl Order {
    /// How the calibration's words name it.
    pub fn words(self) -> &'static str {
        match self {
            Order::Waves => "in waves, first come, first served (a pool)",
            Order::Together => "together, the service shared among them (a curve)",
        }
    }
}

/// The batch size for levels of a closed loop given as (concurrency, mean
/// latency in seconds), those with errors left out by the caller: the
/// least concurrency whose latency reached [`WAVES`] times the lowest
/// concurrency's, at least [`MIN_BATCH`]; the largest probed (at least
/// [`MIN_BATCH`]) if none did; `None` with no levels.
pub fn batch_size(levels: &[(u32, f64)]) -> Option<u32> {
    let mut levels = levels.to_vec();
    levels.sort_by_key(|&(n, _)| n);
    let &(_, first) = levels.first()?;
    let grown = levels
        .iter()
        .find(|&&(_, latency)| latency >= WAVES * first)
        .or(levels.last())
        .map(|&(n, _)| n)?;
    Some(grown.max(MIN_BATCH))
}

/// One batch's spread (module doc), `baseline` the lone request's seconds
/// and `timeout` the rank of a request not answered with success; `None`
/// if the batch tells nothing.
pub fn spread(batch: &Batch, baseline: f64, timeout: f64) -> Option<f64> {
    let n = batch.answered.len();
    if n < MIN_ANSWERS || 2 * n < batch.sent {
        return None;
    }
    let mut ranked = batch.answered.clone();
    ranked.sort_by(f64::total_cmp);
    ranked.resize(batch.sent.max(n), timeout);
    let (low, high) = (nearest_rank(&ranked, 0.25), nearest_rank(&ranked, 0.90));
    (high >= SLOWED * baseline).then(|| (low - baseline).max(0.0) / (high - baseline))
}

/// The `q` quantile (0 to 1) of `sorted`, ascending and not empty, by
/// nearest rank: the value at rank `ceil(q n)`, at least the first.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The verdict of `batches` (module doc), with the median spread it read;
/// `None` if no batch told one.
pub fn order(batches: &[Batch], baseline: f64, timeout: f64) -> Option<(Order, f64)> {
    let spreads: Vec<f64> = batches
        .iter()
        .filter_map(|b| spread(b, baseline, timeout))
        .collect();
    let median = super::gone::median(&spreads)?;
    let kind = if median >= TOGETHER_FROM {
        Order::Together
    } else {
        Order::Waves
    };
    Some((kind, median))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `k` requests answered by `c` workers of `s` seconds, first come,
    /// first served, each `o` seconds later for the connect and the round
    /// trip: the i-th (from 0) in wave i / c + 1.
    fn waves(k: usize, c: usize, s: f64, o: f64) -> Batch {
        Batch {
            answered: (0..k).map(|i| o + (i / c + 1) as f64 * s).collect(),
            sent: k,
        }
    }

    #[test]
    fn a_pool_answers_in_waves() {
        // 16 at once to one worker of 5 ms, alone 5 ms: answers at 5, 10,
        // ..., 80 ms. 25th: rank 4, 20 ms; 90th: rank ceil(14.4) = 15,
        // 75 ms. (20 - 5) / (75 - 5).
        let one = waves(16, 1, 0.005, 0.0);
        let s = spread(&one, 0.005, 1.0).unwrap();
        assert!((s - 0.015 / 0.070).abs() < 1e-12, "{s}");
        // The same 50 ms away: the lone request pays it too; unchanged.
        let far = waves(16, 1, 0.005, 0.05);
        assert!((spread(&far, 0.055, 1.0).unwrap() - s).abs() < 1e-9);
        // 80 at once to 20 workers of 100 ms: four waves of 20. 25th:
        // rank 20, the first wave's 0.1 s, which is the lone request's.
        let twenty = waves(80, 20, 0.1, 0.0);
        assert_eq!(spread(&twenty, 0.1, 5.0), Some(0.0));
        assert_eq!(
            order(&[one, twenty], 0.005, 5.0).map(|(o, _)| o),
            Some(Order::Waves)
        );
    }

    #[test]
    fn a_shared_service_answers_together() {
        // A linear curve of 10 ms + 2 ms a request, alone 12 ms; 16 at
        // once each answered at 42 ms, give or take the 1 ms they took to
        // arrive. 25th: 42.2 ms; 90th: 42.93 ms.
        let together = Batch {
            answered: (0..16).map(|i| 0.042 + i as f64 * 1e-3 / 15.0).collect(),
            sent: 16,
        };
        let s = spread(&together, 0.012, 5.0).unwrap();
        assert!((s - (0.0422 - 0.012) / (0.042 + 0.014 / 15.0 - 0.012)).abs() < 1e-9);
        assert!(s > 0.95, "{s}");
        assert_eq!(order(&[together], 0.012, 5.0), Some((Order::Together, s)));
    }

    #[test]
    fn a_request_unanswered_ranks_as_slow_as_the_timeout() {
        // One worker of 5 ms, a timeout of 45 ms: 8 of 16 answered (5 to
        // 40 ms), 8 ranked at 45 ms. 25th: rank 4, 20 ms; 90th: 45 ms.
        let cut = Batch {
            answered: (1..=8).map(|i| i as f64 * 0.005).collect(),
            sent: 16,
        };
        let s = spread(&cut, 0.005, 0.045).unwrap();
        assert!((s - 0.015 / 0.040).abs() < 1e-12, "{s}");
    }

    #[test]
    fn the_verdict_is_the_median_batchs() {
        let pool = waves(16, 1, 0.01, 0.0);
        let shared = Batch {
            answered: vec![0.1; 16],
            sent: 16,
        };
        // Two sharing (spread 1), one in waves ((0.04 - 0.01) / (0.15 -
        // 0.01) = 0.214): together, at the middle, 1.
        let batches = [shared.clone(), pool.clone(), shared.clone()];
        assert_eq!(order(&batches, 0.01, 5.0), Some((Order::Together, 1.0)));
        // One of each: the mean of the two, (1 + 0.03 / 0.14) / 2 = 0.607.
        let (kind, median) = order(&[shared, pool], 0.01, 5.0).unwrap();
        assert_eq!(kind, Order::Waves);
        assert!(
            (median - (1.0 + 0.03 / 0.14) / 2.0).abs() < 1e-12,
            "{median}"
        );
    }

    #[test]
    fn a_batch_that_tells_nothing_gives_no_verdict() {
        let batch = |answered: Vec<f64>, sent| Batch { answered, sent };
        // 7 answers are too few; 10 of 32 under half.
        assert_eq!(spread(&batch(vec![0.1; 7], 7), 0.01, 5.0), None);
        assert_eq!(spread(&batch(vec![0.1; 10], 32), 0.01, 5.0), None);
        // Half answered at 0.1 s, half ranked at the 5 s timeout.
        let half = spread(&batch(vec![0.1; 16], 32), 0.01, 5.0).unwrap();
        assert!((half - 0.09 / 4.99).abs() < 1e-12, "{half}");
        // Handlers that await 100 ms, 256 at once, each 105 ms: not slowed
        // twice, neither waves nor sharing.
        assert_eq!(spread(&batch(vec![0.105; 256], 256), 0.1, 5.0), None);
        assert_eq!(order(&[batch(vec![0.1; 3], 16)], 0.01, 5.0), None);
        assert_eq!(order(&[], 0.01, 5.0), None);
    }

    #[test]
    fn a_batch_is_where_latency_grew_four_times() {
        // aiohttp's CPU loop: 5.45 ms alone, 20.7 ms at 4 (3.8 times),
        // 41.5 at 8: a batch of 8, raised to the least, 16.
        let cpu = [
            (1, 0.00545),
            (2, 0.0105),
            (4, 0.0207),
            (8, 0.0415),
            (16, 0.0833),
        ];
        assert_eq!(batch_size(&cpu), Some(16));
        // 20 workers of 104 ms: 4 times at 128 (0.666 s), not at 64
        // (0.333), whatever order the levels were probed in.
        let pool = [
            (128, 0.666),
            (1, 0.104),
            (32, 0.166),
            (64, 0.333),
            (256, 1.33),
        ];
        assert_eq!(batch_size(&pool), Some(128));
        // Handlers that await 102 ms: never four times; the largest level.
        let awaiting = [(1, 0.102), (128, 0.104), (256, 0.107), (64, 0.103)];
        assert_eq!(batch_size(&awaiting), Some(256));
        assert_eq!(batch_size(&[(4, 0.1)]), Some(16));
        assert_eq!(batch_size(&[]), None);
    }
}
