//! The shipped clients' budgets as throttles: what each asks before an
//! attempt goes out and learns when it ends.

use std::time::Duration;

use super::adaptive::AdaptiveLimiter;
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

/// How an attempt that went out ended, as a throttle sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A 2xx answer.
    Ok,
    /// A throttling answer (429).
    Throttled,
    /// Any other failure: an error status, a connection error, a timeout.
    Failed,
    /// A failure a gRPC client's policy does not retry (a status it does
    /// not map to `UNAVAILABLE`): gRPC's retry throttling takes no token
    /// for it; every other throttle counts it as any other failure.
    NotRetried,
}

/// A shipped client's budget, with its parameters (the sources' defaults
/// unless given).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShippedThrottleConfig {
    /// The AWS SDKs' process-wide retry quota (500; cost 5, 10 after a
    /// timeout; botocore 1.44: 14).
    AwsQuota {
        /// Whether it is botocore 1.44's (its name; its costs are in `quota`).
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
    /// The AWS SDKs' adaptive mode: the retry quota and the client-side
    /// rate limiter that the first throttling answer switches on.
    AwsAdaptive {
        /// Whether it is botocore 1.44's (its name; its costs are in `quota`).
        variant_2026: bool,
        /// The quota's size, costs and refund.
        quota: AwsQuotaConfig,
        /// How many times the experiment is compressed in time (1: not).
        time_scale: f64,
    },
}

impl ShippedThrottleConfig {
    /// The AWS quota with its source's defaults.
    pub fn aws_quota(variant_2026: bool) -> Self {
        ShippedThrottleConfig::AwsQuota {
            variant_2026,
            quota: AwsQuotaConfig::of(variant_2026),
        }
    }

    /// The AWS adaptive mode with its source's defaults.
    pub fn aws_adaptive(variant_2026: bool) -> Self {
        ShippedThrottleConfig::AwsAdaptive {
            variant_2026,
            quota: AwsQuotaConfig::of(variant_2026),
            time_scale: 1.0,
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
            ShippedThrottleConfig::AwsAdaptive {
                variant_2026,
                quota,
                time_scale,
            } => ShippedThrottleConfig::AwsAdaptive {
                variant_2026,
                quota,
                time_scale: time_scale * k,
            },
            other => other,
        }
    }
}

/// A shipped client's budget and its state.
#[derive(Debug, Clone, PartialEq)]
pub enum ShippedThrottle {
    /// The AWS retry quota, with botocore 1.44's throttling cost.
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
        /// Retries in flight, or sleeping before they go.
        retrying: u64,
    },
    /// The AWS adaptive mode's quota and rate limiter.
    AwsAdaptive {
        /// The retry quota.
        quota: AwsQuota,
        /// The rate limiter.
        limiter: AdaptiveLimiter,
    },
}

