//! Open and partly-open traffic on both engines: no request outstanding
//! is lost across a pause, the bound on outstanding sessions refuses and
//! counts, a virtual run is the same twice, and the real network and
//! virtual time agree on a quick storm.

mod common;

use std::time::Duration;

use clap::Parser;
use common::virtual_time::sim_config;
use common::{ServerChild, fresh_path, one_at_a_time, signal, summary_json};
use retry_storm::cli::ClientCli;
use retry_storm::net::client;
use retry_storm::report::summary::ClientSummary;
use retry_storm::sim::{self, Pause};

/// Every session of one request that arrived either ended (succeeded or
/// given up) or is still outstanding at the end.
fn assert_conserved(summary: &ClientSummary) {
    let t = &summary.totals.tally;
    let succeeded = summary.totals.request_latency.len();
    let outstanding = summary.outstanding.expect("open traffic's summary");
    assert_eq!(
        t.arrived,
        succeeded + t.gave_up + outstanding,
        "arrived = succeeded {succeeded} + given up {} + outstanding {outstanding}",
        t.gave_up
    );
}

fn pause(at: u64, length: u64) -> Pause {
    Pause {
        at: Duration::from_secs(at),
        length: Duration::from_secs(length),
    }
}

#[test]
fn no_request_is_lost_across_a_pause_in_virtual_time() {
    for (strategy, limits) in [("fixed", "3"), ("exponential-2014", "100")] {
        let c = sim_config(
            &[],
            &[
                "--arrival-rate",
                "100",
                "--strategy",
                strategy,
                "--max-attempts",
                limits,
                "--duration",
                "90s",
                "--seed",
                "11",
            ],
            vec![pause(20, 20)],
        );
        let out = sim::run(&c).unwrap();
        let t = &out.client.totals.tally;
        assert_conserved(&out.client);
        // 100 a second for 90 s: 9,000 expected, sd 95.
        assert!((t.arrived as f64 - 9_000.0).abs() < 4.0 * 95.0, "{t:?}");
        assert_eq!(t.refused, 0);
        assert!(t.timeouts > 1_000, "{strategy}: the pause shows: {t:?}");
        assert_eq!(t.gave_up > 0, strategy == "fixed", "{t:?}");
        // Rows carry the sessions held: a handful before the pause, the
        // backlog of the pause at its end (fixed retries give a request
        // up some 6 s after it arrived: about 600 held).
        let rows = &out.client.rows;
        assert!(rows[1].outstanding.unwrap() < 50, "{:?}", rows[1]);
        let paused = rows[7].outstanding.unwrap();
        assert!(
            paused > 400,
            "{strategy}: {paused} outstanding in the pause"
        );
        assert_eq!(rows[7].refused_per_s, Some(0.0));
    }
}

#[test]
fn the_bound_on_outstanding_sessions_refuses_at_the_source_and_counts() {
    let c = sim_config(
        &[],
        &[
            "--arrival-rate",
            "100",
            "--max-outstanding",
            "300",
            "--duration",
            "60s",
            "--seed",
            "3",
        ],
        vec![pause(20, 20)],
    );
    let out = sim::run(&c).unwrap();
    let t = &out.client.totals.tally;
    assert_conserved(&out.client);
    // Fixed retries never give up: from 3 s into the pause, every arrival
    // beyond the 300 held is refused, never sent.
    assert!(t.refused > 1_000, "{t:?}");
    assert!((t.arrived + t.refused) as f64 > 6_000.0 - 4.0 * 78.0);
    let rows = &out.client.rows;
    assert!(rows.iter().all(|r| r.outstanding.unwrap() <= 300));
    assert!(rows.iter().any(|r| r.refused_per_s.unwrap() > 50.0));
    assert!(out.client.to_string().contains("refused at the source"));
}

