//! Service chains on the real network: tiers are real servers on
//! 127.0.0.1 whose handlers call the next tier with the client's own user
//! state machine; the client at the front is the real client. The same in
//! virtual time: tests/sim_chain.rs.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::running::{Running, client_config, model, ms};
use common::scrape::{get as sample, scrape, scrape_as};
use retry_storm::model::arrivals::ThinkTime;
use retry_storm::model::client::ClientConfig;
use retry_storm::model::server::{Failing, OnDisconnect, ServerConfig, Shedding};
use retry_storm::model::tier::TierCall;
use retry_storm::net::client;
use retry_storm::net::metrics::MetricsEndpoint;
use retry_storm::net::server::Server;
use retry_storm::policy::{RetryLimits, Strategy};
use retry_storm::report::metrics::ServerExposition;
use retry_storm::report::status::{Status, StatusSink};
use retry_storm::report::summary::{ClientSummary, ServerSummary};
use tokio::sync::oneshot;

/// A server on an ephemeral port, quiet, with a `base` delay.
fn server(base: Duration) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        model: model(base),
        backlog: 1024,
        report_interval: ms(50),
        timer_resolution: Duration::ZERO,
        quiet: true,
        ..ServerConfig::default()
    }
}

/// A backend refusing every request at once (nothing in flight is ever
/// under a threshold of 0), with no `Retry-After` worth waiting for.
fn refusing() -> ServerConfig {
    ServerConfig {
        shed: Some(Shedding {
            above: 0,
            status: 503,
            retry_after: Duration::ZERO,
        }),
        ..server(ms(1))
    }
}

/// A fixed policy of `attempts` attempts `delay` apart, timing out after
/// `timeout`.
fn policy(url: String, attempts: u32, delay: Duration, timeout: Duration) -> ClientConfig {
    ClientConfig::with_policy(
        url,
        timeout,
        Strategy::Fixed { delay },
        RetryLimits {
            max_attempts: Some(attempts),
            ..RetryLimits::default()
        },
    )
}

/// A tier with a `base` delay of its own calling `url` under `client`.
fn tier(base: Duration, client: ClientConfig, deadline: bool, cancel: bool) -> ServerConfig {
    ServerConfig {
        call: Some(Box::new(TierCall {
            url: client.url.clone(),
            client,
            propagate_deadline: deadline,
            propagate_cancel: cancel,
        })),
        ..server(base)
    }
}

/// Starts a chain, the backend first, each tier calling the one started
/// before it; returns the servers from the backend outward.
fn chain(backend: ServerConfig, tiers: &[(u32, Duration)]) -> Vec<Running> {
    let mut running = vec![Running::start_config(backend)];
    for &(attempts, base) in tiers {
        let next = running.last().unwrap().url();
        let call = policy(next, attempts, ms(1), Duration::from_secs(5));
        running.push(Running::start_config(tier(base, call, false, false)));
    }
    running
}

/// The client's run against `url`: `users` users, each thinking 20 ms on
/// average, for `length`.
async fn drive(url: String, attempts: u32, users: u32, length: Duration) -> ClientSummary {
    let config = ClientConfig {
        clients: users,
        think: ThinkTime::new(ms(20)),
        duration: Some(length),
        report_interval: ms(100),
        seed: 7,
        ..policy(url, attempts, ms(1), Duration::from_secs(5))
    };
    client::run(config, std::future::pending()).await.unwrap()
}

