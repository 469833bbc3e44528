//! The Prometheus endpoints of the real server and the real client code,
//! on ephemeral loopback ports: what a scrape reads is the run's own
//! totals, counted as events happen (not at each report), in an
//! exposition every line of which is well-formed.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::running::{client_config, ms};
use common::scrape::{OPENMETRICS, get, http, scrape, scrape_as};
use retry_storm::model::client::ClientConfig;
use retry_storm::model::latency::LatencyModel;
use retry_storm::model::server::{OnDisconnect, ServerConfig, Shedding};
use retry_storm::net::client;
use retry_storm::net::metrics::{Limits, MetricsEndpoint};
use retry_storm::net::server::Server;
use retry_storm::policy::RetryLimits;
use retry_storm::report::metrics::{ClientMetrics, ServerMetrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Loopback, port 0.
fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

// One thread: when the client stops, no user task is running to count an
// attempt after its summary is taken.
#[tokio::test(flavor = "current_thread")]
async fn a_scrape_reads_the_runs_own_totals() {
    // Busy: 5 ms, growing a fifth with every request above 4, shed above
    // 6 (about 4 in flight on average); attempts time out at 40 ms and
    // requests give up after 3.
    let config = ServerConfig {
        listen: any_port(),
        model: LatencyModel {
            base: ms(5),
            limit: 4,
            factor: 1.2,
            scale: 1.0,
            max_delay: Duration::from_secs(1),
        },
        on_disconnect: OnDisconnect::Cancel,
        shed: Some(Shedding {
            above: 6,
            status: 503,
            retry_after: Duration::from_secs(1),
        }),
        backlog: 1024,
        report_interval: Duration::from_secs(60),
        timer_resolution: Duration::ZERO,
        quiet: true,
        ..ServerConfig::default()
    };
    let server_metrics = Arc::new(ServerMetrics::new(&config));
    let server = Server::bind(config)
        .unwrap()
        .with_metrics(server_metrics.clone());
    let url = server.url();
    let server_endpoint = MetricsEndpoint::serve(any_port(), server_metrics).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let client_metrics = Arc::new(ClientMetrics::new());
    let client_endpoint = MetricsEndpoint::serve(any_port(), client_metrics.clone()).unwrap();
    assert_eq!(
        client_endpoint.url(),
        format!("http://{}/metrics", client_endpoint.local_addr())
    );
    let config = ClientConfig {
        timeout: ms(40),
        limits: RetryLimits {
            max_attempts: Some(3),
            ..RetryLimits::default()
        },
        // No report before the end: whatever a scrape sees before it was
        // counted as it happened.
        report_interval: Duration::from_secs(60),
        duration: Some(ms(600)),
        ..client_config(url)
    };
    let run = tokio::spawn(client::run_with(
        config,
        None,
        Some(client_metrics),
        std::future::pending(),
    ));
    // Live: the first attempts show before any report (bounded by the
    // run).
    loop {
        let live = scrape(&client_endpoint).await;
        let ended: u64 = ["ok", "error", "timeout"]
            .map(|o| {
                get(
                    &live,
                    &format!("retry_storm_client_attempts_total{{outcome=\"{o}\"}}"),
                )
            })
            .iter()
            .sum();
        if ended > 0 {
            break;
        }
        assert!(!run.is_finished(), "no attempt seen while the run lasted");
        tokio::time::sleep(ms(5)).await;
    }
    let summary = run.await.unwrap().unwrap();
    let _ = stop.send(());
    let served = server.await.unwrap();

    let t = &summary.totals.tally;
    let c = scrape(&client_endpoint).await;
    let attempts = |outcome: &str| {
        get(
            &c,
            &format!("retry_storm_client_attempts_total{{outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(attempts("ok"), t.ok);
    assert_eq!(attempts("error"), t.errors);
    assert_eq!(attempts("timeout"), t.timeouts);
    assert_eq!(attempts("cancelled"), t.cancelled);
    assert_eq!(get(&c, "retry_storm_client_retries_total"), t.retries);
    assert_eq!(
        get(&c, "retry_storm_client_requests_started_total"),
        t.started
    );
    assert_eq!(
        get(&c, "retry_storm_client_requests_given_up_total"),
        t.gave_up
    );
    assert_eq!(get(&c, "retry_storm_client_throttled_total"), t.throttled);
    assert_eq!(
        get(&c, "retry_storm_client_rejected_locally_total"),
        t.rejected
    );
    assert_eq!(
        get(&c, "retry_storm_client_attempt_duration_seconds_count"),
        summary.totals.attempt_latency.len()
    );
    assert_eq!(
        get(
            &c,
            "retry_storm_client_attempt_duration_seconds_bucket{le=\"+Inf\"}"
        ),
        t.ok
    );
    assert_eq!(
        get(&c, "retry_storm_client_request_duration_seconds_count"),
        summary.totals.request_latency.len()
    );
    assert!(get(&c, "retry_storm_client_in_flight") <= 20);
    // The storm the server was built for happened.
    assert!(
        t.ok > 0 && t.timeouts + t.errors > 0 && t.retries > 0,
        "{t:?}"
    );

    // Both formats hold the same samples.
    assert_eq!(scrape_as(&client_endpoint, false).await, c);
    let s = scrape(&server_endpoint).await;
    assert_eq!(scrape_as(&server_endpoint, false).await, s);
    assert_eq!(
        get(&s, "retry_storm_server_completed_total"),
        served.completed
    );
    assert_eq!(
        get(&s, "retry_storm_server_abandoned_total"),
        served.abandoned
    );
    assert_eq!(get(&s, "retry_storm_server_shed_total"), served.shed);
    let dropped = |reason: &str| {
        get(
            &s,
            &format!("retry_storm_server_dropped_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(
        dropped("queue_full") + dropped("limiter") + dropped("admission_control"),
        served.refused
    );
    assert_eq!(dropped("queue_timeout"), served.dropped);
    assert_eq!(dropped("failed"), served.failed);
    assert_eq!(get(&s, "retry_storm_server_concurrency"), served.in_flight);
    // A curve: whatever was admitted was completed, abandoned, or is
    // still in the model.
    assert_eq!(
        get(&s, "retry_storm_server_admitted_total"),
        served.completed + served.abandoned + served.in_flight
    );
    assert_eq!(
        get(
            &s,
            "retry_storm_server_time_in_model_seconds_count{outcome=\"completed\"}"
        ),
        served.completed
    );
    assert_eq!(get(&s, "retry_storm_server_queue_length"), 0);
    assert!(s["retry_storm_server_concurrency_seconds_total"] > 0.0);
    assert!(
        served.completed > 0 && served.shed + served.abandoned > 0,
        "{served:?}"
    );
    // Every OK the client counted was a completion the server counted.
    assert!(served.completed >= t.ok, "{served:?} {t:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn only_get_metrics_is_served() {
    let endpoint = MetricsEndpoint::serve(any_port(), Arc::new(ClientMetrics::new())).unwrap();
    let addr = endpoint.local_addr();
    let (status, _, body) = http(addr, "GET", "/api", None).await;
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    assert!(body.contains("/metrics"), "{body}");
    let (status, headers, _) = http(addr, "POST", "/metrics", None).await;
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    assert!(headers.contains("allow: get, head"), "{headers}");
    let (status, headers, body) = http(addr, "HEAD", "/metrics", Some(OPENMETRICS)).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(headers.contains("openmetrics-text"), "{headers}");
    assert!(body.is_empty());
    // Every series of a fresh client, at zero, in either format.
    let samples = scrape(&endpoint).await;
    assert!(samples.values().all(|&v| v == 0.0), "{samples:?}");
    assert_eq!(scrape_as(&endpoint, false).await, samples);
    // A port in use is refused, naming the flag.
    let Err(e) = MetricsEndpoint::serve(addr, Arc::new(ClientMetrics::new())) else {
        panic!("{addr} is in use");
    };
    let message = e.to_string();
    assert!(
        message.starts_with(&format!("--metrics-listen {addr}: address already in use")),
        "{message}"
    );
}

/// The binaries as a user runs them: the start line says where the
/// metrics are, and an address that cannot be used stops the program with
/// exit code 2 and a message naming the flag.
#[test]
fn the_programs_say_where_and_refuse_an_address_they_cannot_use() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::{Command, Stdio};

    let mut server = Command::new(common::SERVER)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let _guard = common::Guard(server);
    let mut banner = String::new();
    out.read_line(&mut banner).unwrap();
    let (_, url) = banner
        .trim_end()
        .split_once("; metrics on http://")
        .unwrap_or_else(|| panic!("{banner}"));
    let addr = url.strip_suffix("/metrics").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\nretry_storm_server_concurrency 0\n"),
        "{answer}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let refused = |bin: &str, args: &[&str], says: &str| {
        let out = Command::new(bin).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    let in_use = format!("--metrics-listen {taken}: address already in use");
    let server_args = ["--listen", "127.0.0.1:0", "--metrics-listen", &taken];
    refused(common::SERVER, &server_args, &in_use);
    let client_args = [
        "--url",
        "http://127.0.0.1:1/api",
        "--duration",
        "1s",
        "--metrics-listen",
        &taken,
    ];
    refused(common::CLIENT, &client_args, &in_use);
    let bad = "invalid value 'nowhere' for '--metrics-listen <ADDR>'";
    refused(common::SERVER, &["--metrics-listen", "nowhere"], bad);
    refused(common::CLIENT, &["--metrics-listen", "nowhere"], bad);

    // The client's start line says where too.
    let out = Command::new(common::CLIENT)
        .args(["--url", "http://127.0.0.1:1/api", "--clients", "1"])
        .args(["--duration", "100ms", "--metrics-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("1 clients -> http://127.0.0.1:1/api")
            && first.contains("; metrics on http://127.0.0.1:"),
        "{first}"
    );
}

/// A half-sent request head, or none, is closed once the header-read
/// timeout has passed (made short here), without an answer; a whole
/// request meanwhile is answered.
#[tokio::test(flavor = "current_thread")]
async fn a_request_head_not_sent_in_time_is_closed() {
    let limits = Limits {
        header_read_timeout: ms(200),
        ..Limits::default()
    };
    let endpoint =
        MetricsEndpoint::serve_with(any_port(), Arc::new(ClientMetrics::new()), limits).unwrap();
    let addr = endpoint.local_addr();
    let start = Instant::now();
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let silent = TcpStream::connect(addr).await.unwrap();
    scrape(&endpoint).await;
    for (what, mut s) in [("half a head", half), ("nothing", silent)] {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
        let waited = start.elapsed();
        // Closed (an end of stream or a reset), after the timeout only.
        assert!(read.is_ok(), "{what}: still open after {waited:?}");
        assert!(waited >= ms(200), "{what}: closed after {waited:?}");
        assert!(answer.is_empty(), "{what}: {answer:?}");
    }
}

/// Connections beyond the bound are closed as soon as they are accepted,
/// and once those held go, the endpoint answers again.
#[tokio::test(flavor = "current_thread")]
async fn connections_beyond_the_bound_are_closed_at_once() {
    let limits = Limits {
        header_read_timeout: Duration::from_secs(60),
        max_connections: 3,
    };
    let endpoint =
        MetricsEndpoint::serve_with(any_port(), Arc::new(ClientMetrics::new()), limits).unwrap();
    let addr = endpoint.local_addr();
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // Accepted after the three (in the order of connection), it finds
    // the bound reached, long before their timeout.
    let mut over = TcpStream::connect(addr).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), over.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "a fourth connection is held");
    assert!(answer.is_empty(), "{answer:?}");
    // The three gone, a scrape is answered again (once the endpoint has
    // seen them close: until then, closed at once like the fourth).
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer).await;
        if answer.starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "no answer since the three went");
        tokio::time::sleep(ms(10)).await;
    }
}
