//! Tests of the client's flags.
use super::*;
use crate::policy::{RetryLimits, Strategy, ThrottleConfig};

fn client(args: &[&str]) -> Result<ClientConfig, clap::Error> {
    let mut argv = vec!["client"];
    argv.extend_from_slice(args);
    ClientCli::try_parse_from(argv)?.run.config()
}

fn plan(args: &[&str]) -> Result<PlanRequest, clap::Error> {
    let mut argv = vec!["client", "plan"];
    argv.extend_from_slice(args);
    match ClientCli::try_parse_from(argv)?.command {
        Some(ClientCommand::Plan(p)) => p.request(),
        None => panic!("plan is a subcommand"),
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn client_defaults_match_the_original() {
    let c = client(&["--seed", "1"]).unwrap();
    assert_eq!(c.clients, 1000);
    assert_eq!(c.think.mean(), Duration::from_secs(10));
    assert_eq!(c.timeout, Duration::from_secs(2));
    assert_eq!(c.strategy, Strategy::Fixed { delay: ms(100) });
    assert_eq!(c.report_interval, Duration::from_secs(5));
    assert_eq!(c.url, "http://127.0.0.1:8070/api");
    assert_eq!(c.limits, RetryLimits::default());
    assert_eq!(c.throttle, None);
}
#[test]
fn original_flag_names_are_accepted() {
    let c = client(&["--exponential-backoff"]).unwrap();
    assert_eq!(c.strategy, Strategy::exponential_2014());
    let c = client(&["--simple-backoff-delay", "250ms"]).unwrap();
    assert_eq!(c.strategy, Strategy::Fixed { delay: ms(250) });
}
#[test]
fn lambda_takes_seconds_or_a_duration() {
    assert_eq!(client(&["--lambda", "0.5"]).unwrap().think.mean(), ms(500));
    assert_eq!(
        client(&["--lambda", "250ms"]).unwrap().think.mean(),
        ms(250)
    );
    assert!(client(&["--lambda", "0"]).is_err());
}
#[test]
fn every_strategy_reads_its_flags_with_its_defaults() {
    let s = |args: &[&str]| client(args).unwrap().strategy;
    assert_eq!(
        s(&["--strategy", "exponential"]),
        Strategy::Exponential {
            min: ms(100),
            max: Duration::from_secs(300),
            factor: 2.7,
            jitter: 0.1
        }
    );
    assert_eq!(
        s(&[
            "--strategy",
            "exponential",
            "--min-delay",
            "1s",
            "--factor",
            "2",
            "--jitter",
            "0"
        ]),
        Strategy::Exponential {
            min: Duration::from_secs(1),
            max: Duration::from_secs(300),
            factor: 2.0,
            jitter: 0.0
        }
    );
    assert_eq!(
        s(&["--strategy", "full-jitter", "--max-delay", "10s"]),
        Strategy::FullJitter {
            base: ms(100),
            cap: Duration::from_secs(10),
            factor: 2.0
        }
    );
    assert_eq!(
        s(&["--strategy", "equal-jitter"]),
        Strategy::EqualJitter {
            base: ms(100),
            cap: Duration::from_secs(300),
            factor: 2.0
        }
    );
    assert_eq!(
        s(&["--strategy", "decorrelated-jitter"]),
        Strategy::DecorrelatedJitter {
            base: ms(100),
            cap: Duration::from_secs(300),
            factor: 3.0
        }
    );
    assert_eq!(
        s(&[
            "--strategy",
            "truncated-binary",
            "--ceiling",
            "4",
            "--stay-at-ceiling"
        ]),
        Strategy::TruncatedBinary {
            slot: ms(100),
            ceiling: 4,
            stay_at_ceiling: true
        }
    );
    let google = client(&["--strategy", "google"]).unwrap();
    assert_eq!(
        google.strategy,
        Strategy::Google {
            first: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(32),
            random: ms(1000)
        }
    );
    assert_eq!(google.limits.max_attempts, Some(10));
    let google = client(&[
        "--strategy",
        "google",
        "--max-attempts",
        "3",
        "--max-delay",
        "64s",
    ])
    .unwrap();
    assert_eq!(google.limits.max_attempts, Some(3));
}
#[test]
fn limits_and_throttles_read_their_flags() {
    let c = client(&[
        "--max-attempts",
        "4",
        "--deadline",
        "30s",
        "--respect-retry-after",
    ])
    .unwrap();
    assert_eq!(
        c.limits,
        RetryLimits {
            max_attempts: Some(4),
            deadline: Some(Duration::from_secs(30)),
            respect_retry_after: true
        }
    );
    let t = |args: &[&str]| client(args).unwrap().throttle.unwrap();
    assert_eq!(
        t(&["--throttle", "token-bucket"]),
        ThrottleConfig::TokenBucket {
            max_tokens: 10.0,
            token_ratio: 0.1
        }
    );
    assert_eq!(
        t(&["--throttle", "budget", "--budget-percent", "50"]),
        ThrottleConfig::Budget {
            percent: 0.5,
            ttl: Duration::from_secs(10),
            min_per_sec: 10.0
        }
    );
    assert_eq!(
        t(&["--throttle", "adaptive"]),
        ThrottleConfig::Adaptive {
            k: 2.0,
            window: Duration::from_secs(120)
        }
    );
    assert_eq!(
        t(&[
            "--throttle",
            "circuit-breaker",
            "--breaker-consecutive",
            "5"
        ]),
        ThrottleConfig::CircuitBreaker {
            failure_ratio: 0.5,
            min_requests: 20,
            window: Duration::from_secs(10),
            consecutive: Some(5),
            cooldown: Duration::from_secs(5),
            probes: 1
        }
    );
}
#[test]
fn flags_of_another_strategy_or_throttle_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--jitter", "0.2"],
            "--jitter does not apply to --strategy fixed",
        ),
        (
            &["--strategy", "exponential", "--fixed-delay", "1s"],
            "--fixed-delay",
        ),
        (&["--exponential-backoff", "--factor", "3"], "--factor"),
        (&["--strategy", "full-jitter", "--jitter", "0"], "--jitter"),
        (&["--strategy", "google", "--ceiling", "3"], "--ceiling"),
        (
            &["--max-tokens", "5"],
            "--max-tokens does not apply to --throttle none",
        ),
        (
            &["--throttle", "budget", "--adaptive-k", "3"],
            "--adaptive-k",
        ),
    ];
    for (args, needle) in cases {
        let err = client(args).expect_err(&format!("{args:?} must be refused"));
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains(needle), "{args:?}: {err}");
    }
}
#[test]
fn bad_input_names_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--clients", "0"], "--clients"),
        (&["--strategy", "exponential", "--factor", "-1"], "--factor"),
        (&["--strategy", "exponential", "--factor", "1"], "--factor"),
        (&["--timeout", "abc"], "--timeout"),
        (&["--timeout", "0s"], "--timeout"),
        (
            &["--strategy", "exponential", "--jitter", "-0.1"],
            "--jitter",
        ),
        (&["--url", "ftp://127.0.0.1/api"], "--url"),
        (&["--header", "no colon"], "--header"),
        (&["--body-file", "/nonexistent/body"], "--body-file"),
        (&["--strategy", "nope"], "--strategy"),
        (
            &["--strategy", "fixed", "--exponential-backoff"],
            "--exponential-backoff",
        ),
        (
            &[
                "--strategy",
                "exponential",
                "--min-delay",
                "10s",
                "--max-delay",
                "1s",
            ],
            "--min-delay",
        ),
        (&["--max-attempts", "0"], "--max-attempts"),
        (
            &[
                "--throttle",
                "circuit-breaker",
                "--breaker-failure-ratio",
                "1.5",
            ],
            "--breaker-failure-ratio",
        ),
    ];
    for (args, flag) in cases {
        let err = client(args).expect_err(&format!("{args:?} must be refused"));
        assert_eq!(err.exit_code(), 2, "{args:?}");
        assert!(
            err.to_string().contains(flag),
            "{args:?} should name {flag}: {err}"
        );
    }
}

