//! The retry flags as a user gives them: hedging, and the shipped
//! throttles' flags and refusals.

use clap::Parser;

use crate::cli::client::ClientCli;
use crate::model::client::ClientConfig;
use crate::model::grpc::{Code, Codes};
use crate::policy::shipped::{GrpcImplementation, ShippedBackoff};
use crate::policy::{Hedging, Strategy, ThrottleConfig};

fn client(args: &[&str]) -> Result<ClientConfig, String> {
    let mut argv = vec!["client"];
    argv.extend_from_slice(args);
    ClientCli::try_parse_from(argv)
        .map_err(|e| e.to_string())?
        .run
        .config()
        .map_err(|e| e.to_string())
}

fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}

#[test]
fn hedging_takes_a6s_example_and_grpcs_throttle_by_default() {
    let c = client(&["--hedge-delay", "50ms"]).unwrap();
    assert_eq!(c.hedging, Some(Hedging::new(ms(50), 4)));
    assert_eq!(
        c.throttle,
        Some(ThrottleConfig::TokenBucket {
            max_tokens: 10.0,
            token_ratio: 0.1
        })
    );
    assert_eq!(c.policy_name(), "hedging");
    let c = client(&[
        "--hedge-delay",
        "0s",
        "--hedge-max-attempts",
        "9",
        "--no-throttle",
    ])
    .unwrap();
    assert_eq!(c.hedging, Some(Hedging::new(ms(0), 5)), "capped at 5");
    assert_eq!(c.throttle, None);
    let c = client(&["--hedge-delay", "50ms", "--implementation", "grpc-js"]).unwrap();
    assert_eq!(
        c.hedging,
        Some(Hedging::new(ms(50), 4).following(GrpcImplementation::Js))
    );
    let err = client(&["--hedge-delay", "50ms", "--implementation", "botocore-1.44"]);
    assert!(
        err.unwrap_err()
            .contains("--implementation botocore-1.44 does not apply with --hedge-delay"),
    );
    let c = client(&["--hedge-delay", "1s", "--time-scale", "10"]).unwrap();
    assert_eq!(c.hedging.map(|h| h.delay), Some(ms(100)));
    assert_eq!(client(&[]).unwrap().hedging, None);
}

#[test]
fn grpc_retryable_lists_the_statuses_of_grpcs_retries_and_hedges_only() {
    let codes = Codes::of(&[Code::ResourceExhausted, Code::Unavailable]);
    let c = client(&[
        "--strategy",
        "grpc",
        "--grpc-retryable",
        "resource-exhausted,14",
    ])
    .unwrap();
    match c.strategy {
        Strategy::Shipped(ShippedBackoff::Grpc { retryable, .. }) => assert_eq!(retryable, codes),
        other => panic!("{other:?}"),
    }
    let c = client(&["--strategy", "grpc"]).unwrap();
    match c.strategy {
        Strategy::Shipped(ShippedBackoff::Grpc { retryable, .. }) => {
            assert_eq!(retryable, Codes::of(&[Code::Unavailable]));
        }
        other => panic!("{other:?}"),
    }
    let c = client(&["--hedge-delay", "5ms", "--grpc-retryable", "ABORTED"]).unwrap();
    let aborted = Codes::of(&[Code::Aborted]);
    assert_eq!(c.hedging, Some(Hedging::new(ms(5), 4).non_fatal(aborted)));
    let err = client(&["--strategy", "fixed", "--grpc-retryable", "UNAVAILABLE"]).unwrap_err();
    assert!(
        err.contains("--grpc-retryable does not apply to --strategy fixed"),
        "{err}"
    );
    let err = client(&["--strategy", "grpc", "--grpc-retryable", "OK"]).unwrap_err();
    assert!(err.contains("OK is a success"), "{err}");
}

#[test]
fn retry_flags_do_not_belong_with_hedging() {
    let refused = |args: &[&str], flag: &str| {
        let e = client(args).unwrap_err();
        assert!(e.contains(flag), "{e}");
    };
    refused(
        &["--hedge-delay", "5ms", "--strategy", "grpc"],
        "--strategy",
    );
    refused(
        &["--hedge-delay", "5ms", "--fixed-delay", "1s"],
        "--fixed-delay",
    );
    refused(
        &["--hedge-delay", "5ms", "--max-attempts", "3"],
        "--max-attempts",
    );
    refused(
        &["--hedge-delay", "5ms", "--respect-retry-after"],
        "--respect-retry-after",
    );
    refused(&["--hedge-max-attempts", "3"], "--hedge-delay");
    refused(&["--hedge-delay", "5ms", "--hedge-max-attempts", "1"], "1");
    assert!(client(&["--hedge-delay", "5ms", "--deadline", "1s"]).is_ok());
}

