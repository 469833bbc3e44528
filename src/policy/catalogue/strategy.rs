//! The strategies by name: the parameters each reads and their defaults.

use std::fmt;
use std::time::Duration;

use super::implementation::Implementation;
use super::not_read::NotRead;
use super::throttle::ThrottleKind;
use crate::model::grpc::Codes;
use crate::policy::backoff::Strategy;
use crate::policy::retry_limits::RetryLimits;
use crate::policy::shipped::{AWS_HINT_CAP, ShippedBackoff};

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
    /// The AWS SDKs' standard mode: `U[0,1) * min(2^(n-1) s, 20 s)`, 3
    /// attempts.
    AwsStandard,
    /// The AWS SDKs' adaptive mode: the standard mode's backoff, and a
    /// client-side rate limiter as its throttle.
    AwsAdaptive,
    /// gRPC's retry policy (A6): `min(initial * multiplier^(n-1), max) *
    /// U(0.8, 1.2)`, the proposal's example values.
    Grpc,
    /// Envoy's router: `U[0, b)` ms, b = 25, 50, 100, 200, 250, ...; one
    /// retry.
    Envoy,
    /// Finagle's default backoff: decorrelated jitter from 5 ms to 200 ms.
    Finagle,
    /// Polly v8's decorrelated jitter V2: base 2 s, 3 retries.
    PollyV2,
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
    /// The shipped strategies: the implementation and release followed.
    Implementation,
    /// grpc: the status codes retried (retryableStatusCodes).
    GrpcRetryable,
}

impl StrategyParam {
    /// Every parameter, in the order they are checked.
    pub const ALL: [StrategyParam; 10] = [
        StrategyParam::FixedDelay,
        StrategyParam::MinDelay,
        StrategyParam::MaxDelay,
        StrategyParam::Factor,
        StrategyParam::Jitter,
        StrategyParam::SlotTime,
        StrategyParam::Ceiling,
        StrategyParam::StayAtCeiling,
        StrategyParam::Implementation,
        StrategyParam::GrpcRetryable,
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
    /// The implementation and release followed (default: the current
    /// release of the strategy's library).
    pub implementation: Option<Implementation>,
    /// grpc: the status codes retried (default `UNAVAILABLE`).
    pub grpc_retryable: Option<Codes>,
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
            StrategyParam::Implementation => self.implementation.is_some(),
            StrategyParam::GrpcRetryable => self.grpc_retryable.is_some(),
        }
    }
}

/// Why parameters do not make a strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyError {
    /// A parameter the strategy does not read.
    NotRead(NotRead<StrategyParam, StrategyKind>),
    /// The first delay exceeds the cap.
    MinOverMax,
    /// An implementation the strategy cannot follow.
    Implementation {
        /// The implementation given.
        implementation: Implementation,
        /// The strategy.
        kind: StrategyKind,
    },
}