async fn stop_all(chain: Vec<Running>) -> Vec<ServerSummary> {
    let mut summaries = Vec::new();
    for server in chain.into_iter().rev() {
        summaries.push(server.stop().await);
    }
    summaries.reverse();
    summaries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_failing_every_request_sees_the_attempts_of_every_layer_multiplied() {
    // Client 2 attempts, tiers of 3 and 2: the backend sees 2 x 3 x 2 = 12
    // attempts of each request, every one refused.
    let servers = chain(refusing(), &[(2, ms(1)), (3, ms(1))]);
    let front = servers.last().unwrap().url();
    let client = drive(front, 2, 5, ms(600)).await;
    let summaries = stop_all(servers).await;
    let t = client.totals.tally;
    assert_eq!(t.ok, 0, "{t:?}");
    assert!(t.gave_up >= 10, "{t:?}");
    let backend = summaries[0].shed;
    // Requests still in flight at the end made part of their attempts.
    let (low, high) = (12 * t.gave_up, 12 * (t.gave_up + 5));
    assert!(
        (low..=high).contains(&backend),
        "backend attempts {backend} for {} requests given up",
        t.gave_up
    );
}

/// Sends one GET to `url` with `headers`, and returns the answer's status
/// and how long it took, or `None` if none came within `patience` (the
/// connection is then closed: the caller has gone).
async fn get(url: &str, headers: &str, patience: Duration) -> Option<(u16, Duration)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/api")
        .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let start = std::time::Instant::now();
    let request = format!("GET /api HTTP/1.1\r\nHost: chain\r\n{headers}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    let read = tokio::time::timeout(patience, stream.read_exact(&mut head)).await;
    let took = start.elapsed();
    read.ok()?.unwrap();
    let status = std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap();
    Some((status, took))
}

/// Waits up to 10 s for `done` to hold.
async fn until(mut done: impl FnMut() -> bool) {
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < give_up, "not within 10 s");
        tokio::time::sleep(ms(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_answers_504_when_its_call_timed_out_and_503_when_it_failed() {
    let slow = Running::start_config(server(ms(400)));
    let call = policy(slow.url(), 1, ms(1), ms(50));
    let timing_out = Running::start_config(tier(ms(1), call, false, false));
    let (status, _) = get(&timing_out.url(), "", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(status, 504);
    let refusing = Running::start_config(refusing());
    let call = policy(refusing.url(), 2, ms(1), Duration::from_secs(5));
    let failing = Running::start_config(tier(ms(1), call, false, false));
    let (status, _) = get(&failing.url(), "", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(status, 503);
    assert_eq!(refusing.stop().await.shed, 2, "two attempts, both refused");
    let ok = Running::start_config(server(ms(1)));
    let call = policy(ok.url(), 1, ms(1), Duration::from_secs(5));
    let passing = Running::start_config(tier(ms(1), call, false, false));
    let (status, _) = get(&passing.url(), "", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(status, 200);
    stop_all(vec![slow, timing_out, failing, ok, passing]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_propagated_deadline_ends_the_call_in_time_and_an_expired_one_starts_nothing() {
    // The backend takes 500 ms; the tier's own call would wait 5 s.
    let backend = Running::start_config(server(ms(500)));
    let call = || policy(backend.url(), 1, ms(1), Duration::from_secs(5));
    let passing = Running::start_config(tier(ms(1), call(), true, false));
    let deaf = Running::start_config(tier(ms(1), call(), false, false));
    let patience = Duration::from_secs(5);
    // 100 ms left: the propagating tier gives up with its caller.
    let (status, took) = get(&passing.url(), "grpc-timeout: 100m\r\n", patience)
        .await
        .unwrap();
    assert_eq!(status, 504);
    assert!(took < ms(450), "answered after {took:?}");
    // The other works on for a caller that has long given up.
    let (status, took) = get(&deaf.url(), "grpc-timeout: 100m\r\n", patience)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(took >= ms(500), "answered after {took:?}");
    // Nothing left: 504 at once, and nothing reaches the backend.
    let before = backend
        .gauges
        .completed
        .load(std::sync::atomic::Ordering::Relaxed)
        + backend
            .gauges
            .abandoned
            .load(std::sync::atomic::Ordering::Relaxed)
        + backend
            .gauges
            .concurrency
            .load(std::sync::atomic::Ordering::Relaxed);
    let (status, _) = get(&passing.url(), "grpc-timeout: 0n\r\n", patience)
        .await
        .unwrap();
    assert_eq!(status, 504);
    let summaries = stop_all(vec![backend, passing, deaf]).await;
    let reached = summaries[0].completed + summaries[0].abandoned + summaries[0].in_flight;
    assert_eq!(reached, before, "the expired request reached the backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_goes_cancels_the_work_inward_only_when_the_tier_propagates_it() {
    use std::sync::atomic::Ordering::Relaxed;
    for propagate in [true, false] {
        // A backend that drops the work of a client that went, 1 s long.
        let backend = Running::start_config(ServerConfig {
            on_disconnect: OnDisconnect::Cancel,
            ..server(Duration::from_secs(1))
        });
        let call = policy(backend.url(), 1, ms(1), Duration::from_secs(5));
        let front = Running::start_config(tier(ms(1), call, false, propagate));
        // The caller gives up after 100 ms and closes its connection.
        assert_eq!(get(&front.url(), "", ms(100)).await, None);
        let gauges = backend.gauges.clone();
        until(|| gauges.completed.load(Relaxed) + gauges.abandoned.load(Relaxed) == 1).await;
        let (completed, abandoned) = (
            gauges.completed.load(Relaxed),
            gauges.abandoned.load(Relaxed),
        );
        if propagate {
            assert_eq!((completed, abandoned), (0, 1), "the work stopped inward");
        } else {
            assert_eq!(
                (completed, abandoned),
                (1, 0),
                "the tier's call waited it out"
            );
        }
        stop_all(vec![backend, front]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_reports_its_calls_on_its_status_lines_beside_its_server() {
    let backend = Running::start_config(server(ms(1)));
    let call = policy(backend.url(), 1, ms(1), Duration::from_secs(5));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = StatusSink::tapped(None, move |s: &Status| {
        let _ = tx.send(s.clone());
    });
    let front = Server::bind(tier(ms(1), call, false, false))
        .unwrap()
        .with_status(sink);
    let url = front.url();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(front.run(async {
        let _ = stopped.await;
    }));
    let (status, _) = get(&url, "", Duration::from_secs(5)).await.unwrap();
    assert_eq!(status, 200);
    let mut lines = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(10);
    // Rows every 50 ms: the call's, once it has ended, says so.
    while !lines
        .iter()
        .any(|s| matches!(s, Status::CallRow(r) if r.ok_per_s > 0.0))
    {
        assert!(Instant::now() < give_up, "no row of the call: {lines:?}");
        lines.extend(rx.try_iter());
        tokio::time::sleep(ms(10)).await;
    }
    let _ = stop.send(());
    running.await.unwrap();
    lines.extend(rx.try_iter());
    assert!(matches!(lines[0], Status::Listening { .. }), "{lines:?}");
    assert!(lines.iter().any(|s| matches!(s, Status::ServerRow(_))));
    // A tier's calls are no client: no totals for a supervisor to take
    // as the client's.
    let client = |s: &Status| matches!(s, Status::ClientRow(_) | Status::ClientTotals(_));
    assert!(!lines.iter().any(client), "{lines:?}");
    stop_all(vec![backend]).await;
}

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// Two chains through a storm without an outage: retries at every layer
/// in front of a backend failing every request, and one retrying tier in
/// front of a backend failing half of them.
const CHAINS: &str = r#"
seed = 3
[protocol]
warmup = "10s"
pause = "0s"
observe = "6s"
report_interval = "2s"
tail = "0s"

[[case]]
name = "everywhere"
client = "--strategy fixed --fixed-delay 10ms --max-attempts 2 --clients 300"
server = "--fail-rate 1 --fail-status 503"
[[case.tier]]
server = "--base-delay 1ms"
client = "--strategy fixed --fixed-delay 1ms --max-attempts 2 --timeout 2s"
[[case.tier]]
server = "--base-delay 1ms"
client = "--strategy fixed --fixed-delay 1ms --max-attempts 3 --timeout 2s"

[[case]]
name = "next-to-failure"
client = "--strategy fixed --max-attempts 1 --clients 300"
server = "--fail-rate 0.5 --fail-status 503"
[[case.tier]]
server = "--base-delay 1ms"
client = "--strategy fixed --fixed-delay 1ms --max-attempts 3 --timeout 2s"
"#;

/// Each run's backend attempts per request and layers, and the requests
/// the "next-to-failure" client counted (the figure's denominator).
struct ChainsStorm {
    everywhere: f64,
    layers: Vec<serde_json::Value>,
    next: f64,
    next_layers: Vec<serde_json::Value>,
    next_requests: f64,
}

/// The requests a client's CSV counts: its rows' rates times their
/// lengths, summed and rounded as the storm does for the chain's figure.
fn requests_counted(csv: &std::path::Path) -> f64 {
    let mut reader = csv::Reader::from_path(csv).unwrap();
    let (mut previous, mut sum) = (0.0, 0.0);
    for row in reader.deserialize::<retry_storm::report::rows::ClientRow>() {
        let row = row.unwrap();
        sum += row.requests_per_s * (row.elapsed_s - previous).max(0.0);
        previous = row.elapsed_s;
    }
    sum.round()
}

/// The chains' storm on `engine`.
fn chains_storm(engine: &str) -> ChainsStorm {
    let dir = common::temp_dir(&format!("chain-storm-{engine}"));
    let file = dir.join("chains.toml");
    std::fs::write(&file, CHAINS).unwrap();
    let out = dir.join("out");
    let ran = std::process::Command::new(STORM)
        .args([
            "run",
            file.to_str().unwrap(),
            "--quick",
            "--engine",
            engine,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let summary = common::summary_json(&out);
    let run = |case: &str| {
        summary["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["case"] == case)
            .unwrap()
            .clone()
    };
    let per_request = |case: &str| run(case)["backend_attempts_per_request"].as_f64().unwrap();
    let layers = |case: &str| run(case)["tiers"].as_array().unwrap().clone();
    let figures = ChainsStorm {
        everywhere: per_request("everywhere"),
        layers: layers("everywhere"),
        next: per_request("next-to-failure"),
        next_layers: layers("next-to-failure"),
        next_requests: requests_counted(&out.join("next-to-failure.client.csv")),
    };
    // Each tier is named as its files are, for its metrics' label.
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    for tier in ["tier-1", "tier-2"] {
        let flag = format!("--tier-name {tier} ");
        assert!(commands.contains(&flag), "{engine}: {flag}: {commands}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    figures
}

#[test]
fn a_storm_through_chains_amplifies_as_the_closed_forms_say_on_both_engines() {
    let _one = common::one_at_a_time();
    let real = chains_storm("real");
    let virtual_time = chains_storm("sim");
    let received = |t: &serde_json::Value| t["attempts_received"].as_f64().unwrap();
    let sent = |t: &serde_json::Value| t["attempts_sent"].as_f64().unwrap();
    let count = |t: &serde_json::Value, what: &str| t[what].as_f64().unwrap();
    for (engine, storm) in [("real", &real), ("sim", &virtual_time)] {
        let (everywhere, tiers) = (storm.everywhere, &storm.layers);
        // 2 x 2 x 3 attempts of every request reach the backend; requests
        // cut short by the run's end made only part of theirs, and counts
        // read back from rates rounded to hundredths may be off by a
        // little.
        assert!(
            (11.0..=12.2).contains(&everywhere),
            "{engine}: {everywhere}"
        );
        assert_eq!(tiers.len(), 3, "two tiers and the backend");
        assert_eq!(
            tiers[2]["ok"], 0,
            "{engine}: the backend fails every request"
        );
        assert_eq!(tiers[0]["ok"], 0);
        // What a layer sends, the next receives.
        for i in 0..2 {
            let (out, into) = (sent(&tiers[i]), received(&tiers[i + 1]));
            assert!(
                (out - into).abs() <= 0.02 * out,
                "{engine} layer {i}: {out} sent, {into} received"
            );
        }
        // One tier making up to 3 attempts in front of a backend failing
        // each with p = 1/2: 1 + p + p^2 = 1.75 attempts per call, of
        // variance 0.6875. 300 users thinking 1 s for 2 s of quick time
        // make about 570 requests (not 3,000): a standard deviation of
        // 0.035 for the mean, so a fixed band of 0.1 failed about one run
        // in 200 on the draws alone (1.87 in CI). The bounds follow from
        // the run's own counts instead, 5 standard deviations wide each.
        let chain = &storm.next_layers;
        assert_eq!(chain.len(), 2, "{engine}: a tier and the backend");
        // A call per request the tier took; its attempts, as the backend
        // received them. The backend failed half: binomial.
        let (calls, attempts) = (received(&chain[0]), received(&chain[1]));
        let drawn = count(&chain[1], "failed") / attempts;
        assert!(
            (drawn - 0.5).abs() <= 5.0 * (0.25 / attempts).sqrt(),
            "{engine}: the backend failed {drawn} of {attempts} attempts"
        );
        // The closed form at f, the share of attempts that failed as the
        // tier saw them: a call that succeeded had one OK attempt, every
        // other attempt failed (a 503, or a timeout under load, retried
        // alike though the backend may have served it). With the share
        // drawn, not 1/2, the variance per call of X - 1 - f - f^2 (X a
        // call's attempts) is 13/112 = 0.116 by the delta method: 5
        // standard deviations are 0.07 over 570 calls, where a fourth
        // attempt (p^3 = 0.125 more) stands out.
        let failed = 1.0 - count(&chain[0], "ok") / attempts;
        let closed = 1.0 + failed + failed * failed;
        let per_call = attempts / calls;
        let bound = 5.0 * (13.0 / 112.0 / calls).sqrt();
        assert!(
            (per_call - closed).abs() <= bound,
            "{engine}: {attempts} attempts over {calls} calls = {per_call}, \
             1 + f + f^2 = {closed} with f = {failed} failed, +- {bound}"
        );
        // The storm's figure: those attempts over the requests the client
        // counted, to the hundredth. It counts a request when its first
        // attempt ends, so the few in flight at its end, which the tier
        // still carries to the backend, put the figure a little above the
        // attempts per call (0.008 on average).
        let (next, requests) = (storm.next, storm.next_requests);
        assert!(
            (next - attempts / requests).abs() <= 0.0051,
            "{engine}: {next} for {attempts} attempts over {requests} requests"
        );
    }
    // The engines agree on what reached each layer, within 3 %.
    for i in 0..3 {
        let (r, v) = (received(&real.layers[i]), received(&virtual_time.layers[i]));
        assert!(
            (r - v).abs() <= 0.03 * v,
            "layer {i}: real {r}, virtual {v}"
        );
    }
}

/// A server on an ephemeral port with a 1 ms delay, serving its metrics
/// (a tier's when it calls `call`, named as the address it got) on an
/// endpoint of its own; stopped by the sender.
fn metered(call: Option<ClientConfig>) -> (String, MetricsEndpoint, oneshot::Sender<()>) {
    let mut config = ServerConfig {
        // A backend failing a request in two, a tier failing none.
        fail: call.is_none().then_some(Failing {
            rate: 0.5,
            status: 503,
        }),
        seed: 11,
        ..server(ms(1))
    };
    config.call = call.map(|client| {
        Box::new(TierCall {
            url: client.url.clone(),
            client,
            propagate_deadline: false,
            propagate_cancel: false,
        })
    });
    let mut exposition = None;
    let server = Server::bind_with(config.clone(), |addr| {
        let tier = ServerExposition::tier(&config, &addr.to_string());
        let calls = tier.calls.clone();
        exposition = Some(tier);
        calls
    })
    .unwrap();
    let exposition = Arc::new(exposition.unwrap_or_else(|| ServerExposition::plain(&config)));
    let server = server.with_metrics(exposition.server.clone());
    let url = server.url();
    let endpoint = MetricsEndpoint::serve("127.0.0.1:0".parse().unwrap(), exposition).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    (url, endpoint, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_serves_its_calls_beside_its_server_every_series_labelled() {
    let (backend_url, backend, stop_backend) = metered(None);
    let call = ClientConfig {
        limits: RetryLimits {
            max_attempts: Some(3),
            ..RetryLimits::default()
        },
        ..client_config(backend_url)
    };
    let (tier_url, tier, stop_tier) = metered(Some(call));
    let named = tier_url
        .trim_start_matches("http://")
        .trim_end_matches("/api");
    let label = format!("tier=\"{named}\"");
    let config = ClientConfig {
        clients: 5,
        duration: Some(ms(400)),
        ..client_config(tier_url.clone())
    };
    client::run(config, std::future::pending()).await.unwrap();
    // Every request the tier took, and every call it made, has ended.
    let calls_done = || async {
        let t = scrape(&tier).await;
        sample(&t, &format!("retry_storm_client_outstanding{{{label}}}")) == 0
            && sample(&t, &format!("retry_storm_client_in_flight{{{label}}}")) == 0
            && sample(&t, &format!("retry_storm_server_concurrency{{{label}}}")) == 0
    };
    let give_up = Instant::now() + Duration::from_secs(10);
    while !calls_done().await {
        assert!(Instant::now() < give_up, "calls still in flight after 10 s");
        tokio::time::sleep(ms(10)).await;
    }
    let t = scrape(&tier).await;
    assert_eq!(scrape_as(&tier, false).await, t);
    for series in t.keys() {
        assert!(series.contains(&format!("{{{label}")), "{series}");
    }
    let b = scrape(&backend).await;
    assert!(b.keys().all(|s| !s.contains("tier=")), "{b:?}");
    let calls = |name: &str| sample(&t, &format!("retry_storm_client_{name}{{{label}}}"));
    let attempts = |outcome: &str| {
        sample(
            &t,
            &format!("retry_storm_client_attempts_total{{{label},outcome=\"{outcome}\"}}"),
        )
    };
    let (ok, errors) = (attempts("ok"), attempts("error"));
    // The backend fails half of what it gets; the tier retries.
    assert!(ok > 10 && errors > 5, "ok {ok}, errors {errors}");
    assert!(calls("retries_total") > 0);
    // What the tier sent, the backend saw, each attempt once.
    let backend_saw = sample(&b, "retry_storm_server_admitted_total")
        + sample(&b, "retry_storm_server_dropped_total{reason=\"failed\"}");
    assert_eq!(ok + errors + attempts("timeout"), backend_saw);
    // One call per request the tier's own work completed, each a session.
    let completed = sample(
        &t,
        &format!("retry_storm_server_completed_total{{{label}}}"),
    );
    // One a user may finish as its client stops, its handler dropped.
    for series in ["requests_started_total", "sessions_arrived_total"] {
        let (n, c) = (calls(series), completed);
        assert!(n <= c && c <= n + 5, "{series}: {n} calls for {c}");
    }
    // Calls whose caller went: at most one per user, cut short when the
    // client stopped.
    assert!(calls("callers_gone_total") <= 5);
    let _ = (stop_tier.send(()), stop_backend.send(()));
}

/// A chain through an outage of its backend: retrying at both layers, and
/// at neither.
const OUTAGE: &str = r#"
seed = 11
[protocol]
warmup = "20s"
pause = "20s"
observe = "30s"
report_interval = "5s"
tail = "0s"

[[case]]
name = "retry-everywhere"
client = "--strategy fixed --clients 500"
[[case.tier]]
server = "--base-delay 5ms"
client = "--strategy fixed --max-attempts 3 --timeout 1s"

[[case]]
name = "no-retries"
client = "--strategy fixed --max-attempts 1 --clients 500"
[[case.tier]]
server = "--base-delay 5ms"
client = "--strategy fixed --max-attempts 1 --timeout 1s"
"#;

/// Each case's verdict and amplification through the outage on `engine`.
fn outage_storm(engine: &str) -> Vec<(String, bool, f64)> {
    let dir = common::temp_dir(&format!("chain-outage-{engine}"));
    let file = dir.join("outage.toml");
    std::fs::write(&file, OUTAGE).unwrap();
    let out = dir.join("out");
    let ran = std::process::Command::new(STORM)
        .args([
            "run",
            file.to_str().unwrap(),
            "--quick",
            "--engine",
            engine,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let verdicts = common::summary_json(&out)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["case"].as_str().unwrap().to_string(),
                r["recovered"].as_bool().unwrap(),
                r["amplification"].as_f64().unwrap(),
            )
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    verdicts
}

#[test]
fn real_and_virtual_chains_reach_the_same_verdicts_through_an_outage() {
    let _one = common::one_at_a_time();
    let real = outage_storm("real");
    let virtual_time = outage_storm("sim");
    let verdicts = |runs: &[(String, bool, f64)]| -> Vec<(String, bool)> {
        runs.iter().map(|(c, r, _)| (c.clone(), *r)).collect()
    };
    // Retries at both layers never come back; no retries at all do.
    assert_eq!(
        verdicts(&virtual_time),
        [
            ("retry-everywhere".to_string(), false),
            ("no-retries".to_string(), true)
        ]
    );
    assert_eq!(verdicts(&real), verdicts(&virtual_time));
    // The client's attempts per request from the stop on, within 10 %.
    for ((case, _, r), (_, _, v)) in real.iter().zip(&virtual_time) {
        assert!((r - v).abs() <= 0.1 * v, "{case}: real {r}, virtual {v}");
    }
}
