//! Service chains in virtual time (docs/chains.md), on cases worked
//! out by hand: retries multiplying down the chain, a tier's 503 and 504,
//! deadlines and cancellation propagated inward, a stopped tier; and a
//! run without tiers as it was before chains.

mod common;

use std::time::Duration;

use common::virtual_time::{NEITHER, Propagate, chain, server, sim_config, tier};
use retry_storm::model::server::Shedding;
use retry_storm::report::output::read_rows;
use retry_storm::report::rows::{ClientRow, ServerRow};
use retry_storm::sim::{self, Pause, SimConfig, SimError, SimOutcome, TierOutcome, WarmedUp};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Logical requests the client finished (succeeded or gave up).
fn finished(out: &SimOutcome) -> u64 {
    out.client.totals.tally.attempts_per_request.iter().sum()
}

/// Makes the backend refuse every request at once: shed with none in
/// flight (below what its flags take), with a Retry-After that no client
/// here honours.
fn refusing_all(mut config: SimConfig) -> SimConfig {
    config.server.shed = Some(Shedding {
        above: 0,
        status: 503,
        retry_after: Duration::from_secs(1),
    });
    config
}

/// A tier's own work: 1 ms for each request.
const QUICK: [&str; 4] = ["--base-delay", "1ms", "--limit", "1000000"];

