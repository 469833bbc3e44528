//! The `server` and `client` binaries as a user runs them: bad input, a port
//! in use, and an orderly stop on SIGINT with nothing lost.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

const SERVER: &str = env!("CARGO_BIN_EXE_server");
const CLIENT: &str = env!("CARGO_BIN_EXE_client");

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
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_refused(SERVER, &["--listen", &addr], "already in use");
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

/// Kills the child if the test ends early.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Reads lines until one contains `needle`, returning it. The processes
/// under test are bounded in time, so their output ends.
fn line_with(reader: &mut BufReader<ChildStdout>, needle: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "output ended before a line with {needle:?}");
        if line.contains(needle) {
            return line;
        }
    }
}

#[test]
fn sigint_prints_the_summary_flushes_the_csv_and_exits_0() {
    let dir = std::env::temp_dir().join(format!("retry-storm-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("client.csv");

    let mut server = Guard(
        Command::new(SERVER)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--base-delay",
                "5ms",
                "--report-interval",
                "100ms",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut server_out = BufReader::new(server.0.stdout.take().unwrap());
    let banner = line_with(&mut server_out, "listening on");
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches(':')
        .to_string();

    let mut client = Guard(
        Command::new(CLIENT)
            .args(["--url", &url, "--clients", "20", "--lambda", "50ms"])
            .args([
                "--report-interval",
                "100ms",
                "--duration",
                "60s",
                "--seed",
                "3",
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

    interrupt(&server.0);
    line_with(&mut server_out, "server stopped");
    assert_eq!(server.0.wait().unwrap().code(), Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}
