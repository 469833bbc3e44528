//! The conventions of command-line tools that docs/exit-codes.md
//! promises: `--version` on every program and subcommand, and every
//! long-running program stopping in order on SIGINT, whatever disposition
//! it inherited (a terminal's default, or the ignored one that `cargo test
//! &` in a script or nohup hands down).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{CLIENT, Inherited, SERVER, fresh_path, signal};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

#[test]
fn every_program_and_subcommand_says_its_version() {
    let version = env!("CARGO_PKG_VERSION");
    for (bin, args, name) in [
        (SERVER, &[][..], "server"),
        (CLIENT, &[][..], "client"),
        (CLIENT, &["plan"][..], "client-plan"),
        (STORM, &[][..], "storm"),
        (STORM, &["run"][..], "storm-run"),
        (STORM, &["sweep"][..], "storm-sweep"),
        (STORM, &["merge"][..], "storm-merge"),
        (STORM, &["proxy"][..], "storm-proxy"),
        (STORM, &["calibrate"][..], "storm-calibrate"),
    ] {
        for flag in ["--version", "-V"] {
            let out = Command::new(bin).args(args).arg(flag).output().unwrap();
            assert!(out.status.success(), "{name} {flag}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("{name} {version}"),
                "{name} {flag}"
            );
            assert!(out.stderr.is_empty(), "{name} {flag}");
        }
    }
}

/// How a program ended after SIGINT: its status, the rest of its stdout
/// and its stderr.
struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Starts `program` with `args`, SIGINT and SIGTERM inherited as `how`;
/// once its first line (which must start with `first`) is out, sends
/// SIGINT and waits at most 30 s for it to end.
fn interrupted(program: &str, args: &[&str], how: Inherited, first: &str) -> Ended {
    let mut cmd = Command::new(program);
    how.apply(&mut cmd);
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with(first), "{program} {args:?}: {line}");
    signal(child.id(), "INT");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = String::new();
        let _ = out.read_to_string(&mut stdout);
        let output = child.wait_with_output().unwrap();
        let _ = tx.send(Ended {
            status: output.status,
            stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            signal(pid, "KILL");
            panic!("{program} {args:?} ({how:?}) still ran 30 s after SIGINT")
        })
}

#[test]
fn server_client_and_proxy_stop_in_order_on_sigint_whatever_they_inherited() {
    for how in Inherited::BOTH {
        let server = interrupted(SERVER, &["--listen", "127.0.0.1:0"], how, "listening on");
        assert_eq!(server.status.code(), Some(0), "{how:?}: {}", server.stderr);
        assert!(server.stdout.contains("server stopped"), "{how:?}");
        // Nothing listens on the discard port: errors, then the summary.
        let client = interrupted(
            CLIENT,
            &["--url", "http://127.0.0.1:9/api", "--clients", "5"],
            how,
            "5 clients ->",
        );
        assert_eq!(client.status.code(), Some(0), "{how:?}: {}", client.stderr);
        assert!(client.stdout.contains("summary:"), "{how:?}");
        let proxy = interrupted(
            STORM,
            &[
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://127.0.0.1:9/api",
            ],
            how,
            "listening on",
        );
        assert_eq!(proxy.status.code(), Some(0), "{how:?}: {}", proxy.stderr);
        assert!(proxy.stdout.contains("proxy stopped"), "{how:?}");
    }
}

#[test]
fn ctrl_c_stops_a_long_storm_in_virtual_time_between_runs_whatever_it_inherited() {
    for how in Inherited::BOTH {
        let out = fresh_path(&format!("conventions-sim-sigint-{how:?}"));
        let path = out.to_str().unwrap();
        // Hours of runs: only the signal can end it within the test.
        let args = [
            "--engine",
            "sim",
            "--strategies",
            "fixed",
            "--runs",
            "100000",
        ];
        let ended = interrupted(
            STORM,
            &[&args[..], &["--out", path]].concat(),
            how,
            "storm: fixed",
        );
        assert_eq!(ended.status.code(), Some(130), "{how:?}: {}", ended.stderr);
        assert!(
            ended
                .stderr
                .contains("interrupted: the runs made so far written"),
            "{how:?}: {}",
            ended.stderr
        );
        // In order: the scenario and the runs it finished, no summary.
        assert!(out.join("scenario.toml").exists(), "{how:?}");
        assert!(!out.join("summary.md").exists(), "{how:?}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}

#[test]
fn ctrl_c_stops_a_long_sweep_whatever_it_inherited() {
    // The grid, and the adaptive search held to an interval the 2014
    // client's wide edge reaches only after tens of thousands of runs:
    // both run for hours.
    let grid = ["sweep", "--search", "grid", "--seeds", "100000"];
    let adaptive = ["sweep", "--precision", "0.3s", "--max-runs", "100000"];
    for (how, long) in Inherited::BOTH.into_iter().zip([&grid, &adaptive]) {
        let out = fresh_path(&format!("conventions-sweep-sigint-{how:?}"));
        let path = out.to_str().unwrap();
        let args = [&long[..], &["--out", path]].concat();
        let ended = interrupted(STORM, &args, how, "sweep: ");
        assert_eq!(ended.status.code(), Some(130), "{how:?}: {}", ended.stderr);
        assert!(
            ended.stderr.contains("interrupted: nothing written"),
            "{how:?}: {}",
            ended.stderr
        );
        assert!(!out.exists(), "{how:?}: a sweep writes only once done");
    }
}
