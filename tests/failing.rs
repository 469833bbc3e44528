//! A failing backend (`server --fail-rate P`) in both engines: a client
//! allowed `a` attempts makes 1 + p + ... + p^(a-1) of them per request on
//! average (the closed form in docs/chains.md, "Amplification, checked"),
//! exactly `a` when every request fails; and the failure's status reaches
//! the client's policy the same way in both.

mod common;

use std::process::Command;

use clap::Parser;
use common::SERVER;
use common::running::Running;
use common::virtual_time::sim_config;
use retry_storm::cli::{ClientCli, ServerArgs};
use retry_storm::net::client;
use retry_storm::report::counts::Tally;
use retry_storm::sim;

/// A steady client of 20 users (think 10 ms) retrying a failure 1 ms
/// later, at most three attempts a request.
const THREE_ATTEMPTS: [&str; 10] = [
    "--clients",
    "20",
    "--lambda",
    "10ms",
    "--strategy",
    "fixed",
    "--fixed-delay",
    "1ms",
    "--max-attempts",
    "3",
];

/// A virtual run of `seconds` (no pause) of a server with `server`'s
/// flags and a client with `client`'s.
fn virtual_run(server: &[&str], client: &[&str], seconds: u32) -> (Tally, u64, u64) {
    let duration = format!("{seconds}s");
    let mut client = client.to_vec();
    client.extend_from_slice(&["--duration", &duration, "--seed", "2"]);
    let out = sim::run(&sim_config(server, &client, vec![])).unwrap();
    (
        out.client.totals.tally,
        out.server.completed,
        out.server.failed,
    )
}

/// The finished requests and their mean attempts (the buckets are exact
/// up to five).
fn mean_attempts(t: &Tally) -> (f64, f64) {
    let b = t.attempts_per_request;
    assert_eq!(b[5..], [0, 0], "{t:?}");
    let n: u64 = b.iter().sum();
    let sum: u64 = b.iter().zip(1..).map(|(count, k)| count * k).sum();
    (n as f64, sum as f64 / n as f64)
}

#[test]
fn half_failing_costs_one_and_three_quarter_attempts_a_request() {
    let (t, completed, failed) =
        virtual_run(&["--fail-rate", "0.5", "--seed", "1"], &THREE_ATTEMPTS, 300);
    // Attempts A of a request: 1 with probability 1/2, 2 with 1/4, 3 with
    // 1/4 (the first two failed, whatever the third does). E[A] = 1.75,
    // E[A^2] = 0.5 + 4/4 + 9/4 = 3.75, Var A = 3.75 - 1.75^2 = 0.6875;
    // over n independent requests the mean is within 4 sqrt(0.6875 / n)
    // of 1.75 but with a chance of 6e-5 (and the seeds are fixed).
    let (n, mean) = mean_attempts(&t);
    assert!(n > 20_000.0, "{t:?}");
    let bound = 4.0 * (0.6875 / n).sqrt();
    assert!((mean - 1.75).abs() <= bound, "{mean} +- {bound}: {t:?}");
    assert_eq!(t.attempts_per_request[3], 0, "never a fourth: {t:?}");
    // A request is given up when all three fail: 1/8 of them.
    let gave_up = t.gave_up as f64 / n;
    let bound = 4.0 * (0.125 * 0.875 / n).sqrt();
    assert!((gave_up - 0.125).abs() <= bound, "{gave_up} +- {bound}");
    // The server's books and the client's agree: every error a failure,
    // every success served, nothing timed out.
    assert_eq!(t.timeouts, 0);
    assert_eq!(failed, t.errors);
    assert_eq!(completed, t.ok);
}

#[test]
fn failing_everything_costs_exactly_the_attempts_allowed() {
    let (t, completed, failed) = virtual_run(&["--fail-rate", "1"], &THREE_ATTEMPTS, 60);
    assert_eq!((t.ok, completed), (0, 0), "nothing succeeds: {t:?}");
    assert!(t.gave_up > 1000, "{t:?}");
    assert_eq!(t.attempts_per_request, [0, 0, t.gave_up, 0, 0, 0, 0]);
    // Each of the 20 users may end with a request of one or two attempts
    // unfinished.
    assert!(
        (3 * t.gave_up..=3 * t.gave_up + 2 * 20).contains(&t.errors),
        "{t:?}"
    );
    assert_eq!(failed, t.errors);
}

