//! HTTP/2 in virtual time, on cases worked out by hand: through an outage
//! HTTP/1.1 opens a new connection for every retry (SYNs, dropped beyond
//! the backlog) while HTTP/2 sends its retries as streams on the
//! connection it holds; a `cancel` server drops the reset streams' work at
//! resume, unless more were reset on a connection than it allows (then
//! it closes the connection unread); the server's stream limit forces a
//! second connection.

mod common;

use std::time::Duration;

use common::virtual_time::sim_config as config;
use retry_storm::sim::{self, Pause, SimConfig, SimOutcome};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Three users firing at once (think 1 µs) at a server stopped from 0 to
/// 2.5 s, with a listen backlog of 1 (two connections wait), timeout 1 s
/// and the default retries 100 ms apart; `extra` server and client flags.
fn outage(server: &[&str], client: &[&str]) -> SimConfig {
    let mut server_flags = vec!["--backlog", "1"];
    server_flags.extend_from_slice(server);
    let mut client_flags = vec![
        "--clients",
        "3",
        "--lambda",
        "0.000001",
        "--timeout",
        "1s",
        "--duration",
        "2550ms",
        "--report-interval",
        "500ms",
    ];
    client_flags.extend_from_slice(client);
    config(
        &server_flags,
        &client_flags,
        vec![Pause {
            at: Duration::ZERO,
            length: ms(2500),
        }],
    )
}

fn run(c: &SimConfig) -> SimOutcome {
    sim::run(c).unwrap()
}

#[test]
fn through_an_outage_http1_opens_connections_and_http2_opens_one() {
    // HTTP/1.1: at 0 three SYNs, two wait in the backlog, one is dropped
    // (its retransmission due at 1 s). At 1 s all three time out and close
    // their connections, which keep their backlog places; the retries at
    // 1.1 s and 2.2 s find the backlog full: six more SYNs, all dropped.
    let h1 = run(&outage(&[], &[]));
    assert_eq!((h1.connects, h1.syns_dropped), (9, 7));
    // HTTP/2: the first attempt opens a connection (its SYN queued in the
    // backlog); the other two, and every retry, are streams on it.
    let h2 = run(&outage(&[], &["--http2"]));
    assert_eq!((h2.connects, h2.syns_dropped), (1, 0));
    // On both, the first attempts and the retries at 1.1 s timed out; the
    // retries at 2.2 s are still in flight at the end (a retry counts
    // when it ends).
    for out in [&h1, &h2] {
        let t = &out.client.totals.tally;
        assert_eq!((t.timeouts, t.retries), (6, 3), "{t:?}");
    }
    // At resume HTTP/2's server reads all nine requests, the six reset
    // ones worked for nobody (`continue`); HTTP/1.1's reads the two that
    // held the backlog, both abandoned: the retries' SYNs never got in.
    assert_eq!(h2.server.peak_concurrency, 9);
    assert_eq!(h1.server.peak_concurrency, 2);
    assert_eq!(h2.server.abandoned_held, 6);
    assert_eq!(h1.server.abandoned_held, 2);
}

#[test]
fn with_cancel_the_server_drops_the_reset_streams_work_at_resume() {
    // The same outage over HTTP/2: at resume the server reads each reset
    // stream's request and then its RST_STREAM, so in `cancel` mode the
    // six are dropped as read and only the three live attempts are
    // worked, answered 100 ms later (the base delay) at 2.6 s.
    let cancel = run(&outage(&["--on-disconnect", "cancel"], &["--http2"]));
    assert_eq!(cancel.server.peak_concurrency, 3);
    assert_eq!(cancel.server.abandoned_held, 0);
    let goes_on = run(&outage(&["--on-disconnect", "continue"], &["--http2"]));
    assert_eq!(goes_on.server.peak_concurrency, 9);
    assert_eq!(goes_on.server.abandoned_held, 6);
}

#[test]
fn past_its_reset_limit_the_server_closes_the_connection_unread_at_resume() {
    // The same outage over HTTP/2: on the one connection six streams were
    // written and reset while the server was stopped (the first attempts,
    // reset at 1 s, and the retries of 1.1 s, reset at 2.1 s); the three
    // retries of 2.2 s are live. A server allowing 5 resets before accept
    // closes the connection at 2.5 s (GOAWAY ENHANCE_YOUR_CALM): it reads
    // none of the nine, and the three live ones fail with an error there.
    let calm = run(&outage(&["--max-pending-resets", "5"], &["--http2"]));
    let t = &calm.client.totals.tally;
    assert_eq!((t.timeouts, t.errors), (6, 3), "{t:?}");
    assert_eq!(calm.server.peak_concurrency, 0);
    assert_eq!(calm.server.abandoned_held, 0);
    assert_eq!(calm.connects, 1);
    // Six resets are within a limit of 6: every stream is read, as above.
    let within = run(&outage(&["--max-pending-resets", "6"], &["--http2"]));
    let t = &within.client.totals.tally;
    assert_eq!((t.timeouts, t.errors), (6, 0), "{t:?}");
    assert_eq!(within.server.peak_concurrency, 9);
    assert_eq!(within.server.abandoned_held, 6);
}

