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

/// A quiet run of 300 users with the flags given: the server stopped
/// after the warm-up for `pause`, then for the `later` pauses; the run
/// ends `OBSERVE` after the first pause, or at `end`.
fn config(
    server: &[&str],
    client: &[&str],
    pause: Duration,
    later: &[Pause],
    end: Option<Duration>,
) -> SimConfig {
    let end = end.unwrap_or(WARMUP + pause + OBSERVE);
    let duration = format!("{}ms", end.as_millis());
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
    let client = [&fixed[..], client].concat();
    let mut pauses = vec![Pause {
        at: WARMUP,
        length: pause,
    }];
    pauses.extend_from_slice(later);
    sim_config(server, &client, pauses)
}

/// Out of order, twice at one pause, and back below the last one, as a
/// bisection goes.
const PAUSES: [u64; 8] = [12, 0, 25, 6, 6, 3, 30, 18];

/// Each of [`PAUSES`] in turn from one warm-up, against the same run from
/// the start: rows, totals and the server's summary.
fn same_from_the_warm_up(server: &[&str], client: &[&str]) {
    let shared = same_with(server, client, &[], None);
    // The warm-up is made once; later pauses go on from earlier ones.
    let config = config(server, client, Duration::ZERO, &[], None);
    let warm_up = WarmedUp::new(&config).unwrap().events();
    assert!(
        shared > PAUSES.len() as u64 * warm_up,
        "{shared} events shared"
    );
}

/// [`same_from_the_warm_up`] with `later` pauses and the run's `end`;
/// returns the events the runs from the warm-up did not process again.
fn same_with(server: &[&str], client: &[&str], later: &[Pause], end: Option<Duration>) -> u64 {
    let make = |secs| config(server, client, Duration::from_secs(secs), later, end);
    let mut warm = WarmedUp::new(&make(0)).unwrap();
    let mut shared = 0;
    for secs in PAUSES {
        let c = make(secs);
        let alone = sim::run(&c).unwrap();
        let from_warm = warm.finish(&c).unwrap();
        let what = format!("server {server:?}, client {client:?}, pause {secs} s, {later:?}");
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
    shared
}

#[test]
fn the_curve_server_under_fixed_retries() {
    // No seed: the server's is random, and unused.
    same_from_the_warm_up(&[], &["--strategy", "fixed"]);
}

#[test]
fn adaptive_limiters_under_client_throttles() {
    same_from_the_warm_up(
        &["--limiter", "aimd"],
        &["--strategy", "full-jitter", "--throttle", "token-bucket"],
    );
    same_from_the_warm_up(
        &["--limiter", "gradient2"],
        &["--strategy", "fixed", "--throttle", "circuit-breaker"],
    );
}

#[test]
fn later_pauses_overlapping_or_after_the_first() {
    let at = |s| Duration::from_secs(s);
    let later = [
        // Inside the first pause, one longer than it, and after it.
        Pause {
            at: at(12),
            length: at(3),
        },
        Pause {
            at: at(5),
            length: at(20),
        },
        Pause {
            at: at(35),
            length: at(4),
        },
    ];
    same_with(&[], &["--strategy", "fixed"], &later, None);
}

#[test]
fn runs_that_end_during_the_pause() {
    let end = Some(WARMUP + Duration::from_secs(10));
    same_with(&[], &["--strategy", "fixed"], &[], end);
    same_with(
        &["--on-disconnect", "cancel", "--backlog", "8"],
        &["--strategy", "fixed"],
        &[],
        end,
    );
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
            "--seed",
            "5",
        ],
        &["--strategy", "fixed"],
    );
}

#[test]
fn a_vegas_limiter_and_a_shedding_server_under_the_aws_adaptive_client() {
    same_from_the_warm_up(
        &[
            "--seed",
            "5",
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
    let c = config(
        &[],
        &["--strategy", "fixed"],
        Duration::from_secs(5),
        &[],
        None,
    );
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
    let mut loud = c.clone();
    loud.client.quiet = false;
    assert!(matches!(WarmedUp::new(&loud), Err(SimError::Unshared(_))));
    let mut none = c;
    none.pauses.clear();
    assert!(matches!(WarmedUp::new(&none), Err(SimError::Unshared(_))));
}
