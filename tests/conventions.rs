//! The conventions of command-line tools that docs/exit-codes.md
//! promises: `--version` on every program and subcommand, and Ctrl-C
//! ending long work in virtual time at once.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{CLIENT, Guard, SERVER, fresh_path, signal};

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

#[test]
fn ctrl_c_ends_a_long_storm_in_virtual_time_at_once() {
    let out = fresh_path("conventions-sim-sigint");
    // Hours of runs: only the signal can end it within the test.
    let mut child = Command::new(STORM)
        .args([
            "--engine",
            "sim",
            "--strategies",
            "fixed",
            "--runs",
            "100000",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("storm: fixed"), "{first}");
    signal(child.id(), "INT");
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    let guard = Guard(child);
    std::thread::spawn(move || {
        let mut guard = guard;
        let _ = tx.send(guard.0.wait());
    });
    let status = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            signal(pid, "KILL");
            panic!("storm {pid} still ran 30 s after SIGINT")
        })
        .unwrap();
    assert_eq!(status.signal(), Some(2), "ended by SIGINT: {status}");
}
