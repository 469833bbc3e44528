//! Runs made from a shared warm-up (what a sweep does for each seed) are
//! the runs made from the start, to the row: for every server shape,
//! defence and client policy whose state crosses the pause, in any order
//! of pauses.

mod common;

use std::time::Duration;

use common::virtual_time::sim_config;
use retry_storm::sim::{self, Pause, SimConfig, SimError, WarmedUp};

const WARMUP: Duration = Duration::from_secs(10);
const OBSERVE: Duration = Duration::from_secs(20);

/// A quiet run of 300 users with the flags given, the server stopped
/// after the warm-up for `pause`, observed for a while after.
fn config(server: &[&str], client: &[&str], pause: Duration) -> SimConfig {
    let duration = format!("{}ms", (WARMUP + pause + OBSERVE).as_millis());
    let fixed = [
        "--clients",
        "300",
        "--lambda",
        "0.5",
        "--timeout",
        "1s",
        "--report-interval",
        "2s",
        "--seed",
        "11",
        "--duration",
        &duration,
    ];
    let server = [&["--seed", "5"], server].concat();
    let client = [&fixed[..], client].concat();
    let pauses = vec![Pause {
        at: WARMUP,
        length: pause,
    }];
    sim_config(&server, &client, pauses)
}

/// Each pause in turn from one warm-up, against the same run from the
/// start: rows, totals and the server's summary.
fn same_from_the_warm_up(server: &[&str], client: &[&str]) {
    // Out of order, twice at one pause, and back below the last one, as
    // a bisection goes.
    let pauses = [12, 0, 25, 6, 6, 3, 30, 18];
    let mut warm = WarmedUp::new(&config(server, client, Duration::ZERO)).unwrap();
    let mut shared = 0;
    for secs in pauses {
        let c = config(server, client, Duration::from_secs(secs));
        let alone = sim::run(&c).unwrap();
        let from_warm = warm.finish(&c).unwrap();
        let what = format!("server {server:?}, client {client:?}, pause {secs} s");
        assert_eq!(from_warm.client.rows, alone.client.rows, "{what}");
        assert_eq!(from_warm.server_rows, alone.server_rows, "{what}");
        assert_eq!(from_warm.server, alone.server, "{what}");
        let totals = (&from_warm.client.totals, &alone.client.totals);
        assert_eq!(totals.0.tally, totals.1.tally, "{what}");
        assert_eq!(totals.0.attempt_latency, totals.1.attempt_latency, "{what}");
        assert_eq!(totals.0.request_latency, totals.1.request_latency, "{what}");
        assert!(
            alone.client.totals.tally.timeouts > 0 || secs == 0,
            "{what}: no storm"
        );
        assert!(from_warm.events < alone.events, "{what}");
        shared += alone.events - from_warm.events;
    }
    // The warm-up is made once; later pauses go on from earlier ones.
    assert!(
        shared > pauses.len() as u64 * warm.events(),
        "{shared} events shared"
    );
}

#[test]
fn the_curve_server_under_fixed_retries() {
    same_from_the_warm_up(&[], &["--strategy", "fixed"]);
}

#[test]
fn a_cancelling_server_with_a_small_backlog_under_jittered_backoff() {
    same_from_the_warm_up(
        &["--on-disconnect", "cancel", "--backlog", "16"],
        &["--strategy", "full-jitter"],
    );
}

#[test]
fn a_pool_with_codel_and_adaptive_lifo_behind_admission_control() {
    same_from_the_warm_up(
        &[
            "--model",
            "pool",
            "--workers",
            "10",
            "--service-time",
            "50ms",
            "--queue",
            "200",
            "--queue-timeout",
            "codel",
            "--lifo",
            "adaptive",
            "--admission-control",
        ],
        &["--strategy", "fixed"],
    );
}

#[test]
fn a_vegas_limiter_and_a_shedding_server_under_the_aws_adaptive_client() {
    same_from_the_warm_up(
        &[
            "--limiter",
            "vegas",
            "--shed-above",
            "60",
            "--shed-status",
            "429",
        ],
        &["--strategy", "aws-adaptive"],
    );
}

#[test]
fn hedging_clients_against_pushback() {
    same_from_the_warm_up(
        &["--shed-above", "40", "--pushback-ms", "300"],
        &["--hedge-delay", "200ms"],
    );
}

#[test]
fn another_configuration_is_refused() {
    let c = config(&[], &["--strategy", "fixed"], Duration::from_secs(5));
    let mut warm = WarmedUp::new(&c).unwrap();
    let mut other = c.clone();
    other.client.seed += 1;
    assert!(matches!(warm.finish(&other), Err(SimError::Unshared(_))));
    let mut short = c.clone();
    short.client.duration = Some(WARMUP);
    assert!(matches!(warm.finish(&short), Err(SimError::Unshared(_))));
    let mut writes = c.clone();
    writes.client.csv = Some(std::env::temp_dir().join("never-written.csv"));
    assert!(matches!(WarmedUp::new(&writes), Err(SimError::Unshared(_))));
    assert!(!writes.client.csv.unwrap().exists());
    let mut none = c;
    none.pauses.clear();
    assert!(matches!(WarmedUp::new(&none), Err(SimError::Unshared(_))));
}
