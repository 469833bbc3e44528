//! The shipped clients' budgets as throttles: what each asks before an
//! attempt goes out and learns when it ends.

use std::time::Duration;

use super::budget::{AwsQuota, AwsQuotaConfig, EnvoyRetryBudget, FinagleBudget, TpsBudget};
use crate::model::timescale::compress;
use crate::policy::decision::Decision;

/// What a throttle is told about an attempt: whether it is a retry, and
/// whether the failure before it was a timeout (the AWS quota charges
/// those double).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptKind {
    /// Not the first attempt of its logical request.
    pub retry: bool,
    /// The attempt before it timed out.
    pub after_timeout: bool,
    /// The attempt before it was throttled (a 429).
    pub after_throttle: bool,
}

/// A shipped client's budget, with its parameters (the sources' defaults
/// unless given).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShippedThrottleConfig {
    /// The AWS SDKs' process-wide retry quota (500; cost 5, 10 after a
    /// timeout; the 2026 variant: 14).
    AwsQuota {
        /// The 2026 variant (its name; its costs are in `quota`).
        variant_2026: bool,
        /// The quota's size, costs and refund.
        quota: AwsQuotaConfig,
    },
    /// tower's `TpsBudget` (10 s, 10/s, 20 %), deposited by each success
    /// as tower's documented policy does.
    Tower {
        /// Retries allowed per request (0.2 for 20 %).
        percent: f64,
        /// ttl.
        ttl: Duration,
        /// Retries a second allowed regardless (10; multiplied when time
        /// is compressed).
        min_per_sec: f64,
    },
    /// Finagle's `RetryBudget` (10 s, 10/s, 20 %), deposited by each
    /// request.
    Finagle {
        /// Retries allowed per request (0.2 for 20 %).
        percent: f64,
        /// ttl.
        ttl: Duration,
        /// Retries a second allowed regardless.
        min_per_sec: f64,
    },
    /// Envoy's concurrent-retry budget (20 % of active requests, at least
    /// 3).
    Envoy(EnvoyRetryBudget),
}

impl ShippedThrottleConfig {
    /// The AWS quota with its source's defaults.
    pub fn aws_quota(variant_2026: bool) -> Self {
        ShippedThrottleConfig::AwsQuota {
            variant_2026,
            quota: AwsQuotaConfig::of(variant_2026),
        }
    }

    /// tower's defaults.
    pub fn tower() -> Self {
        ShippedThrottleConfig::Tower {
            percent: 0.2,
            ttl: Duration::from_secs(10),
            min_per_sec: 10.0,
        }
    }

    /// Finagle's defaults.
    pub fn finagle() -> Self {
        ShippedThrottleConfig::Finagle {
            percent: 0.2,
            ttl: Duration::from_secs(10),
            min_per_sec: 10.0,
        }
    }

    /// The same budget with time compressed `k` times: shorter windows,
    /// and as many retries allowed within them; the percent is unchanged.
    pub fn scaled(self, k: f64) -> Self {
        match self {
            ShippedThrottleConfig::Tower {
                percent,
                ttl,
                min_per_sec,
            } => ShippedThrottleConfig::Tower {
                percent,
                ttl: compress(ttl, k),
                min_per_sec: min_per_sec * k,
            },
            ShippedThrottleConfig::Finagle {
                percent,
                ttl,
                min_per_sec,
            } => ShippedThrottleConfig::Finagle {
                percent,
                ttl: compress(ttl, k),
                min_per_sec: min_per_sec * k,
            },
            other => other,
        }
    }
}

/// A shipped client's budget and its state.
#[derive(Debug, Clone, PartialEq)]
pub enum ShippedThrottle {
    /// The AWS retry quota, with the 2026 variant's throttling cost.
    AwsQuota(AwsQuota),
    /// tower's budget.
    Tower(TpsBudget),
    /// Finagle's budget.
    Finagle(FinagleBudget),
    /// Envoy's budget, with the requests and the retries in flight.
    Envoy {
        /// The budget.
        budget: EnvoyRetryBudget,
        /// Attempts in flight.
        active: u64,
        /// Retries in flight.
        retrying: u64,
    },
}

