//! The catalogue of retry policies as a user picks them: every strategy
//! and throttle by name, the parameters each reads, and the defaults of
//! the parameters not given.
//!
//! The command line turns its flags into [`StrategyParams`] and
//! [`ThrottleParams`]; what a name means, which parameters apply to it and
//! what the rest default to is decided here, once, for every front end.

use std::fmt;
use std::time::Duration;

use super::backoff::Strategy;
use super::retry_limits::RetryLimits;
use super::throttle::ThrottleConfig;

/// A retry strategy, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrategyKind {
    /// The same delay before every retry.
    Fixed,
    /// Textbook exponential backoff with normal jitter.
    Exponential,
    /// The 2014 original client, exactly.
    Exponential2014,
    /// `U(0, min(max, min * factor^n))`.
    FullJitter,
    /// `v/2 + U(0, v/2)`, `v = min(max, min * factor^n)`.
    EqualJitter,
    /// `min(max, U(min, factor * previous sleep))`.
    DecorrelatedJitter,
    /// Ethernet's truncated binary exponential backoff.
    TruncatedBinary,
    /// Google Cloud's documented algorithm.
    Google,
}

/// A parameter of the strategies, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyParam {
    /// fixed: the delay before every retry.
    FixedDelay,
    /// The first delay or base of the growing strategies.
    MinDelay,
    /// Their cap.
    MaxDelay,
    /// Their growth factor.
    Factor,
    /// exponential: normal jitter as a fraction of the delay.
    Jitter,
    /// truncated-binary: the slot time.
    SlotTime,
    /// truncated-binary: the largest collision count.
    Ceiling,
    /// truncated-binary: stay at the ceiling instead of starting again.
    StayAtCeiling,
}

impl StrategyParam {
    /// Every parameter, in the order they are checked.
    pub const ALL: [StrategyParam; 8] = [
        StrategyParam::FixedDelay,
        StrategyParam::MinDelay,
        StrategyParam::MaxDelay,
        StrategyParam::Factor,
        StrategyParam::Jitter,
        StrategyParam::SlotTime,
        StrategyParam::Ceiling,
        StrategyParam::StayAtCeiling,
    ];
}

/// The strategy parameters a user gave; the others take the strategy's
/// defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrategyParams {
    /// fixed: delay before every retry (default 100 ms).
    pub fixed_delay: Option<Duration>,
    /// First delay or base (default 100 ms; google 1 s).
    pub min_delay: Option<Duration>,
    /// Cap on a delay (default 5 min; google 32 s).
    pub max_delay: Option<Duration>,
    /// Growth factor (default: exponential 2.7; full-jitter, equal-jitter,
    /// google 2; decorrelated-jitter 3).
    pub factor: Option<f64>,
    /// exponential: jitter as a fraction of the delay (default 0.1).
    pub jitter: Option<f64>,
    /// truncated-binary: slot time (default 100 ms).
    pub slot_time: Option<Duration>,
    /// truncated-binary: largest collision count (default 10).
    pub ceiling: Option<u32>,
    /// truncated-binary: stay at the ceiling (default: start again at 1).
    pub stay_at_ceiling: bool,
}

impl StrategyParams {
    /// Whether the user gave `param`.
    pub fn given(&self, param: StrategyParam) -> bool {
        match param {
            StrategyParam::FixedDelay => self.fixed_delay.is_some(),
            StrategyParam::MinDelay => self.min_delay.is_some(),
            StrategyParam::MaxDelay => self.max_delay.is_some(),
            StrategyParam::Factor => self.factor.is_some(),
            StrategyParam::Jitter => self.jitter.is_some(),
            StrategyParam::SlotTime => self.slot_time.is_some(),
            StrategyParam::Ceiling => self.ceiling.is_some(),
            StrategyParam::StayAtCeiling => self.stay_at_ceiling,
        }
    }
}

/// A parameter was given that the chosen kind of policy does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotRead<P, K> {
    /// The parameter.
    pub param: P,
    /// The kind chosen.
    pub kind: K,
}

/// Why parameters do not make a strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyError {
    /// A parameter the strategy does not read.
    NotRead(NotRead<StrategyParam, StrategyKind>),
    /// The first delay exceeds the cap.
    MinOverMax,
}

