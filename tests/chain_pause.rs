//! A stopped tier of a service chain in virtual time: it reads nothing,
//! makes no call and answers nothing until it resumes, then reads the
//! answers its calls were given meanwhile; runs of a chain made from a
//! shared warm-up are the runs made from the start; and a chain of every
//! kind of caller and server holds together through a stop.

mod common;

use std::time::Duration;

use common::virtual_time::{NEITHER, Propagate, chain, tier};
use retry_storm::report::summary::ClientSummary;
use retry_storm::sim::{self, Pause, SimConfig, SimOutcome, WarmedUp};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// 20 users (a request a second each, timeout 10 s, no retry) through a
/// tier (own work 10 ms, calls of up to two 4 s attempts) to a backend
/// taking 3 s; the tier stopped from 10 s to 15 s.
fn stopped_tier() -> SimConfig {
    let user = [
        "--clients",
        "20",
        "--lambda",
        "1",
        "--timeout",
        "10s",
        "--max-attempts",
        "1",
        "--duration",
        "30s",
        "--seed",
        "21",
        "--report-interval",
        "1s",
    ];
    let own = ["--base-delay", "10ms", "--limit", "1000000"];
    let call = [
        "--max-attempts",
        "2",
        "--timeout",
        "4s",
        "--strategy",
        "fixed",
        "--fixed-delay",
        "10ms",
        "--seed",
        "22",
    ];
    let mut config = chain(
        &user,
        vec![tier(&own, &call, NEITHER)],
        &["--base-delay", "3s", "--limit", "1000000"],
    );
    config.paused = Some(0);
    config.pauses = vec![Pause {
        at: secs(10),
        length: secs(5),
    }];
    config
}

#[test]
fn a_stopped_tier_makes_no_call_and_answers_nothing_until_it_resumes() {
    let out = sim::run(&stopped_tier()).unwrap();
    let t = &out.client.totals.tally;
    // Nobody waits 10 s: every request ends OK, but those in flight at
    // the end.
    assert_eq!((t.errors, t.timeouts), (0, 0));
    let finished: u64 = t.attempts_per_request.iter().sum();
    assert_eq!(t.ok, finished);
    assert!(t.ok > 100, "{}", t.ok);
    // Rows end at 1, 2, ... 30 s. No answer reaches a user while the tier
    // is stopped (rows ending at 11 to 15 s), though the backend answers
    // the calls in flight at 10 s until 13 s.
    for client in &out.client.rows[10..15] {
        assert_eq!(client.ok_per_s, 0.0, "{client:?}");
    }
    assert!(out.server_rows[10].completed_per_s > 0.0);
    // The tier makes no call while stopped: an attempt the backend took
    // between 10 s and 15 s would have left it between 13 s and 18 s. The
    // timeouts of the calls in flight at the stop fell within it, but
    // their answers had come: at the resume the tier reads those first,
    // and retries none.
    for backend in &out.server_rows[13..17] {
        assert_eq!(backend.completed_per_s, 0.0, "{backend:?}");
        assert_eq!(backend.abandoned_per_s, 0.0, "{backend:?}");
    }
    let tier = &out.tiers[0];
    assert_eq!(tier.calls.totals.tally.timeouts, 0);
    assert_eq!(tier.answers.ok, tier.calls.totals.tally.ok);
    assert_eq!(tier.answers.ok, t.ok);
    // The slowest: sent soon after the tier stopped, read at 15 s and
    // answered 10 ms and 3 s later (8.01 s after 10 s, less how long
    // after 10 s it came); or a call's whose answer waited from 10 s to
    // the resume (at most 8 s, made at 7 s).
    let slowest = out.client.totals.attempt_latency.max() as f64 / 1e6;
    assert!((7.9..8.02).contains(&slowest), "{slowest} s");
    // The tier's ticks at 11 to 15 s fell while it was stopped: one row
    // at the resume covers them.
    let ends: Vec<f64> = tier.server_rows.iter().map(|r| r.elapsed_s).collect();
    assert!(ends.contains(&10.0) && ends.contains(&15.0), "{ends:?}");
    assert!(!ends.contains(&12.0), "{ends:?}");
    assert_eq!(tier.server_rows.len(), 30 - 5 + 1);
    // At the resume it holds every user's request: those that came while
    // it was stopped, and those it was calling for at the stop.
    assert_eq!(tier.peak_concurrency, 20);
}