impl ShippedThrottle {
    /// A fresh budget.
    pub fn new(config: ShippedThrottleConfig) -> Self {
        match config {
            ShippedThrottleConfig::AwsQuota { quota, .. } => {
                ShippedThrottle::AwsQuota(quota.quota())
            }
            ShippedThrottleConfig::Tower {
                percent,
                ttl,
                min_per_sec,
            } => ShippedThrottle::Tower(TpsBudget::new(ttl, min_per_sec, percent)),
            ShippedThrottleConfig::Finagle {
                percent,
                ttl,
                min_per_sec,
            } => ShippedThrottle::Finagle(FinagleBudget::new(ttl, min_per_sec, percent)),
            ShippedThrottleConfig::Envoy(budget) => ShippedThrottle::Envoy {
                budget,
                active: 0,
                retrying: 0,
            },
        }
    }

    /// Whether an attempt of `kind` may go out at `now`: a retry the
    /// budget refuses is given up, and its request fails.
    pub fn before(&mut self, kind: AttemptKind, now: Duration) -> Decision {
        let allowed = match self {
            ShippedThrottle::AwsQuota(quota) => {
                !kind.retry
                    || quota
                        .acquire(kind.after_timeout, kind.after_throttle)
                        .is_some()
            }
            ShippedThrottle::Tower(budget) => !kind.retry || budget.withdraw(now),
            ShippedThrottle::Finagle(budget) => {
                if kind.retry {
                    budget.withdraw(now)
                } else {
                    budget.deposit(now);
                    true
                }
            }
            ShippedThrottle::Envoy {
                budget,
                active,
                retrying,
            } => {
                let ok = !kind.retry || budget.allows(*retrying, *active);
                if ok {
                    *active += 1;
                    *retrying += u64::from(kind.retry);
                }
                ok
            }
        };
        if allowed {
            Decision::Allow
        } else {
            Decision::GiveUp
        }
    }

    /// An attempt of `kind` that went out ended at `now`, `ok` or not.
    pub fn after(&mut self, ok: bool, kind: AttemptKind, now: Duration) {
        match self {
            ShippedThrottle::AwsQuota(quota) => {
                if ok {
                    // The success of a retry gives back what that retry
                    // took: the last cost of its request.
                    let last = kind
                        .retry
                        .then(|| quota.cost_of(kind.after_timeout, kind.after_throttle));
                    quota.release(last);
                }
            }
            ShippedThrottle::Tower(budget) => {
                if ok {
                    budget.deposit(now);
                }
            }
            ShippedThrottle::Finagle(_) => {}
            ShippedThrottle::Envoy {
                active, retrying, ..
            } => {
                *active = active.saturating_sub(1);
                if kind.retry {
                    *retrying = retrying.saturating_sub(1);
                }
            }
        }
    }
}

