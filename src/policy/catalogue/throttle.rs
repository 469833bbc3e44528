//! The throttles by name: the parameters each reads and their defaults.
//! A parameter may be read by several throttles (the budgets share theirs).

use std::fmt;
use std::time::Duration;

use super::not_read::NotRead;
use crate::policy::shipped::{AwsQuotaConfig, EnvoyRetryBudget, ShippedThrottleConfig};
use crate::policy::throttle::ThrottleConfig;

/// A retry throttle, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThrottleKind {
    /// gRPC retry throttling.
    TokenBucket,
    /// A Finagle-style retry budget.
    Budget,
    /// The SRE book's client-side adaptive throttling.
    Adaptive,
    /// A circuit breaker.
    CircuitBreaker,
    /// The AWS SDKs' process-wide retry quota, as botocore 1.44 and later
    /// keep it (the SDKs' 2026 retry behaviour).
    AwsQuota,
    /// The AWS quota as botocore up to 1.43 keeps it.
    AwsQuota143,
    /// tower's `TpsBudget`.
    TowerBudget,
    /// Finagle's `RetryBudget`.
    FinagleBudget,
    /// Envoy's concurrent-retry budget.
    EnvoyBudget,
    /// The AWS SDKs' adaptive mode: the retry quota and a client-side rate
    /// limiter, as botocore 1.44 and later do it.
    AwsAdaptive,
    /// The adaptive mode as botocore up to 1.43 does it.
    AwsAdaptive143,
}

/// A parameter of the throttles, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleParam {
    /// token-bucket: bucket size.
    MaxTokens,
    /// token-bucket: tokens a success returns.
    TokenRatio,
    /// budget: retries allowed as a percentage of requests.
    BudgetPercent,
    /// budget: window.
    BudgetTtl,
    /// budget: retries per second allowed regardless.
    BudgetMinPerSec,
    /// adaptive: the multiplier K.
    AdaptiveK,
    /// adaptive: window.
    AdaptiveWindow,
    /// circuit-breaker: failure share that opens it.
    BreakerFailureRatio,
    /// circuit-breaker: fewest attempts before the ratio counts.
    BreakerMinRequests,
    /// circuit-breaker: window of the ratio.
    BreakerWindow,
    /// circuit-breaker: consecutive failures that open it.
    BreakerConsecutive,
    /// circuit-breaker: how long it stays open.
    BreakerCooldown,
    /// circuit-breaker: attempts let through while half-open.
    BreakerProbes,
    /// aws-quota: the quota's size, and what it starts with.
    QuotaCapacity,
    /// aws-quota: a retry's cost after a failure that is neither a timeout
    /// nor a throttling answer.
    QuotaRetryCost,
    /// aws-quota: a retry's cost after a timeout.
    QuotaTimeoutCost,
    /// aws-quota: a retry's cost after a throttling answer (a 429).
    QuotaThrottleCost,
    /// aws-quota: what a success without retries gives back.
    QuotaRefund,
    /// envoy-budget: retries in flight allowed regardless.
    MinRetryConcurrency,
}

impl ThrottleParam {
    /// Every parameter, in the order they are checked.
    pub const ALL: [ThrottleParam; 19] = [
        ThrottleParam::MaxTokens,
        ThrottleParam::TokenRatio,
        ThrottleParam::BudgetPercent,
        ThrottleParam::BudgetTtl,
        ThrottleParam::BudgetMinPerSec,
        ThrottleParam::AdaptiveK,
        ThrottleParam::AdaptiveWindow,
        ThrottleParam::BreakerFailureRatio,
        ThrottleParam::BreakerMinRequests,
        ThrottleParam::BreakerWindow,
        ThrottleParam::BreakerConsecutive,
        ThrottleParam::BreakerCooldown,
        ThrottleParam::BreakerProbes,
        ThrottleParam::QuotaCapacity,
        ThrottleParam::QuotaRetryCost,
        ThrottleParam::QuotaTimeoutCost,
        ThrottleParam::QuotaThrottleCost,
        ThrottleParam::QuotaRefund,
        ThrottleParam::MinRetryConcurrency,
    ];