/// A chain of two tiers whose calls retry, the inner one stopped after a
/// 10 s warm-up for `pause`; the run ends 20 s after the pause.
fn warm_chain(pause: u64) -> SimConfig {
    let end = format!("{}s", 10 + pause + 20);
    let user = [
        "--clients",
        "100",
        "--lambda",
        "1",
        "--timeout",
        "1s",
        "--strategy",
        "fixed",
        "--max-attempts",
        "3",
        "--duration",
        &end,
        "--seed",
        "31",
        "--report-interval",
        "2s",
    ];
    let call = |seed| {
        [
            "--strategy",
            "exponential",
            "--max-attempts",
            "2",
            "--timeout",
            "500ms",
            "--seed",
            seed,
        ]
    };
    let own = ["--base-delay", "20ms", "--on-disconnect", "cancel"];
    let both = Propagate {
        deadline: true,
        cancel: true,
    };
    let mut config = chain(
        &user,
        vec![
            tier(&own, &call("32"), NEITHER),
            tier(&own, &call("33"), both),
        ],
        &["--backlog", "64"],
    );
    config.paused = Some(1);
    config.pauses = vec![Pause {
        at: secs(10),
        length: secs(pause),
    }];
    config
}

/// What a run's tiers did, to compare.
fn tiers(out: &SimOutcome) -> Vec<String> {
    out.tiers
        .iter()
        .map(|t| {
            format!(
                "{:?} {:?} {:?} {:?} {} {} {} {}",
                t.server,
                t.server_rows,
                t.calls.rows,
                t.calls.totals.tally,
                t.received,
                t.expired,
                t.peak_concurrency,
                t.work_for_gone_callers
            )
        })
        .collect()
}

#[test]
fn runs_of_a_chain_from_a_shared_warm_up_are_the_runs_from_the_start() {
    let mut warm = WarmedUp::new(&warm_chain(0)).unwrap();
    for pause in [6, 0, 12, 3, 3] {
        let config = warm_chain(pause);
        let alone = sim::run(&config).unwrap();
        let from_warm = warm.finish(&config).unwrap();
        assert_eq!(from_warm.client.rows, alone.client.rows, "{pause} s");
        assert_eq!(from_warm.server_rows, alone.server_rows, "{pause} s");
        assert_eq!(from_warm.server, alone.server, "{pause} s");
        assert_eq!(tiers(&from_warm), tiers(&alone), "{pause} s");
        assert!(from_warm.events < alone.events);
        if pause >= 6 {
            // The inner tier's stop reaches the client.
            assert!(alone.client.totals.tally.timeouts > 0, "{pause} s");
            assert!(alone.tiers[1].expired > 0, "{pause} s");
        }
    }
}

