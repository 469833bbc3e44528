//! The `server` and `client` binaries as a user runs them: bad input, a port
//! in use, and an orderly stop on SIGINT with nothing lost.

mod common;

use std::io::BufReader;
use std::process::{Command, Output, Stdio};

use common::{CLIENT, Guard, SERVER, ServerChild, command, line_with, signal, temp_dir};
use retry_storm::report::status::Status;

fn interrupt(child: &std::process::Child) {
    signal(child.id(), "INT");
}

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .output()
        .expect("run the binary")
}

fn assert_refused(bin: &str, args: &[&str], mention: &str) {
    let out = run(bin, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(mention),
        "{args:?} should mention {mention}: {stderr}"
    );
}

#[test]
fn bad_flags_exit_2_with_a_message_naming_the_flag() {
    assert_refused(CLIENT, &["--clients", "0"], "--clients");
    assert_refused(CLIENT, &["--factor", "-1"], "--factor");
    assert_refused(CLIENT, &["--timeout", "abc"], "--timeout");
    assert_refused(CLIENT, &["--strategy", "bogus"], "exponential-2014");
    assert_refused(SERVER, &["--factor", "-1"], "--factor");
    assert_refused(SERVER, &["--base-delay", "soon"], "--base-delay");
    assert_refused(CLIENT, &["--clients", "-5"], "--clients");
    let exp = ["--strategy", "exponential"];
    assert_refused(
        CLIENT,
        &[&exp[..], &["--factor", "1"]].concat(),
        "greater than 1",
    );
    assert_refused(
        CLIENT,
        &[&exp[..], &["--jitter", "-0.1"]].concat(),
        "--jitter",
    );
    assert_refused(
        CLIENT,
        &[&exp[..], &["--min-delay", "10s", "--max-delay", "1s"]].concat(),
        "--min-delay must not exceed --max-delay",
    );
    assert_refused(CLIENT, &["--timeout", "0s"], "greater than zero");
    assert_refused(CLIENT, &["--url", "ftp://127.0.0.1/api"], "http://");
    assert_refused(CLIENT, &["--header", "no colon"], "--header");
    assert_refused(CLIENT, &["--grpc", "NoService"], "--grpc");
    assert_refused(
        SERVER,
        &["--header-read-timeout", "0s"],
        "--header-read-timeout",
    );
    assert_refused(CLIENT, &["--timer-resolution", "1s"], "at most 10ms");
    assert_refused(
        SERVER,
        &["--timer-resolution", "often"],
        "--timer-resolution",
    );
    assert_refused(CLIENT, &["--threads", "0"], "--threads");
    assert_refused(CLIENT, &["--shard", "2/2"], "--shard");
    assert_refused(CLIENT, &["--shard", "0/2"], "--seed");
    assert_refused(CLIENT, &["--start-at", "tomorrow"], "--start-at");
    assert_refused(SERVER, &["--threads", "-1"], "--threads");
}