    /// Whether the throttle `kind` reads this parameter. The budgets share
    /// theirs: tower's and Finagle's budgets read all three of the `budget`
    /// throttle's, Envoy's its percent; both AWS quotas read the quota's.
    pub fn read_by(self, kind: ThrottleKind) -> bool {
        use ThrottleKind as K;
        match self {
            ThrottleParam::MaxTokens | ThrottleParam::TokenRatio => kind == K::TokenBucket,
            ThrottleParam::BudgetPercent => matches!(
                kind,
                K::Budget | K::TowerBudget | K::FinagleBudget | K::EnvoyBudget
            ),
            ThrottleParam::BudgetTtl | ThrottleParam::BudgetMinPerSec => {
                matches!(kind, K::Budget | K::TowerBudget | K::FinagleBudget)
            }
            ThrottleParam::AdaptiveK | ThrottleParam::AdaptiveWindow => kind == K::Adaptive,
            ThrottleParam::BreakerFailureRatio
            | ThrottleParam::BreakerMinRequests
            | ThrottleParam::BreakerWindow
            | ThrottleParam::BreakerConsecutive
            | ThrottleParam::BreakerCooldown
            | ThrottleParam::BreakerProbes => kind == K::CircuitBreaker,
            ThrottleParam::QuotaCapacity
            | ThrottleParam::QuotaRetryCost
            | ThrottleParam::QuotaTimeoutCost
            | ThrottleParam::QuotaThrottleCost
            | ThrottleParam::QuotaRefund => matches!(
                kind,
                K::AwsQuota143 | K::AwsQuota | K::AwsAdaptive143 | K::AwsAdaptive
            ),
            ThrottleParam::MinRetryConcurrency => kind == K::EnvoyBudget,
        }
    }

    /// The throttles that read this parameter, in the catalogue's order.
    pub fn readers(self) -> impl Iterator<Item = ThrottleKind> {
        ThrottleKind::ALL
            .into_iter()
            .filter(move |&kind| self.read_by(kind))
    }
}

/// The throttle parameters a user gave; the others take the throttle's
/// defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThrottleParams {
    /// token-bucket: bucket size (default 10).
    pub max_tokens: Option<f64>,
    /// token-bucket: tokens a success returns (default 0.1).
    pub token_ratio: Option<f64>,
    /// budget: percentage of requests (default 20).
    pub budget_percent: Option<f64>,
    /// budget: window (default 10 s).
    pub budget_ttl: Option<Duration>,
    /// budget: retries per second allowed regardless (default 10).
    pub budget_min_per_sec: Option<f64>,
    /// adaptive: K (default 2).
    pub adaptive_k: Option<f64>,
    /// adaptive: window (default 2 min).
    pub adaptive_window: Option<Duration>,
    /// circuit-breaker: failure share (default 0.5).
    pub breaker_failure_ratio: Option<f64>,
    /// circuit-breaker: fewest attempts (default 20).
    pub breaker_min_requests: Option<u64>,
    /// circuit-breaker: window (default 10 s).
    pub breaker_window: Option<Duration>,
    /// circuit-breaker: consecutive failures (default: off).
    pub breaker_consecutive: Option<u64>,
    /// circuit-breaker: cool-down (default 5 s).
    pub breaker_cooldown: Option<Duration>,
    /// circuit-breaker: probes (default 1).
    pub breaker_probes: Option<u32>,
    /// aws-quota: size (default 500).
    pub quota_capacity: Option<u32>,
    /// aws-quota: a retry's cost (default 14; aws-quota-1.43: 5).
    pub quota_retry_cost: Option<u32>,
    /// aws-quota: a retry's cost after a timeout (default 14;
    /// aws-quota-1.43: 10).
    pub quota_timeout_cost: Option<u32>,
    /// aws-quota: a retry's cost after a 429 (default 5).
    pub quota_throttle_cost: Option<u32>,
    /// aws-quota: a clean success's refund (default 1).
    pub quota_refund: Option<u32>,
    /// envoy-budget: retries in flight allowed regardless (default 3).
    pub min_retry_concurrency: Option<u32>,
}

