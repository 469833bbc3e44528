//! A pool whose requests wait in the listen backlog, on the real network:
//! its workers accept a connection only when free, the kernel holds the
//! rest (and drops connection attempts beyond its accept queue), each
//! connection carries one request, and a request whose client has gone is
//! served all the same.

mod common;

use std::time::Duration;

use common::running::{Running, ms};
use retry_storm::model::server::{PoolModel, ServerConfig, Shape};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// `workers` serving `service` each, waiting in a backlog of `backlog`.
fn backlog_pool(workers: u32, service: Duration, backlog: u32) -> Running {
    Running::start_config(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        shape: Shape::Pool(PoolModel::backlog(workers, service)),
        backlog,
        report_interval: ms(20),
        timer_resolution: Duration::ZERO,
        quiet: true,
        ..ServerConfig::default()
    })
}

const GET: &[u8] = b"GET /api HTTP/1.1\r\nHost: test\r\n\r\n";

/// Sends one GET on `stream` and reads until the server closes it.
async fn answer(mut stream: TcpStream) -> String {
    stream.write_all(GET).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_accept_only_when_free_and_the_kernel_drops_attempts_beyond_the_backlog() {
    // One worker, 400 ms a request, a backlog of 2: one connection served,
    // three waiting in the kernel's accept queue (Linux holds backlog + 1),
    // and the SYNs of the next two dropped until a place frees.
    let server = backlog_pool(1, ms(400), 2);
    let start = Instant::now();
    let mut attempts = Vec::new();
    for _ in 0..6 {
        let addr = server.addr;
        attempts.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let connected = start.elapsed();
            let text = answer(stream).await;
            (connected, start.elapsed(), text)
        }));
    }
    let mut answers = Vec::new();
    for attempt in attempts {
        answers.push(attempt.await.unwrap());
    }
    for (_, _, text) in &answers {
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "one request a connection: {text}"
        );
    }
    // The kernel retransmits a dropped SYN after a second.
    let late = answers
        .iter()
        .filter(|(connected, _, _)| *connected >= ms(900))
        .count();
    assert!(late >= 2, "two SYNs dropped: {answers:?}");
    // One worker: the k-th answer comes no sooner than k service times.
    let mut ends: Vec<Duration> = answers.iter().map(|a| a.1).collect();
    ends.sort();
    for (k, end) in ends.iter().enumerate() {
        assert!(*end >= ms(400) * (k as u32 + 1), "answer {k} at {end:?}");
    }
    let summary = server.stop().await;
    assert_eq!(summary.completed, 6);
    assert_eq!(
        summary.peak_concurrency, 4,
        "one served and backlog + 1 waiting, as the kernel reports them"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_left_while_it_waited_is_served_all_the_same() {
    let server = backlog_pool(1, ms(300), 8);
    let start = Instant::now();
    let first = TcpStream::connect(server.addr).await.unwrap();
    let first = tokio::spawn(answer(first));
    // Accepted before the next connection arrives: a worker is free.
    while server
        .gauges
        .concurrency
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
    {
        tokio::task::yield_now().await;
    }
    let mut gone = TcpStream::connect(server.addr).await.unwrap();
    gone.write_all(GET).await.unwrap();
    drop(gone);
    let last = TcpStream::connect(server.addr).await.unwrap();
    let last = answer(last).await;
    assert!(last.starts_with("HTTP/1.1 200"), "{last}");
    assert!(first.await.unwrap().starts_with("HTTP/1.1 200"));
    // The gone client's request took the worker before the last one's.
    assert!(start.elapsed() >= ms(900), "{:?}", start.elapsed());
    let summary = server.stop().await;
    assert_eq!((summary.completed, summary.abandoned), (2, 1));
}