/// The message of a refusal of `args` (split at spaces), which must
/// exit with code 2.
fn refused(args: &str) -> String {
    let argv = std::iter::once("client").chain(args.split_whitespace());
    let err = ClientCli::try_parse_from(argv)
        .and_then(|cli| cli.run.config())
        .expect_err(args);
    assert_eq!(err.exit_code(), 2, "{args}: {err}");
    err.to_string()
}

#[test]
fn the_shipped_throttles_read_their_flags_and_no_others() {
    use crate::policy::shipped::{AwsQuotaConfig, EnvoyRetryBudget, ShippedThrottleConfig};
    let throttle = |args: &str| match client(&args.split(' ').collect::<Vec<_>>()) {
        Ok(c) => c.throttle,
        Err(e) => panic!("{args}: {e}"),
    };
    let shipped = |c| Some(ThrottleConfig::Shipped(c));
    let quota = AwsQuotaConfig {
        capacity: 50,
        retry_cost: 10,
        refund: 0,
        ..AwsQuotaConfig::STANDARD
    };
    assert_eq!(
        throttle(
            "--strategy aws-standard --implementation botocore-1.43 --quota-capacity 50 \
             --quota-retry-cost 10 --quota-refund 0"
        ),
        shipped(ShippedThrottleConfig::AwsQuota {
            variant_2026: false,
            quota
        })
    );
    // Four times faster: 2.5 a second over 4 s is 10 over 1 s.
    assert_eq!(
        throttle(
            "--strategy finagle --budget-percent 50 --budget-ttl 4s --budget-min-per-sec 2.5 --time-scale 4"
        ),
        shipped(ShippedThrottleConfig::Finagle {
            percent: 0.5,
            ttl: ms(1000),
            min_per_sec: 10.0
        })
    );
    assert_eq!(
        throttle("--strategy envoy --min-retry-concurrency 0"),
        shipped(ShippedThrottleConfig::Envoy(EnvoyRetryBudget {
            percent: 20.0,
            min: 0
        }))
    );
    for (args, message) in [
        (
            "--throttle tower-budget --quota-capacity 50",
            "--quota-capacity does not apply to --throttle tower-budget \
             (it applies to: aws-quota, aws-quota-1.43, aws-adaptive, aws-adaptive-1.43)",
        ),
        (
            "--strategy aws-standard --min-retry-concurrency 1",
            "--min-retry-concurrency does not apply to --throttle aws-quota \
             (it applies to: envoy-budget)",
        ),
        (
            "--strategy envoy --budget-ttl 1s",
            "(it applies to: budget, tower-budget, finagle-budget)",
        ),
        (
            "--throttle aws-quota-1.43 --budget-percent 5",
            "(it applies to: budget, tower-budget, finagle-budget, envoy-budget)",
        ),
        (
            "--strategy fixed --implementation botocore-1.43",
            "--implementation does not apply to --strategy fixed",
        ),
        (
            "--strategy grpc --implementation botocore-1.44",
            "--implementation botocore-1.44 does not apply to --strategy grpc \
             (it applies to: aws-standard, aws-adaptive)",
        ),
        (
            "--strategy aws-adaptive --implementation grpc-js",
            "--implementation grpc-js does not apply to --strategy aws-adaptive \
             (it applies to: grpc)",
        ),
        (
            "--throttle tower-budget --budget-ttl 1500ms",
            "--throttle tower-budget: tower's TpsBudget takes a ttl of 1 to 60 whole seconds",
        ),
        (
            "--throttle tower-budget --budget-min-per-sec 2.5",
            "a whole number of retries a second, not 2.5",
        ),
    ] {
        let err = refused(args);
        assert!(err.contains(message), "{args}: {err}");
    }
    // Bad values: no empty quota, no negative cost, no fraction.
    for (flag, value) in [
        ("--quota-capacity", "0"),
        ("--quota-retry-cost", "-1"),
        ("--quota-timeout-cost", "x"),
        ("--quota-throttle-cost", "-1"),
        ("--quota-refund", "1.5"),
        ("--min-retry-concurrency", "-1"),
    ] {
        let err = refused(&format!("--throttle aws-quota {flag} {value}"));
        assert!(err.contains(flag) && err.contains("invalid value"), "{err}");
    }
}