impl ThrottleParams {
    /// Whether the user gave `param`.
    pub fn given(&self, param: ThrottleParam) -> bool {
        match param {
            ThrottleParam::MaxTokens => self.max_tokens.is_some(),
            ThrottleParam::TokenRatio => self.token_ratio.is_some(),
            ThrottleParam::BudgetPercent => self.budget_percent.is_some(),
            ThrottleParam::BudgetTtl => self.budget_ttl.is_some(),
            ThrottleParam::BudgetMinPerSec => self.budget_min_per_sec.is_some(),
            ThrottleParam::AdaptiveK => self.adaptive_k.is_some(),
            ThrottleParam::AdaptiveWindow => self.adaptive_window.is_some(),
            ThrottleParam::BreakerFailureRatio => self.breaker_failure_ratio.is_some(),
            ThrottleParam::BreakerMinRequests => self.breaker_min_requests.is_some(),
            ThrottleParam::BreakerWindow => self.breaker_window.is_some(),
            ThrottleParam::BreakerConsecutive => self.breaker_consecutive.is_some(),
            ThrottleParam::BreakerCooldown => self.breaker_cooldown.is_some(),
            ThrottleParam::BreakerProbes => self.breaker_probes.is_some(),
            ThrottleParam::QuotaCapacity => self.quota_capacity.is_some(),
            ThrottleParam::QuotaRetryCost => self.quota_retry_cost.is_some(),
            ThrottleParam::QuotaTimeoutCost => self.quota_timeout_cost.is_some(),
            ThrottleParam::QuotaThrottleCost => self.quota_throttle_cost.is_some(),
            ThrottleParam::QuotaRefund => self.quota_refund.is_some(),
            ThrottleParam::MinRetryConcurrency => self.min_retry_concurrency.is_some(),
        }
    }
}

impl ThrottleKind {
    /// Every throttle, in the catalogue's order.
    pub const ALL: [ThrottleKind; 11] = [
        ThrottleKind::TokenBucket,
        ThrottleKind::Budget,
        ThrottleKind::Adaptive,
        ThrottleKind::CircuitBreaker,
        ThrottleKind::AwsQuota,
        ThrottleKind::AwsQuota143,
        ThrottleKind::TowerBudget,
        ThrottleKind::FinagleBudget,
        ThrottleKind::EnvoyBudget,
        ThrottleKind::AwsAdaptive,
        ThrottleKind::AwsAdaptive143,
    ];

