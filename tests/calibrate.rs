//! `storm calibrate`, the whole loop on loopback, compressed: the
//! project's own server at a shape the calibration is not told (a pool of
//! 20 workers at 100 ms, run ten times faster), probed, fitted, written
//! as a twin, swept, and checked by storms against the server through the
//! storm's fault proxy.

mod common;

use std::path::Path;
use std::process::Command;

use common::calibration::POOL;
use common::{ServerChild, fresh_path, one_at_a_time};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

fn calibrate(target: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    common::calibration::calibrate(STORM, target, out, extra)
}

fn json(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap()
}

#[test]
#[ignore = "tier 2, the whole calibration against a real server, its check's storms included (about 50 s): cargo test -- --ignored"]
fn a_hidden_pool_is_probed_fitted_predicted_and_checked() {
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], &POOL);
    let out = fresh_path("calibrate-loop");
    let output = calibrate(
        &server.url,
        &out,
        &[
            "--strategies",
            "fixed",
            "--seeds",
            "4",
            "--max-pause",
            "20s",
            "--verify",
            "--verify-runs",
            "1",
        ],
    );
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    let record = json(&out);

    // The probe: every level, each answered without errors, the service
    // (not the prober) setting the pace.
    let levels = record["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 8, "{said}");
    for level in levels {
        assert_eq!(level["error_share"], 0.0, "{level}");
        let little = level["little_ratio"].as_f64().unwrap();
        assert!((0.8..1.2).contains(&little), "{level}");
    }
    // The fit: the pool, at full scale, near its hidden parameters.
    let fits = &record["fits"];
    let best = &fits["shapes"][fits["best"].as_u64().unwrap() as usize]["twin"];
    assert_eq!(best["shape"], "pool", "{fits}");
    let workers = best["workers"].as_u64().unwrap();
    assert!((16..=24).contains(&workers), "{best}");
    let flags = record["twin_flags"].as_str().unwrap();
    assert!(flags.starts_with("--model pool --workers"), "{flags}");
    // The gone probe: the server goes on with work for clients that have
    // gone (its default), so the twin keeps it.
    assert_eq!(record["gone"]["verdict"], "continues", "{}", record["gone"]);
    // The burst: 5,000 requests at once against a queue of 1,000 places
    // that refuses past them, beside the workers in service.
    let queue = &record["queue"];
    assert_eq!(queue["queue"]["kind"], "refuses", "{queue}");
    let places = queue["queue"]["places"].as_u64().unwrap();
    // What the pool finished while the burst arrived is taken off.
    assert!((950..=1050).contains(&places), "{queue}");
    assert!(flags.contains(&format!("--queue {places}")), "{flags}");

    // The twin: a scenario the storm reads, with the user's load.
    let twin = std::fs::read_to_string(out.join("twin.toml")).unwrap();
    assert!(twin.contains("--clients 1000 --timeout 2s"), "{twin}");
    assert!(twin.contains(flags), "{twin}");
    let run = Command::new(STORM)
        .args(["run", out.join("twin.toml").to_str().unwrap()])
        .args(["--dump-scenario"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");

    // The prediction: a T50 for fixed retries, and the checks at pauses
    // around it, each with the twin's share and the server's.
    let predictions = record["predictions"].as_array().unwrap();
    assert_eq!(predictions.len(), 1);
    assert!(
        predictions[0]["t50_s"].as_f64().is_some(),
        "{predictions:?}"
    );
    assert!(out.join("predict/critical.csv").exists());
    let checks = record["checks"].as_array().unwrap();
    assert!((2..=3).contains(&checks.len()), "{checks:?}");
    for check in checks {
        assert_eq!(check["measured_runs"], 1, "{check}");
        assert_eq!(check["predicted_runs"], 4, "{check}");
        let pause = check["pause_s"].as_f64().unwrap();
        let folder = out.join(format!("verify/fixed.pause-{pause}s"));
        assert!(folder.join("summary.json").exists(), "{}", folder.display());
    }
    let csv = std::fs::read_to_string(out.join("verify.csv")).unwrap();
    assert_eq!(csv.lines().count(), checks.len() + 1, "{csv}");
    assert!(
        csv.starts_with("case,pause_s,") && csv.lines().next().unwrap().ends_with(",holds,overlap"),
        "{csv}"
    );
    for file in ["levels.csv", "calibration.md", "fit.svg"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_service_that_does_not_answer_is_refused_with_its_levels_kept() {
    // A port nothing listens on: every request of the first level fails.
    let port = common::unowned_port();
    let out = fresh_path("calibrate-refused");
    let output = calibrate(
        &format!("http://127.0.0.1:{port}/"),
        &out,
        &["--no-predict"],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot be fitted"), "{stderr}");
    let record = json(&out);
    assert_eq!(record["levels"].as_array().unwrap().len(), 1, "{record}");
    assert_eq!(record["levels"][0]["error_share"], 1.0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_levels_are_refused_before_any_probe() {
    let out = fresh_path("calibrate-bad-levels");
    let output = Command::new(STORM)
        .args([
            "calibrate",
            "--target",
            "http://127.0.0.1:9/",
            "--levels",
            "4,2",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--levels 4,2: must rise"), "{stderr}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn ctrl_c_keeps_the_levels_measured() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], &POOL);
    let out = fresh_path("calibrate-interrupted");
    let child = common::command(STORM)
        .args(["calibrate", "--target", &server.url, "--quick", "--out"])
        .arg(&out)
        .args([
            "--levels",
            "1,2,4,8",
            "--level-warmup",
            "100ms",
            "--hold",
            "200ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = common::Guard(child);
    let mut lines = BufReader::new(guard.0.stdout.take().unwrap()).lines();
    // The second level's start: the first is measured and written.
    for line in lines.by_ref() {
        if line.unwrap().starts_with("probe: 2 client(s), ") {
            break;
        }
    }
    common::signal(guard.0.id(), "INT");
    let status = guard.0.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status}");
    let record = json(&out);
    let levels = record["levels"].as_array().unwrap();
    assert!(!levels.is_empty() && levels.len() < 4, "{record}");
    assert_eq!(levels[0]["concurrency"], 1);
    assert_eq!(record["probe_end"], "interrupted");
    let csv = std::fs::read_to_string(out.join("levels.csv")).unwrap();
    assert_eq!(csv.lines().count(), levels.len() + 1, "{csv}");
    let _ = std::fs::remove_dir_all(&out);
}
