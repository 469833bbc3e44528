//! The fault proxy (`storm proxy`), run as the storm's runner runs it (a
//! child with `--status-fd 3`, switched by SIGUSR1 and SIGUSR2) or through
//! its control endpoint, in front of a small echo service in this test
//! process: forwarding is faithful, each fault does what docs/proxy.md
//! says, and its rows, CSV and metrics say what passed. Loopback only;
//! reports every 100 ms; every wait bounded; every child killed if a test
//! fails.

mod common;
#[path = "common/proxied.rs"]
mod proxied;

use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::pty::Pty;
use common::{temp_dir, unowned_port};
use proxied::{Conn, Proxy, SILENCE, STORM, Seen, Silence, Silent, Upstream, addr_of, control};
use retry_storm::report::output::read_rows;
use retry_storm::report::proxy::ProxyRow;

#[test]
fn requests_and_answers_pass_through_unchanged_on_kept_alive_connections() {
    let upstream = Upstream::start();
    let proxy = Proxy::start(&upstream.url("/api?from=proxy"), &[]);
    assert_eq!(
        proxy.url,
        format!("http://{}/api?from=proxy", proxy.addr),
        "the proxy's URL carries the target's path and query"
    );
    let mut conn = Conn::to(proxy.addr);
    conn.send(
        "POST",
        "/echo/path?q=1&r=two",
        &[
            ("x-custom", "one"),
            ("x-multi", "a"),
            ("x-multi", "b"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "dropped"),
            ("keep-alive", "timeout=5"),
        ],
        b"hello body",
    );
    let answer = conn.answer().unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let seen = answer.json();
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["target"], "/echo/path?q=1&r=two");
    assert_eq!(seen["body"], "hello body");
    let headers: Vec<(String, String)> = serde_json::from_value(seen["headers"].clone()).unwrap();
    let values = |name: &str| -> Vec<&str> {
        headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(
        values("host"),
        ["proxied.example"],
        "Host as the client sent it"
    );
    assert_eq!(values("x-custom"), ["one"]);
    assert_eq!(values("x-multi"), ["a", "b"]);
    for hop in ["x-hop", "keep-alive", "connection"] {
        assert!(values(hop).is_empty(), "{hop} is hop-by-hop: {headers:?}");
    }
    let first_peer = seen["peer"].as_u64().unwrap();
    // The target's statuses, reasons and headers come back as they were.
    for code in [404, 503] {
        let answer = conn.request("GET", &format!("/status/{code}"));
        assert_eq!(answer.status, code);
        assert_eq!(answer.reason, "Upstream Says So");
        assert_eq!(answer.header("x-upstream"), Some(code.to_string().as_str()));
        assert_eq!(answer.header("retry-after"), Some("7"));
        assert_eq!(answer.body, b"from upstream\n");
    }
    // Large bodies both ways, on the same connection.
    let big = vec![b'x'; 1 << 20];
    conn.send("PUT", "/upload", &[], &big);
    let answer = conn.answer().unwrap();
    assert_eq!(answer.json()["body"].as_str().unwrap().len(), big.len());
    let answer = conn.request("GET", "/big/1000000");
    assert_eq!(answer.body.len(), 1_000_000);
    // Every request so far on one client connection, and on one
    // connection to the target.
    let again = conn.request("GET", "/again").json();
    assert_eq!(again["peer"].as_u64(), Some(first_peer));
    assert_eq!(upstream.seen(), 6);
}

