//! The real server on 127.0.0.1 port 0, driven by the real client code, with
//! time compressed to milliseconds. Lower bounds on latency hold however
//! loaded the machine is; upper bounds are generous.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::running::{Running, client_config, model, ms};
use retry_storm::model::arrivals::ThinkTime;
use retry_storm::model::client::ClientConfig;
use retry_storm::model::grpc::Codes;
use retry_storm::model::latency::LatencyModel;
use retry_storm::model::server::{OnDisconnect, ServerConfig, Shedding};
use retry_storm::net::client;
use retry_storm::policy::shipped::{GrpcImplementation, ShippedBackoff};
use retry_storm::policy::{RetryLimits, Strategy, ThrottleConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Waits (bounded) until `cond` holds, checking every few milliseconds.
async fn eventually(what: &str, within: Duration, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(ms(2)).await;
    }
}

/// Sends raw bytes and returns the status line of the answer.
async fn raw_status(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0; 1024];
    let n = s.read(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines().next().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_is_all_ok_at_the_base_latency() {
    let server = Running::start(model(ms(5)), OnDisconnect::Continue);
    let summary = client::run(client_config(server.url()), std::future::pending())
        .await
        .unwrap();
    let t = &summary.totals.tally;
    assert_eq!(t.errors, 0);
    assert_eq!(t.timeouts, 0);
    assert_eq!(t.retries, 0);
    // 20 users, 20 ms think + 5 ms latency, 0.8 s: about 640 requests.
    assert!(t.ok > 200 && t.ok < 1000, "ok = {}", t.ok);
    let p50_us = summary.totals.attempt_latency.value_at_quantile(0.5);
    assert!(
        p50_us >= 5_000,
        "p50 {p50_us} us is below the modelled delay"
    );
    assert!(p50_us < 100_000, "p50 {p50_us} us");
    assert!(!summary.rows.is_empty());
    let served = server.stop().await;
    // Attempts cut short at the client's stop end as abandoned.
    assert!(served.completed >= t.ok, "{served:?} vs ok {}", t.ok);
    assert!(served.completed <= t.ok + 20, "{served:?} vs ok {}", t.ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_slows_the_first() {
    // delay(1) = 40 ms, delay(2) = 80 ms.
    let server = Running::start(
        LatencyModel {
            base: ms(40),
            limit: 1,
            factor: 2.0,
            scale: 1.0,
            max_delay: Duration::from_secs(60),
        },
        OnDisconnect::Continue,
    );
    let addr = server.addr;
    let get = "GET /api HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let started = tokio::time::Instant::now();
    let (a, b) = tokio::join!(raw_status(addr, get), raw_status(addr, get));
    let elapsed = started.elapsed();
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    assert!(b.starts_with("HTTP/1.1 200"), "{b}");
    // Alone, the first would take 40 ms; with two in flight both need 80 ms
    // (the first completes at 80, the second then completes at once).
    assert!(elapsed >= ms(79), "{elapsed:?}");
    let summary = server.stop().await;
    assert_eq!(summary.completed, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_paths_and_methods_are_refused_at_once() {
    let server = Running::start(model(Duration::from_secs(30)), OnDisconnect::Continue);
    let addr = server.addr;
    let status = raw_status(addr, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let status = raw_status(
        addr,
        "POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    let status = raw_status(addr, "garbage\r\n\r\n").await;
    assert!(
        status.starts_with("HTTP/1.1 400") || status.is_empty(),
        "{status}"
    );
    assert_eq!(server.gauges.concurrency.load(Ordering::Relaxed), 0);
    server.stop().await;
}

/// Sends a request and closes the connection at once, as a client that
/// timed out while the server was stopped.
async fn send_and_hang_up(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    s.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_requests_keep_counting_until_their_modelled_completion() {
    let server = Running::start(model(ms(150)), OnDisconnect::Continue);
    let g = server.gauges.clone();
    for _ in 0..5 {
        send_and_hang_up(server.addr).await;
    }
    // Every request counts, even one hyper drops before polling its handler.
    eventually("5 in flight", Duration::from_secs(10), || {
        g.concurrency.load(Ordering::Relaxed) + g.abandoned.load(Ordering::Relaxed) == 5
    })
    .await;
    eventually("5 abandoned", Duration::from_secs(10), || {
        g.abandoned.load(Ordering::Relaxed) == 5
    })
    .await;
    let summary = server.stop().await;
    assert_eq!(summary.completed, 0);
    assert_eq!(summary.abandoned, 5);
    assert_eq!(summary.peak_concurrency, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mode_drops_abandoned_work_at_once() {
    // A minute of modelled delay: only cancellation can empty the model.
    let server = Running::start(model(Duration::from_secs(60)), OnDisconnect::Cancel);
    let g = server.gauges.clone();
    for _ in 0..5 {
        send_and_hang_up(server.addr).await;
    }
    eventually("5 cancelled", Duration::from_secs(10), || {
        g.abandoned.load(Ordering::Relaxed) == 5
    })
    .await;
    assert_eq!(g.concurrency.load(Ordering::Relaxed), 0);
    let summary = server.stop().await;
    assert_eq!(summary.in_flight, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_retried_and_the_server_keeps_the_work() {
    let server = Running::start(model(Duration::from_secs(2)), OnDisconnect::Continue);
    let config = ClientConfig {
        clients: 5,
        think: ThinkTime::new(ms(5)),
        timeout: ms(50),
        duration: Some(ms(400)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let t = &summary.totals.tally;
    assert_eq!(t.ok, 0);
    assert_eq!(t.errors, 0);
    // Each user: 50 ms timeout + 10 ms delay, so several attempts in 400 ms.
    assert!(t.timeouts >= 10, "{}", t.timeouts);
    assert!(
        t.retries >= 5 && t.retries < t.timeouts + 5,
        "{}",
        t.retries
    );
    // The abandoned attempts are still in the model: none has completed.
    let g = server.gauges.clone();
    eventually(
        "the abandoned attempts to reach the model",
        Duration::from_secs(10),
        || g.concurrency.load(Ordering::Relaxed) >= 10,
    )
    .await;
    let served = server.stop().await;
    assert_eq!(served.completed, 0);
}

/// Users are dealt to the client's lanes (`--threads`): whatever their
/// number, every user runs, once. Each user's first attempt waits on a
/// server that answers after the run, so each starts exactly one request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_user_runs_once_whatever_the_number_of_lanes() {
    for threads in [1, 3] {
        let server = Running::start(model(Duration::from_secs(2)), OnDisconnect::Continue);
        let config = ClientConfig {
            clients: 30,
            threads: Some(threads),
            duration: Some(ms(400)),
            ..client_config(server.url())
        };
        let summary = client::run(config, std::future::pending()).await.unwrap();
        let t = &summary.totals.tally;
        assert_eq!((t.ok, t.errors, t.timeouts), (0, 0, 0), "{threads} lanes");
        // One attempt in flight per user, none of them answered: the
        // model's peak is the number of users that sent.
        let g = server.gauges.clone();
        eventually(
            "every user's request to reach the model",
            Duration::from_secs(10),
            || g.peak_concurrency.load(Ordering::Relaxed) == 30,
        )
        .await;
        server.stop().await;
    }
}

/// A lane kept busy hands users to the idle one, and they go on there.
/// The client's first lane is this test's thread, and a task on it holds
/// the thread for 20 ms at a time; the server runs on threads of its own.
#[test]
fn users_of_a_busy_lane_move_to_an_idle_one_and_go_on() {
    let server_runtime = tokio::runtime::Runtime::new().unwrap();
    let server =
        server_runtime.block_on(async { Running::start(model(ms(1)), OnDisconnect::Continue) });
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let summary = client_runtime.block_on(async {
        let hog = tokio::spawn(async {
            loop {
                std::thread::sleep(ms(20));
                tokio::task::yield_now().await;
            }
        });
        let config = ClientConfig {
            clients: 40,
            threads: Some(2),
            duration: Some(ms(1500)),
            ..client_config(server.url())
        };
        let summary = client::run(config, std::future::pending()).await.unwrap();
        hog.abort();
        summary
    });
    server_runtime.block_on(server.stop());
    assert!(summary.moves > 0, "no user left the busy lane");
    assert!(
        summary.moves < 10_000,
        "{} moves: users went back and forth",
        summary.moves
    );
    let t = &summary.totals.tally;
    assert!(t.ok > 40, "{} requests answered", t.ok);
    assert_eq!((t.errors, t.timeouts), (0, 0));
    assert!(summary.to_string().contains("users moved from a busy lane"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_counts_as_errors() {
    let config = ClientConfig {
        clients: 3,
        duration: Some(ms(300)),
        ..client_config(refused_url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    assert!(
        summary.totals.tally.errors > 3,
        "{}",
        summary.totals.tally.errors
    );
    assert_eq!(summary.totals.tally.ok, 0);
    assert!(summary.totals.tally.retries > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_files_hold_the_header_and_every_row() {
    let dir = std::env::temp_dir().join(format!("retry-storm-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("client.csv");
    let server = Running::start(model(ms(5)), OnDisconnect::Continue);
    let config = ClientConfig {
        csv: Some(path.clone()),
        duration: Some(ms(450)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    server.stop().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "unix_ms,elapsed_s,ok_per_s,errors_per_s,timeouts_per_s,retries_per_s,in_flight,p50_ms,p99_ms,max_ms,gave_up_per_s,throttled_per_s,attempts_per_request,requests_per_s,sent_per_s"
        )
    );
    assert_eq!(lines.count(), summary.rows.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A port with nothing listening: every connect is refused at once. Not
/// one from binding port 0 and letting go: the servers of the tests
/// beside this one bind port 0 and could take it, and the client's own
/// connections could take it as their source port.
fn refused_url() -> String {
    format!("http://127.0.0.1:{}/api", common::unowned_port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_attempts_gives_requests_up() {
    let config = ClientConfig {
        clients: 4,
        limits: RetryLimits {
            max_attempts: Some(2),
            ..RetryLimits::default()
        },
        duration: Some(ms(300)),
        ..client_config(refused_url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let t = &summary.totals.tally;
    assert!(t.gave_up >= 4, "{t:?}");
    // Every finished request made exactly two attempts.
    assert_eq!(t.attempts_per_request, [0, t.gave_up, 0, 0, 0, 0, 0]);
    assert_eq!(t.ok, 0);
    assert!(
        t.errors >= 2 * t.gave_up && t.errors <= 2 * t.gave_up + 4,
        "{t:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_stops_retries_once_drained() {
    let config = ClientConfig {
        clients: 4,
        throttle: Some(ThrottleConfig::TokenBucket {
            max_tokens: 10.0,
            token_ratio: 0.1,
        }),
        duration: Some(ms(300)),
        ..client_config(refused_url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let t = &summary.totals.tally;
    // Five failures take the bucket to half: after that no retry goes out,
    // each request is tried once and given up.
    // (A few may slip through while in flight when the bucket drains.)
    assert!(t.retries <= 8, "{t:?}");
    assert!(t.throttled >= 4 && t.gave_up >= 4, "{t:?}");
    assert_eq!(t.gave_up, t.throttled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_fails_attempts_locally() {
    let config = ClientConfig {
        clients: 4,
        throttle: Some(ThrottleConfig::CircuitBreaker {
            failure_ratio: 0.5,
            min_requests: 5,
            window: Duration::from_secs(10),
            consecutive: None,
            cooldown: Duration::from_secs(60),
            probes: 1,
        }),
        duration: Some(ms(300)),
        ..client_config(refused_url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let t = &summary.totals.tally;
    // Five refused connects open the breaker; then every attempt (one per
    // user every 10 ms) is rejected locally and counted as an error.
    assert!(t.throttled > 20, "{t:?}");
    assert_eq!(t.rejected, t.throttled);
    assert_eq!(t.errors, t.attempts());
    assert!(t.sent() >= 5 && t.sent() < 10, "{t:?}");
    assert_eq!(t.gave_up, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedding_answers_at_once_with_retry_after() {
    let shed = Shedding {
        above: 2,
        status: 503,
        retry_after: Duration::from_secs(7),
    };
    let server = Running::start_with(
        model(Duration::from_secs(30)),
        OnDisconnect::Continue,
        Some(shed),
    );
    let g = server.gauges.clone();
    // Two requests fill the server (and hang for 30 s); keep them open.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        s.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    eventually("two in flight", Duration::from_secs(10), || {
        g.concurrency.load(Ordering::Relaxed) == 2
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0; 1024];
    let n = s.read(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 503"), "{text}");
    assert!(text.contains("retry-after: 7\r\n"), "{text}");
    assert_eq!(g.concurrency.load(Ordering::Relaxed), 2);
    let summary = server.stop().await;
    assert_eq!(summary.shed, 1);
    assert_eq!(summary.peak_concurrency, 2);
}

/// Users hammer a server that sheds everything above one request, with and
/// without respecting its Retry-After; returns the requests it shed.
async fn shed_with(respect_retry_after: bool) -> u64 {
    let shed = Shedding {
        above: 1,
        status: 429,
        retry_after: ms(200),
    };
    let server = Running::start_with(
        model(Duration::from_secs(30)),
        OnDisconnect::Continue,
        Some(shed),
    );
    let config = ClientConfig {
        clients: 5,
        think: ThinkTime::new(ms(1)),
        strategy: Strategy::Fixed { delay: ms(1) },
        limits: RetryLimits {
            respect_retry_after,
            ..RetryLimits::default()
        },
        duration: Some(ms(500)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    assert_eq!(summary.totals.tally.ok, 0);
    server.stop().await.shed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respecting_retry_after_slows_retries_to_the_servers_pace() {
    let respectful = shed_with(true).await;
    // At most one attempt per user per 200 ms, plus the first: 5 * (1 + 2.5).
    assert!(respectful <= 20, "{respectful}");
    let impatient = shed_with(false).await;
    // A retry every millisecond or so per user.
    assert!(impatient > 5 * respectful, "{impatient} vs {respectful}");
}

/// A gRPC client (its backoff, 4 attempts, no throttle) against a server
/// that sheds everything above one request (held 30 s, past the 5 s
/// timeout of a 500 ms run) and pushes back with `pushback`; returns the
/// client's retries.
async fn grpc_retries_against(pushback: Option<i64>) -> u64 {
    let shed = Shedding {
        above: 1,
        status: 503,
        retry_after: Duration::from_secs(1),
    };
    let server = Running::start_config(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        model: model(Duration::from_secs(30)),
        shed: Some(shed),
        pushback_ms: pushback,
        quiet: true,
        ..ServerConfig::default()
    });
    let config = ClientConfig {
        clients: 5,
        think: ThinkTime::new(ms(1)),
        strategy: Strategy::Shipped(ShippedBackoff::Grpc {
            initial: ms(1),
            multiplier: 2.0,
            max: ms(4),
            implementation: GrpcImplementation::Core,
            retryable: Codes::default(),
        }),
        limits: RetryLimits {
            max_attempts: Some(4),
            ..RetryLimits::default()
        },
        duration: Some(ms(500)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    server.stop().await;
    summary.totals.tally.retries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_client_stops_retrying_when_the_server_pushes_back() {
    // Every refusal says "do not retry" (the one request held never ends
    // within the run): not a single retry.
    assert_eq!(grpc_retries_against(Some(-1)).await, 0);
    // Without pushback the same client retries each refusal, up to three
    // times a request.
    let retries = grpc_retries_against(None).await;
    assert!(retries > 50, "{retries}");
}

/// Sends `bytes`, then reads the answer until the server closes the
/// connection or `within` passes; returns the first line ("" if none).
async fn answer_to(addr: SocketAddr, bytes: &[u8], within: Duration) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut text = Vec::new();
    let read = tokio::time::timeout(within, s.read_to_end(&mut text)).await;
    assert!(read.is_ok(), "the server neither answered nor closed");
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_or_a_closed_connection_and_others_are_served() {
    let server = Running::with_header_read_timeout(ms(300));
    let addr = server.addr;
    // A very slow sender: half a request head, then nothing. It is cut off
    // after the header-read timeout, while everyone else is served.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let good = b"GET /api HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert!(
        answer_to(addr, good, Duration::from_secs(5))
            .await
            .contains("200")
    );
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the slow sender was not cut off");

    let within = Duration::from_secs(5);
    let cases: [(&str, Vec<u8>, &[&str]); 5] = [
        (
            "garbage",
            b"\x00\x01\xff garbage\r\n\r\n".to_vec(),
            &["400", ""],
        ),
        (
            "oversized headers",
            [
                b"GET /api HTTP/1.1\r\nHost: x\r\nX-Big: ".as_slice(),
                &vec![b'a'; 1 << 20],
                b"\r\n\r\n",
            ]
            .concat(),
            &["431", "400", ""],
        ),
        (
            "POST",
            b"POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                .to_vec(),
            &["405"],
        ),
        (
            "unknown path",
            b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            &["404"],
        ),
        ("not HTTP at all", b"HELLO\r\n\r\n".to_vec(), &["400", ""]),
    ];
    for (what, bytes, expected) in cases {
        let line = answer_to(addr, &bytes, within).await;
        assert!(
            expected.iter().any(|e| if e.is_empty() {
                line.is_empty()
            } else {
                line.contains(e)
            }),
            "{what}: {line:?}"
        );
    }
    // A truncated request: the head cut short, then the connection closed.
    let mut cut = TcpStream::connect(addr).await.unwrap();
    cut.write_all(b"GET /api HTTP/1.1\r\nHo").await.unwrap();
    cut.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(within, cut.read_to_end(&mut rest)).await;
    // None of it reached the model, and the server still serves.
    assert!(answer_to(addr, good, within).await.contains("200"));
    let summary = server.stop().await;
    assert_eq!(summary.completed, 2);
    assert_eq!(summary.peak_concurrency, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_read_timeout_also_closes_idle_connections_and_the_pool_copes() {
    // hyper counts the idle time of a keep-alive connection against the
    // header-read timeout: an idle connection is closed after it.
    let server = Running::with_header_read_timeout(ms(100));
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0; 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let eof = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
    assert!(matches!(eof, Ok(Ok(0))), "{eof:?}");
    // The client's pool skips closed connections: with think times far
    // above the timeout every connection is closed between requests, and
    // no attempt fails.
    let config = ClientConfig {
        clients: 3,
        think: ThinkTime::new(ms(400)),
        duration: Some(ms(1500)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let t = summary.totals.tally;
    assert!(t.ok >= 3, "{t:?}");
    assert_eq!(t.errors, 0, "{t:?}");
    server.stop().await;
}