impl StrategyKind {
    /// Every strategy, in the catalogue's order.
    pub const ALL: [StrategyKind; 8] = [
        StrategyKind::Fixed,
        StrategyKind::Exponential,
        StrategyKind::Exponential2014,
        StrategyKind::FullJitter,
        StrategyKind::EqualJitter,
        StrategyKind::DecorrelatedJitter,
        StrategyKind::TruncatedBinary,
        StrategyKind::Google,
    ];

    /// The name on the command line and in every result.
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Fixed => "fixed",
            StrategyKind::Exponential => "exponential",
            StrategyKind::Exponential2014 => "exponential-2014",
            StrategyKind::FullJitter => "full-jitter",
            StrategyKind::EqualJitter => "equal-jitter",
            StrategyKind::DecorrelatedJitter => "decorrelated-jitter",
            StrategyKind::TruncatedBinary => "truncated-binary",
            StrategyKind::Google => "google",
        }
    }

    /// The strategy of that name.
    pub fn from_name(name: &str) -> Option<StrategyKind> {
        StrategyKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The strategies whose delays grow from a minimum to a cap by a factor.
    fn grows(self) -> bool {
        matches!(
            self,
            StrategyKind::Exponential
                | StrategyKind::FullJitter
                | StrategyKind::EqualJitter
                | StrategyKind::DecorrelatedJitter
                | StrategyKind::Google
        )
    }

    /// Whether this strategy reads `param`.
    pub fn reads(self, param: StrategyParam) -> bool {
        match param {
            StrategyParam::FixedDelay => self == StrategyKind::Fixed,
            StrategyParam::MinDelay | StrategyParam::MaxDelay | StrategyParam::Factor => {
                self.grows()
            }
            StrategyParam::Jitter => self == StrategyKind::Exponential,
            StrategyParam::SlotTime | StrategyParam::Ceiling | StrategyParam::StayAtCeiling => {
                self == StrategyKind::TruncatedBinary
            }
        }
    }

    /// The attempt limit a strategy has unless one is given: Google's
    /// documents require a limit without fixing it; 10 here.
    pub fn default_max_attempts(self) -> Option<u32> {
        (self == StrategyKind::Google).then_some(10)
    }

    /// The retry limits of this strategy: `given` with the strategy's
    /// attempt limit where none is given.
    pub fn limits(self, given: RetryLimits) -> RetryLimits {
        RetryLimits {
            max_attempts: given.max_attempts.or(self.default_max_attempts()),
            ..given
        }
    }

    /// Builds the strategy from `params`, with its defaults for the rest;
    /// refuses a parameter it does not read.
    pub fn build(self, params: &StrategyParams) -> Result<Strategy, StrategyError> {
        if let Some(param) = StrategyParam::ALL
            .into_iter()
            .find(|&p| params.given(p) && !self.reads(p))
        {
            return Err(StrategyError::NotRead(NotRead { param, kind: self }));
        }
        let ms = Duration::from_millis;
        let (min_default, max_default, factor_default) = match self {
            StrategyKind::Google => (Duration::from_secs(1), Duration::from_secs(32), 2.0),
            StrategyKind::Exponential => (ms(100), Duration::from_secs(300), 2.7),
            StrategyKind::DecorrelatedJitter => (ms(100), Duration::from_secs(300), 3.0),
            _ => (ms(100), Duration::from_secs(300), 2.0),
        };
        let min = params.min_delay.unwrap_or(min_default);
        let max = params.max_delay.unwrap_or(max_default);
        let factor = params.factor.unwrap_or(factor_default);
        if self.grows() && min > max {
            return Err(StrategyError::MinOverMax);
        }
        Ok(match self {
            StrategyKind::Fixed => Strategy::Fixed {
                delay: params.fixed_delay.unwrap_or(ms(100)),
            },
            StrategyKind::Exponential => Strategy::Exponential {
                min,
                max,
                factor,
                jitter: params.jitter.unwrap_or(0.1),
            },
            StrategyKind::Exponential2014 => Strategy::exponential_2014(),
            StrategyKind::FullJitter => Strategy::FullJitter {
                base: min,
                cap: max,
                factor,
            },
            StrategyKind::EqualJitter => Strategy::EqualJitter {
                base: min,
                cap: max,
                factor,
            },
            StrategyKind::DecorrelatedJitter => Strategy::DecorrelatedJitter {
                base: min,
                cap: max,
                factor,
            },
            StrategyKind::TruncatedBinary => Strategy::TruncatedBinary {
                slot: params.slot_time.unwrap_or(ms(100)),
                ceiling: params.ceiling.unwrap_or(10),
                stay_at_ceiling: params.stay_at_ceiling,
            },
            StrategyKind::Google => Strategy::Google {
                first: min,
                factor,
                max,
                random: ms(1000),
            },
        })
    }
}