    /// The name on the command line and in every result.
    pub fn name(self) -> &'static str {
        match self {
            ThrottleKind::TokenBucket => "token-bucket",
            ThrottleKind::Budget => "budget",
            ThrottleKind::Adaptive => "adaptive",
            ThrottleKind::CircuitBreaker => "circuit-breaker",
            ThrottleKind::AwsQuota => "aws-quota",
            ThrottleKind::AwsQuota143 => "aws-quota-1.43",
            ThrottleKind::TowerBudget => "tower-budget",
            ThrottleKind::FinagleBudget => "finagle-budget",
            ThrottleKind::EnvoyBudget => "envoy-budget",
            ThrottleKind::AwsAdaptive => "aws-adaptive",
            ThrottleKind::AwsAdaptive143 => "aws-adaptive-1.43",
        }
    }

    /// Builds the throttle `kind` (none if `None`) from `params`, with its
    /// defaults for the rest; refuses a parameter it does not read.
    pub fn build(
        kind: Option<ThrottleKind>,
        params: &ThrottleParams,
    ) -> Result<Option<ThrottleConfig>, NotRead<ThrottleParam, Option<ThrottleKind>>> {
        if let Some(param) = ThrottleParam::ALL
            .into_iter()
            .find(|&p| params.given(p) && !kind.is_some_and(|k| p.read_by(k)))
        {
            return Err(NotRead { param, kind });
        }
        let secs = Duration::from_secs;
        // The budget's three, which tower's and Finagle's budgets share.
        let percent = params.budget_percent.unwrap_or(20.0) / 100.0;
        let ttl = params.budget_ttl.unwrap_or(secs(10));
        let min_per_sec = params.budget_min_per_sec.unwrap_or(10.0);
        Ok(kind.map(|kind| match kind {
            ThrottleKind::TokenBucket => ThrottleConfig::TokenBucket {
                max_tokens: params.max_tokens.unwrap_or(10.0),
                token_ratio: params.token_ratio.unwrap_or(0.1),
            },
            ThrottleKind::Budget => ThrottleConfig::Budget {
                percent,
                ttl,
                min_per_sec,
            },
            ThrottleKind::Adaptive => ThrottleConfig::Adaptive {
                k: params.adaptive_k.unwrap_or(2.0),
                window: params.adaptive_window.unwrap_or(secs(120)),
            },
            ThrottleKind::CircuitBreaker => ThrottleConfig::CircuitBreaker {
                failure_ratio: params.breaker_failure_ratio.unwrap_or(0.5),
                min_requests: params.breaker_min_requests.unwrap_or(20),
                window: params.breaker_window.unwrap_or(secs(10)),
                consecutive: params.breaker_consecutive,
                cooldown: params.breaker_cooldown.unwrap_or(secs(5)),
                probes: params.breaker_probes.unwrap_or(1),
            },
            ThrottleKind::AwsQuota143
            | ThrottleKind::AwsQuota
            | ThrottleKind::AwsAdaptive143
            | ThrottleKind::AwsAdaptive => {
                let variant_2026 =
                    matches!(kind, ThrottleKind::AwsQuota | ThrottleKind::AwsAdaptive);
                let source = AwsQuotaConfig::of(variant_2026);
                let quota = AwsQuotaConfig {
                    capacity: params.quota_capacity.unwrap_or(source.capacity),
                    retry_cost: params.quota_retry_cost.unwrap_or(source.retry_cost),
                    timeout_cost: params.quota_timeout_cost.unwrap_or(source.timeout_cost),
                    throttle_cost: params.quota_throttle_cost.unwrap_or(source.throttle_cost),
                    refund: params.quota_refund.unwrap_or(source.refund),
                };
                ThrottleConfig::Shipped(match kind {
                    ThrottleKind::AwsAdaptive143 | ThrottleKind::AwsAdaptive => {
                        ShippedThrottleConfig::AwsAdaptive {
                            variant_2026,
                            quota,
                            time_scale: 1.0,
                        }
                    }
                    _ => ShippedThrottleConfig::AwsQuota {
                        variant_2026,
                        quota,
                    },
                })
            }
            ThrottleKind::TowerBudget => ThrottleConfig::Shipped(ShippedThrottleConfig::Tower {
                percent,
                ttl,
                min_per_sec,
            }),
            ThrottleKind::FinagleBudget => {
                ThrottleConfig::Shipped(ShippedThrottleConfig::Finagle {
                    percent,
                    ttl,
                    min_per_sec,
                })
            }
            ThrottleKind::EnvoyBudget => {
                let source = EnvoyRetryBudget::default();
                ThrottleConfig::Shipped(ShippedThrottleConfig::Envoy(EnvoyRetryBudget {
                    percent: params.budget_percent.unwrap_or(source.percent),
                    min: params.min_retry_concurrency.map_or(source.min, u64::from),
                }))
            }
        }))
    }
}

impl ThrottleConfig {
    /// Which throttle of the catalogue this is.
    pub fn kind(&self) -> ThrottleKind {
        match self {
            ThrottleConfig::TokenBucket { .. } => ThrottleKind::TokenBucket,
            ThrottleConfig::Budget { .. } => ThrottleKind::Budget,
            ThrottleConfig::Adaptive { .. } => ThrottleKind::Adaptive,
            ThrottleConfig::CircuitBreaker { .. } => ThrottleKind::CircuitBreaker,
            ThrottleConfig::Shipped(c) => match c {
                ShippedThrottleConfig::AwsQuota {
                    variant_2026: false,
                    ..
                } => ThrottleKind::AwsQuota143,
                ShippedThrottleConfig::AwsQuota {
                    variant_2026: true, ..
                } => ThrottleKind::AwsQuota,
                ShippedThrottleConfig::Tower { .. } => ThrottleKind::TowerBudget,
                ShippedThrottleConfig::Finagle { .. } => ThrottleKind::FinagleBudget,
                ShippedThrottleConfig::Envoy(_) => ThrottleKind::EnvoyBudget,
                ShippedThrottleConfig::AwsAdaptive {
                    variant_2026: false,
                    ..
                } => ThrottleKind::AwsAdaptive143,
                ShippedThrottleConfig::AwsAdaptive {
                    variant_2026: true, ..
                } => ThrottleKind::AwsAdaptive,
            },
        }
    }

    /// The throttle's name as the command line spells it.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

impl fmt::Display for ThrottleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
