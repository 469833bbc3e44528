//! A failing backend's door: each request fails with a fixed probability,
//! drawn independently of everything else the server draws.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// Decides which requests a failing backend fails.
#[derive(Clone)]
pub(super) struct Failures {
    rate: f64,
    rng: Xoshiro256PlusPlus,
}

impl Failures {
    /// Fails a fraction `rate` (0 to 1) of requests, drawing from `seed`.
    pub(super) fn new(rate: f64, seed: u64) -> Self {
        Failures {
            rate,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// Whether the next request fails: a draw in [0, 1) under the rate, so
    /// that a rate of 1 fails every request and 0 none.
    pub(super) fn fails(&mut self) -> bool {
        self.rng.random::<f64>() < self.rate
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{
        ADMISSION_STREAM, FAIL_STREAM, LIMITER_STREAM, POOL_STREAM, Refusal, Service,
    };
    use super::*;
    use crate::model::server::{Failing, PoolModel, ServerConfig, Shape};
    use crate::policy::defence::{AdmissionConfig, LimiterConfig, LimiterKind};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn failed(rate: f64, seed: u64, n: u32) -> u32 {
        let mut f = Failures::new(rate, seed);
        (0..n).map(|_| u32::from(f.fails())).sum()
    }

    #[test]
    fn the_fraction_failed_is_the_rate() {
        // n independent draws: the count failed is binomial(n, p), of
        // standard deviation sqrt(n p (1 - p)), 145 for p = 0.3 and 95 for
        // p = 0.1 over 100,000; four of them either side (a chance of
        // 6e-5 of failing for a correct gate, and the seeds are fixed).
        let n = 100_000;
        for (rate, seed) in [(0.1, 1), (0.3, 2), (0.5, 3), (0.9, 4)] {
            let expected = rate * f64::from(n);
            let sigma = (expected * (1.0 - rate)).sqrt();
            let got = f64::from(failed(rate, seed, n));
            assert!(
                (got - expected).abs() <= 4.0 * sigma,
                "rate {rate}: {got} failed of {n}, expected {expected} +- {}",
                4.0 * sigma
            );
        }
    }

    #[test]
    fn a_rate_of_0_fails_none_and_1_fails_all() {
        for seed in [0, 7, u64::MAX] {
            assert_eq!(failed(0.0, seed, 100_000), 0);
            assert_eq!(failed(1.0, seed, 100_000), 100_000);
        }
    }

    fn failing(rate: f64, config: ServerConfig) -> ServerConfig {
        let fail = Some(Failing { rate, status: 500 });
        ServerConfig { fail, ..config }
    }

    #[test]
    fn failing_comes_first_and_leaves_the_other_gates_alone() {
        // Every gate behind it would refuse the second request; all fail.
        let mut s = Service::new(&failing(
            1.0,
            ServerConfig {
                admission: Some(AdmissionConfig::default()),
                limiter: Some(LimiterConfig::new(LimiterKind::Aimd)),
                shape: Shape::Pool(PoolModel::constant(1, ms(100), 0)),
                ..ServerConfig::default()
            },
        ));
        for id in 0..100 {
            assert_eq!(
                s.admit(ms(id), id as u32),
                Err((id as u32, Refusal::Failed))
            );
        }
        assert_eq!(s.concurrency(), 0, "no work");
        assert_eq!(s.limiter.as_ref().unwrap().inflight(), 0);
        let admission = s.admission.as_mut().unwrap();
        assert_eq!(admission.counts(ms(100)), (0, 0), "nothing recorded");
    }

    #[test]
    fn failures_do_not_change_a_pools_draws() {
        // One worker, exponential service times, everything queued at 0:
        // the k-th request admitted leaves at the sum of the first k
        // times drawn. Half the requests failing, those admitted leave
        // at the same instants as the first ones of a pool without
        // failures: the pool's stream is untouched.
        let exponential = || ServerConfig {
            shape: Shape::Pool(PoolModel {
                workers: 1,
                ..PoolModel::default()
            }),
            seed: 11,
            ..ServerConfig::default()
        };
        let departures = |config: ServerConfig, n: u32| {
            let mut s = Service::new(&config);
            let admitted = (0..n).filter(|&id| s.admit(ms(0), id).is_ok()).count();
            let mut at = Vec::new();
            while let Some(next) = s.next_event() {
                s.advance(next);
                s.drain(|d| {
                    at.push(d.at);
                    true
                });
            }
            (admitted, at)
        };
        let (admitted, with) = departures(failing(0.5, exponential()), 1000);
        assert!((400..600).contains(&admitted), "{admitted}");
        let (_, without) = departures(exponential(), admitted as u32);
        assert_eq!(with, without);
        // Nor are the failures the pool's draws seen another way.
        let streams = [POOL_STREAM, ADMISSION_STREAM, LIMITER_STREAM, FAIL_STREAM];
        let distinct: std::collections::HashSet<_> = streams.iter().collect();
        assert_eq!(distinct.len(), streams.len());
    }
}