// The names of built policies are the catalogue's, so they are given here,
// where the kinds are.
impl Strategy {
    /// Which strategy of the catalogue this is.
    pub fn kind(&self) -> StrategyKind {
        match self {
            Strategy::Fixed { .. } => StrategyKind::Fixed,
            Strategy::Exponential { .. } => StrategyKind::Exponential,
            Strategy::Exponential2014 { .. } => StrategyKind::Exponential2014,
            Strategy::FullJitter { .. } => StrategyKind::FullJitter,
            Strategy::EqualJitter { .. } => StrategyKind::EqualJitter,
            Strategy::DecorrelatedJitter { .. } => StrategyKind::DecorrelatedJitter,
            Strategy::TruncatedBinary { .. } => StrategyKind::TruncatedBinary,
            Strategy::Google { .. } => StrategyKind::Google,
        }
    }

    /// The strategy's name as the command line spells it.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
}

impl ThrottleParam {
    /// Every parameter, in the order they are checked.
    pub const ALL: [ThrottleParam; 13] = [
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
    ];

    /// The throttle that reads this parameter.
    pub fn of(self) -> ThrottleKind {
        match self {
            ThrottleParam::MaxTokens | ThrottleParam::TokenRatio => ThrottleKind::TokenBucket,
            ThrottleParam::BudgetPercent
            | ThrottleParam::BudgetTtl
            | ThrottleParam::BudgetMinPerSec => ThrottleKind::Budget,
            ThrottleParam::AdaptiveK | ThrottleParam::AdaptiveWindow => ThrottleKind::Adaptive,
            ThrottleParam::BreakerFailureRatio
            | ThrottleParam::BreakerMinRequests
            | ThrottleParam::BreakerWindow
            | ThrottleParam::BreakerConsecutive
            | ThrottleParam::BreakerCooldown
            | ThrottleParam::BreakerProbes => ThrottleKind::CircuitBreaker,
        }
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
        }
    }
}

impl ThrottleKind {
    /// Every throttle, in the catalogue's order.
    pub const ALL: [ThrottleKind; 4] = [
        ThrottleKind::TokenBucket,
        ThrottleKind::Budget,
        ThrottleKind::Adaptive,
        ThrottleKind::CircuitBreaker,
    ];