impl ShippedThrottle {
    /// An attempt of `kind` that went out was cancelled at `now`, unanswered
    /// (a hedge that lost): Envoy's budget stops counting it in flight;
    /// the others saw neither a success nor a failure.
    pub fn cancelled(&mut self, kind: AttemptKind, now: Duration) {
        if let ShippedThrottle::Envoy { .. } = self {
            self.after(false, kind, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: AttemptKind = AttemptKind {
        retry: false,
        after_timeout: false,
        after_throttle: false,
    };
    const RETRY: AttemptKind = AttemptKind {
        retry: true,
        after_timeout: false,
        after_throttle: false,
    };
    const RETRY_AFTER_TIMEOUT: AttemptKind = AttemptKind {
        retry: true,
        after_timeout: true,
        after_throttle: false,
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_aws_quota_charges_retries_and_refunds_successes() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::aws_quota(false));
        // 50 retries after timeouts use up the 500.
        for _ in 0..50 {
            assert_eq!(t.before(RETRY_AFTER_TIMEOUT, ms(0)), Decision::Allow);
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        assert_eq!(
            t.before(FIRST, ms(0)),
            Decision::Allow,
            "first attempts are free"
        );
        // A clean success gives 1, a retry's success its cost (10 here).
        t.after(true, FIRST, ms(0));
        t.after(true, RETRY_AFTER_TIMEOUT, ms(0));
        t.after(false, RETRY, ms(0));
        let ShippedThrottle::AwsQuota(q) = &t else {
            unreachable!()
        };
        assert_eq!(q.available(), 11);
    }

    #[test]
    fn envoy_counts_retries_in_flight_against_a_fifth_of_all() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Envoy(EnvoyRetryBudget::default()));
        for _ in 0..3 {
            assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp, "at least 3");
        // 17 first attempts in flight: 20 active, a fifth is 4.
        for _ in 0..17 {
            t.before(FIRST, ms(0));
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp, "4 of 21");
        t.after(false, RETRY, ms(1));
        assert_eq!(t.before(RETRY, ms(1)), Decision::Allow);
    }

    #[test]
    fn tower_deposits_successes_and_finagle_requests() {
        // tower: a reserve of 500 at 5 a retry, plus one per five successes.
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::tower());
        for _ in 0..100 {
            assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        for _ in 0..5 {
            t.before(FIRST, ms(0));
            t.after(true, FIRST, ms(0));
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        // Finagle: the reserve, then one retry per five requests, whatever
        // their outcome.
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::finagle());
        for _ in 0..100 {
            assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        for _ in 0..5 {
            t.before(FIRST, ms(0));
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
    }

    #[test]
    fn an_aws_quota_of_50_at_10_a_retry_allows_exactly_5_retries() {
        let quota = AwsQuotaConfig {
            capacity: 50,
            retry_cost: 10,
            ..AwsQuotaConfig::STANDARD
        };
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::AwsQuota {
            variant_2026: false,
            quota,
        });
        for _ in 0..5 {
            assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        // A clean success refunds 1: not enough for a retry of 10; ten
        // of them are.
        t.after(true, FIRST, ms(0));
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        for _ in 0..9 {
            t.after(true, FIRST, ms(0));
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
    }

    #[test]
    fn envoy_at_half_with_a_floor_of_one() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Envoy(EnvoyRetryBudget {
            percent: 50.0,
            min: 1,
        }));
        // Alone, the floor: one retry; then 1 in flight, trunc(0.5) = 0.
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        t.after(false, RETRY, ms(1));
        // 6 first attempts in flight; each retry counts in flight too:
        // 0 < 3, 1 < trunc(3.5), 2 < 4, 3 < trunc(4.5), 4 < 5, then 5 of
        // 11 is not below trunc(5.5) = 5.
        for _ in 0..6 {
            t.before(FIRST, ms(1));
        }
        for _ in 0..5 {
            assert_eq!(t.before(RETRY, ms(1)), Decision::Allow);
        }
        assert_eq!(t.before(RETRY, ms(1)), Decision::GiveUp);
    }

    #[test]
    fn tower_and_finagle_at_one_half_let_one_retry_per_two_requests() {
        let ttl = Duration::from_secs(10);
        // tower: two successes deposit 2, a retry withdraws trunc(1/0.5).
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Tower {
            percent: 0.5,
            ttl,
            min_per_sec: 0.0,
        });
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp, "no reserve");
        for _ in 0..2 {
            t.before(FIRST, ms(0));
            t.after(true, FIRST, ms(0));
        }
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        // Finagle: two requests deposit 2000, a retry withdraws 2000.
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Finagle {
            percent: 0.5,
            ttl,
            min_per_sec: 0.0,
        });
        t.before(FIRST, ms(0));
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
        t.before(FIRST, ms(0));
        assert_eq!(t.before(RETRY, ms(0)), Decision::Allow);
        assert_eq!(t.before(RETRY, ms(0)), Decision::GiveUp);
    }

    #[test]
    fn compressed_time_divides_the_ttl_and_multiplies_the_rate_only() {
        let tower = ShippedThrottleConfig::Tower {
            percent: 0.5,
            ttl: Duration::from_secs(4),
            min_per_sec: 2.5,
        };
        assert_eq!(
            tower.scaled(4.0),
            ShippedThrottleConfig::Tower {
                percent: 0.5,
                ttl: Duration::from_secs(1),
                min_per_sec: 10.0,
            }
        );
        assert_eq!(
            ShippedThrottleConfig::finagle().scaled(10.0),
            ShippedThrottleConfig::Finagle {
                percent: 0.2,
                ttl: Duration::from_secs(1),
                min_per_sec: 100.0,
            }
        );
        // The same reserve: 2.5 a second over 4 s is 10 retries of 2.
        let reserve = |c| match ShippedThrottle::new(c) {
            ShippedThrottle::Tower(mut b) => b.balance(ms(0)),
            _ => unreachable!(),
        };
        assert_eq!((reserve(tower), reserve(tower.scaled(4.0))), (20, 20));
        // The quota and Envoy's budget have no clock.
        let envoy = ShippedThrottleConfig::Envoy(EnvoyRetryBudget {
            percent: 50.0,
            min: 1,
        });
        assert_eq!(envoy.scaled(10.0), envoy);
        let aws = ShippedThrottleConfig::aws_quota(true);
        assert_eq!(aws.scaled(10.0), aws);
    }
}