#[test]
fn status_answers_without_the_target_and_the_rows_csv_and_metrics_say_so() {
    let upstream = Upstream::start();
    let dir = temp_dir("proxy-status");
    let csv = dir.join("proxy.csv");
    let mut proxy = Proxy::start(
        &upstream.url("/api"),
        &[
            "--fault",
            "status=503,retry-after=2s",
            "--seed",
            "3",
            "--csv",
            csv.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let mut conn = Conn::to(proxy.addr);
    assert_eq!(conn.request("GET", "/api").status, 200);
    proxy.switch("USR1");
    let answer = conn.request("GET", "/api");
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("retry-after"), Some("2"));
    assert_eq!(answer.header("x-amz-retry-after"), Some("2000"));
    assert_eq!(
        upstream.seen(),
        1,
        "the fault's answer never reaches the target"
    );
    let row = proxy.row_where("the injected answer", |r| r.injected_per_s > 0.0);
    assert!(row.faulted && row.answers_5xx_per_s == 0.0, "{row:?}");
    let metrics = addr_of(&proxy.url_after("metrics on "));
    let scraped = String::from_utf8(Conn::to(metrics).request("GET", "/metrics").body).unwrap();
    for sample in [
        "retry_storm_proxy_requests_total 2",
        "retry_storm_proxy_injected_total 1",
        "retry_storm_proxy_answers_total{class=\"2xx\"} 1",
        "retry_storm_proxy_faulted 1",
        "retry_storm_proxy_connections 1",
        "retry_storm_proxy_answer_duration_seconds_count 1",
    ] {
        assert!(scraped.contains(sample), "{sample}: {scraped}");
    }
    proxy.switch("USR2");
    assert_eq!(conn.request("GET", "/api").status, 200);
    assert_eq!(upstream.seen(), 2);
    let (status, stdout, rows) = proxy.terminate();
    assert_eq!(status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("proxy stopped: requests 3, answers passed back 2"),
        "{stdout}"
    );
    // The CSV holds every row the status lines gave, the last one too.
    let written: Vec<ProxyRow> = read_rows(&csv).unwrap();
    assert_eq!(written, rows);
    // Plausible rows: the fault's answers only while it was on, the
    // target's latency while it answered.
    assert!(rows.iter().any(|r| r.faulted) && !rows.last().unwrap().faulted);
    assert!(rows.iter().all(|r| r.injected_per_s == 0.0 || r.faulted));
    assert!(
        rows.iter()
            .all(|r| r.upstream_errors_per_s == 0.0 && r.held == 0)
    );
    assert!(rows.iter().any(|r| r.p99_ms.is_some()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stall_answers_nothing_until_it_ends_and_then_everything() {
    let upstream = Upstream::start();
    let (mut proxy, control_url) = Proxy::controlled(&upstream, "stall");
    let mut held = Conn::to(proxy.addr);
    assert_eq!(held.request("GET", "/api").status, 200);
    // A request forwarded before the stall, its answer due 100 ms later.
    let mut slow = Conn::to(proxy.addr);
    slow.send("GET", "/slow/100", &[], b"");
    upstream.arrival("/slow/100");
    let on = control(&control_url, "POST", "/fault/on");
    assert_eq!(on, serde_json::json!({"faulted": true, "fault": "stall"}));
    // Its answer comes back from the target, and waits unwritten.
    assert_eq!(slow.silence(), Silence::Kept);
    // A request on a connection open before: never read.
    held.send("GET", "/api?held", &[], b"");
    assert_eq!(held.silence(), Silence::Kept);
    // A new connection: the kernel completes it into the listen queue,
    // and nothing more.
    let mut queued = Conn::to(proxy.addr);
    queued.send("GET", "/api?queued", &[], b"");
    assert_eq!(queued.silence(), Silence::Kept);
    let row = proxy.row_where("a queued connection", |r| r.faulted && r.queued >= 1);
    assert_eq!((row.connections, row.held), (2, 0), "nothing read: {row:?}");
    assert_eq!(upstream.seen(), 2, "nothing forwarded while stalled");
    // Switched off (twice: idempotent), every one gets the target's answer.
    control(&control_url, "POST", "/fault/off");
    let off = control(&control_url, "POST", "/fault/off");
    assert_eq!(off["faulted"], false);
    assert_eq!(slow.answer().unwrap().json()["target"], "/slow/100");
    assert_eq!(held.answer().unwrap().json()["target"], "/api?held");
    assert_eq!(queued.answer().unwrap().json()["target"], "/api?queued");
    assert_eq!(upstream.seen(), 4);
    assert_eq!(control(&control_url, "GET", "/fault")["faulted"], false);
}

#[test]
fn a_request_held_by_a_fraction_goes_when_the_fault_ends_and_a_swallowed_one_never() {
    let upstream = Upstream::start();
    // Seed 1 draws the first request into the fraction of 0.99.
    let mut stalled = Proxy::faulted(&upstream, "stall,fraction=0.99", "1");
    let mut conn = Conn::to(stalled.addr);
    conn.send("GET", "/api?held", &[], b"");
    stalled.row_where("the request held", |r| r.held == 1);
    assert_eq!(conn.silence(), Silence::Kept);
    stalled.switch("USR2");
    assert_eq!(conn.answer().unwrap().json()["target"], "/api?held");
    let mut swallowing = Proxy::faulted(&upstream, "blackhole,fraction=0.99", "1");
    let mut conn = Conn::to(swallowing.addr);
    conn.send("GET", "/api?swallowed", &[], b"");
    swallowing.row_where("the request swallowed", |r| r.held == 1);
    swallowing.switch("USR2");
    assert_eq!(conn.silence(), Silence::Kept, "swallowed for good");
    drop(conn);
    let row = swallowing.row_where("its client gone", |r| r.gone_per_s > 0.0);
    assert_eq!(row.held, 0, "{row:?}");
    assert_eq!(upstream.seen(), 1);
}

#[test]
fn a_blackhole_queues_one_connection_and_leaves_the_next_unanswered() {
    let upstream = Upstream::start();
    let mut proxy = Proxy::faulted(&upstream, "blackhole", "1");
    let mut first = Conn::to(proxy.addr);
    first.send("GET", "/api", &[], b"");
    assert_eq!(first.silence(), Silence::Kept);
    let refused = TcpStream::connect_timeout(&proxy.addr, SILENCE);
    assert!(
        refused.is_err(),
        "beyond a queue of one, the handshake does not complete"
    );
    proxy.switch("USR2");
    assert_eq!(first.answer().unwrap().status, 200);
    assert_eq!(Conn::to(proxy.addr).request("GET", "/api").status, 200);
}

/// Whether `read` is one whole request for `target` with no body, and
/// nothing after it.
fn one_request(read: &str, target: &str) -> bool {
    read.starts_with(&format!("GET {target} HTTP/1.1\r\n"))
        && read.find("\r\n\r\n") == Some(read.len() - 4)
}

#[test]
fn a_request_whose_client_went_during_a_stall_reaches_the_target_followed_by_its_end() {
    // As a stopped process reads at its resume what a client that gave up
    // left in its socket: the request, then the FIN. Through a whole
    // stall on a connection open before it and on one queued meanwhile;
    // through a blackhole, whose queue holds one connection, as well.
    for fault in ["stall", "blackhole"] {
        let target = Silent::start();
        let mut proxy = Proxy::start(&target.url("/api"), &["--fault", fault]);
        let mut open = Conn::to(proxy.addr);
        proxy.row_where("the connection accepted", |r| r.connections == 1);
        proxy.switch("USR1");
        open.send("GET", "/api?open", &[], b"");
        drop(open);
        let mut queued = Conn::to(proxy.addr);
        queued.send("GET", "/api?queued", &[], b"");
        drop(queued);
        proxy.row_where("the queued connection", |r| r.queued == 1);
        proxy.switch("USR2");
        let ended = target.ended(2);
        for ((read, fin), path) in ended.iter().zip(["/api?open", "/api?queued"]) {
            assert!(one_request(read, path), "{fault}: {read:?}");
            assert!(fin, "{fault}: the request, then its client's FIN: {read:?}");
        }
        proxy.row_where("none in flight", |r| {
            r.in_flight == 0 && r.gone_per_s == 0.0
        });
        let (_, stdout, _) = proxy.terminate();
        assert!(
            stdout
                .contains("upstream errors 0, gone 2; at stop 0 connections, 0 in flight, 0 held"),
            "{fault}: {stdout}"
        );
    }
}

#[test]
fn a_held_or_delayed_request_whose_client_went_reaches_the_target_followed_by_its_end() {
    // Seed 1 draws the first request into the fraction of 0.99.
    for fault in ["stall,fraction=0.99", "delay=1s"] {
        let target = Silent::start();
        let mut proxy = Proxy::start(
            &target.url("/api"),
            &["--fault", fault, "--fault-on", "--seed", "1"],
        );
        let mut conn = Conn::to(proxy.addr);
        conn.send("GET", "/api?held", &[], b"");
        proxy.row_where("the request held", |r| r.held == 1);
        drop(conn);
        // Its client gone while it is still held: the delay has not run
        // out (else it went to the target on a pooled connection, the
        // case of the next test).
        let row = proxy.row_where("its client gone", |r| r.gone_per_s > 0.0);
        assert_eq!(
            row.held, 1,
            "{fault}: held still when its client went: {row:?}"
        );
        if fault.starts_with("stall") {
            proxy.switch("USR2");
        }
        let ended = target.ended(1);
        let (read, fin) = &ended[0];
        assert!(one_request(read, "/api?held"), "{fault}: {read:?}");
        assert!(fin, "{fault}: the request, then its client's FIN: {read:?}");
        let (_, stdout, _) = proxy.terminate();
        assert!(
            stdout
                .contains("upstream errors 0, gone 1; at stop 0 connections, 0 in flight, 0 held"),
            "{fault}: {stdout}"
        );
    }
}

#[test]
fn a_client_that_goes_while_its_request_is_at_the_target_closes_that_connection_at_once() {
    let target = Silent::start();
    let proxy = Proxy::start(&target.url("/api"), &[]);
    let mut conn = Conn::to(proxy.addr);
    conn.send("GET", "/api?waiting", &[], b"");
    let Seen::Bytes(first) = target.next() else {
        panic!("the request arrives first");
    };
    assert!(first.starts_with("GET /api?waiting "), "{first:?}");
    drop(conn);
    // A pooled connection waiting for its answer would stay open for as
    // long as the target takes; an idle one, 90 s.
    let ended = target.ended(1);
    let (read, fin) = &ended[0];
    assert!(one_request(read, "/api?waiting") && *fin, "{read:?}");
    let (_, stdout, _) = proxy.terminate();
    assert!(
        stdout.contains("gone 1; at stop 0 connections, 0 in flight"),
        "{stdout}"
    );
}

#[test]
fn a_reset_resets_open_connections_and_new_ones_until_it_ends() {
    let upstream = Upstream::start();
    let (mut proxy, control_url) = Proxy::controlled(&upstream, "reset");
    let mut open = Conn::to(proxy.addr);
    assert_eq!(open.request("GET", "/api").status, 200);
    control(&control_url, "POST", "/fault/on");
    let reset = open.answer().unwrap_err();
    assert_eq!(reset.kind(), io::ErrorKind::ConnectionReset, "{reset}");
    // A new connection is reset as it is accepted: its request's write
    // or its answer's read says so, whichever meets the RST first.
    let mut new = Conn::to(proxy.addr);
    let sent = new.try_send("GET", "/api", &[], b"");
    let read = new.answer();
    let was_reset = |r: &io::Error| r.kind() == io::ErrorKind::ConnectionReset;
    assert!(
        sent.as_ref().err().is_some_and(was_reset) || read.as_ref().err().is_some_and(was_reset),
        "{sent:?}, {read:?}"
    );
    let row = proxy.row_where("two resets", |r| r.resets_per_s > 0.0);
    assert!(row.faulted, "{row:?}");
    control(&control_url, "POST", "/fault/off");
    assert_eq!(Conn::to(proxy.addr).request("GET", "/api").status, 200);
    assert_eq!(upstream.seen(), 2);
}

#[test]
fn a_delay_forwards_late_and_off_forwards_at_once() {
    let upstream = Upstream::start();
    let mut proxy = Proxy::faulted(&upstream, "delay=300ms", "1");
    let mut conn = Conn::to(proxy.addr);
    let started = Instant::now();
    assert_eq!(conn.request("GET", "/api").status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let row = proxy.row_where("the delayed answer", |r| r.answers_2xx_per_s > 0.0);
    assert!(row.p50_ms.unwrap() >= 300.0, "{row:?}");
    proxy.switch("USR2");
    let started = Instant::now();
    assert_eq!(conn.request("GET", "/api").status, 200);
    assert!(started.elapsed() < Duration::from_millis(300));
}

#[test]
fn a_fraction_faults_about_its_share_the_same_for_the_same_seed() {
    let upstream = Upstream::start();
    let faulted = |seed: &str| {
        let proxy = Proxy::faulted(&upstream, "status=503,fraction=0.5", seed);
        let mut conn = Conn::to(proxy.addr);
        (0..200)
            .filter(|_| conn.request("GET", "/api").status == 503)
            .count()
    };
    let share = faulted("7");
    assert!((60..=140).contains(&share), "{share} of 200");
    assert_eq!(faulted("7"), share, "the same seed, the same requests");
    assert_eq!(upstream.seen() as usize, 2 * (200 - share));
}

#[test]
fn a_target_that_refuses_gets_its_clients_a_502() {
    let port = unowned_port();
    let mut proxy = Proxy::start(&format!("http://127.0.0.1:{port}/api"), &[]);
    let answer = Conn::to(proxy.addr).request("GET", "/api");
    assert_eq!(answer.status, 502);
    let row = proxy.row_where("the upstream error", |r| r.upstream_errors_per_s > 0.0);
    assert_eq!(
        row.answers_5xx_per_s, 0.0,
        "a 502 of the proxy's own: {row:?}"
    );
}

#[test]
fn the_live_views_key_switches_the_fault() {
    let upstream = Upstream::start();
    let port = unowned_port();
    let control_url = format!("http://127.0.0.1:{port}/fault");
    let mut pty = Pty::spawn(
        STORM,
        &[
            "proxy",
            "--tui",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &upstream.url("/api"),
            "--report-interval",
            "100ms",
            "--control",
            &format!("127.0.0.1:{port}"),
        ],
        &[("NO_COLOR", "1")],
        120,
        40,
    );
    pty.wait_for_text(&["f: fault on/off", "fault         off", "connections, held"]);
    pty.keys("f");
    pty.wait_for_text(&["fault         ON", "░ fault on"]);
    assert_eq!(control(&control_url, "GET", "/fault")["faulted"], true);
    pty.keys("q");
    let (status, screen, alternate) = pty.wait_end();
    assert!(status.success(), "{status}: {screen}");
    assert!(!alternate, "the terminal is given back");
    assert!(screen.contains("proxy stopped"), "{screen}");
}