impl ShippedThrottle {
    /// A fresh budget.
    pub fn new(config: ShippedThrottleConfig) -> Self {
        match config {
            ShippedThrottleConfig::AwsQuota { quota, .. } => {
                ShippedThrottle::AwsQuota(quota.quota())
            }
            ShippedThrottleConfig::AwsAdaptive {
                quota, time_scale, ..
            } => ShippedThrottle::AwsAdaptive {
                quota: quota.quota(),
                limiter: AdaptiveLimiter::compressed(Duration::ZERO, time_scale),
            },
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

    /// At a failure: whether the retry of `kind` may follow. This is where
    /// the sources decide: botocore takes its quota, tower and Finagle
    /// withdraw, and Envoy counts the retry as in flight from here, through
    /// its backoff, until its answer.
    pub fn allows_retry(&mut self, kind: AttemptKind, now: Duration) -> bool {
        match self {
            ShippedThrottle::AwsQuota(quota) | ShippedThrottle::AwsAdaptive { quota, .. } => quota
                .acquire(kind.after_timeout, kind.after_throttle)
                .is_some(),
            ShippedThrottle::Tower(budget) => budget.withdraw(now),
            ShippedThrottle::Finagle(budget) => budget.withdraw(now),
            ShippedThrottle::Envoy {
                budget,
                active,
                retrying,
            } => {
                let ok = budget.allows(*retrying, *active);
                *retrying += u64::from(ok);
                ok
            }
        }
    }

    /// An attempt of `kind` is about to go out at `now`: Finagle deposits
    /// a request, Envoy counts it active, and the AWS adaptive mode's
    /// limiter, once on, makes it wait for a token.
    pub fn before(&mut self, kind: AttemptKind, now: Duration) -> Decision {
        match self {
            ShippedThrottle::Finagle(budget) if !kind.retry => budget.deposit(now),
            ShippedThrottle::Envoy { active, .. } => *active += 1,
            ShippedThrottle::AwsAdaptive { limiter, .. } => {
                if let Some(wait) = limiter.before_send(now) {
                    return Decision::Wait(wait);
                }
            }
            _ => {}
        }
        Decision::Allow
    }

    /// An attempt of `kind` that went out ended at `now` with `answer`.
    /// True if a user waiting for a token is to look again now: botocore
    /// sets its bucket's rate at every response and wakes one waiter
    /// (the one waiting longest) when it does.
    pub fn after(&mut self, answer: Answer, kind: AttemptKind, now: Duration) -> bool {
        let ok = answer == Answer::Ok;
        match self {
            ShippedThrottle::AwsQuota(quota) => aws_release(quota, ok, kind),
            ShippedThrottle::AwsAdaptive { quota, limiter } => {
                aws_release(quota, ok, kind);
                // botocore's limiter hears of every attempt's end, errors
                // and timeouts included.
                limiter.on_response(now, answer == Answer::Throttled);
                return true;
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
        false
    }

    /// An attempt of `kind` that went out was cancelled at `now`, unanswered
    /// (a hedge that lost): Envoy's budget stops counting it in flight;
    /// the others saw neither a success nor a failure.
    pub fn cancelled(&mut self, kind: AttemptKind, now: Duration) {
        if let ShippedThrottle::Envoy { .. } = self {
            self.after(Answer::Failed, kind, now);
        }
    }
}

/// A success gives the AWS quota back what the request's last retry took
/// (1 if it had none).
fn aws_release(quota: &mut AwsQuota, ok: bool, kind: AttemptKind) {
    if ok {
        let last = kind
            .retry
            .then(|| quota.cost_of(kind.after_timeout, kind.after_throttle));
        quota.release(last);
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

    /// Asks for an attempt of `kind` at `now`: a retry at its failure,
    /// then as it goes, as the users do with the retries sent at once.
    fn ask(t: &mut ShippedThrottle, kind: AttemptKind, now: Duration) -> bool {
        if kind.retry && !t.allows_retry(kind, now) {
            return false;
        }
        assert_eq!(t.before(kind, now), Decision::Allow);
        true
    }

    #[test]
    fn the_aws_quota_charges_retries_and_refunds_successes() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::aws_quota(false));
        // 50 retries after timeouts use up the 500.
        for _ in 0..50 {
            assert!(ask(&mut t, RETRY_AFTER_TIMEOUT, ms(0)));
        }
        assert!(!ask(&mut t, RETRY, ms(0)));
        assert!(ask(&mut t, FIRST, ms(0)), "first attempts are free");
        // A clean success gives 1, a retry's success its cost (10 here).
        t.after(Answer::Ok, FIRST, ms(0));
        t.after(Answer::Ok, RETRY_AFTER_TIMEOUT, ms(0));
        t.after(Answer::Failed, RETRY, ms(0));
        let ShippedThrottle::AwsQuota(q) = &t else {
            unreachable!()
        };
        assert_eq!(q.available(), 11);
    }

    #[test]
    fn envoy_counts_retries_in_flight_against_a_fifth_of_all() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Envoy(EnvoyRetryBudget::default()));
        for _ in 0..3 {
            assert!(ask(&mut t, RETRY, ms(0)));
        }
        assert!(!ask(&mut t, RETRY, ms(0)), "at least 3");
        // 17 first attempts in flight: 20 active, a fifth is 4.
        for _ in 0..17 {
            ask(&mut t, FIRST, ms(0));
        }
        assert!(ask(&mut t, RETRY, ms(0)));
        assert!(!ask(&mut t, RETRY, ms(0)), "4 of 21");
        t.after(Answer::Failed, RETRY, ms(1));
        assert!(ask(&mut t, RETRY, ms(1)));
    }

    #[test]
    fn tower_deposits_successes_and_finagle_requests() {
        // tower: a reserve of 500 at 5 a retry, plus one per five successes.
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::tower());
        for _ in 0..100 {
            assert!(ask(&mut t, RETRY, ms(0)));
        }
        assert!(!ask(&mut t, RETRY, ms(0)));
        for _ in 0..5 {
            ask(&mut t, FIRST, ms(0));
            t.after(Answer::Ok, FIRST, ms(0));
        }
        assert!(ask(&mut t, RETRY, ms(0)));
        // Finagle: the reserve, then one retry per five requests, whatever
        // their outcome.
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::finagle());
        for _ in 0..100 {
            assert!(ask(&mut t, RETRY, ms(0)));
        }
        assert!(!ask(&mut t, RETRY, ms(0)));
        for _ in 0..5 {
            ask(&mut t, FIRST, ms(0));
        }
        assert!(ask(&mut t, RETRY, ms(0)));
    }

    #[test]
    fn envoy_counts_a_retry_from_its_failure_through_its_backoff() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Envoy(EnvoyRetryBudget::default()));
        // Three failures whose retries sleep: none has gone, all count.
        for _ in 0..3 {
            assert!(t.allows_retry(RETRY, ms(0)));
        }
        assert!(!t.allows_retry(RETRY, ms(0)), "the floor of 3 is taken");
        // One of them goes and fails: its place is free again.
        assert_eq!(t.before(RETRY, ms(10)), Decision::Allow);
        t.after(Answer::Failed, RETRY, ms(20));
        assert!(t.allows_retry(RETRY, ms(20)));
    }

    /// The AWS adaptive mode's limiter after one throttle at `at`, in an
    /// experiment compressed `k` times: what the next two attempts wait.
    fn adaptive_waits(k: f64, at: Duration) -> [Decision; 2] {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::aws_adaptive(false).scaled(k));
        assert_eq!(t.before(FIRST, Duration::ZERO), Decision::Allow, "off");
        t.after(Answer::Throttled, FIRST, at);
        [t.before(FIRST, at), t.before(FIRST, at)]
    }

    #[test]
    fn the_aws_adaptive_limiter_makes_attempts_wait_after_a_throttle() {
        // The 429 at 1 s is the first response: the measured rate is
        // 0.8 * 1/1 s = 0.8, the rate cut to 0.7 * 0.8 = 0.56 a second. The
        // bucket refilled one token since it was made: the next attempt
        // goes at once, the one after waits 1 / 0.56 s.
        let wait = Duration::from_secs_f64(1.0 / 0.56);
        let [a, b] = adaptive_waits(1.0, ms(1000));
        assert_eq!(a, Decision::Allow);
        let Decision::Wait(w) = b else {
            panic!("{b:?}")
        };
        assert!((w.as_secs_f64() - wait.as_secs_f64()).abs() < 1e-9, "{w:?}");
        // Ten times compressed: the same at 0.1 s, a tenth of the wait.
        let [a, b] = adaptive_waits(10.0, ms(100));
        assert_eq!(a, Decision::Allow);
        let Decision::Wait(w) = b else {
            panic!("{b:?}")
        };
        assert!(
            (w.as_secs_f64() - wait.as_secs_f64() / 10.0).abs() < 1e-9,
            "{w:?}"
        );
    }

    #[test]
    fn the_aws_adaptive_mode_keeps_the_quota() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::aws_adaptive(false));
        for _ in 0..100 {
            assert!(t.allows_retry(RETRY, ms(0)));
        }
        assert!(!t.allows_retry(RETRY, ms(0)), "500 at 5 a retry");
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
            assert!(ask(&mut t, RETRY, ms(0)));
        }
        assert!(!ask(&mut t, RETRY, ms(0)));
        // A clean success refunds 1: not enough for a retry of 10; ten
        // of them are.
        t.after(Answer::Ok, FIRST, ms(0));
        assert!(!ask(&mut t, RETRY, ms(0)));
        for _ in 0..9 {
            t.after(Answer::Ok, FIRST, ms(0));
        }
        assert!(ask(&mut t, RETRY, ms(0)));
    }

    #[test]
    fn envoy_at_half_with_a_floor_of_one() {
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Envoy(EnvoyRetryBudget {
            percent: 50.0,
            min: 1,
        }));
        // Alone, the floor: one retry; then 1 in flight, trunc(0.5) = 0.
        assert!(ask(&mut t, RETRY, ms(0)));
        assert!(!ask(&mut t, RETRY, ms(0)));
        t.after(Answer::Failed, RETRY, ms(1));
        // 6 first attempts in flight; each retry counts in flight too:
        // 0 < 3, 1 < trunc(3.5), 2 < 4, 3 < trunc(4.5), 4 < 5, then 5 of
        // 11 is not below trunc(5.5) = 5.
        for _ in 0..6 {
            ask(&mut t, FIRST, ms(1));
        }
        for _ in 0..5 {
            assert!(ask(&mut t, RETRY, ms(1)));
        }
        assert!(!ask(&mut t, RETRY, ms(1)));
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
        assert!(!ask(&mut t, RETRY, ms(0)), "no reserve");
        for _ in 0..2 {
            ask(&mut t, FIRST, ms(0));
            t.after(Answer::Ok, FIRST, ms(0));
        }
        assert!(ask(&mut t, RETRY, ms(0)));
        assert!(!ask(&mut t, RETRY, ms(0)));
        // Finagle: two requests deposit 2000, a retry withdraws 2000.
        let mut t = ShippedThrottle::new(ShippedThrottleConfig::Finagle {
            percent: 0.5,
            ttl,
            min_per_sec: 0.0,
        });
        ask(&mut t, FIRST, ms(0));
        assert!(!ask(&mut t, RETRY, ms(0)));
        ask(&mut t, FIRST, ms(0));
        assert!(ask(&mut t, RETRY, ms(0)));
        assert!(!ask(&mut t, RETRY, ms(0)));
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