#[test]
fn unknown_strategy_lists_the_valid_ones() {
    let msg = client(&["--strategy", "nope"]).unwrap_err().to_string();
    for name in [
        "fixed",
        "exponential",
        "exponential-2014",
        "full-jitter",
        "equal-jitter",
        "decorrelated-jitter",
        "truncated-binary",
        "google",
    ] {
        assert!(msg.contains(name), "{msg}");
    }
}
#[test]
fn time_scale_compresses_every_duration() {
    let c = client(&[
        "--time-scale",
        "10",
        "--duration",
        "100s",
        "--strategy",
        "google",
        "--deadline",
        "1m",
        "--throttle",
        "budget",
    ])
    .unwrap();
    assert_eq!(c.think.mean(), Duration::from_secs(1));
    assert_eq!(c.timeout, ms(200));
    assert_eq!(c.report_interval, ms(500));
    assert_eq!(c.duration, Some(Duration::from_secs(10)));
    assert_eq!(c.limits.deadline, Some(Duration::from_secs(6)));
    assert_eq!(
        c.strategy,
        Strategy::Google {
            first: ms(100),
            factor: 2.0,
            max: Duration::from_millis(3200),
            random: ms(100)
        }
    );
    assert_eq!(
        c.throttle,
        Some(ThrottleConfig::Budget {
            percent: 0.2,
            ttl: Duration::from_secs(1),
            min_per_sec: 100.0
        })
    );
    assert!(client(&["--time-scale", "0.5"]).is_err());
}
#[test]
fn plan_target_ratio_picks_the_geometric_factor() {
    let p = plan(&[
        "--strategy",
        "exponential",
        "--min-delay",
        "1s",
        "--target-ratio",
        "0.1",
    ])
    .unwrap();
    match p.strategy {
        Strategy::Exponential { factor, jitter, .. } => {
            assert!((factor - 1.1).abs() < 1e-12);
            assert_eq!(jitter, 0.0);
        }
        other => panic!("{other:?}"),
    }
    assert!(plan(&["--target-ratio", "0.1"]).is_err());
    assert!(
        plan(&[
            "--strategy",
            "exponential",
            "--target-ratio",
            "0.1",
            "--factor",
            "2"
        ])
        .is_err()
    );
    let p = plan(&["--strategy", "google"]).unwrap();
    assert_eq!(p.retries, 9, "google gives up after 10 attempts");
    let p = plan(&["--attempts", "4", "--max-attempts", "10"]).unwrap();
    assert_eq!(p.retries, 4);
}