#[test]
fn the_stream_limit_forces_a_second_connection() {
    // Two streams a connection: user 0 opens the first, user 1 shares it,
    // user 2 opens a second (its SYN takes the backlog's second place).
    // The retries find four slots free on the two (each timeout resets
    // its stream) and open none.
    let mut c = outage(&[], &["--http2"]);
    c.server.max_streams = 2;
    let out = run(&c);
    assert_eq!((out.connects, out.syns_dropped), (2, 0));
    assert_eq!(out.server.peak_concurrency, 9);
    let rows = &out.client.rows;
    assert!(rows.iter().all(|r| r.connections.is_some()));
    assert_eq!(rows.last().and_then(|r| r.connections), Some(2));
}

#[test]
fn connections_and_streams_in_flight_are_reported_apart() {
    // A running server: 50 users, each with an attempt in flight at the
    // report now and then, share one connection (limit 200).
    let c = config(
        &[],
        &[
            "--clients",
            "50",
            "--lambda",
            "0.2",
            "--duration",
            "10s",
            "--report-interval",
            "1s",
            "--seed",
            "3",
            "--http2",
        ],
        vec![],
    );
    let out = run(&c);
    assert_eq!((out.connects, out.syns_dropped), (1, 0));
    let rows = &out.client.rows;
    assert!(rows.iter().all(|r| r.connections == Some(1)), "{rows:?}");
    assert!(rows.iter().any(|r| r.in_flight > 1), "{rows:?}");
    // HTTP/1.1 rows leave the column out.
    let mut h1 = c.clone();
    h1.client.wire.transport = Default::default();
    let out = run(&h1);
    assert!(out.client.rows.iter().all(|r| r.connections.is_none()));
    assert!(out.connects > 1);
}

#[test]
fn a_connection_whose_syn_was_dropped_opens_when_a_retransmission_gets_in() {
    // One stream a connection, a backlog of two places, the server
    // stopped from 0 to 1.5 s: users 0 and 1 open a connection each
    // (queued), user 2's SYN is dropped, and again at 1 s (still
    // stopped, the backlog still full). At 1.5 s the server reads the two
    // streams, answered at 1.6 s; users 0 and 1 then go round on their
    // connections. User 2's SYN retransmitted at 3 s gets in: a third
    // connection, its request answered at 3.1 s.
    let mut c = config(
        &["--backlog", "1"],
        &[
            "--clients",
            "3",
            "--lambda",
            "0.000001",
            "--timeout",
            "10s",
            "--duration",
            "3300ms",
            "--http2",
        ],
        vec![Pause {
            at: Duration::ZERO,
            length: ms(1500),
        }],
    );
    c.server.max_streams = 1;
    let out = run(&c);
    assert_eq!((out.connects, out.syns_dropped), (3, 2));
    assert_eq!(out.client.rows.last().and_then(|r| r.connections), Some(3));
    let t = &out.client.totals.tally;
    assert_eq!((t.errors, t.timeouts), (0, 0));
    let slowest = out.client.totals.attempt_latency.max() as f64 / 1000.0;
    assert!(
        (3099.0..=3101.0).contains(&slowest),
        "slowest: {slowest} ms"
    );
}

#[test]
fn http2_against_a_server_closing_each_connection_is_refused() {
    let c = config(
        &[
            "--model",
            "pool",
            "--workers",
            "2",
            "--service-time",
            "100ms",
            "--queue",
            "backlog",
        ],
        &["--clients", "1", "--duration", "1s", "--http2"],
        vec![],
    );
    let err = sim::run(&c).unwrap_err();
    assert!(err.to_string().contains("--queue backlog"), "{err}");
    let mut h1 = c.clone();
    h1.client.wire.transport = Default::default();
    assert!(sim::run(&h1).is_ok());
}

#[test]
fn hedges_that_lose_reset_their_streams_and_free_their_slots() {
    // One user alone, copies at 0, 10 and 20 ms, the oldest answered
    // first and the two others cancelled (as in tests/sim.rs), over
    // HTTP/2 with one stream a connection: the first request's three
    // copies open three connections, and every later request's copies
    // find them free again (the answer ends one stream, the resets the
    // others) and open none. A cancel-mode server drops the reset ones.
    let mut c = config(
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
            "--http2",
        ],
        vec![],
    );
    c.server.max_streams = 1;
    let out = run(&c);
    let t = out.client.totals.tally;
    assert!(t.started > 30, "{t:?}");
    assert_eq!(t.ok, t.started);
    assert_eq!(t.cancelled, 2 * t.started);
    assert_eq!(out.server.abandoned, t.cancelled);
    assert_eq!((out.connects, out.syns_dropped), (3, 0));
    assert_eq!(out.client.rows.last().and_then(|r| r.connections), Some(3));
}
