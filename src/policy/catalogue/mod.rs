//! The catalogue of retry policies as a user picks them: every strategy
//! and throttle by name, the parameters each reads, and the defaults of
//! the parameters not given.
//!
//! The command line turns its flags into [`StrategyParams`] and
//! [`ThrottleParams`]; what a name means, which parameters apply to it and
//! what the rest default to is decided here, once, for every front end.

mod implementation;
mod not_read;
mod strategy;
mod throttle;

pub use implementation::Implementation;
pub use not_read::NotRead;
pub use strategy::{StrategyError, StrategyKind, StrategyParam, StrategyParams};
pub use throttle::{ThrottleKind, ThrottleParam, ThrottleParams};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::grpc::Codes;
    use crate::policy::backoff::Strategy;
    use crate::policy::retry_limits::RetryLimits;
    use crate::policy::throttle::ThrottleConfig;
    use std::time::Duration;

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
    fn shipped_clients_take_their_sources_defaults() {
        use crate::policy::shipped::{GrpcImplementation, ShippedBackoff};
        let none = StrategyParams::default();
        let secs = Duration::from_secs;
        let built = |k: StrategyKind| k.build(&none).unwrap();
        // Without a word, the AWS strategies follow botocore 1.44 on.
        for (kind, adaptive, throttle) in [
            (StrategyKind::AwsStandard, false, ThrottleKind::AwsQuota),
            (StrategyKind::AwsAdaptive, true, ThrottleKind::AwsAdaptive),
        ] {
            let built = built(kind);
            assert_eq!(
                built,
                Strategy::Shipped(ShippedBackoff::Aws {
                    adaptive,
                    scale: ms(50),
                    throttle_scale: secs(1),
                    max: secs(20),
                    variant_2026: true,
                    hint_cap: secs(5)
                })
            );
            assert_eq!(
                built,
                Strategy::Shipped(ShippedBackoff::aws(adaptive, true))
            );
            assert_eq!(built.default_throttle(), Some(throttle));
            assert_eq!(built.kind(), kind);
        }
        let older = StrategyParams {
            implementation: Some(Implementation::Botocore143),
            ..StrategyParams::default()
        };
        for (kind, adaptive, throttle) in [
            (StrategyKind::AwsStandard, false, ThrottleKind::AwsQuota143),
            (
                StrategyKind::AwsAdaptive,
                true,
                ThrottleKind::AwsAdaptive143,
            ),
        ] {
            let built = kind.build(&older).unwrap();
            assert_eq!(
                built,
                Strategy::Shipped(ShippedBackoff::aws(adaptive, false))
            );
            assert_eq!(built.default_throttle(), Some(throttle));
        }
        assert_eq!(
            StrategyKind::Grpc.build(&older),
            Err(StrategyError::Implementation {
                implementation: Implementation::Botocore143,
                kind: StrategyKind::Grpc
            })
        );
        let js = StrategyParams {
            implementation: Some(Implementation::GrpcJs),
            ..StrategyParams::default()
        };
        assert_eq!(
            StrategyKind::Grpc.build(&js),
            Ok(Strategy::Shipped(ShippedBackoff::Grpc {
                initial: ms(100),
                multiplier: 2.0,
                max: secs(1),
                implementation: GrpcImplementation::Js,
                retryable: Codes::default(),
            }))
        );
        assert_eq!(
            StrategyKind::Fixed.build(&older),
            Err(StrategyError::NotRead(NotRead {
                param: StrategyParam::Implementation,
                kind: StrategyKind::Fixed
            }))
        );
        assert_eq!(
            built(StrategyKind::Grpc),
            Strategy::Shipped(ShippedBackoff::Grpc {
                initial: ms(100),
                multiplier: 2.0,
                max: secs(1),
                implementation: GrpcImplementation::Core,
                retryable: Codes::default(),
            })
        );
        assert_eq!(
            built(StrategyKind::Envoy),
            Strategy::Shipped(ShippedBackoff::Envoy {
                base: ms(25),
                max: ms(250)
            })
        );
        assert_eq!(
            built(StrategyKind::Finagle),
            Strategy::Shipped(ShippedBackoff::Finagle {
                start: ms(5),
                max: ms(200)
            })
        );
        assert_eq!(
            built(StrategyKind::PollyV2),
            Strategy::Shipped(ShippedBackoff::PollyV2 {
                base: secs(2),
                max: Duration::MAX
            })
        );
        // gRPC treats more than 5 attempts as 5.
        let ten = RetryLimits {
            max_attempts: Some(10),
            ..RetryLimits::default()
        };
        assert_eq!(StrategyKind::Grpc.limits(ten).max_attempts, Some(5));
        assert_eq!(StrategyKind::Fixed.limits(ten).max_attempts, Some(10));
        // Envoy's maximum follows its base unless given, even past 250 ms.
        let slow = StrategyParams {
            min_delay: Some(ms(300)),
            ..StrategyParams::default()
        };
        assert_eq!(
            StrategyKind::Envoy.build(&slow).unwrap(),
            Strategy::Shipped(ShippedBackoff::Envoy {
                base: ms(300),
                max: secs(3)
            })
        );
        let base = StrategyParams {
            min_delay: Some(ms(100)),
            ..StrategyParams::default()
        };
        assert_eq!(
            StrategyKind::Envoy.build(&base).unwrap(),
            Strategy::Shipped(ShippedBackoff::Envoy {
                base: ms(100),
                max: secs(1)
            })
        );
        let attempts: Vec<Option<u32>> = [
            StrategyKind::AwsStandard,
            StrategyKind::AwsAdaptive,
            StrategyKind::Grpc,
            StrategyKind::Envoy,
            StrategyKind::Finagle,
            StrategyKind::PollyV2,
        ]
        .into_iter()
        .map(StrategyKind::default_max_attempts)
        .collect();
        assert_eq!(
            attempts,
            [Some(3), Some(3), Some(4), Some(2), None, Some(4)]
        );
        for k in StrategyKind::ALL {
            assert_eq!(built(k).kind(), k, "{k}");
        }
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
                "google",
                "grpc"
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
    fn a_throttle_refuses_a_parameter_it_does_not_read() {
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

    #[test]
    fn a_parameter_may_belong_to_several_throttles() {
        use crate::policy::shipped::{AwsQuotaConfig, EnvoyRetryBudget, ShippedThrottleConfig};
        let readers = |p: ThrottleParam| p.readers().map(ThrottleKind::name).collect::<Vec<_>>();
        assert_eq!(
            readers(ThrottleParam::BudgetPercent),
            ["budget", "tower-budget", "finagle-budget", "envoy-budget"]
        );
        assert_eq!(
            readers(ThrottleParam::BudgetTtl),
            ["budget", "tower-budget", "finagle-budget"]
        );
        assert_eq!(
            readers(ThrottleParam::QuotaRefund),
            [
                "aws-quota",
                "aws-quota-1.43",
                "aws-adaptive",
                "aws-adaptive-1.43"
            ]
        );
        assert_eq!(
            readers(ThrottleParam::MinRetryConcurrency),
            ["envoy-budget"]
        );
        assert_eq!(readers(ThrottleParam::MaxTokens), ["token-bucket"]);
        for p in ThrottleParam::ALL {
            assert!(p.readers().next().is_some(), "{p:?} is read by none");
        }
        // 50 % is one half for tower and Finagle, 50 for Envoy.
        let half = ThrottleParams {
            budget_percent: Some(50.0),
            budget_ttl: Some(Duration::from_secs(4)),
            budget_min_per_sec: Some(2.5),
            ..ThrottleParams::default()
        };
        let shipped = |kind, params: &ThrottleParams| match ThrottleKind::build(Some(kind), params)
        {
            Ok(Some(ThrottleConfig::Shipped(c))) => c,
            other => panic!("{other:?}"),
        };
        let tower = ShippedThrottleConfig::Tower {
            percent: 0.5,
            ttl: Duration::from_secs(4),
            min_per_sec: 2.5,
        };
        assert_eq!(shipped(ThrottleKind::TowerBudget, &half), tower);
        let ShippedThrottleConfig::Tower {
            percent,
            ttl,
            min_per_sec,
        } = tower
        else {
            unreachable!()
        };
        assert_eq!(
            shipped(ThrottleKind::FinagleBudget, &half),
            ShippedThrottleConfig::Finagle {
                percent,
                ttl,
                min_per_sec
            }
        );
        let envoy = ThrottleParams {
            budget_percent: Some(50.0),
            min_retry_concurrency: Some(1),
            ..ThrottleParams::default()
        };
        assert_eq!(
            shipped(ThrottleKind::EnvoyBudget, &envoy),
            ShippedThrottleConfig::Envoy(EnvoyRetryBudget {
                percent: 50.0,
                min: 1
            })
        );
        // The quota's flags over either variant's defaults.
        let quota = ThrottleParams {
            quota_capacity: Some(50),
            quota_retry_cost: Some(10),
            quota_refund: Some(0),
            ..ThrottleParams::default()
        };
        for (kind, variant_2026, timeout_cost) in [
            (ThrottleKind::AwsQuota143, false, 10),
            (ThrottleKind::AwsQuota, true, 14),
        ] {
            assert_eq!(
                shipped(kind, &quota),
                ShippedThrottleConfig::AwsQuota {
                    variant_2026,
                    quota: AwsQuotaConfig {
                        capacity: 50,
                        retry_cost: 10,
                        timeout_cost,
                        throttle_cost: 5,
                        refund: 0
                    }
                }
            );
        }
    }

    #[test]
    fn a_shared_parameter_is_still_refused_by_a_throttle_that_does_not_read_it() {
        let refused = |kind, params: ThrottleParams, param| {
            assert_eq!(
                ThrottleKind::build(Some(kind), &params),
                Err(NotRead {
                    param,
                    kind: Some(kind)
                }),
                "{kind}"
            );
        };
        let capacity = ThrottleParams {
            quota_capacity: Some(50),
            ..ThrottleParams::default()
        };
        for kind in [ThrottleKind::TowerBudget, ThrottleKind::Budget] {
            refused(kind, capacity.clone(), ThrottleParam::QuotaCapacity);
        }
        let floor = ThrottleParams {
            min_retry_concurrency: Some(1),
            ..ThrottleParams::default()
        };
        refused(
            ThrottleKind::AwsQuota143,
            floor,
            ThrottleParam::MinRetryConcurrency,
        );
        let ttl = ThrottleParams {
            budget_ttl: Some(Duration::from_secs(1)),
            ..ThrottleParams::default()
        };
        refused(ThrottleKind::EnvoyBudget, ttl, ThrottleParam::BudgetTtl);
        let percent = ThrottleParams {
            budget_percent: Some(10.0),
            ..ThrottleParams::default()
        };
        refused(
            ThrottleKind::AwsQuota,
            percent,
            ThrottleParam::BudgetPercent,
        );
    }

    #[test]
    fn without_flags_the_shipped_throttles_are_their_sources() {
        use crate::policy::shipped::{
            AwsQuota, EnvoyRetryBudget, FinagleBudget, ShippedThrottle, ShippedThrottleConfig,
            TpsBudget,
        };
        let built = |kind| match ThrottleKind::build(Some(kind), &ThrottleParams::default()) {
            Ok(Some(ThrottleConfig::Shipped(c))) => c,
            other => panic!("{other:?}"),
        };
        let cases = [
            (
                ThrottleKind::AwsQuota143,
                ShippedThrottleConfig::aws_quota(false),
                ShippedThrottle::AwsQuota(AwsQuota::standard()),
            ),
            (
                ThrottleKind::AwsQuota,
                ShippedThrottleConfig::aws_quota(true),
                ShippedThrottle::AwsQuota(AwsQuota::variant_2026()),
            ),
            (
                ThrottleKind::TowerBudget,
                ShippedThrottleConfig::tower(),
                ShippedThrottle::Tower(TpsBudget::tower_default()),
            ),
            (
                ThrottleKind::FinagleBudget,
                ShippedThrottleConfig::finagle(),
                ShippedThrottle::Finagle(FinagleBudget::finagle_default()),
            ),
            (
                ThrottleKind::EnvoyBudget,
                ShippedThrottleConfig::Envoy(EnvoyRetryBudget::default()),
                ShippedThrottle::Envoy {
                    budget: EnvoyRetryBudget {
                        percent: 20.0,
                        min: 3,
                    },
                    active: 0,
                    retrying: 0,
                },
            ),
        ];
        for (kind, config, fresh) in cases {
            assert_eq!(built(kind), config, "{kind}");
            assert_eq!(ShippedThrottle::new(built(kind)), fresh, "{kind}");
        }
        assert_eq!(
            AwsQuota::standard(),
            AwsQuota::new(500, 5, 10, 5, 1),
            "botocore's numbers"
        );
        assert_eq!(
            ShippedThrottleConfig::tower(),
            ShippedThrottleConfig::Tower {
                percent: 0.2,
                ttl: Duration::from_secs(10),
                min_per_sec: 10.0
            }
        );
    }
}
