//! `storm sweep --target URL --outage KIND`: the adaptive search of a
//! service's edge with real storms, against the project's own server at
//! an edge the virtual engine knows, and stopped part way with Ctrl-C.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Guard, ServerChild, fresh_path, one_at_a_time, signal};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// The server stood for the user's service: compressed ten times, as the
/// storms are (`--quick`), and cancelling the work of a client that has
/// gone, so that it is calm again at once after a run that stayed down
/// (one that goes on worked off its backlog for a minute at this load).
const SERVER_FLAGS: &[&str] = &[
    "--listen",
    "127.0.0.1:0",
    "--time-scale",
    "10",
    "--on-disconnect",
    "cancel",
];

/// Fixed retries at 2,000 clients against that server: in virtual time
/// its T50 is 4.75 s (4.25-5.25, a sharp edge) and at 1,000 clients it
/// comes back from every pause up to 20 s.
const SETTING: &[&str] = &[
    "--strategies",
    "fixed",
    "--clients",
    "2000",
    "--max-pause",
    "20s",
];

/// The flags of a sweep of `target` through `outage` into `out`, at most
/// `runs` storms.
fn measured(target: &str, outage: &str, runs: &str, out: &Path) -> Command {
    let mut cmd = Command::new(STORM);
    cmd.arg("sweep")
        .args(SETTING)
        .args(["--target", target, "--outage", outage, "--quick"])
        .args(["--calm", "1s", "--max-runs", runs, "--quiet", "--out"])
        .arg(out);
    cmd
}

/// The rows of a CSV file, as header-keyed maps.
fn rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    csv::Reader::from_path(path)
        .unwrap()
        .deserialize()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A number of a row, if the cell holds one.
fn number(row: &std::collections::HashMap<String, String>, column: &str) -> Option<f64> {
    row[column].parse().ok()
}

#[test]
#[ignore = "tier 2, 7 real storms (about 80 s): cargo test -- --ignored"]
fn the_real_search_finds_the_edge_the_virtual_engine_knows_and_keeps_its_runs_on_ctrl_c() {
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], SERVER_FLAGS);
    let sigstop = format!("sigstop={}", server.pid());

    // The edge in virtual time, of the same setting and server.
    let model = fresh_path("sweep-target-model");
    let status = Command::new(STORM)
        .arg("sweep")
        .args(SETTING)
        .args([
            "--server-args",
            "--on-disconnect cancel",
            "--quiet",
            "--out",
        ])
        .arg(&model)
        .status()
        .unwrap();
    assert!(status.success());
    let predicted = number(&rows(&model.join("critical.csv"))[0], "t50_s").unwrap();

    let out = fresh_path("sweep-target");
    let output = measured(&server.url, &sigstop, "6", &out).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let runs = rows(&out.join("runs.csv"));
    assert_eq!(runs.len(), 6, "every storm a row");
    for run in &runs {
        // Each run is a storm of its own, its files kept.
        let summary = out.join(&run["folder"]).join("summary.json");
        assert!(summary.exists(), "{}", summary.display());
    }
    // The edge is sharp: a run against it is rare.
    let against = runs
        .iter()
        .filter(|r| {
            let pause = number(r, "pause_s").unwrap();
            let recovered = r["recovered"] == "true";
            (pause <= predicted - 2.0 && !recovered) || (pause >= predicted + 2.0 && recovered)
        })
        .count();
    assert!(against <= 1, "{against} runs against the edge: {runs:?}");
    let edge = &rows(&out.join("critical.csv"))[0];
    assert_eq!(edge["seeds"], "6");
    assert_eq!(edge["server_limit"], "0", "no project server ran");
    let t50 = number(edge, "t50_s").expect("an edge within the pauses");
    assert!(
        (t50 - predicted).abs() <= 2.5,
        "measured T50 {t50} s against the model's {predicted} s"
    );
    let high = number(edge, "t50_ci_high_s").unwrap_or(f64::INFINITY);
    let low = number(edge, "t50_ci_low_s").unwrap_or(0.0);
    assert!(
        (low..=high).contains(&predicted),
        "{predicted} within {low}-{high}"
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains(&format!("Real storms of the service at {}", server.url)),
        "{summary}"
    );

    // Stopped during a pause after the first storm: that storm ends with
    // the target resumed, and the storms before it stay, with their edge.
    let stopped = fresh_path("sweep-target-stopped");
    let mut sweep = Guard(
        measured(&server.url, &sigstop, "6", &stopped)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while rows_so_far(&stopped.join("runs.csv")) < 1 {
        assert!(Instant::now() < deadline, "no storm ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A pause is a second or less at this compression: looked for often.
    while !is_stopped(server.pid()) {
        assert!(Instant::now() < deadline, "no pause after the first storm");
        std::thread::sleep(Duration::from_millis(2));
    }
    let made = rows_so_far(&stopped.join("runs.csv"));
    signal(sweep.0.id(), "INT");
    let status = sweep.0.wait().unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(&mut sweep.0.stderr.take().unwrap(), &mut said).unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(said.contains("interrupted"), "{said}");
    assert!(!is_stopped(server.pid()), "the target was left stopped");
    assert_eq!(
        rows(&stopped.join("runs.csv")).len(),
        made,
        "the storm stopped not kept"
    );
    let edge = &rows(&stopped.join("critical.csv"))[0];
    assert_eq!(edge["seeds"], made.to_string(), "the edge of the runs made");
    let summary = std::fs::read_to_string(stopped.join("summary.md")).unwrap();
    assert!(summary.contains("Stopped part way"), "{summary}");

    for dir in [model, out, stopped] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// The data rows of a CSV file written so far (none before it exists).
fn rows_so_far(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count().saturating_sub(1))
}

/// Whether any thread of `pid` is stopped.
fn is_stopped(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .any(|stat| stat[stat.rfind(')').unwrap() + 2..].starts_with('T'))
}
