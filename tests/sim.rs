//! The virtual-time engine on cases worked out by hand, its determinism,
//! and the default storm's verdicts.

mod common;

use std::time::Duration;

use clap::Parser;
use common::virtual_time::sim_config as config;
use retry_storm::cli::{ProgramFlags, StormCli};
use retry_storm::model::arrivals::{ThinkTime, user_rng};
use retry_storm::sim::{self, Pause, SimConfig};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn one_client_alone_sees_exactly_the_base_delay() {
    let c = config(
        &[],
        &[
            "--clients",
            "1",
            "--lambda",
            "1",
            "--duration",
            "60s",
            "--seed",
            "7",
        ],
        vec![],
    );
    let out = sim::run(&c).unwrap();
    // By hand: think, 100 ms of service, think again; an attempt still in
    // flight at the end is not counted.
    let think = ThinkTime::new(Duration::from_secs(1));
    let mut rng = user_rng(7, 0);
    let (mut t, mut expected) = (Duration::ZERO, 0);
    loop {
        t += think.sample(&mut rng);
        if t + ms(100) >= Duration::from_secs(60) {
            break;
        }
        t += ms(100);
        expected += 1;
    }
    let totals = &out.client.totals;
    assert_eq!(totals.tally.ok, expected);
    assert_eq!(totals.tally.attempts(), expected);
    assert_eq!(out.server.completed, expected);
    let h = &totals.attempt_latency;
    // Exactly 100 ms every time (the histogram keeps three digits).
    assert!(
        h.min() >= 99_900 && h.max() <= 100_100,
        "{}..{}",
        h.min(),
        h.max()
    );
    assert_eq!(out.server.peak_concurrency, 1);
    assert_eq!(out.client.rows.len(), 12);
}

#[test]
fn connections_beyond_a_full_backlog_wait_for_the_syn_retransmission() {
    // Five users fire at once (think 1 µs) while the server is stopped for
    // 500 ms with a backlog of 1 (Linux holds one more than the backlog:
    // two). Two wait in the backlog and are answered
    // at 0.6 s; three SYNs are dropped and retransmitted at 1 s, answered at
    // 1.1 s. The first two then go round every 100 ms: 0.6, 0.7 ... 1.1.
    let c = config(
        &["--backlog", "1", "--report-interval", "100ms"],
        &[
            "--clients",
            "5",
            "--lambda",
            "0.000001",
            "--timeout",
            "10s",
            "--duration",
            "1150ms",
        ],
        vec![Pause {
            at: Duration::ZERO,
            length: ms(500),
        }],
    );
    let out = sim::run(&c).unwrap();
    let t = &out.client.totals.tally;
    assert_eq!((t.ok, t.errors, t.timeouts), (2 * 6 + 3, 0, 0));
    let h = &out.client.totals.attempt_latency;
    let max_ms = h.max() as f64 / 1000.0;
    assert!((1099.0..=1101.0).contains(&max_ms), "slowest: {max_ms} ms");
    assert_eq!(h.count_between(595_000, 605_000), 2);
    assert_eq!(out.server.peak_concurrency, 5);
}

#[test]
fn a_timed_out_request_read_at_resume_is_wasted_work() {
    // One user, timeout 1 s, server stopped from 0 to 3 s: its first attempt
    // waits in the backlog, times out at 1 s, and its retries (100 ms apart,
    // each new connection in the backlog) all wait too. At resume the server
    // reads them all: one answer still awaited, the rest wasted.
    let c = config(
        &[],
        &[
            "--clients",
            "1",
            "--lambda",
            "0.000001",
            "--timeout",
            "1s",
            "--duration",
            "3200ms",
        ],
        vec![Pause {
            at: Duration::ZERO,
            length: Duration::from_secs(3),
        }],
    );
    let out = sim::run(&c).unwrap();
    let t = &out.client.totals.tally;
    // Attempts start at 0, 1.1 and 2.2 s; the first two time out.
    assert_eq!((t.timeouts, t.ok), (2, 1));
    assert_eq!(out.server.completed, 1);
    assert_eq!(out.server.abandoned, 2);
    assert_eq!(out.server.peak_concurrency, 3);
}

fn default_storm(strategy: &str, seed: &str) -> SimConfig {
    config(
        &["--backlog", "4096"],
        &["--strategy", strategy, "--duration", "110s", "--seed", seed],
        vec![Pause {
            at: Duration::from_secs(20),
            length: Duration::from_secs(20),
        }],
    )
}

