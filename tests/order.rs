//! The order probe against the project's own `server`, started here as a
//! pool (first come, first served) and as a linear curve (its one delay
//! shared by every request in flight): requests sent at once come back in
//! waves from the one and together from the other, and `storm calibrate`
//! makes a pool of one worker, which a closed loop fits as well by a
//! linear curve, the twin's pool.

mod common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{LINEAR_CURVE, ServerChild, fresh_path};
use retry_storm::model::fit::order::{Batch, Order, order};
use retry_storm::model::wire::Wire;
use retry_storm::net::probe::{BatchConfig, batch};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// The project's pool of `workers` at a constant `service_time`, both
/// divided by ten.
fn pool(workers: &str, service_time: &str) -> ServerChild {
    ServerChild::quick(&[
        "--model",
        "pool",
        "--workers",
        workers,
        "--service-time",
        service_time,
        "--service-distribution",
        "constant",
    ])
}

/// Two batches of 16 at once against `server`, and what they tell.
fn order_of(server: &ServerChild) -> (Order, f64) {
    let probe = batch(
        &BatchConfig {
            target: server.url.clone(),
            wire: Wire::default(),
            requests: 16,
            batches: 2,
            timeout: Duration::from_secs(5),
        },
        &AtomicBool::new(false),
    )
    .unwrap();
    eprintln!("{probe:?}");
    assert_eq!(probe.latencies_s.len(), 2);
    for latencies in &probe.latencies_s {
        assert_eq!(latencies.len(), 16, "every request answered: {probe:?}");
    }
    let batches: Vec<Batch> = probe
        .latencies_s
        .into_iter()
        .map(|answered| Batch { answered, sent: 16 })
        .collect();
    let told = order(&batches, probe.baseline_s, 5.0).unwrap();
    eprintln!("{told:?}");
    told
}

#[test]
fn a_pool_answers_requests_sent_at_once_in_waves() {
    // Two workers of 20 ms: eight waves, 20 to 160 ms; the 25th
    // percentile's answer in the second (40 ms), the 90th's in the last,
    // each less the lone request's 20 ms: 20 / 140.
    let pool = pool("2", "200ms");
    let (seen, spread) = order_of(&pool);
    assert_eq!(seen, Order::Waves, "{spread}");
    assert!((0.05..0.3).contains(&spread), "{spread}");
}

#[test]
fn a_curve_answers_requests_sent_at_once_together() {
    // 10 ms + 2 ms a request in flight: 16 at once, each 42 ms.
    let curve = ServerChild::quick(&LINEAR_CURVE);
    let (seen, spread) = order_of(&curve);
    assert_eq!(seen, Order::Together, "{spread}");
}

#[test]
fn calibrate_makes_a_pool_of_one_worker_a_pool() {
    // An event loop's CPU work, 5 ms a request one at a time: a closed
    // loop measures N times 5 ms, which a linear curve fits as well.
    let pool = pool("1", "50ms");
    let out = fresh_path("order-calibrate");
    let output = std::process::Command::new(STORM)
        .args(["calibrate", "--target", &pool.url, "--quick"])
        .args(["--levels", "1,2,4,8,16", "--level-warmup", "300ms"])
        .args(["--hold", "700ms", "--no-gone", "--no-predict", "--burst"])
        .args(["0", "--batches", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap())
            .unwrap();
    assert_eq!(record["order"]["order"], "waves", "{record}");
    assert_eq!(record["order"]["requests"], 16, "{record}");
    let twin = std::fs::read_to_string(out.join("twin.toml")).unwrap();
    let md = std::fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(twin.contains("--model pool --workers 1 "), "{twin}\n{md}");
    assert!(
        md.contains("Requests sent at once (the order probe): **in waves"),
        "{md}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}
