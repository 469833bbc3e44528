//! `storm --target URL --outage stall`: the storm against a service it
//! did not start, its outage caused by a fault proxy the storm starts in
//! front of it. The stand-in target is the project's own `server`: a
//! stalled proxy must look to the clients as the target stopped with
//! SIGSTOP does, verdict for verdict, and the runs' figures come from the
//! client and the proxy.

mod common;

use std::path::Path;
use std::process::Command;

use common::{ServerChild, fresh_path, one_at_a_time, summary_json, verdicts};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// Clients that never retry come back from a 6 s pause of the default
/// server, fixed retries do not (tests/target.rs says why in this order).
const SCENARIO: &str = "seed = 2014\n\
    [protocol]\npause = \"6s\"\ntail = \"0s\"\n\
    [[case]]\nname = \"no-retry\"\nclient = \"--strategy fixed --max-attempts 1\"\n\
    [[case]]\nname = \"fixed\"\nclient = \"--strategy fixed\"\n";

/// The server flags the storm gives its own with `--quick`.
const QUICK_SERVER: [&str; 4] = ["--listen", "127.0.0.1:0", "--time-scale", "10"];

/// Storms `target` through `outage`, each case once, into `out`.
fn storm(file: &Path, target: &str, outage: &str, out: &Path) {
    let output = Command::new(STORM)
        .args(["run", file.to_str().unwrap(), "--quick", "--quiet"])
        .args(["--target", target, "--outage", outage, "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{outage}: {output:?}");
}

#[test]
#[ignore = "tier 2, real storms (about 50 s): cargo test -- --ignored"]
fn a_stalled_proxy_gets_the_verdicts_of_the_target_stopped_run_for_run() {
    let _serial = one_at_a_time();
    let dir = fresh_path("target-proxy");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("target.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    // A target of its own for each storm: fixed retries leave the one
    // they stormed overloaded for up to a minute (compressed).
    let (stopped, stalled) = (dir.join("sigstop"), dir.join("stall"));
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let outage = format!("sigstop={}", server.pid());
    storm(&file, &server.url, &outage, &stopped);
    drop(server);
    let server = ServerChild::start(&[], &QUICK_SERVER);
    storm(&file, &server.url, "stall", &stalled);
    let expected = vec![("no-retry".to_string(), true), ("fixed".to_string(), false)];
    assert_eq!(verdicts(&stopped), expected, "the target stopped");
    assert_eq!(verdicts(&stalled), expected, "the proxy stalled");

    let summary = summary_json(&stalled);
    assert_eq!(summary["target"]["outage"], "stall");
    for r in summary["runs"].as_array().unwrap() {
        let proxy = &r["proxy"];
        // The clients went through the proxy, and the target answered.
        assert!(proxy["answers_2xx"].as_u64().unwrap() > 1000, "{r}");
        assert!(proxy["warmup_p50_ms"].as_f64().unwrap() > 5.0, "{r}");
        // The stall held the clients' connections in its listen queue.
        assert!(proxy["peak_queued"].as_u64().unwrap() > 0, "{r}");
        assert!(r["peak_concurrency"].is_null(), "{r}");
    }
    let commands = std::fs::read_to_string(stalled.join("commands.txt")).unwrap();
    assert!(
        commands.contains(" proxy --listen 127.0.0.1:0 --upstream "),
        "{commands}"
    );
    assert!(commands.contains("--fault stall"), "{commands}");
    assert!(stalled.join("fixed.proxy.csv").exists());
    let md = std::fs::read_to_string(stalled.join("summary.md")).unwrap();
    assert!(md.contains("## Through the fault proxy"), "{md}");
    assert!(
        !summary_json(&stopped)["runs"][0]
            .as_object()
            .unwrap()
            .contains_key("proxy")
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}