#[test]
fn the_same_seed_gives_byte_identical_files() {
    let dir = std::env::temp_dir().join(format!("retry-storm-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (run, seed) in [(0, "5"), (1, "5"), (2, "6")] {
        let mut c = default_storm("exponential-2014", seed);
        let client = dir.join(format!("{run}.client.csv"));
        let server = dir.join(format!("{run}.server.csv"));
        c.client.csv = Some(client.clone());
        c.server.csv = Some(server.clone());
        sim::run(&c).unwrap();
        files.push((
            std::fs::read(client).unwrap(),
            std::fs::read(server).unwrap(),
        ));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(files[0].0.len() > 1000 && files[0].1.len() > 1000);
    assert_eq!(files[0], files[1]);
    assert_ne!(files[0].0, files[2].0);
}

#[test]
fn the_default_storm_keeps_fixed_retries_down_and_lets_the_2014_client_recover() {
    let storm = |strategy| {
        let c = default_storm(strategy, "2014");
        let out = sim::run(&c).unwrap();
        let after: Vec<_> = out.client.rows[8..20].iter().map(|r| r.ok_per_s).collect();
        (out, after)
    };
    let (fixed, after) = storm("fixed");
    // At resume: the full backlog (4096 by default) plus the users whose
    // connections wait for a SYN retransmission.
    assert!(
        fixed.server.peak_concurrency > 4096 + 500,
        "{}",
        fixed.server.peak_concurrency
    );
    assert!(after.iter().all(|&ok| ok < 10.0), "{after:?}");
    let (exp, after) = storm("exponential-2014");
    let peak = exp.server.peak_concurrency;
    assert!((800..2000).contains(&peak), "{peak}");
    assert!(
        after[after.len() - 3..].iter().all(|&ok| ok > 80.0),
        "{after:?}"
    );
}

#[test]
fn storm_configurations_run_in_virtual_time() {
    let flags = [
        "storm",
        "--engine",
        "sim",
        "--strategies",
        "fixed",
        "--seed",
        "1",
        "--server-args",
        "--backlog 100",
        "--client-args",
        "--clients 200",
    ];
    let args = StormCli::try_parse_from(flags).unwrap().run;
    let storm = args
        .exec
        .storm(args.scenario().unwrap(), "storm".into(), None);
    let c = storm
        .sim_config(&storm.scenario.cases[0], 0, &ProgramFlags)
        .unwrap();
    assert_eq!(c.server.backlog, 100);
    assert_eq!(c.client.clients, 200);
    assert_eq!(
        c.client.duration,
        Some(Duration::from_secs(170)),
        "warm-up, pause, window, tail and two intervals to confirm"
    );
    assert_eq!(
        c.pauses,
        vec![Pause {
            at: Duration::from_secs(20),
            length: Duration::from_secs(20)
        }]
    );
}

#[test]
fn a_ramp_up_starts_users_evenly() {
    // A hundred users that send back to back (think 1 µs): with all of them
    // started at once a hundred are in flight; with a 10 s ramp-up only the
    // first half has started 5 s in.
    let run = |ramp: &str| {
        let c = config(
            &[],
            &[
                "--clients",
                "100",
                "--lambda",
                "0.000001",
                "--duration",
                "5s",
                "--ramp-up",
                ramp,
            ],
            vec![],
        );
        assert_eq!(
            c.client.start_of(50),
            Duration::from_secs(5) * u32::from(ramp != "0s")
        );
        sim::run(&c).unwrap().server.peak_concurrency
    };
    assert_eq!(run("0s"), 100);
    assert_eq!(run("10s"), 50);
}

#[test]
fn a_zero_retry_delay_against_instant_refusals_still_lets_time_run() {
    // Every refusal is answered at once and retried at once: each user
    // tries again a round trip (100 µs) later, not at the same instant.
    let c = config(
        &["--shed-above", "5"],
        &[
            "--clients",
            "50",
            "--lambda",
            "0.01",
            "--fixed-delay",
            "0s",
            "--duration",
            "1s",
        ],
        vec![],
    );
    let out = sim::run(&c).unwrap();
    assert!(out.server.shed > 1000, "{:?}", out.server);
    assert!(out.client.totals.tally.attempts() <= 50 * 10_000 + 50);
}

#[test]
fn back_to_back_pauses_stop_the_server_for_both() {
    let c = config(
        &["--report-interval", "100ms"],
        &["--clients", "10", "--duration", "4s"],
        vec![
            Pause {
                at: Duration::from_secs(1),
                length: Duration::from_secs(1),
            },
            Pause {
                at: Duration::from_secs(2),
                length: Duration::from_secs(1),
            },
        ],
    );
    let out = sim::run(&c).unwrap();
    let inside: Vec<f64> = out
        .server_rows
        .iter()
        .map(|r| r.elapsed_s)
        // The resume at 2 s fires the missed report, an instant before the
        // second stop; nothing else while stopped.
        .filter(|&t| t > 1.0 && t < 3.0 && t != 2.0)
        .collect();
    assert!(inside.is_empty(), "rows while stopped: {inside:?}");
    assert!(out.server_rows.iter().any(|r| r.elapsed_s == 3.0));
}

#[test]
fn hedges_that_lose_are_cancelled_and_the_server_drops_them() {
    // One user alone against the 2014 curve: copies go at 0, 10 and 20 ms;
    // the oldest is answered first (when its time reaches the delay for
    // concurrency 3) and the two others are cancelled, so three go per
    // request, exactly, and a cancel-mode server drops two per request.
    let c = config(
        &["--on-disconnect", "cancel"],
        &[
            "--clients",
            "1",
            "--lambda",
            "1",
            "--duration",
            "60s",
            "--seed",
            "7",
            "--hedge-delay",
            "10ms",
            "--hedge-max-attempts",
            "3",
        ],
        vec![],
    );
    let out = sim::run(&c).unwrap();
    let t = out.client.totals.tally;
    assert!(t.started > 30, "{t:?}");
    assert_eq!(t.ok, t.started);
    assert_eq!(t.cancelled, 2 * t.started);
    assert_eq!(t.retries, 2 * t.started);
    assert_eq!(t.amplification(), Some(3.0));
    assert_eq!(out.server.completed, t.ok);
    assert_eq!(out.server.abandoned, t.cancelled);
    // Each answer took the curve's delay at concurrency 3.
    let delay = c.server.model.delay(3);
    let latency = &out.client.totals.attempt_latency;
    for q in [0.0, 1.0] {
        let at = Duration::from_micros(latency.value_at_quantile(q));
        assert!(at.abs_diff(delay) < ms(1), "{at:?} against {delay:?}");
    }
    assert_eq!(out.client.strategy, "hedging");
}

#[test]
fn hedging_is_the_same_twice_in_virtual_time() {
    let run = || {
        let c = config(
            &["--model", "pool", "--seed", "3"],
            &[
                "--clients",
                "200",
                "--duration",
                "60s",
                "--seed",
                "9",
                "--hedge-delay",
                "50ms",
            ],
            vec![Pause {
                at: Duration::from_secs(10),
                length: Duration::from_secs(5),
            }],
        );
        sim::run(&c).unwrap().client.totals.tally
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    assert!(a.cancelled > 0 && a.retries > a.cancelled / 2, "{a:?}");
}

#[test]
fn the_aws_adaptive_limiter_holds_attempts_only_once_a_throttling_answer_has_come() {
    let run = |server: &[&str], strategy: &str, generation: &[&str]| {
        let mut client = vec![
            "--strategy",
            strategy,
            "--clients",
            "50",
            "--lambda",
            "1",
            "--duration",
            "30s",
            "--seed",
            "3",
        ];
        client.extend(generation);
        sim::run(&config(server, &client, vec![]))
            .unwrap()
            .client
            .totals
    };
    // A server that never answers 429: the limiter never switches on, and
    // the adaptive mode is the standard mode draw for draw.
    let older = ["--implementation", "botocore-1.43"];
    let (standard, adaptive) = (
        run(&[], "aws-standard", &older),
        run(&[], "aws-adaptive", &older),
    );
    assert_eq!(standard.tally.attempts(), adaptive.tally.attempts());
    assert_eq!(standard.tally.ok, adaptive.tally.ok);
    // About 5 requests in flight against a server that sheds above 5 with
    // a bare 429 (no AWS error code). botocore 1.44 takes it for
    // throttling: the limiter, on from the first, holds attempts back.
    let shedding = ["--shed-above", "5", "--shed-status", "429"];
    let standard = run(&shedding, "aws-standard", &[]);
    let adaptive = run(&shedding, "aws-adaptive", &[]);
    assert!(standard.tally.errors > 0, "the server sheds");
    assert!(
        adaptive.tally.attempts() < standard.tally.attempts(),
        "{} attempts against {}",
        adaptive.tally.attempts(),
        standard.tally.attempts()
    );
    assert!(adaptive.tally.ok > adaptive.tally.attempts() / 2);
    // Up to 1.43 a bare 429 is not throttling: the limiter stays off, and
    // the adaptive mode is the standard mode draw for draw again.
    let standard = run(&shedding, "aws-standard", &older);
    let adaptive = run(&shedding, "aws-adaptive", &older);
    assert!(standard.tally.errors > 0, "the server sheds");
    assert_eq!(standard.tally.attempts(), adaptive.tally.attempts());
    assert_eq!(standard.tally.ok, adaptive.tally.ok);
}
