//! The burst probe against the project's own `server`, started here with
//! each kind of queue a pool can have: the listen backlog, whose full
//! queue drops SYNs; an application queue that refuses past its places;
//! and one that holds the whole burst. Each is told apart and its size
//! read back, and `storm calibrate` writes the one it found into the twin.

mod common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{ServerChild, fresh_path};
use retry_storm::model::fit::queue::{Listen, Queue, classify, taken_in};
use retry_storm::model::wire::{Transport, Wire};
use retry_storm::net::probe::{BurstConfig, BurstProbe, burst};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// A pool of 2 workers of 50 ms (500 ms divided by ten) with `queue`'s
/// flags, its report lines rare.
fn pool(queue: &[&str]) -> ServerChild {
    let shape = [
        "--model",
        "pool",
        "--workers",
        "2",
        "--service-time",
        "500ms",
        "--service-distribution",
        "constant",
    ];
    ServerChild::quick(&[&shape[..], queue].concat())
}

fn config(target: &str, transport: Transport) -> BurstConfig {
    BurstConfig {
        target: target.to_string(),
        wire: Wire {
            transport,
            ..Wire::default()
        },
        connections: 64,
        hold: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
    }
}

/// A burst of 64 against a pool with `queue`'s flags, and the queue it
/// shows with the pool's 2 workers in service.
fn burst_of(queue: &[&str]) -> (BurstProbe, Queue) {
    let server = pool(queue);
    let probe = burst(
        &config(&server.url, Transport::Http1),
        &AtomicBool::new(false),
    )
    .unwrap();
    let found = classify(&probe.tally, 2, probe.finished, probe.listen);
    eprintln!("{queue:?}: {probe:?}: {found:?}");
    assert_eq!(probe.tally.total(), 64);
    (probe, found)
}

#[test]
fn a_full_listen_backlog_drops_syns_and_shows_its_depth() {
    let (probe, found) = burst_of(&["--queue", "backlog", "--backlog", "16"]);
    // The kernel tells the listen queue it keeps, and that is the depth.
    let told = Listen {
        listeners: 1,
        backlog: 16,
    };
    assert_eq!(probe.listen, Some(told), "{probe:?}");
    assert_eq!(found, Queue::Backlog { depth: 16 }, "{probe:?}");
    // Counted, Linux lets backlog + 1 wait, and the workers may have
    // taken their two in before the burst's connects were done: none
    // taken in beyond the workers.
    let Queue::Backlog { depth } = classify(&probe.tally, 2, probe.finished, None) else {
        panic!("{probe:?}");
    };
    assert!((16..=18).contains(&depth), "{depth}");
    let taken = taken_in(&probe.tally, 2, probe.finished, probe.listen);
    assert!(taken.is_some_and(|n| n <= 2), "{taken:?}");
    assert!(probe.tally.dropped >= 44, "{probe:?}");
    assert_eq!(probe.tally.refused, 0, "{probe:?}");
}

#[test]
fn an_application_queue_refuses_past_its_places() {
    let (probe, found) = burst_of(&["--queue", "8"]);
    assert_eq!(found, Queue::Refuses { places: 8 }, "{probe:?}");
    assert_eq!(probe.tally.dropped, 0, "{probe:?}");
}

#[test]
fn a_queue_longer_than_the_burst_holds_it_all() {
    let (probe, found) = burst_of(&["--queue", "1000"]);
    assert_eq!(found, Queue::Holds { places: 62 }, "{probe:?}");
}

#[test]
fn over_http2_the_burst_is_refused() {
    let server = pool(&[]);
    let e = burst(
        &config(&server.url, Transport::Http2),
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("HTTP/1.1 only"), "{e}");
}

#[test]
fn calibrate_writes_the_backlog_it_found_into_the_twin() {
    let server = pool(&["--queue", "backlog", "--backlog", "16"]);
    let out = fresh_path("burst-calibrate");
    let output = std::process::Command::new(STORM)
        .args(["calibrate", "--target", &server.url, "--quick"])
        .args(["--levels", "1,2,4,8", "--level-warmup", "300ms", "--hold"])
        .args([
            "700ms",
            "--no-gone",
            "--no-predict",
            "--burst",
            "64",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let twin = std::fs::read_to_string(out.join("twin.toml")).unwrap();
    assert!(twin.contains("--queue backlog --backlog 1"), "{twin}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap())
            .unwrap();
    assert_eq!(record["queue"]["queue"]["kind"], "backlog", "{record}");
    assert_eq!(record["queue"]["serving"], 2, "{record}");
    let md = std::fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(
        md.contains("Where requests wait (the burst): **the listen backlog"),
        "{md}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}