#[test]
fn an_unwritable_csv_or_a_taken_port_is_refused_before_any_load_and_writes_nothing() {
    let dir = temp_dir("refuse");
    // A folder is made for the file, but not under a file, even by root.
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let csv = file.join("client.csv");
    let csv = csv.to_str().unwrap();
    assert_refused(
        CLIENT,
        &["--csv", csv, "--duration", "1s"],
        &format!("--csv {csv}"),
    );
    let hlog = file.join("client.hlog");
    let hlog = hlog.to_str().unwrap();
    assert_refused(
        CLIENT,
        &["--hlog", hlog, "--duration", "1s"],
        &format!("--hlog {hlog}"),
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let csv = dir.join("server.csv");
    assert_refused(
        SERVER,
        &["--listen", &addr, "--csv", csv.to_str().unwrap()],
        "already in use",
    );
    assert!(!csv.exists(), "a CSV file from a server that never started");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_refused(SERVER, &["--listen", &addr], "already in use");
}

#[test]
fn a_status_descriptor_that_was_not_inherited_is_refused_at_start() {
    // Nothing is open at descriptor 1,000 in the child: it inherited none.
    assert_refused(
        SERVER,
        &["--listen", "127.0.0.1:0", "--status-fd", "1000"],
        "--status-fd 1000",
    );
    assert_refused(
        CLIENT,
        &["--duration", "1s", "--status-fd", "1000"],
        "--status-fd 1000",
    );
}

#[test]
fn help_shows_defaults_and_units() {
    let out = run(CLIENT, &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in [
        "--strategy",
        "[default: 2s]",
        "[default: 1000]",
        "--exponential-backoff",
    ] {
        assert!(help.contains(needle), "client --help lacks {needle}");
    }
    let out = run(SERVER, &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "[default: 100ms]",
        "[default: 10m]",
        "--on-disconnect",
        "--backlog",
    ] {
        assert!(help.contains(needle), "server --help lacks {needle}");
    }
}

// On one thread each (`--threads 1`), the runtime the other binary tests do
// not use: signals and the final flush must work there too.
#[test]
fn sigint_prints_the_summary_flushes_the_csv_and_exits_0() {
    let dir = temp_dir("bin");
    let csv = dir.join("client.csv");

    let mut server = ServerChild::start(
        &[],
        &[
            "--listen",
            "127.0.0.1:0",
            "--base-delay",
            "5ms",
            "--report-interval",
            "100ms",
            "--threads",
            "1",
        ],
    );
    let url = server.url.clone();

    let mut client = Guard(
        command(CLIENT)
            .args(["--url", &url, "--clients", "20", "--lambda", "50ms"])
            .args([
                "--report-interval",
                "100ms",
                "--duration",
                "60s",
                "--seed",
                "3",
                "--threads",
                "1",
            ])
            .arg("--csv")
            .arg(&csv)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut client_out = BufReader::new(client.0.stdout.take().unwrap());
    let mut report_lines = 0;
    for _ in 0..2 {
        line_with(&mut client_out, "OK: ");
        report_lines += 1;
    }
    interrupt(&client.0);
    // Every line up to the summary is a report line the CSV must also hold.
    let mut rest = String::new();
    loop {
        let line = line_with(&mut client_out, "");
        if line.starts_with("summary:") {
            assert!(line.contains("seed 3"), "{line}");
            break;
        }
        if line.starts_with("OK: ") {
            report_lines += 1;
        }
        rest.push_str(&line);
    }
    let status = client.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));

    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("unix_ms,elapsed_s,ok_per_s"));
    assert_eq!(text.lines().count(), 1 + report_lines, "{text}\n{rest}");

    signal(server.pid(), "INT");
    line_with(&mut server.out, "server stopped");
    assert_eq!(server.guard.0.wait().unwrap().code(), Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shard_waiting_for_its_start_says_so_and_stops_on_sigint_with_nothing_run() {
    let dir = temp_dir("start-at");
    let csv = dir.join("shard-1").join("client.csv");
    let start = std::time::SystemTime::now() + std::time::Duration::from_secs(600);
    let start = start
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    // No server: nothing may be sent before the start.
    let mut client = Guard(
        command(CLIENT)
            .args(["--url", "http://127.0.0.1:9/api", "--clients", "10"])
            .args(["--seed", "4", "--start-at", &start, "--csv"])
            .arg(&csv)
            .env("SLURM_PROCID", "1")
            .env("SLURM_NTASKS", "2")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(client.0.stdout.take().unwrap());
    let line = line_with(&mut out, "clients");
    assert!(
        line.starts_with("5 of 10 clients (shard 1/2 from SLURM_PROCID/SLURM_NTASKS)"),
        "{line}"
    );
    assert!(line.contains("starting at"), "{line}");
    interrupt(&client.0);
    let summary = line_with(&mut out, "summary:");
    assert!(summary.contains("5 clients"), "{summary}");
    let attempts = line_with(&mut out, "attempts:");
    assert!(attempts.contains("attempts: 0 "), "{attempts}");
    assert!(client.0.wait().unwrap().success());
    // The CSV (and its folder) exist, with the header only.
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_status_descriptor_ends_with_the_runs_totals_as_data() {
    let dir = temp_dir("status-totals");
    let status = dir.join("status.jsonl");
    let mut server = ServerChild::start(&[], &["--listen", "127.0.0.1:0", "--base-delay", "5ms"]);
    // The shell opens descriptor 3 on the file, as a supervisor would
    // hand down a pipe.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$0" "$@" --status-fd 3 3>"$STATUS""#)
        .arg(CLIENT)
        .args(["--url", &server.url, "--clients", "20", "--lambda", "50ms"])
        .args(["--report-interval", "200ms", "--duration", "1s"])
        .args(["--seed", "5", "--threads", "1"])
        .env("STATUS", &status)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = std::fs::read_to_string(&status).unwrap();
    let lines: Vec<Status> = text
        .lines()
        .map(|l| Status::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let (last, rows) = lines.split_last().expect("status lines");
    let Status::ClientTotals(totals) = last else {
        panic!("the last line is not the totals: {last:?}");
    };
    assert!(rows.len() >= 3, "{text}");
    assert!(
        rows.iter().all(|s| matches!(s, Status::ClientRow(_))),
        "{text}"
    );
    assert!((0.9..10.0).contains(&totals.elapsed_s), "{totals:?}");
    assert!(totals.tally.ok > 0, "{totals:?}");
    // Every attempt started, none as late as the run was long.
    let late = totals.start_lateness;
    assert!(late.max_ms.is_some_and(|ms| ms < 1000.0), "{late:?}");
    assert_eq!(totals.timer_step_ms, 0.5, "the default step");
    // The same run's totals as the summary prints them.
    let summary = String::from_utf8_lossy(&out.stdout);
    let said = format!("(OK {}, errors {}", totals.tally.ok, totals.tally.errors);
    assert!(summary.contains(&said), "{said} not in {summary}");
    signal(server.pid(), "INT");
    line_with(&mut server.out, "server stopped");
    std::fs::remove_dir_all(&dir).unwrap();
}