    /// The name on the command line and in every result.
    pub fn name(self) -> &'static str {
        match self {
            ThrottleKind::TokenBucket => "token-bucket",
            ThrottleKind::Budget => "budget",
            ThrottleKind::Adaptive => "adaptive",
            ThrottleKind::CircuitBreaker => "circuit-breaker",
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
            .find(|&p| params.given(p) && Some(p.of()) != kind)
        {
            return Err(NotRead { param, kind });
        }
        let secs = Duration::from_secs;
        Ok(kind.map(|kind| match kind {
            ThrottleKind::TokenBucket => ThrottleConfig::TokenBucket {
                max_tokens: params.max_tokens.unwrap_or(10.0),
                token_ratio: params.token_ratio.unwrap_or(0.1),
            },
            ThrottleKind::Budget => ThrottleConfig::Budget {
                percent: params.budget_percent.unwrap_or(20.0) / 100.0,
                ttl: params.budget_ttl.unwrap_or(secs(10)),
                min_per_sec: params.budget_min_per_sec.unwrap_or(10.0),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn names_round_trip_and_every_strategy_names_itself() {
        for kind in StrategyKind::ALL {
            assert_eq!(StrategyKind::from_name(kind.name()), Some(kind));
            let built = kind.build(&StrategyParams::default()).unwrap();
            assert_eq!(built.kind(), kind);
            assert_eq!(built.name(), kind.name());
        }
        assert_eq!(StrategyKind::from_name("nope"), None);
        for kind in ThrottleKind::ALL {
            let built = ThrottleKind::build(Some(kind), &ThrottleParams::default());
            assert_eq!(built.unwrap().unwrap().kind(), kind);
        }
    }

    #[test]
    fn defaults_are_the_sources() {
        let build = |k: StrategyKind| k.build(&StrategyParams::default()).unwrap();
        assert_eq!(
            build(StrategyKind::Fixed),
            Strategy::Fixed { delay: ms(100) }
        );
        assert_eq!(
            build(StrategyKind::Exponential),
            Strategy::Exponential {
                min: ms(100),
                max: Duration::from_secs(300),
                factor: 2.7,
                jitter: 0.1
            }
        );
        assert_eq!(
            build(StrategyKind::DecorrelatedJitter),
            Strategy::DecorrelatedJitter {
                base: ms(100),
                cap: Duration::from_secs(300),
                factor: 3.0
            }
        );
        assert_eq!(
            build(StrategyKind::Google),
            Strategy::Google {
                first: Duration::from_secs(1),
                factor: 2.0,
                max: Duration::from_secs(32),
                random: ms(1000)
            }
        );
        assert_eq!(
            StrategyKind::Google
                .limits(RetryLimits::default())
                .max_attempts,
            Some(10)
        );
        let given = RetryLimits {
            max_attempts: Some(3),
            ..RetryLimits::default()
        };
        assert_eq!(StrategyKind::Google.limits(given).max_attempts, Some(3));
        assert_eq!(
            StrategyKind::Fixed.limits(RetryLimits::default()),
            RetryLimits::default()
        );
    }

    #[test]
    fn a_parameter_of_another_strategy_is_refused_by_name() {
        let params = StrategyParams {
            jitter: Some(0.2),
            ..StrategyParams::default()
        };
        assert_eq!(
            StrategyKind::Fixed.build(&params),
            Err(StrategyError::NotRead(NotRead {
                param: StrategyParam::Jitter,
                kind: StrategyKind::Fixed
            }))
        );
        let growing: Vec<&str> = StrategyKind::ALL
            .into_iter()
            .filter(|k| k.reads(StrategyParam::Factor))
            .map(StrategyKind::name)
            .collect();
        assert_eq!(
            growing,
            [
                "exponential",
                "full-jitter",
                "equal-jitter",
                "decorrelated-jitter",
                "google"
            ]
        );
        let inverted = StrategyParams {
            min_delay: Some(Duration::from_secs(10)),
            max_delay: Some(Duration::from_secs(1)),
            ..StrategyParams::default()
        };
        assert_eq!(
            StrategyKind::Exponential.build(&inverted),
            Err(StrategyError::MinOverMax)
        );
    }

    #[test]
    fn throttle_parameters_belong_to_one_throttle() {
        let params = ThrottleParams {
            adaptive_k: Some(3.0),
            ..ThrottleParams::default()
        };
        assert_eq!(
            ThrottleKind::build(Some(ThrottleKind::Budget), &params),
            Err(NotRead {
                param: ThrottleParam::AdaptiveK,
                kind: Some(ThrottleKind::Budget)
            })
        );
        assert_eq!(
            ThrottleKind::build(None, &params),
            Err(NotRead {
                param: ThrottleParam::AdaptiveK,
                kind: None
            })
        );
        assert_eq!(
            ThrottleKind::build(None, &ThrottleParams::default()),
            Ok(None)
        );
        let budget = ThrottleParams {
            budget_percent: Some(50.0),
            ..ThrottleParams::default()
        };
        assert_eq!(
            ThrottleKind::build(Some(ThrottleKind::Budget), &budget),
            Ok(Some(ThrottleConfig::Budget {
                percent: 0.5,
                ttl: Duration::from_secs(10),
                min_per_sec: 10.0
            }))
        );
    }
}