/// Hedging users (or open traffic's sessions) through a pool tier with
/// CoDel whose calls retry under a budget, then a tier whose calls follow
/// the AWS adaptive mode (its rate limiter, on from the first 429, makes
/// attempts wait for tokens), to a backend that sheds with 429; the inner
/// tier stopped from 10 s to 18 s.
fn tangle(open: bool) -> SimConfig {
    let mut user = vec![
        "--lambda",
        "0.5",
        "--timeout",
        "800ms",
        "--hedge-delay",
        "100ms",
        "--hedge-max-attempts",
        "3",
        "--duration",
        "40s",
        "--seed",
        "41",
    ];
    if open {
        user.extend(["--arrival-rate", "150", "--session-requests", "2"]);
    } else {
        user.extend([
            "--clients",
            "200",
            "--ramp-up",
            "1s",
            "--report-interval",
            "5s",
        ]);
    }
    let pool = [
        "--model",
        "pool",
        "--workers",
        "10",
        "--service-time",
        "20ms",
        "--queue",
        "50",
        "--queue-timeout",
        "codel",
        "--seed",
        "42",
    ];
    let adaptive = [
        "--strategy",
        "aws-adaptive",
        "--timeout",
        "300ms",
        "--seed",
        "43",
    ];
    let curve = ["--base-delay", "30ms", "--on-disconnect", "cancel"];
    let budget = [
        "--strategy",
        "fixed",
        "--max-attempts",
        "3",
        "--throttle",
        "budget",
        "--timeout",
        "200ms",
        "--seed",
        "44",
    ];
    let both = Propagate {
        deadline: true,
        cancel: true,
    };
    let deadline = Propagate {
        deadline: true,
        cancel: false,
    };
    let backend = [
        "--base-delay",
        "50ms",
        "--shed-above",
        "40",
        "--shed-status",
        "429",
        "--backlog",
        "16",
    ];
    let mut config = chain(
        &user,
        vec![
            tier(&pool, &budget, both),
            tier(&curve, &adaptive, deadline),
        ],
        &backend,
    );
    config.paused = Some(1);
    config.pauses = vec![Pause {
        at: secs(10),
        length: secs(8),
    }];
    config
}

#[test]
fn a_chain_of_every_kind_of_caller_and_server_holds_together_through_a_stop() {
    for open in [false, true] {
        let config = tangle(open);
        let out = sim::run(&config).unwrap();
        // The same seed, the same run.
        assert_eq!(tiers(&out), tiers(&sim::run(&config).unwrap()));
        let t = &out.client.totals.tally;
        // The outer tier bounds its calls by the users' deadlines: they
        // see its 504s, not their own timeouts.
        assert!(t.ok > 1000 && t.cancelled > 0 && t.errors > 0, "{t:?}");
        // What a layer sent (ended, or in flight at the end) reaches the
        // next server, or waits in its backlog at the end, or lost its
        // SYN.
        let sent = |summary: &ClientSummary| {
            let in_flight = summary.rows.last().map_or(0, |row| row.in_flight);
            summary.totals.tally.sent() + in_flight
        };
        let sent = [
            sent(&out.client),
            sent(&out.tiers[0].calls),
            sent(&out.tiers[1].calls),
        ];
        let received = [
            out.tiers[0].received,
            out.tiers[1].received,
            out.server.completed + out.server.abandoned + out.server.shed + out.server.in_flight,
        ];
        for (layer, (sent, received)) in sent.iter().zip(received).enumerate() {
            assert!(
                received <= *sent && received > 0,
                "layer {layer}: {sent} {received}"
            );
        }
        let (outer, inner) = (&out.tiers[0], &out.tiers[1]);
        // The outer tier's calls wait for the stopped inner one, and its
        // hedged callers go: both tiers cancel calls of gone callers.
        assert!(outer.cancelled_calls > 0 && outer.calls.totals.tally.timeouts > 0);
        assert!(inner.expired > 0, "the inner tier reads deadlines passed");
        assert!(outer.work_for_gone_callers > 0 && inner.work_for_gone_callers > 0);
        // The outer tier's budget lets few retries go. The backend sheds
        // with 429, and the inner tier's calls then wait for tokens: some
        // wait past their caller's deadline and end before any attempt.
        let calls = outer.calls.totals.tally;
        assert!(calls.retries * 5 < calls.started * 2, "{calls:?}");
        assert!(out.server.shed > 0);
        let calls = inner.calls.totals.tally;
        let ended: u64 = calls.attempts_per_request.iter().sum();
        assert!(ended > calls.started + 100, "{calls:?}");
    }
}