#[test]
fn partly_open_sessions_make_their_requests_and_the_run_is_the_same_twice() {
    let run = || {
        let c = sim_config(
            &[],
            &[
                "--arrival-rate",
                "20",
                "--session-requests",
                "5",
                "--lambda",
                "1",
                "--duration",
                "300s",
                "--seed",
                "8",
            ],
            vec![],
        );
        sim::run(&c).unwrap().client
    };
    let (a, b) = (run(), run());
    assert_eq!(a.rows, b.rows);
    let t = &a.totals.tally;
    // 20 sessions a second of 5 requests each: 100 requests a second, one
    // attempt each (nothing fails), about 6,000 sessions in 300 s.
    assert!((t.arrived as f64 - 6_000.0).abs() < 4.0 * 78.0, "{t:?}");
    let per_session = t.started as f64 / t.arrived as f64;
    assert!((4.7..5.1).contains(&per_session), "{per_session}");
    // A session thinks between requests: about 5 s each, 20 a second, so
    // some 100 are held at any time.
    let held = a.rows[30].outstanding.unwrap();
    assert!((50..160).contains(&held), "{held}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_is_lost_across_a_real_pause() {
    let server = ServerChild::start(&[], &["--listen", "127.0.0.1:0", "--base-delay", "10ms"]);
    let url = server.url.clone();
    let flags = [
        "client",
        "--url",
        &url,
        "--arrival-rate",
        "200",
        "--timeout",
        "200ms",
        "--max-attempts",
        "5",
        "--duration",
        "4s",
        "--report-interval",
        "500ms",
        "--seed",
        "5",
    ];
    let mut config = ClientCli::try_parse_from(flags)
        .unwrap()
        .run
        .config()
        .unwrap();
    config.quiet = true;
    let pid = server.pid();
    // The pause is the experiment's schedule, not a wait for anything:
    // the check below holds whenever it falls.
    let pauser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        signal(pid, "STOP");
        std::thread::sleep(Duration::from_millis(1500));
        signal(pid, "CONT");
    });
    let summary = client::run(config, std::future::pending()).await.unwrap();
    pauser.join().unwrap();
    let t = &summary.totals.tally;
    assert_conserved(&summary);
    assert!(t.arrived > 400, "{t:?}");
    assert!(t.timeouts > 0, "the pause shows: {t:?}");
    assert!(summary.totals.request_latency.len() > 200, "{t:?}");
    assert!(summary.rows.iter().all(|r| r.outstanding.is_some()));
}

#[test]
fn a_quick_storm_of_open_traffic_agrees_on_both_engines() {
    let _serial = one_at_a_time();
    let flags = [
        "--strategies",
        "fixed,exponential-2014",
        "--runs",
        "1",
        "--tail",
        "0s",
        "--client-args",
        "--arrival-rate 100",
        "--quiet",
    ];
    let mut summaries = Vec::new();
    for engine in ["real", "sim"] {
        let out = fresh_path(&format!("open-storm-{engine}"));
        let mut storm = common::command(env!("CARGO_BIN_EXE_storm"));
        if engine == "real" {
            storm.arg("--quick");
        }
        let status = storm
            .args(["--engine", engine])
            .args(flags)
            .arg("--out")
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success(), "{engine}");
        summaries.push(summary_json(&out));
        std::fs::remove_dir_all(&out).unwrap();
    }
    // Open traffic keeps arriving at 100 a second through the pause and
    // after it: neither policy brings the server back, on either engine.
    for (engine, s) in ["real", "sim"].iter().zip(&summaries) {
        let cases = s["cases"].as_array().unwrap();
        for case in cases {
            assert_eq!(case["recovered_runs"], 0, "{engine}: {case}");
        }
    }
    // The 2014 client's amplification, the same seed on both engines.
    let amplification = |s: &serde_json::Value| {
        s["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["case"] == "exponential-2014")
            .unwrap()["amplification"]
            .as_f64()
            .unwrap()
    };
    let (real, sim) = (amplification(&summaries[0]), amplification(&summaries[1]));
    assert!((real / sim - 1.0).abs() < 0.25, "real {real}, sim {sim}");
}
