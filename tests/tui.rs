//! The live view (`--tui`) of each program, driven through a
//! pseudo-terminal as a user would drive it (tests/common/pty.rs: a
//! terminal emulator, nothing to install): the screen holds the charts and
//! the figures, `q` ends the run exactly as Ctrl-C does (the summary
//! printed on the terminal given back, the CSV written, a storm's children
//! stopped in order, the same exit code), and without a terminal `--tui`
//! is refused. Time-compressed: a few seconds each.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::pty::{Pty, Shown};
use common::{CLIENT, Guard, SERVER, ServerChild, fresh_path, signal, temp_dir};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// The screen, once a line holding `label` shows a figure (a digit after
/// the label).
fn figure(label: &'static str) -> impl FnMut(&Shown) -> Option<String> {
    move |shown| {
        let screen = shown.parser.screen().contents();
        let shows = screen.lines().any(|line| {
            line.find(label).is_some_and(|at| {
                line[at + label.len()..]
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_digit())
            })
        });
        shows.then_some(screen)
    }
}

#[test]
fn the_client_view_shows_its_charts_and_q_prints_the_summary() {
    let server = ServerChild::start(&[], &["--listen", "127.0.0.1:0"]);
    let dir = temp_dir("tui-client");
    let csv = dir.join("client.csv");
    let mut pty = Pty::spawn(
        CLIENT,
        &[
            "--tui",
            "--url",
            &server.url,
            "--clients",
            "50",
            "--lambda",
            "100ms",
            "--report-interval",
            "200ms",
            "--duration",
            "5m",
            "--seed",
            "7",
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[("NO_COLOR", "1")],
        110,
        34,
    );
    pty.wait_for_text(&[
        "attempts per second",
        "attempts in flight",
        "⠒ OK",
        "x errors",
        "+ timeouts",
        "50 clients ->",
    ]);
    let screen = pty.wait_for("a latency figure", figure("latency p99"));
    assert!(screen.contains("left"), "the time left: {screen}");
    pty.wait_for("an OK rate", figure("OK"));
    assert!(!pty.coloured(), "NO_COLOR leaves no colour");
    pty.keys("q");
    let (status, screen, alternate) = pty.wait_end();
    assert!(status.success(), "{status}: {screen}");
    assert!(!alternate, "the terminal is given back");
    assert!(
        screen.contains("50 clients ->") && screen.contains("summary:"),
        "{screen}"
    );
    assert!(screen.contains("attempt latency (OK): p50"), "{screen}");
    assert!(
        !screen.contains("in-flight:"),
        "no report lines under the view: {screen}"
    );
    // At least the row whose figures were on the screen.
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert!(rows.lines().count() >= 2, "the CSV has its rows: {rows}");
}

#[test]
fn the_server_view_shades_a_stop_and_q_prints_the_summary() {
    let mut pty = Pty::spawn(
        SERVER,
        &[
            "--tui",
            "--listen",
            "127.0.0.1:0",
            "--report-interval",
            "250ms",
        ],
        &[],
        110,
        34,
    );
    let screen = pty.wait_for_text(&[
        "server concurrency",
        "server answers per second",
        "⠒ completed",
        "last interval",
    ]);
    let url = screen
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the address in the header")
        .trim_end_matches(':')
        .to_string();
    let client = Command::new(CLIENT)
        .args(["--url", &url, "--clients", "50", "--lambda", "100ms"])
        .args(["--duration", "1m", "--seed", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _client = Guard(client);
    pty.wait_for("answers", |shown| {
        let screen = shown.parser.screen().contents();
        screen
            .lines()
            .any(|l| l.contains("completed     ") && !l.contains("completed     0.00"))
            .then_some(())
    });
    let before = pty.wait_for_text(&["server concurrency"]);
    assert!(
        !before.contains("░ stopped"),
        "nothing shaded yet: {before}"
    );
    // Stopped for a while, as Ctrl-Z or a storm would: the sleep is the
    // length of the stop, not a wait for anything.
    signal(pty.pid(), "STOP");
    std::thread::sleep(Duration::from_secs(1));
    signal(pty.pid(), "CONT");
    pty.wait_for_text(&["░ stopped"]);
    assert!(pty.coloured(), "colour without NO_COLOR");
    pty.keys("q");
    let (status, screen, alternate) = pty.wait_end();
    assert!(status.success(), "{status}: {screen}");
    assert!(!alternate);
    assert!(
        screen.contains("listening on http://127.0.0.1:"),
        "{screen}"
    );
    assert!(screen.contains("server stopped: completed"), "{screen}");
    assert!(
        !screen.contains("last delay:"),
        "no report lines under the view: {screen}"
    );
}

#[test]
fn the_storm_view_follows_the_phases_and_q_stops_it_as_ctrl_c_does() {
    let out = fresh_path("tui-storm");
    let mut pty = Pty::spawn(
        STORM,
        &[
            "--tui",
            "--quick",
            "--strategies",
            "fixed,exponential-2014",
            "--warmup",
            "20s",
            "--pause",
            "30s",
            "--observe",
            "30s",
            "--tail",
            "0s",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
        120,
        40,
    );
    pty.wait_for_text(&[
        "fixed: attempts per second",
        "fixed: server concurrency",
        "verdict so far",
        "batch 1 of 1",
    ]);
    pty.wait_for_text(&["pause, ", "░ paused", "paused: baseline"]);
    pty.wait_for("the baseline", figure("baseline"));
    pty.wait_for("the concurrency", figure("concurrency"));
    pty.keys("\t");
    pty.wait_for_text(&["exponential-2014: attempts per second"]);
    pty.keys("q");
    let (status, screen, alternate) = pty.wait_end();
    assert_eq!(status.code(), Some(130), "{screen}");
    assert!(!alternate);
    assert!(
        screen.contains("interrupted: every server resumed and stopped"),
        "{screen}"
    );
    for run in ["fixed", "exponential-2014"] {
        let log = std::fs::read_to_string(out.join(format!("{run}.server.log"))).unwrap();
        assert!(
            log.contains("server stopped:"),
            "{run}: stopped in order: {log}"
        );
        let rows = std::fs::read_to_string(out.join(format!("{run}.client.csv"))).unwrap();
        assert!(rows.lines().count() > 2, "{run}: rows written: {rows}");
    }
}

#[test]
fn a_tier_view_shows_its_calls_inward_and_a_storm_its_tiers() {
    // A server run by hand as a tier of a chain, in front of a backend.
    let backend = ServerChild::start(&[], &["--listen", "127.0.0.1:0", "--base-delay", "5ms"]);
    let mut pty = Pty::spawn(
        SERVER,
        &[
            "--tui",
            "--listen",
            "127.0.0.1:0",
            "--base-delay",
            "5ms",
            "--report-interval",
            "250ms",
            "--call",
            &backend.url,
        ],
        &[],
        110,
        40,
    );
    let screen = pty.wait_for_text(&["server concurrency", "last interval"]);
    let url = screen
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the address in the header")
        .trim_end_matches(':')
        .to_string();
    let client = Command::new(CLIENT)
        .args(["--url", &url, "--clients", "20", "--lambda", "50ms"])
        .args(["--duration", "1m", "--seed", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _client = Guard(client);
    pty.wait_for_text(&["calls inward", "callers gone"]);
    pty.wait_for("the calls' OK rate", figure("OK"));
    pty.keys("q");
    let (status, screen, _) = pty.wait_end();
    assert!(status.success(), "{status}: {screen}");
    assert!(screen.contains("server stopped: completed"), "{screen}");

    // A storm through a chain of one tier: the tier's figures as they come.
    let dir = temp_dir("tui-chain");
    let file = dir.join("chain.toml");
    std::fs::write(
        &file,
        r#"
seed = 3
[protocol]
warmup = "20s"
pause = "30s"
observe = "30s"
tail = "0s"

[[case]]
name = "chain"
client = "--strategy fixed --clients 50"
[[case.tier]]
server = "--base-delay 5ms"
client = "--strategy fixed --max-attempts 2"
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let mut pty = Pty::spawn(
        STORM,
        &[
            "run",
            file.to_str().unwrap(),
            "--tui",
            "--quick",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
        140,
        50,
    );
    pty.wait_for_text(&["tiers: conc./calls", "tier 1        concurrency"]);
    pty.wait_for("the tier's calls", figure("in flight"));
    pty.keys("q");
    let (status, screen, _) = pty.wait_end();
    assert_eq!(status.code(), Some(130), "{screen}");
    let log = std::fs::read_to_string(out.join("chain.tier-1.server.log")).unwrap();
    assert!(log.contains("server stopped:"), "stopped in order: {log}");
}

#[test]
fn without_a_terminal_tui_is_refused() {
    let out = fresh_path("tui-refused");
    let out_flag = out.to_str().unwrap();
    for args in [
        vec![SERVER, "--tui", "--listen", "127.0.0.1:0"],
        vec![CLIENT, "--tui", "--duration", "1s"],
        vec![STORM, "--tui", "--quick", "--out", out_flag],
        vec![STORM, "--tui", "--engine", "sim", "--out", out_flag],
    ] {
        let output = Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
        let why = if args.contains(&"sim") {
            "--tui watches a storm on the real engine"
        } else {
            "--tui draws on a terminal, and stdout is not one"
        };
        assert!(
            stderr.starts_with("error: ") && stderr.contains(why),
            "{args:?}: {stderr}"
        );
    }
    assert!(!out.exists(), "nothing ran");
}

#[test]
fn no_color_takes_the_colour_out_of_errors_too() {
    // clap colours a usage error on a terminal, unless NO_COLOR says not.
    for (env, colour) in [(&[][..], true), (&[("NO_COLOR", "1")][..], false)] {
        let pty = Pty::spawn(CLIENT, &["--bogus"], env, 80, 12);
        pty.wait_for("the end", |shown| shown.ended.then_some(()));
        assert_eq!(pty.coloured(), colour, "{env:?}");
        let (status, screen, _) = pty.wait_end();
        assert_eq!(status.code(), Some(2), "{screen}");
        assert!(
            screen.contains("error: unexpected argument '--bogus'"),
            "{screen}"
        );
    }
}

#[test]
fn repeated_runs_show_a_progress_bar_on_a_terminal_unless_quiet() {
    let out = fresh_path("tui-progress");
    let out_flag = out.to_str().unwrap();
    for quiet in [false, true] {
        let mut args = vec!["--engine", "sim", "--strategies", "fixed", "--runs", "12"];
        // The second run takes the first's folder.
        args.extend(["--replace", "--out", out_flag]);
        if quiet {
            args.push("--quiet");
        }
        let pty = Pty::spawn(STORM, &args, &[], 120, 30);
        pty.wait_for("the end", |shown| shown.ended.then_some(()));
        let raw = pty.wait_for("the output", |shown| {
            Some(String::from_utf8_lossy(&shown.raw).into_owned())
        });
        let (status, screen, _) = pty.wait_end();
        assert!(status.success(), "{screen}");
        assert_eq!(raw.contains("/12 runs · "), !quiet, "{raw}");
        assert!(screen.contains("| fixed | 12 |"), "the table: {screen}");
        assert!(!screen.contains("runs · "), "the bar cleared: {screen}");
    }
}