/// Fixed retries 1 ms apart, at most `attempts`.
fn fixed(attempts: &str, seed: &str) -> Vec<String> {
    [
        "--strategy",
        "fixed",
        "--fixed-delay",
        "1ms",
        "--max-attempts",
        attempts,
        "--timeout",
        "10s",
        "--seed",
        seed,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The chain of `layers` retrying layers, each making at most `a`
/// attempts, against a backend that refuses everything: one user
/// thinking a second between requests for a minute.
fn amplification(a: u64, layers: usize) -> SimOutcome {
    let attempts = a.to_string();
    let mut user = fixed(&attempts, "3");
    user.extend(["--clients", "1", "--lambda", "1", "--duration", "60s"].map(String::from));
    let tiers = (1..layers)
        .map(|i| tier(&QUICK, &strs(&fixed(&attempts, &i.to_string())), NEITHER))
        .collect();
    sim::run(&refusing_all(chain(&strs(&user), tiers, &[]))).unwrap()
}

#[test]
fn retries_at_every_layer_multiply_to_a_to_the_power_of_the_layers() {
    // Each layer's call fails after its a attempts (the backend refuses
    // each at once), so its caller's attempt fails and is retried: the
    // backend sees a^L attempts per request of the user.
    for (a, layers) in [(2, 1), (2, 2), (2, 3), (3, 3), (4, 3)] {
        let out = amplification(a, layers);
        let t = &out.client.totals.tally;
        let requests = t.started;
        // The run ends while the user thinks: every request has ended,
        // given up after its a attempts.
        assert!(requests > 30, "a = {a}, L = {layers}: {requests} requests");
        assert_eq!(finished(&out), requests, "a = {a}, L = {layers}");
        assert_eq!((t.gave_up, t.ok), (requests, 0));
        assert_eq!(t.attempts(), a * requests);
        let backend = a.pow(layers as u32) * requests;
        assert_eq!(out.server.shed, backend, "a = {a}, L = {layers}");
        assert_eq!(out.tiers.len(), layers - 1);
        for (i, tier) in out.tiers.iter().enumerate() {
            // Tier i receives a^(i+1) attempts per user request, calls
            // once for each, and each call sends a attempts.
            let received = a.pow(i as u32 + 1) * requests;
            assert_eq!(tier.received, received, "tier {i}");
            assert_eq!(tier.server.completed, received);
            assert_eq!(tier.calls.totals.tally.started, received);
            assert_eq!(tier.calls.totals.tally.attempts(), a * received);
            assert_eq!(tier.answers.unavailable, received, "503 every time");
            assert_eq!(tier.answers.ok + tier.answers.gateway_timeout, 0);
            assert_eq!(tier.work_for_gone_callers, 0);
        }
    }
    // The SRE book's example (chapter 22): 3 layers of 4 attempts, 64.
    let sre = amplification(4, 3);
    assert_eq!(sre.server.shed, 64 * sre.client.totals.tally.started);
}

#[test]
fn a_tier_answers_503_when_its_call_fails_and_504_when_it_timed_out() {
    let user = [
        "--clients",
        "1",
        "--lambda",
        "1",
        "--timeout",
        "2s",
        "--max-attempts",
        "1",
        "--duration",
        "30s",
        "--seed",
        "4",
    ];
    let one_try = ["--max-attempts", "1", "--timeout", "100ms", "--seed", "8"];
    let failing = refusing_all(chain(&user, vec![tier(&QUICK, &one_try, NEITHER)], &[]));
    // A backend taking a second: the call's 100 ms attempt times out.
    let slow = chain(
        &user,
        vec![tier(&QUICK, &one_try, NEITHER)],
        &["--base-delay", "1s", "--limit", "1000000"],
    );
    for (config, status) in [(failing, 503), (slow, 504)] {
        let out = sim::run(&config).unwrap();
        let t = &out.client.totals.tally;
        let tier = &out.tiers[0];
        let calls = tier.calls.totals.tally;
        assert!(t.started > 10 && finished(&out) == t.started, "{status}");
        // Every call failed and the user's attempt with it, as an error
        // (the tier answered within the user's 2 s): no timeout.
        assert_eq!((t.errors, t.timeouts, t.ok), (t.started, 0, 0), "{status}");
        assert_eq!(calls.started, t.started);
        let (unavailable, gateway_timeout) = match status {
            503 => {
                assert_eq!((calls.errors, calls.timeouts), (t.started, 0));
                (t.started, 0)
            }
            _ => {
                assert_eq!((calls.errors, calls.timeouts), (0, t.started));
                (0, t.started)
            }
        };
        assert_eq!(tier.answers.unavailable, unavailable, "{status}");
        assert_eq!(tier.answers.gateway_timeout, gateway_timeout, "{status}");
        assert_eq!(tier.answers.ok, 0);
    }
}

/// The user (timeout 1 s, no retry) through a tier whose own work takes
/// 200 ms and whose call may take 5 s, to a backend taking 3 s.
fn deadline_chain(propagate: Propagate) -> SimConfig {
    let user = [
        "--clients",
        "1",
        "--lambda",
        "5",
        "--timeout",
        "1s",
        "--max-attempts",
        "1",
        "--duration",
        "60s",
        "--seed",
        "6",
    ];
    let call = [
        "--timeout",
        "5s",
        "--max-attempts",
        "3",
        "--strategy",
        "fixed",
        "--fixed-delay",
        "10ms",
        "--seed",
        "2",
    ];
    let own = ["--base-delay", "200ms", "--limit", "1000000"];
    let backend = ["--base-delay", "3s", "--limit", "1000000"];
    chain(&user, vec![tier(&own, &call, propagate)], &backend)
}

#[test]
fn a_propagated_deadline_ends_the_call_by_the_callers_deadline() {
    let with = sim::run(&deadline_chain(Propagate {
        deadline: true,
        cancel: false,
    }))
    .unwrap();
    let without = sim::run(&deadline_chain(NEITHER)).unwrap();
    // The user's timeline is the same in both: each request ends at its
    // 1 s timeout, as a 504 or as a timeout at the same instant.
    let requests = with.client.totals.tally.started;
    assert_eq!(without.client.totals.tally.started, requests);
    assert!(requests > 5 && finished(&with) == requests);
    // With the deadline passed inward, the call gets the 800 ms left
    // after the tier's own work: its one attempt times out at the user's
    // deadline, no retry follows, and the tier answers 504 as the user's
    // own timeout falls: no work for a caller that had gone.
    let (t, tier) = (&with.client.totals.tally, &with.tiers[0]);
    assert_eq!((t.errors, t.timeouts), (requests, 0));
    let calls = tier.calls.totals.tally;
    assert_eq!((calls.attempts(), calls.timeouts), (requests, requests));
    assert_eq!(tier.answers.gateway_timeout, requests);
    assert_eq!(tier.work_for_gone_callers, 0);
    // The backend's work outlives the call's timeout (it does not cancel).
    assert_eq!(with.server.completed, 0);
    assert_eq!(with.server.abandoned, requests);
    // Without it, the call waits its 3 s for the backend, long after the
    // user gave up: the tier answers 200 to nobody, each time.
    let (t, tier) = (&without.client.totals.tally, &without.tiers[0]);
    assert_eq!((t.errors, t.timeouts), (0, requests));
    let calls = tier.calls.totals.tally;
    assert_eq!((calls.ok, calls.timeouts), (requests, 0));
    assert_eq!(tier.answers.ok, requests);
    assert_eq!(tier.work_for_gone_callers, requests);
    assert_eq!(without.server.completed, requests);
}

/// One user with no think time (1 µs) and no retry, timeout 1 s, through
/// a tier stopped from 0 to 2.5 s (own work 200 ms, calls of one attempt)
/// to a backend of 100 ms; the run ends at 2.85 s.
fn stopped_tier(propagate: Propagate) -> SimOutcome {
    let user = [
        "--clients",
        "1",
        "--lambda",
        "0.000001",
        "--timeout",
        "1s",
        "--max-attempts",
        "1",
        "--duration",
        "2850ms",
    ];
    let own = ["--base-delay", "200ms"];
    let mut config = chain(
        &user,
        vec![tier(
            &own,
            &["--max-attempts", "1", "--timeout", "1s"],
            propagate,
        )],
        &[],
    );
    config.paused = Some(0);
    config.pauses = vec![Pause {
        at: Duration::ZERO,
        length: ms(2500),
    }];
    sim::run(&config).unwrap()
}

#[test]
fn a_request_read_after_its_deadline_is_answered_504_without_work() {
    // The user's attempts go at 0, 1 and 2 s (each after the last timed
    // out) and wait in the stopped tier's backlog. At 2.5 s the tier
    // reads them: the first two are past their deadline, the third has
    // 500 ms left. Its own work ends at 2.7 s, its call (300 ms left)
    // gets the backend's answer at 2.8 s: the user's third request is
    // answered 200. A fourth is in the tier's own work at the end.
    let with = stopped_tier(Propagate {
        deadline: true,
        cancel: false,
    });
    let (t, tier) = (&with.client.totals.tally, &with.tiers[0]);
    assert_eq!((t.timeouts, t.ok), (2, 1));
    assert_eq!((tier.received, tier.expired), (4, 2));
    assert_eq!((tier.server.completed, tier.server.abandoned), (1, 0));
    assert_eq!(tier.server.in_flight, 1);
    assert_eq!(tier.answers.ok, 1);
    assert_eq!(tier.work_for_gone_callers, 0);
    assert_eq!(with.server.completed, 1);
    // Without propagation the tier works on both for nobody; it calls
    // the backend for neither (as the real tier's HTTP server drops the
    // handler of a caller that has gone).
    let without = stopped_tier(NEITHER);
    let (t, tier) = (&without.client.totals.tally, &without.tiers[0]);
    assert_eq!((t.timeouts, t.ok), (2, 1));
    assert_eq!((tier.received, tier.expired), (4, 0));
    assert_eq!((tier.server.completed, tier.server.abandoned), (1, 2));
    assert_eq!(tier.work_for_gone_callers, 2);
    assert_eq!(tier.calls.totals.tally.started, 1);
    assert_eq!(without.server.completed, 1);
    // Three requests held at once at the resume, and no more after it.
    assert_eq!(tier.peak_concurrency, 3);
}

/// 50 users (timeout 1 s, no retry) through a tier whose call retries up
/// to 3 attempts of 2 s, to a backend taking 3 s that drops work whose
/// client has gone.
fn cancel_chain(cancel: bool) -> SimOutcome {
    let user = [
        "--clients",
        "50",
        "--lambda",
        "5",
        "--timeout",
        "1s",
        "--max-attempts",
        "1",
        "--duration",
        "60s",
        "--seed",
        "9",
    ];
    let call = [
        "--timeout",
        "2s",
        "--max-attempts",
        "3",
        "--strategy",
        "fixed",
        "--fixed-delay",
        "10ms",
        "--seed",
        "12",
    ];
    let propagate = Propagate {
        deadline: false,
        cancel,
    };
    let backend = [
        "--base-delay",
        "3s",
        "--limit",
        "1000000",
        "--on-disconnect",
        "cancel",
    ];
    sim::run(&chain(
        &user,
        vec![tier(&QUICK, &call, propagate)],
        &backend,
    ))
    .unwrap()
}

#[test]
fn a_cancelled_caller_stops_the_work_inward_when_the_tier_propagates_it() {
    let with = cancel_chain(true);
    let without = cancel_chain(false);
    let requests = with.client.totals.tally.started;
    assert_eq!(without.client.totals.tally.started, requests);
    assert!(requests > 400, "{requests}");
    // Each user's attempt times out at 1 s, 999 ms into the tier's call.
    for out in [&with, &without] {
        let t = &out.client.totals.tally;
        assert_eq!((t.timeouts, t.ok), (t.started, 0));
    }
    let backend_attempts = |out: &SimOutcome| out.tiers[0].calls.totals.tally.attempts();
    // Propagated: the call is cancelled with its one attempt, and the
    // backend drops that work at once; nothing more goes inward.
    let tier: &TierOutcome = &with.tiers[0];
    assert_eq!(tier.cancelled_calls, requests - in_call_at_end(&with));
    assert_eq!(tier.calls.totals.tally.cancelled, tier.cancelled_calls);
    assert_eq!(backend_attempts(&with), requests);
    assert_eq!(with.server.completed, 0);
    // Not propagated: the call runs its three 2 s attempts for nobody,
    // and the backend holds each for 2 s before it notices.
    let tier = &without.tiers[0];
    assert_eq!(tier.cancelled_calls, 0);
    assert!(backend_attempts(&without) > 3 * requests - 3 * 50);
    assert!(without.server.abandoned > 2 * with.server.abandoned);
    // Either way the caller had gone while the tier called for it.
    for out in [&with, &without] {
        assert_eq!(out.tiers[0].work_for_gone_callers, requests);
    }
    let held = |out: &SimOutcome| {
        let rows = &out.server_rows;
        rows.iter().map(|r| r.abandoned_time_per_s).sum::<f64>()
    };
    // The backend's time on gone callers: under a second a request
    // propagated, six seconds without.
    assert!(
        held(&without) > 5.0 * held(&with),
        "{} {}",
        held(&without),
        held(&with)
    );
}

/// Requests whose tier call was still running at the end (their user's
/// attempt in flight then).
fn in_call_at_end(out: &SimOutcome) -> u64 {
    let t = &out.client.totals.tally;
    t.started - finished(out)
}

#[test]
fn a_tier_writes_its_rows_where_its_configurations_say() {
    let dir = std::env::temp_dir().join(format!("retry-storm-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (server_csv, calls_csv) = (dir.join("tier.server.csv"), dir.join("tier.calls.csv"));
    let mut with_files = tier(&QUICK, &strs(&fixed("2", "7")), NEITHER);
    with_files.csv = Some(server_csv.clone());
    let call = with_files.call.as_mut().unwrap();
    call.client.csv = Some(calls_csv.clone());
    let user = ["--clients", "5", "--duration", "10s", "--seed", "3"];
    let mut config = refusing_all(chain(&user, vec![with_files], &[]));
    let out = sim::run(&config).unwrap();
    let tier = &out.tiers[0];
    // A row a second for the tier's server and its calls alike (its
    // server's interval), the same rows as the outcome's.
    let server_rows: Vec<ServerRow> = read_rows(&server_csv).unwrap();
    let call_rows: Vec<ClientRow> = read_rows(&calls_csv).unwrap();
    assert_eq!((server_rows.len(), call_rows.len()), (10, 10));
    let seconds = |rows: Vec<f64>| rows.iter().map(|s| s.round() as u64).collect::<Vec<_>>();
    assert_eq!(
        seconds(server_rows.iter().map(|r| r.elapsed_s).collect()),
        (1..=10).collect::<Vec<_>>()
    );
    let sent: f64 = call_rows.iter().map(|r| r.sent_per_s).sum();
    let sent_out: f64 = tier.calls.rows.iter().map(|r| r.sent_per_s).sum();
    assert!(
        (sent - sent_out).abs() < 1e-6 && sent > 0.0,
        "{sent} {sent_out}"
    );
    // Files cannot be shared by runs from one warm-up.
    config.pauses = vec![Pause {
        at: Duration::from_secs(2),
        length: Duration::from_secs(1),
    }];
    let refused = WarmedUp::new(&config).err().unwrap();
    assert_eq!(
        refused.to_string(),
        "a warm-up cannot be shared: it writes files"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_chain_the_engine_cannot_run_is_refused_with_its_reason() {
    let user = ["--clients", "1", "--duration", "1s"];
    let call = tier(&[], &[], NEITHER);
    // The backend calls nothing.
    let mut config = chain(&user, vec![], &[]);
    config.server.call = call.call.clone();
    let err = sim::run(&config).unwrap_err();
    assert!(matches!(err, SimError::Chain(_)));
    assert!(err.to_string().contains("backend"), "{err}");
    // Every tier calls inward.
    let config = chain(&user, vec![call.clone(), server(&[])], &[]);
    let err = sim::run(&config).unwrap_err().to_string();
    assert!(
        err.contains("tier 1") && err.contains("makes no call"),
        "{err}"
    );
    // The pauses stop a server of the chain.
    let mut config = chain(&user, vec![call.clone()], &[]);
    config.paused = Some(1);
    let err = sim::run(&config).unwrap_err().to_string();
    assert!(err.contains("tier 1"), "{err}");
    // At most MAX_TIERS tiers.
    let config = chain(&user, vec![call; sim::MAX_TIERS + 1], &[]);
    assert!(sim::run(&config).unwrap_err().to_string().contains("tiers"));
}

#[test]
fn a_run_without_tiers_is_the_run_it_was_before_chains() {
    // The default storm with fixed retries and its figures as the engine
    // gave them before it knew of tiers (bce016d), to the request.
    let config = sim_config(
        &["--backlog", "4096"],
        &["--strategy", "fixed", "--duration", "110s", "--seed", "5"],
        vec![Pause {
            at: Duration::from_secs(20),
            length: Duration::from_secs(20),
        }],
    );
    assert!(config.tiers.is_empty() && config.paused.is_none());
    let out = sim::run(&config).unwrap();
    let t = &out.client.totals.tally;
    let figures = (
        t.ok,
        t.errors,
        t.timeouts,
        t.retries,
        out.server.completed,
        out.server.abandoned,
        out.server.peak_concurrency,
        out.server_rows.len(),
        out.events,
    );
    assert_eq!(figures, BEFORE_CHAINS);
    assert!(out.tiers.is_empty());
}

/// The figures of [`a_run_without_tiers_is_the_run_it_was_before_chains`]
/// as the engine gave them before chains.
const BEFORE_CHAINS: (u64, u64, u64, u64, u64, u64, u64, usize, u64) =
    (1981, 0, 37698, 36698, 1981, 5, 37299, 91, 85542);