#[test]
fn open_traffic_replaces_the_population_and_its_flags_are_checked() {
    let c = client(&["--arrival-rate", "250", "--session-requests", "4"]).unwrap();
    let open = c.open.unwrap();
    assert_eq!((c.clients, open.rate, open.session.mean()), (0, 250.0, 4.0));
    assert_eq!(open.max_outstanding, crate::cli::DEFAULT_MAX_OUTSTANDING);
    assert_eq!(c.demand(), 1000.0);
    // Time compressed ten times: ten times the arrivals.
    let c = client(&["--arrival-rate", "5", "--time-scale", "10"]).unwrap();
    assert_eq!(c.open.unwrap().rate, 50.0);
    assert_eq!(client(&["--seed", "1"]).unwrap().open, None);
    let kind = |args: &[&str]| client(args).unwrap_err().kind();
    assert_eq!(
        kind(&["--arrival-rate", "5", "--clients", "10"]),
        ErrorKind::ArgumentConflict
    );
    assert_eq!(
        kind(&["--session-requests", "3"]),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        kind(&["--max-outstanding", "3"]),
        ErrorKind::MissingRequiredArgument
    );
    for bad in [
        ["--arrival-rate", "0"],
        ["--arrival-rate", "-3"],
        ["--arrival-rate", "x"],
    ] {
        assert_eq!(kind(&bad), ErrorKind::ValueValidation, "{bad:?}");
    }
    let err = client(&["--arrival-rate", "5", "--session-requests", "0.5"]).unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
    let err = client(&["--arrival-rate", "5", "--max-outstanding", "0"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ValueValidation);
}
#[test]
fn http2_sets_the_transport_and_http1_is_the_default() {
    use crate::model::wire::Transport;
    assert_eq!(client(&[]).unwrap().wire.transport, Transport::Http1);
    assert_eq!(
        client(&["--http2"]).unwrap().wire.transport,
        Transport::Http2
    );
}