/// Retries a client with `client`'s flags makes against a backend failing
/// everything with `status`, in virtual time.
fn virtual_retries(status: &str, client: &[&str]) -> u64 {
    let server = ["--fail-rate", "1", "--fail-status", status];
    let (t, _, failed) = virtual_run(&server, client, 10);
    assert_eq!(failed, t.sent(), "{t:?}");
    t.retries
}

const GRPC: [&str; 6] = ["--clients", "5", "--lambda", "10ms", "--strategy", "grpc"];
/// Fifty users, so that some retry within 300 ms when botocore's first
/// backoff, uniform up to 1 s, allows a retry at all (all fifty later:
/// a chance of 0.7^50, 2e-8).
const BOTOCORE_1_43: [&str; 8] = [
    "--clients",
    "50",
    "--lambda",
    "10ms",
    "--strategy",
    "aws-standard",
    "--implementation",
    "botocore-1.43",
];

#[test]
fn the_failures_status_reaches_the_clients_policy() {
    // gRPC clients retry UNAVAILABLE (503), not INTERNAL (500).
    assert_eq!(virtual_retries("500", &GRPC), 0);
    assert!(virtual_retries("503", &GRPC) > 0);
    // A 429 is a throttling answer, which botocore up to 1.43 does not
    // retry when it names no AWS error code.
    assert_eq!(virtual_retries("429", &BOTOCORE_1_43), 0);
    assert!(virtual_retries("503", &BOTOCORE_1_43) > 0);
}

/// A real server on a loopback port with `server`'s flags, and a real
/// client with `client`'s against it for 300 ms: the client's counts and
/// the server's completed and failed requests.
async fn real_run(server: &[&str], client: &[&str]) -> (Tally, u64, u64) {
    let mut config = ServerArgs::try_parse_from(["server"].iter().chain(server))
        .unwrap()
        .config()
        .unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.quiet = true;
    let running = Running::start_config(config);
    let url = running.url();
    let mut argv = vec![
        "client",
        "--url",
        &url,
        "--duration",
        "300ms",
        "--seed",
        "2",
    ];
    argv.extend_from_slice(client);
    let mut config = ClientCli::try_parse_from(argv)
        .unwrap()
        .run
        .config()
        .unwrap();
    config.quiet = true;
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let served = running.stop().await;
    (summary.totals.tally, served.completed, served.failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_backend_failing_everything_costs_the_attempts_allowed() {
    let (t, completed, failed) = real_run(
        &["--fail-rate", "1", "--fail-status", "503"],
        &THREE_ATTEMPTS,
    )
    .await;
    assert_eq!((t.ok, t.timeouts, completed), (0, 0, 0), "{t:?}");
    assert!(t.gave_up > 0, "{t:?}");
    // Every finished request made exactly three attempts, each an error.
    assert_eq!(t.attempts_per_request, [0, 0, t.gave_up, 0, 0, 0, 0]);
    assert!(
        (3 * t.gave_up..=3 * t.gave_up + 2 * 20).contains(&t.errors),
        "{t:?}"
    );
    // The server failed every attempt the client counted, and perhaps a
    // few it sent as the run ended.
    assert!(failed >= t.errors, "{failed} failed, {t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_429_is_a_throttling_answer_as_in_virtual_time() {
    let server = ["--fail-rate", "1", "--fail-status", "429"];
    let (t, _, _) = real_run(&server, &BOTOCORE_1_43).await;
    assert!(t.started > 0 && t.errors > 0, "{t:?}");
    assert_eq!(t.retries, 0, "{t:?}");
    // The default 500: an error botocore retries.
    let (t, _, failed) = real_run(&["--fail-rate", "1"], &BOTOCORE_1_43).await;
    assert!(t.retries > 0 && failed > 0, "{t:?}");
}

#[test]
fn the_server_refuses_a_fail_status_alone_and_a_rate_beyond_1() {
    for (args, mention) in [
        (&["--fail-status", "503"][..], "--fail-rate"),
        (&["--fail-rate", "1.5"][..], "--fail-rate"),
        (
            &["--fail-rate", "1", "--fail-status", "302"][..],
            "--fail-status",
        ),
    ] {
        let out = Command::new(SERVER).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(mention), "{args:?}: {stderr}");
    }
}
