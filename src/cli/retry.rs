//! The retry policy's flags, shared by `client` and `client plan`: the
//! strategy, the limits and the throttle. What each name means and what
//! its parameters default to is the policy catalogue's; this file maps
//! flags onto it and says which flag is wrong when one is.

use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use super::refusal::stray;
use super::values::{backoff_factor, duration, non_negative, positive, positive_duration, ratio};
use crate::model::grpc::Codes;
use crate::policy::shipped::{GrpcImplementation, ShippedThrottleConfig, TpsBudget};
use crate::policy::{
    Hedging, Implementation, NotRead, RetryLimits, Strategy, StrategyError, StrategyKind,
    StrategyParam, StrategyParams, ThrottleConfig, ThrottleKind, ThrottleParam, ThrottleParams,
};

impl ValueEnum for StrategyKind {
    fn value_variants<'a>() -> &'a [Self] {
        &StrategyKind::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            StrategyKind::Fixed => "The same delay (--fixed-delay) before every retry",
            StrategyKind::Exponential => {
                "Textbook backoff: --min-delay, times --factor per retry, capped at \
                 --max-delay, plus normal jitter of --jitter times the delay"
            }
            StrategyKind::Exponential2014 => {
                "The 2014 original client exactly: e times the previous sleep (first: the \
                 think time), capped at 5m, plus N(0, 0.1 s) jitter"
            }
            StrategyKind::FullJitter => "U(0, min(max, min * factor^n))",
            StrategyKind::EqualJitter => "v/2 + U(0, v/2), v = min(max, min * factor^n)",
            StrategyKind::DecorrelatedJitter => "min(max, U(min, factor * previous sleep))",
            StrategyKind::TruncatedBinary => {
                "Ethernet: slot * (2^k - 1), k uniform in 0..=c, c growing per failure up to \
                 --ceiling"
            }
            StrategyKind::Google => {
                "Google Cloud: min(min * factor^(n-1) + U(0, 1 s), max): 1 s, 2 s, 4 s, ... \
                 plus up to 1000 ms, at most 32 s, at most 10 attempts"
            }
            StrategyKind::AwsStandard => {
                "AWS SDKs' standard mode (botocore 1.44): U[0,1) * min(min * 2^(n-1), max), \
                 min 0.05 s after a transient error and 1 s after throttling (botocore-1.43: \
                 1 s), max 20 s, 3 attempts, with the aws-quota throttle"
            }
            StrategyKind::AwsAdaptive => {
                "AWS SDKs' adaptive mode (botocore): the standard mode's backoff and quota, \
                 and a CUBIC rate limiter, on from the first throttling answer, that makes every attempt \
                 wait for a token (the aws-adaptive throttle)"
            }
            StrategyKind::Grpc => {
                "gRPC retry policy (A6): min(min * factor^(n-1), max) * U(0.8, 1.2), the \
                 proposal's example: 100ms, 2, 1s, 4 attempts"
            }
            StrategyKind::Envoy => {
                "Envoy router: U[0, b) ms, b = min, doubled while under max/2, then max: \
                 25, 50, 100, 200, 250 ms (max 10 x min), 1 retry"
            }
            StrategyKind::Finagle => {
                "Finagle's default: decorrelated jitter, min then d + U[0, upper - d), \
                 upper = 3d or max once d >= max/3; 5ms to 200ms"
            }
            StrategyKind::PollyV2 => {
                "Polly v8 decorrelated jitter V2: t = k + U[0,1), next = 2^t tanh(sqrt(4t)), \
                 delay (next - prev) / 1.4 * min; min 2s, 3 retries"
            }
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for Implementation {
    fn value_variants<'a>() -> &'a [Self] {
        &Implementation::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Implementation::Botocore144 => {
                "aws-standard, aws-adaptive: botocore 1.44 and later, the SDKs' 2026 retry \
                 behaviour: 0.05 s scale after a transient error, 1 s after throttling (a \
                 bare 429 included), x-amz-retry-after read, quota costs 14 and 5"
            }
            Implementation::Botocore143 => {
                "aws-standard, aws-adaptive: botocore up to 1.43: 1 s scale, quota costs 5 \
                 and 10 after a timeout; a 429 without an AWS error code is not retried"
            }
            Implementation::GrpcCore => {
                "grpc, hedging: grpc-go and C-core: the retry throttle decides at the \
                 failure; hedging as gRFC A6's text (a hedge asks the throttle, a \
                 pushback sets the next hedge's time)"
            }
            Implementation::GrpcJs => {
                "grpc, hedging: @grpc/grpc-js 1.14: the throttle decides when the backoff \
                 ends; a hedge never asks it, a pushback leaves the hedging timer alone, a \
                 negative one ends the call"
            }
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for ThrottleKind {
    fn value_variants<'a>() -> &'a [Self] {
        &ThrottleKind::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            ThrottleKind::TokenBucket => "gRPC retry throttling: no retries while tokens <= max/2",
            ThrottleKind::Budget => {
                "Finagle-style budget: retries <= percent of requests + a floor"
            }
            ThrottleKind::Adaptive => {
                "SRE book client-side throttling: reject locally with probability \
                 max(0, (requests - K * accepts) / (requests + 1))"
            }
            ThrottleKind::CircuitBreaker => "Closed, open for a cool-down, half-open probes",
            ThrottleKind::AwsQuota => {
                "AWS SDKs' retry quota (botocore 1.44 on): 500, a retry takes 14 (5 after \
                 throttling), a success gives 1 back (after retries: the last cost); no \
                 quota, no retry"
            }
            ThrottleKind::AwsQuota143 => {
                "The AWS quota as botocore up to 1.43 keeps it: a retry takes 5 (10 after a \
                 timeout)"
            }
            ThrottleKind::AwsAdaptive => {
                "AWS adaptive mode: aws-quota, and a token bucket whose rate CUBIC sets \
                 (C 0.4, beta 0.7), switched on by the first throttling answer: every \
                 attempt waits for a token"
            }
            ThrottleKind::AwsAdaptive143 => {
                "aws-adaptive as botocore up to 1.43 does it: aws-quota-1.43's costs; \
                 a 429 without an AWS error code does not switch it on"
            }
            ThrottleKind::TowerBudget => {
                "tower TpsBudget: 10 s, 10/s, 20 %; a success deposits 1, a retry withdraws \
                 trunc(1/0.2) = 5"
            }
            ThrottleKind::FinagleBudget => {
                "Finagle RetryBudget: 10 s, 10/s, 20 %; a request deposits 1000, a retry \
                 withdraws 5000"
            }
            ThrottleKind::EnvoyBudget => {
                "Envoy retry budget: retries in flight < max(20 % of requests in flight, 3)"
            }
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

/// The flag that sets a strategy parameter.
fn strategy_flag(param: StrategyParam) -> &'static str {
    match param {
        StrategyParam::FixedDelay => "--fixed-delay",
        StrategyParam::MinDelay => "--min-delay",
        StrategyParam::MaxDelay => "--max-delay",
        StrategyParam::Factor => "--factor",
        StrategyParam::Jitter => "--jitter",
        StrategyParam::SlotTime => "--slot-time",
        StrategyParam::Ceiling => "--ceiling",
        StrategyParam::StayAtCeiling => "--stay-at-ceiling",
        StrategyParam::Implementation => "--implementation",
        StrategyParam::GrpcRetryable => "--grpc-retryable",
    }
}

/// The flag that sets a throttle parameter.
fn throttle_flag(param: ThrottleParam) -> &'static str {
    match param {
        ThrottleParam::MaxTokens => "--max-tokens",
        ThrottleParam::TokenRatio => "--token-ratio",
        ThrottleParam::BudgetPercent => "--budget-percent",
        ThrottleParam::BudgetTtl => "--budget-ttl",
        ThrottleParam::BudgetMinPerSec => "--budget-min-per-sec",
        ThrottleParam::AdaptiveK => "--adaptive-k",
        ThrottleParam::AdaptiveWindow => "--adaptive-window",
        ThrottleParam::BreakerFailureRatio => "--breaker-failure-ratio",
        ThrottleParam::BreakerMinRequests => "--breaker-min-requests",
        ThrottleParam::BreakerWindow => "--breaker-window",
        ThrottleParam::BreakerConsecutive => "--breaker-consecutive",
        ThrottleParam::BreakerCooldown => "--breaker-cooldown",
        ThrottleParam::BreakerProbes => "--breaker-probes",
        ThrottleParam::QuotaCapacity => "--quota-capacity",
        ThrottleParam::QuotaRetryCost => "--quota-retry-cost",
        ThrottleParam::QuotaTimeoutCost => "--quota-timeout-cost",
        ThrottleParam::QuotaThrottleCost => "--quota-throttle-cost",
        ThrottleParam::QuotaRefund => "--quota-refund",
        ThrottleParam::MinRetryConcurrency => "--min-retry-concurrency",
    }
}

/// Retry strategy flags. Flags that do not apply to the chosen strategy are
/// refused; defaults depend on the strategy.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Retry strategy")]
pub struct StrategyArgs {
    /// Retry strategy [default: fixed].
    #[arg(long, value_enum, value_name = "NAME")]
    pub strategy: Option<StrategyKind>,
    /// Same as --strategy exponential-2014 (the original client's flag).
    #[arg(long, conflicts_with = "strategy")]
    pub exponential_backoff: bool,
    /// fixed: delay before every retry [default: 100ms].
    #[arg(long, alias = "simple-backoff-delay", value_parser = duration, value_name = "DURATION")]
    pub fixed_delay: Option<Duration>,
    /// First delay or base [default: 100ms; google, aws-standard,
    /// aws-adaptive: 50ms, the scale of a transient error's backoff (with
    /// --implementation botocore-1.43: 1s); grpc: 100ms; envoy: 25ms; finagle: 5ms;
    /// polly-v2: 2s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub min_delay: Option<Duration>,
    /// Cap on a delay [default: 5m; google: 32s; aws-standard, aws-adaptive:
    /// 20s; grpc: 1s; envoy: 10 x --min-delay; finagle: 200ms; polly-v2:
    /// none].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub max_delay: Option<Duration>,
    /// Growth factor, greater than 1 [default: exponential 2.7;
    /// full-jitter, equal-jitter, google, grpc 2; decorrelated-jitter 3].
    #[arg(long, value_parser = backoff_factor, value_name = "X")]
    pub factor: Option<f64>,
    /// exponential: standard deviation of the normal jitter, as a fraction
    /// of the delay; 0 for the plain geometric schedule [default: 0.1].
    #[arg(long, value_parser = non_negative, value_name = "X")]
    pub jitter: Option<f64>,
    /// truncated-binary: slot time [default: 100ms].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub slot_time: Option<Duration>,
    /// truncated-binary: largest collision count, 1 to 32 [default: 10].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32), value_name = "N")]
    pub ceiling: Option<u32>,
    /// truncated-binary: stay at the ceiling instead of starting again at 1.
    #[arg(long)]
    pub stay_at_ceiling: bool,
    /// The library and release a shipped strategy follows where they differ
    /// [default: aws-standard, aws-adaptive: botocore-1.44; grpc and
    /// hedging: grpc-core].
    #[arg(long, value_enum, value_name = "NAME")]
    pub implementation: Option<Implementation>,
    /// grpc: the statuses retried (retryableStatusCodes), comma-separated
    /// names or numbers; with --hedge-delay, the statuses that send the
    /// next copy at once rather than end the call (nonFatalStatusCodes).
    /// An HTTP status without a grpc-status counts as the status gRPC maps
    /// it to (503: UNAVAILABLE); a timeout or a refused connection is
    /// always retried [default: UNAVAILABLE].
    #[arg(long, value_name = "CODES")]
    pub grpc_retryable: Option<Codes>,
}

impl StrategyArgs {
    /// The chosen strategy.
    pub fn kind(&self) -> StrategyKind {
        match (self.strategy, self.exponential_backoff) {
            (Some(s), _) => s,
            (None, true) => StrategyKind::Exponential2014,
            (None, false) => StrategyKind::Fixed,
        }
    }

    /// The strategy flags given, by name.
    fn given(&self) -> Vec<&'static str> {
        [
            ("--strategy", self.strategy.is_some()),
            ("--exponential-backoff", self.exponential_backoff),
            ("--fixed-delay", self.fixed_delay.is_some()),
            ("--min-delay", self.min_delay.is_some()),
            ("--max-delay", self.max_delay.is_some()),
            ("--factor", self.factor.is_some()),
            ("--jitter", self.jitter.is_some()),
            ("--slot-time", self.slot_time.is_some()),
            ("--ceiling", self.ceiling.is_some()),
            ("--stay-at-ceiling", self.stay_at_ceiling),
            ("--implementation", self.implementation.is_some()),
            ("--grpc-retryable", self.grpc_retryable.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    /// Builds the strategy, or says which flags are wrong for it.
    pub fn strategy(&self) -> Result<Strategy, String> {
        let params = StrategyParams {
            fixed_delay: self.fixed_delay,
            min_delay: self.min_delay,
            max_delay: self.max_delay,
            factor: self.factor,
            jitter: self.jitter,
            slot_time: self.slot_time,
            ceiling: self.ceiling,
            stay_at_ceiling: self.stay_at_ceiling,
            implementation: self.implementation,
            grpc_retryable: self.grpc_retryable,
        };
        self.kind().build(&params).map_err(|e| match e {
            StrategyError::NotRead(NotRead { param, kind }) => {
                let applies = StrategyKind::ALL
                    .into_iter()
                    .filter(|k| k.reads(param))
                    .map(StrategyKind::name);
                stray(strategy_flag(param), "--strategy", kind.name(), applies)
            }
            StrategyError::MinOverMax => "--min-delay must not exceed --max-delay".to_string(),
            StrategyError::Implementation {
                implementation,
                kind,
            } => {
                let applies = StrategyKind::ALL
                    .into_iter()
                    .filter(|k| k.can_follow(implementation))
                    .map(StrategyKind::name);
                stray(
                    &format!("--implementation {implementation}"),
                    "--strategy",
                    kind.name(),
                    applies,
                )
            }
        })
    }
}

/// gRPC's hedging policy, instead of retries.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Hedging")]
pub struct HedgingArgs {
    /// Hedge instead of retrying (gRPC's hedging policy): send the request
    /// again this long after the last copy went while no answer has come;
    /// a failure sends the next copy at once; the first success wins and
    /// the others are cancelled; nothing is retried. 0: all copies at once.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub hedge_delay: Option<Duration>,
    /// Copies of a request at most, the first included; more than 5 count
    /// as 5, as gRPC clients cap it [default: 4, gRFC A6's example].
    #[arg(long, requires = "hedge_delay", value_parser = clap::value_parser!(u32).range(2..), value_name = "N")]
    pub hedge_max_attempts: Option<u32>,
}

impl HedgingArgs {
    /// gRFC A6's example policy has 4 attempts.
    const DEFAULT_MAX_ATTEMPTS: u32 = 4;

    /// The hedging policy, if one is asked for, or says which retry flag
    /// does not belong with it.
    pub fn hedging(
        &self,
        retry: &StrategyArgs,
        limits: &LimitArgs,
    ) -> Result<Option<Hedging>, String> {
        let Some(delay) = self.hedge_delay else {
            return Ok(None);
        };
        // Hedging is gRPC's: it follows a gRPC implementation.
        let implementation = match retry.implementation {
            None => GrpcImplementation::default(),
            Some(i) => i.grpc().ok_or_else(|| {
                format!(
                    "--implementation {i} does not apply with --hedge-delay \
                     (it applies to: grpc-core, grpc-js)"
                )
            })?,
        };
        let hedging_reads = ["--implementation", "--grpc-retryable"];
        if let Some(flag) = retry
            .given()
            .into_iter()
            .find(|f| !hedging_reads.contains(f))
        {
            return Err(format!(
                "{flag} does not apply with --hedge-delay (a hedged request is never retried)"
            ));
        }
        if limits.max_attempts.is_some() {
            return Err(
                "--max-attempts does not apply with --hedge-delay (use --hedge-max-attempts)"
                    .to_string(),
            );
        }
        if limits.respect_retry_after {
            return Err(
                "--respect-retry-after does not apply with --hedge-delay (a gRPC \
                 client reads grpc-retry-pushback-ms, not Retry-After)"
                    .to_string(),
            );
        }
        Ok(Some(
            Hedging::new(
                delay,
                self.hedge_max_attempts
                    .unwrap_or(Self::DEFAULT_MAX_ATTEMPTS),
            )
            .following(implementation)
            .non_fatal(retry.grpc_retryable.unwrap_or_default()),
        ))
    }

    /// The throttle a client gets by default: hedging is gRPC's, and
    /// brings gRPC's; otherwise the strategy's.
    pub fn default_throttle(&self, strategy: &Strategy) -> Option<ThrottleKind> {
        match self.hedge_delay {
            Some(_) => StrategyKind::Grpc.default_throttle(),
            None => strategy.default_throttle(),
        }
    }
}

/// Limits on the retries of a logical request, whatever the strategy.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Retry limits")]
pub struct LimitArgs {
    /// Attempts per logical request, the first included; then it is given
    /// up [default: no limit; google: 10].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Give a logical request up once this long has passed since its first
    /// attempt's scheduled start; no attempt runs past it.
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub deadline: Option<Duration>,
    /// Wait at least what the server's Retry-After header asks for.
    #[arg(long)]
    pub respect_retry_after: bool,
}

impl LimitArgs {
    /// The limits for a strategy (some have an attempt limit by default).
    pub fn limits(&self, kind: StrategyKind) -> RetryLimits {
        kind.limits(RetryLimits {
            max_attempts: self.max_attempts,
            deadline: self.deadline,
            respect_retry_after: self.respect_retry_after,
        })
    }
}

/// A throttle shared by all users of the process. Flags that do not apply
/// to the chosen throttle are refused.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Retry throttle")]
pub struct ThrottleArgs {
    /// Retry throttle shared by all clients [default: none; aws-standard:
    /// aws-quota; aws-adaptive: aws-adaptive (with --implementation
    /// botocore-1.43: their -1.43 variants); grpc and hedging: token-bucket;
    /// envoy: envoy-budget; finagle: finagle-budget].
    #[arg(long, value_enum, value_name = "NAME")]
    pub throttle: Option<ThrottleKind>,
    /// No throttle, not even the one a shipped client's strategy brings.
    #[arg(long, conflicts_with = "throttle")]
    pub no_throttle: bool,
    /// token-bucket: bucket size [default: 10].
    #[arg(long, value_parser = positive, value_name = "X")]
    pub max_tokens: Option<f64>,
    /// token-bucket: tokens a success returns [default: 0.1].
    #[arg(long, value_parser = positive, value_name = "X")]
    pub token_ratio: Option<f64>,
    /// budget, tower-budget, finagle-budget: retries allowed as a
    /// percentage of requests; envoy-budget: retries in flight as a
    /// percentage of requests in flight [default: 20].
    #[arg(long, value_parser = non_negative, value_name = "PERCENT")]
    pub budget_percent: Option<f64>,
    /// budget, tower-budget, finagle-budget: window [default: 10s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub budget_ttl: Option<Duration>,
    /// budget, tower-budget, finagle-budget: retries per second allowed
    /// regardless [default: 10].
    #[arg(long, value_parser = non_negative, value_name = "X")]
    pub budget_min_per_sec: Option<f64>,
    /// adaptive: the multiplier K [default: 2].
    #[arg(long, value_parser = positive, value_name = "X")]
    pub adaptive_k: Option<f64>,
    /// adaptive: window [default: 2m].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub adaptive_window: Option<Duration>,
    /// circuit-breaker: failure share that opens it, in (0, 1] [default: 0.5].
    #[arg(long, value_parser = ratio, value_name = "X")]
    pub breaker_failure_ratio: Option<f64>,
    /// circuit-breaker: fewest attempts in the window before the ratio
    /// counts [default: 20].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub breaker_min_requests: Option<u64>,
    /// circuit-breaker: window of the ratio [default: 10s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub breaker_window: Option<Duration>,
    /// circuit-breaker: also open after this many consecutive failures.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub breaker_consecutive: Option<u64>,
    /// circuit-breaker: how long it stays open [default: 5s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub breaker_cooldown: Option<Duration>,
    /// circuit-breaker: attempts let through while half-open [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub breaker_probes: Option<u32>,
    /// aws-quota, aws-adaptive and their -1.43 variants: the retry quota's
    /// size, what it starts with and never exceeds [default: 500].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub quota_capacity: Option<u32>,
    /// aws-quota, aws-adaptive (and -1.43): what a retry takes from the
    /// quota after a failure that is neither a timeout nor throttling
    /// [default: 14; the -1.43 variants: 5].
    #[arg(long, value_parser = clap::value_parser!(u32), value_name = "N")]
    pub quota_retry_cost: Option<u32>,
    /// aws-quota, aws-adaptive (and -1.43): what a retry takes after a
    /// timeout [default: 14; the -1.43 variants: 10].
    #[arg(long, value_parser = clap::value_parser!(u32), value_name = "N")]
    pub quota_timeout_cost: Option<u32>,
    /// aws-quota, aws-adaptive (and -1.43): what a retry takes after a
    /// throttling answer [default: 5].
    #[arg(long, value_parser = clap::value_parser!(u32), value_name = "N")]
    pub quota_throttle_cost: Option<u32>,
    /// aws-quota, aws-adaptive (and -1.43): what a success without retries gives
    /// back (a success after retries gives back its last retry's cost)
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32), value_name = "N")]
    pub quota_refund: Option<u32>,
    /// envoy-budget: retries in flight allowed whatever the percent
    /// (Envoy's min_retry_concurrency) [default: 3].
    #[arg(long, value_parser = clap::value_parser!(u32), value_name = "N")]
    pub min_retry_concurrency: Option<u32>,
}

impl ThrottleArgs {
    /// Builds the throttle, or says which flags are wrong for it. The
    /// throttle the strategy brings (`default`) applies unless another (or
    /// none) is chosen.
    pub fn throttle(
        &self,
        default: Option<ThrottleKind>,
    ) -> Result<Option<ThrottleConfig>, String> {
        let kind = if self.no_throttle {
            None
        } else {
            self.throttle.or(default)
        };
        let params = ThrottleParams {
            max_tokens: self.max_tokens,
            token_ratio: self.token_ratio,
            budget_percent: self.budget_percent,
            budget_ttl: self.budget_ttl,
            budget_min_per_sec: self.budget_min_per_sec,
            adaptive_k: self.adaptive_k,
            adaptive_window: self.adaptive_window,
            breaker_failure_ratio: self.breaker_failure_ratio,
            breaker_min_requests: self.breaker_min_requests,
            breaker_window: self.breaker_window,
            breaker_consecutive: self.breaker_consecutive,
            breaker_cooldown: self.breaker_cooldown,
            breaker_probes: self.breaker_probes,
            quota_capacity: self.quota_capacity,
            quota_retry_cost: self.quota_retry_cost,
            quota_timeout_cost: self.quota_timeout_cost,
            quota_throttle_cost: self.quota_throttle_cost,
            quota_refund: self.quota_refund,
            min_retry_concurrency: self.min_retry_concurrency,
        };
        let built = ThrottleKind::build(kind, &params).map_err(|NotRead { param, kind }| {
            stray(
                throttle_flag(param),
                "--throttle",
                kind.map_or("none", ThrottleKind::name),
                param.readers().map(ThrottleKind::name),
            )
        })?;
        // What tower would compute otherwise is refused, not modelled.
        if let Some(ThrottleConfig::Shipped(ShippedThrottleConfig::Tower {
            percent,
            ttl,
            min_per_sec,
        })) = built
            && let Some(why) = TpsBudget::refusal(ttl, min_per_sec, percent)
        {
            return Err(format!(
                "--throttle tower-budget: {why} (--budget-ttl, --budget-min-per-sec, \
                 --budget-percent)"
            ));
        }
        Ok(built)
    }
}

#[cfg(test)]
mod tests;
