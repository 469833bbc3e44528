//! Fixed retries through a pause over HTTP/1.1 and over HTTP/2, on the
//! real network against the project's own server (hyper): over HTTP/1.1
//! the retries pile up and the server never comes back; over HTTP/2 the
//! server answers each connection that holds more than 20 streams reset
//! before it accepted them with GOAWAY `ENHANCE_YOUR_CALM` at the resume,
//! closing it with the retries still unread in its socket, and comes back
//! at once; with that defence lifted (`--max-pending-resets`) it reads
//! them all and stays down, as over HTTP/1.1. The virtual engine predicts
//! the same three verdicts (docs/protocols.md, "HTTP/2 beside HTTP/1.1,
//! measured"; results/http2/).

mod common;

use std::path::Path;
use std::process::Command;

use common::{fresh_path, one_at_a_time, summary_json, temp_dir};
use retry_storm::report::rows::ClientRow;

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// The pair of scenarios/http2.toml for fixed retries, without the tail
/// that only the recovery chart reads.
const PAIR: &str = r#"seed = 2014

[protocol]
warmup = "20s"
pause = "20s"
observe = "1m"
tail = "0s"
report_interval = "5s"

[[case]]
name = "fixed-h1"
client = "--strategy fixed"

[[case]]
name = "fixed-h2"
client = "--strategy fixed --http2"

[[case]]
name = "fixed-h2-unguarded"
server = "--max-pending-resets 1000000"
client = "--strategy fixed --http2"
"#;

fn client_rows(path: &Path) -> Vec<ClientRow> {
    csv::Reader::from_path(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .deserialize()
        .collect::<Result<Vec<ClientRow>, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
#[ignore = "tier 2, three real storms (about 40 s): cargo test -- --ignored"]
fn a_hyper_server_drops_an_http2_storm_at_the_resume_and_not_an_http1_one() {
    let _serial = one_at_a_time();
    let dir = temp_dir("http2-storm");
    let file = dir.join("pair.toml");
    std::fs::write(&file, PAIR).unwrap();
    let out = fresh_path("http2-storm-out");
    // In turn: side by side, two storms compressed ten times on two cores
    // measure the machine as much as the protocol.
    let status = Command::new(STORM)
        .args([
            "run",
            file.to_str().unwrap(),
            "--quick",
            "--in-turn",
            "--quiet",
        ])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());

    let summary = summary_json(&out);
    let runs = summary["runs"].as_array().unwrap();
    let run = |case: &str| runs.iter().find(|r| r["case"] == case).unwrap();
    let (h1, h2) = (run("fixed-h1"), run("fixed-h2"));
    let unguarded = run("fixed-h2-unguarded");
    assert_eq!(h1["recovered"], false, "{h1}");
    assert_eq!(h2["recovered"], true, "{h2}");
    assert_eq!(unguarded["recovered"], false, "{unguarded}");
    // At full time the HTTP/1.1 server held some 37,000 requests at its
    // peak, the HTTP/2 one about 900 (the users' retries on new
    // connections after the GOAWAY; results/http2/); a factor of 4 leaves
    // room for a loaded machine.
    let peak = |r: &serde_json::Value| r["peak_concurrency"].as_u64().unwrap();
    assert!(peak(h2) * 4 < peak(h1), "{} against {}", peak(h2), peak(h1));
    assert!(peak(h2) * 4 < peak(unguarded), "{unguarded}");

    // The GOAWAY fails the streams still open on the closed connections:
    // errors, which a stopped server never gives over HTTP/1.1.
    let errors = |case: &str| -> f64 {
        client_rows(&out.join(format!("{case}.client.csv")))
            .iter()
            .map(|r| r.errors_per_s)
            .sum()
    };
    assert_eq!(errors("fixed-h1"), 0.0);
    assert!(errors("fixed-h2") > 0.0);
    assert_eq!(errors("fixed-h2-unguarded"), 0.0);

    // The virtual engine, one run a case: the same verdicts.
    let sim = fresh_path("http2-storm-sim");
    let status = Command::new(STORM)
        .args(["run", file.to_str().unwrap(), "--engine", "sim", "--quiet"])
        .arg("--out")
        .arg(&sim)
        .status()
        .unwrap();
    assert!(status.success());
    let predicted = summary_json(&sim);
    for r in predicted["runs"].as_array().unwrap() {
        let case = r["case"].as_str().unwrap();
        assert_eq!(r["recovered"], run(case)["recovered"], "{case}: {r}");
    }
    std::fs::remove_dir_all(&sim).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
