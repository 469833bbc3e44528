//! Faults, as a user would hit them, against the real binaries: running out
//! of file descriptors on either side, a server that is down or dies, a
//! server stopped and resumed again and again, and signals. Times are
//! compressed to milliseconds; every process is bounded and killed on
//! failure.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    CLIENT, Guard, ServerChild, command, cpu_ticks, line_with, signal, temp_dir, wait_until_stopped,
};
use retry_storm::report::rows::ClientRow;

fn rows(path: &std::path::Path) -> Vec<ClientRow> {
    csv::Reader::from_path(path)
        .unwrap()
        .deserialize()
        .collect::<Result<Vec<ClientRow>, _>>()
        .unwrap()
}

/// The number right after `label` in a summary line such as
/// `attempts: 12 (OK 10, errors 2, ...)`.
fn count_after(line: &str, label: &str) -> u64 {
    let start = line.find(label).unwrap() + label.len();
    line[start..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// One GET on a fresh connection; the status line, or "" if the
/// connection closed without an answer.
fn get(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.lines().next().unwrap_or("").to_string()
}

#[test]
fn a_server_out_of_descriptors_counts_accept_failures_and_recovers() {
    let mut server = ServerChild::start(
        &["prlimit", "--nofile=32:32"],
        &[
            "--listen",
            "127.0.0.1:0",
            "--base-delay",
            "5ms",
            "--report-interval",
            "100ms",
        ],
    );
    let addr = server.addr();
    // Far more connections than descriptors: the kernel queues them all in
    // the backlog, the server runs out accepting them.
    let held: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let line = line_with(&mut server.out, "accept errors: ");
    let count: u64 = line
        .rsplit("accept errors: ")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(count > 0, "{line}");
    // Out of descriptors, the server retries with a growing pause, not in a
    // busy loop: over a second it uses a small share of a core.
    let before = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(server.pid()) - before;
    assert!(used < 50, "{used} ticks of CPU in a second");
    // Load gone, the server serves again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = get(&addr);
        if status.contains("200") {
            break;
        }
        assert!(Instant::now() < deadline, "not serving again: {status:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(server.pid(), "INT");
    line_with(&mut server.out, "server stopped");
    assert_eq!(server.guard.0.wait().unwrap().code(), Some(0));
}

#[test]
fn a_client_out_of_descriptors_counts_errors_and_carries_on() {
    let server = ServerChild::start(&[], &["--listen", "127.0.0.1:0", "--base-delay", "50ms"]);
    // 200 users at 10 ms think want about 100 connections at once; the
    // client has 32 descriptors.
    let out = Command::new("prlimit")
        .args(["--nofile=32:32", CLIENT, "--url", &server.url])
        .args(["--clients", "200", "--lambda", "10ms", "--timeout", "1s"])
        .args([
            "--duration",
            "1s",
            "--report-interval",
            "250ms",
            "--seed",
            "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let attempts = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("attempts:"))
        .unwrap();
    let number = |label: &str| count_after(attempts, label);
    assert!(number("OK ") > 0, "{attempts}");
    assert!(number("errors ") > 0, "{attempts}");
    // A second at 250 ms: rows at 250, 500 and 750 ms, and the last at the
    // end, however late the timer under load (before, a slow start made a
    // fifth of the sliver the end ran past, and a late tick a third).
    assert_eq!(stdout.lines().filter(|l| l.starts_with("OK: ")).count(), 4);
}

#[test]
fn a_client_stalled_past_its_report_ticks_writes_a_row_for_every_interval() {
    let server = ServerChild::start(&[], &["--listen", "127.0.0.1:0", "--base-delay", "5ms"]);
    let mut client = Guard(
        command(CLIENT)
            .args(["--url", &server.url, "--clients", "20", "--lambda", "20ms"])
            .args(["--duration", "1s", "--report-interval", "250ms"])
            .args(["--seed", "3"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = client.0.id();
    let mut out = std::io::BufReader::new(client.0.stdout.take().unwrap());
    // After its first row the client stops for 600 ms, as a starved
    // process would: its ticks of 500 and 750 ms come late, past the end
    // if the first row came late too. The sleep is the stall itself.
    let first = common::line_with(&mut out, "OK: ");
    signal(pid, "STOP");
    wait_until_stopped(pid);
    std::thread::sleep(Duration::from_millis(600));
    signal(pid, "CONT");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(client.0.wait().unwrap().code(), Some(0), "{rest}");
    // Still a row for each interval of the second: none lost to a tick
    // put off past the end, none made of the end's lateness.
    let rows = 1 + rest.lines().filter(|l| l.starts_with("OK: ")).count();
    assert_eq!(rows, 4, "{first}{rest}");
}

#[test]
fn a_server_down_at_start_then_dead_then_back_is_survived() {
    let dir = temp_dir("faults-down");
    let csv = dir.join("client.csv");
    // A free port with nothing on it yet, and that nothing else takes
    // while the server is down (before it starts, and between its death
    // and its return): not one from the ephemeral range, which any bind to
    // port 0 or outgoing connection may take in the meantime.
    let addr = format!("127.0.0.1:{}", common::unowned_port());
    let url = format!("http://{addr}/api");
    let mut client = Guard(
        command(CLIENT)
            .args(["--url", &url, "--clients", "20", "--lambda", "20ms"])
            .args([
                "--strategy",
                "fixed",
                "--fixed-delay",
                "20ms",
                "--timeout",
                "500ms",
            ])
            .args([
                "--report-interval",
                "100ms",
                "--duration",
                "60s",
                "--seed",
                "2",
            ])
            .arg("--csv")
            .arg(&csv)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let wait_for = |what: &str, cond: &dyn Fn(&[ClientRow]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = std::fs::read(&csv).map(|_| rows(&csv)).unwrap_or_default();
            if cond(&seen) {
                return seen.len();
            }
            assert!(Instant::now() < deadline, "waiting for {what}: {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Down at start: connection refused, counted as errors, reported.
    let n = wait_for("errors while down", &|r| {
        r.len() >= 3 && r.iter().all(|r| r.ok_per_s == 0.0 && r.errors_per_s > 0.0)
    });
    let listen = ["--listen", &addr, "--base-delay", "5ms"];
    let mut server = ServerChild::start(&[], &listen);
    let n = wait_for("OK once up", &|r| r[n..].iter().any(|r| r.ok_per_s > 0.0));
    // The server dies.
    server.guard.0.kill().unwrap();
    server.guard.0.wait().unwrap();
    let n = wait_for("errors once dead", &|r| {
        r[n..]
            .iter()
            .any(|r| r.ok_per_s == 0.0 && r.errors_per_s > 0.0)
    });
    // A server returns on the same port; the client recovers by itself.
    let server = ServerChild::start(&[], &listen);
    wait_for("OK again", &|r| r[n..].iter().any(|r| r.ok_per_s > 0.0));
    signal(client.0.id(), "INT");
    assert_eq!(client.0.wait().unwrap().code(), Some(0));
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A server that cannot start fails the test with what it said, not only
/// with the end of its output.
#[test]
#[should_panic(expected = "address already in use")]
fn a_server_child_that_cannot_start_names_its_cause() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    ServerChild::start(&[], &["--listen", &addr]);
}

#[test]
fn ten_stops_and_resumes_keep_every_rate_true_and_nothing_hangs() {
    let dir = temp_dir("faults-stops");
    let csv = dir.join("client.csv");
    let mut server = ServerChild::start(
        &[],
        &[
            "--listen",
            "127.0.0.1:0",
            "--base-delay",
            "10ms",
            "--report-interval",
            "100ms",
        ],
    );
    let mut client = Guard(
        command(CLIENT)
            .args(["--url", &server.url, "--clients", "50", "--lambda", "20ms"])
            .args(["--timeout", "150ms", "--report-interval", "100ms"])
            .args(["--duration", "60s", "--seed", "4"])
            .arg("--csv")
            .arg(&csv)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The client handles signals from its first line on.
    let mut out = std::io::BufReader::new(client.0.stdout.take().unwrap());
    line_with(&mut out, "clients ->");
    for _ in 0..10 {
        // Longer than the client's timeout, so that the stops are felt.
        signal(server.pid(), "STOP");
        std::thread::sleep(Duration::from_millis(250));
        signal(server.pid(), "CONT");
        std::thread::sleep(Duration::from_millis(120));
    }
    signal(client.0.id(), "INT");
    let summary = line_with(&mut out, "  attempts: ");
    assert_eq!(client.0.wait().unwrap().code(), Some(0));
    // Every row's rates times its measured length add up to the totals.
    let rows = rows(&csv);
    assert!(rows.len() >= 20, "{} rows", rows.len());
    let mut previous = 0.0;
    let (mut ok, mut timeouts) = (0.0, 0.0);
    for r in &rows {
        let secs = r.elapsed_s - previous;
        previous = r.elapsed_s;
        ok += r.ok_per_s * secs;
        timeouts += r.timeouts_per_s * secs;
    }
    let total = |label: &str| count_after(&summary, label) as f64;
    // Rates are rounded to 0.01/s: within a request per row or so.
    let slack = rows.len() as f64;
    assert!((ok - total("OK ")).abs() <= slack, "{ok} vs {summary}");
    assert!(
        (timeouts - total("timed out ")).abs() <= slack,
        "{timeouts} vs {summary}"
    );
    assert!(total("timed out ") > 0.0, "the stops were felt: {summary}");
    // The server is whole too.
    assert!(get(&server.addr()).contains("200"));
    signal(server.pid(), "TERM");
    line_with(&mut server.out, "server stopped");
    assert_eq!(server.guard.0.wait().unwrap().code(), Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigterm_stops_the_client_in_order_and_a_second_signal_ends_at_once() {
    let server = ServerChild::start(&[], &["--listen", "127.0.0.1:0", "--base-delay", "5ms"]);
    let mut client = Guard(
        command(CLIENT)
            .args(["--url", &server.url, "--clients", "10", "--lambda", "20ms"])
            .args(["--report-interval", "100ms", "--duration", "60s"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = std::io::BufReader::new(client.0.stdout.take().unwrap());
    line_with(&mut out, "OK: ");
    signal(client.0.id(), "TERM");
    line_with(&mut out, "summary: ");
    assert_eq!(client.0.wait().unwrap().code(), Some(0));

    // Two signals at once (both pending while the process is stopped): the
    // second ends the process at once, with code 130.
    let mut second = ServerChild::start(&[], &["--listen", "127.0.0.1:0"]);
    signal(second.pid(), "STOP");
    wait_until_stopped(second.pid());
    signal(second.pid(), "INT");
    signal(second.pid(), "TERM");
    signal(second.pid(), "CONT");
    assert_eq!(second.guard.0.wait().unwrap().code(), Some(130));
}