impl StrategyKind {
    /// Every strategy, in the catalogue's order.
    pub const ALL: [StrategyKind; 14] = [
        StrategyKind::Fixed,
        StrategyKind::Exponential,
        StrategyKind::Exponential2014,
        StrategyKind::FullJitter,
        StrategyKind::EqualJitter,
        StrategyKind::DecorrelatedJitter,
        StrategyKind::TruncatedBinary,
        StrategyKind::Google,
        StrategyKind::AwsStandard,
        StrategyKind::AwsAdaptive,
        StrategyKind::Grpc,
        StrategyKind::Envoy,
        StrategyKind::Finagle,
        StrategyKind::PollyV2,
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
            StrategyKind::AwsStandard => "aws-standard",
            StrategyKind::AwsAdaptive => "aws-adaptive",
            StrategyKind::Grpc => "grpc",
            StrategyKind::Envoy => "envoy",
            StrategyKind::Finagle => "finagle",
            StrategyKind::PollyV2 => "polly-v2",
        }
    }

    /// The strategies of clients that ship their own policy.
    fn shipped(self) -> bool {
        matches!(
            self,
            StrategyKind::AwsStandard
                | StrategyKind::AwsAdaptive
                | StrategyKind::Grpc
                | StrategyKind::Envoy
                | StrategyKind::Finagle
                | StrategyKind::PollyV2
        )
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
            StrategyParam::MinDelay | StrategyParam::MaxDelay => self.grows() || self.shipped(),
            StrategyParam::Factor => self.grows() || self == StrategyKind::Grpc,
            StrategyParam::Jitter => self == StrategyKind::Exponential,
            StrategyParam::SlotTime | StrategyParam::Ceiling | StrategyParam::StayAtCeiling => {
                self == StrategyKind::TruncatedBinary
            }
            StrategyParam::Implementation => self.default_implementation().is_some(),
            StrategyParam::GrpcRetryable => self == StrategyKind::Grpc,
        }
    }

    /// The attempt limit a strategy has unless one is given: Google's
    /// documents require a limit without fixing it, 10 here; the AWS SDKs
    /// make 3 attempts, gRPC's proposal's example 4 (its limit is 5), Envoy
    /// 2 (one retry), Polly 4 (three retries); Finagle's budget is its only
    /// limit.
    pub fn default_max_attempts(self) -> Option<u32> {
        match self {
            StrategyKind::Google => Some(10),
            StrategyKind::AwsStandard | StrategyKind::AwsAdaptive => Some(3),
            StrategyKind::Grpc | StrategyKind::PollyV2 => Some(4),
            StrategyKind::Envoy => Some(2),
            _ => None,
        }
    }

    /// Whether this strategy can follow `implementation`.
    pub fn can_follow(self, implementation: Implementation) -> bool {
        match implementation {
            Implementation::Botocore144 | Implementation::Botocore143 => {
                matches!(self, StrategyKind::AwsStandard | StrategyKind::AwsAdaptive)
            }
            Implementation::GrpcCore | Implementation::GrpcJs => self == StrategyKind::Grpc,
        }
    }

    /// What this strategy follows unless told: the current release of its
    /// library; none for a strategy that follows no library's variants.
    pub fn default_implementation(self) -> Option<Implementation> {
        match self {
            StrategyKind::AwsStandard | StrategyKind::AwsAdaptive => {
                Some(Implementation::Botocore144)
            }
            StrategyKind::Grpc => Some(Implementation::GrpcCore),
            _ => None,
        }
    }

    /// The throttle a shipped client brings unless one is given: the AWS
    /// SDKs' retry quota (with the adaptive mode's rate limiter), gRPC's
    /// retry throttling (the proposal's example: 10 tokens, 0.1 a
    /// success), Envoy's concurrent-retry budget, Finagle's RetryBudget.
    pub fn default_throttle(self) -> Option<ThrottleKind> {
        match self {
            StrategyKind::AwsStandard => Some(ThrottleKind::AwsQuota),
            StrategyKind::AwsAdaptive => Some(ThrottleKind::AwsAdaptive),
            StrategyKind::Grpc => Some(ThrottleKind::TokenBucket),
            StrategyKind::Envoy => Some(ThrottleKind::EnvoyBudget),
            StrategyKind::Finagle => Some(ThrottleKind::FinagleBudget),
            _ => None,
        }
    }

    /// The retry limits of this strategy: `given` with the strategy's
    /// attempt limit where none is given.
    pub fn limits(self, given: RetryLimits) -> RetryLimits {
        let mut max_attempts = given.max_attempts.or(self.default_max_attempts());
        if self == StrategyKind::Grpc {
            // gRPC treats a maxAttempts above 5 as 5.
            max_attempts = max_attempts.map(|n| n.min(5));
        }
        RetryLimits {
            max_attempts,
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
        let implementation = params.implementation.or(self.default_implementation());
        if let Some(i) = implementation.filter(|&i| !self.can_follow(i)) {
            return Err(StrategyError::Implementation {
                implementation: i,
                kind: self,
            });
        }
        // The AWS SDKs' 2026 retry behaviour: botocore 1.44 on.
        let aws_2026 = implementation == Some(Implementation::Botocore144);
        let ms = Duration::from_millis;
        let secs = Duration::from_secs;
        let (min_default, max_default, factor_default) = match self {
            StrategyKind::Google => (secs(1), secs(32), 2.0),
            StrategyKind::AwsStandard | StrategyKind::AwsAdaptive if aws_2026 => {
                (ms(50), secs(20), 2.0)
            }
            StrategyKind::AwsStandard | StrategyKind::AwsAdaptive => (secs(1), secs(20), 2.0),
            StrategyKind::Grpc => (ms(100), secs(1), 2.0),
            StrategyKind::Envoy => (ms(25), ms(250), 2.0),
            StrategyKind::Finagle => (ms(5), ms(200), 3.0),
            StrategyKind::PollyV2 => (secs(2), Duration::MAX, 2.0),
            StrategyKind::Exponential => (ms(100), Duration::from_secs(300), 2.7),
            StrategyKind::DecorrelatedJitter => (ms(100), Duration::from_secs(300), 3.0),
            _ => (ms(100), Duration::from_secs(300), 2.0),
        };
        let min = params.min_delay.unwrap_or(min_default);
        let max = match self {
            // Envoy's maximum is ten times its base unless given.
            StrategyKind::Envoy => params.max_delay.unwrap_or(min * 10),
            _ => params.max_delay.unwrap_or(max_default),
        };
        let factor = params.factor.unwrap_or(factor_default);
        if (self.grows() || self.shipped()) && min > max {
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
            StrategyKind::AwsStandard | StrategyKind::AwsAdaptive => {
                let variant_2026 = aws_2026;
                Strategy::Shipped(ShippedBackoff::Aws {
                    adaptive: self == StrategyKind::AwsAdaptive,
                    scale: min,
                    // The 2026 variant scales a throttle's backoff by 1 s
                    // whatever the transient scale; standard mode by both.
                    throttle_scale: if variant_2026 { secs(1) } else { min },
                    max,
                    variant_2026,
                    hint_cap: AWS_HINT_CAP,
                })
            }
            StrategyKind::Grpc => Strategy::Shipped(ShippedBackoff::Grpc {
                initial: min,
                multiplier: factor,
                max,
                implementation: implementation
                    .and_then(Implementation::grpc)
                    .unwrap_or_default(),
                retryable: params.grpc_retryable.unwrap_or_default(),
            }),
            StrategyKind::Envoy => Strategy::Shipped(ShippedBackoff::Envoy { base: min, max }),
            StrategyKind::Finagle => Strategy::Shipped(ShippedBackoff::Finagle { start: min, max }),
            StrategyKind::PollyV2 => Strategy::Shipped(ShippedBackoff::PollyV2 { base: min, max }),
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
            Strategy::Shipped(b) => match b {
                ShippedBackoff::Aws {
                    adaptive: false, ..
                } => StrategyKind::AwsStandard,
                ShippedBackoff::Aws { adaptive: true, .. } => StrategyKind::AwsAdaptive,
                ShippedBackoff::Grpc { .. } => StrategyKind::Grpc,
                ShippedBackoff::Envoy { .. } => StrategyKind::Envoy,
                ShippedBackoff::Finagle { .. } => StrategyKind::Finagle,
                ShippedBackoff::PollyV2 { .. } => StrategyKind::PollyV2,
            },
        }
    }

    /// The strategy's name as the command line spells it.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The throttle this strategy brings unless one is given: its kind's,
    /// with botocore 1.43's quota costs when the strategy follows 1.43.
    pub fn default_throttle(&self) -> Option<ThrottleKind> {
        match self {
            Strategy::Shipped(ShippedBackoff::Aws {
                adaptive,
                variant_2026: false,
                ..
            }) => Some(if *adaptive {
                ThrottleKind::AwsAdaptive143
            } else {
                ThrottleKind::AwsQuota143
            }),
            _ => self.kind().default_throttle(),
        }
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
