//! The real client sends what it was asked to, as it was asked: a POST
//! with headers and a body, over HTTP/1.1 or HTTP/2, in clear or TLS, or a
//! gRPC call whose outcome is its grpc-status, retried as gRPC's policy
//! retries. A recording target (tests/common/recorder.rs) says what
//! arrived and on how many connections.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::recorder::{Certificate, Recorder, Reply};
use common::running::{client_config, ms};
use hyper::Version;
use retry_storm::model::arrivals::ThinkTime;
use retry_storm::model::client::ClientConfig;
use retry_storm::model::grpc::{Code, Codes};
use retry_storm::model::wire::{GrpcCall, RequestShape, Transport, Trust, Wire};
use retry_storm::net::client;
use retry_storm::policy::shipped::{GrpcImplementation, ShippedBackoff};
use retry_storm::policy::{RetryLimits, Strategy};
use retry_storm::report::counts::Tally;
use retry_storm::report::summary::ClientSummary;

/// A short run of 20 users, one lane, against `url`, sending as `wire`.
async fn run(url: String, wire: Wire) -> ClientSummary {
    let config = ClientConfig {
        wire,
        threads: Some(1),
        think: ThinkTime::new(ms(5)),
        timeout: Duration::from_secs(2),
        duration: Some(ms(300)),
        ..client_config(url)
    };
    client::run(config, std::future::pending()).await.unwrap()
}

fn post() -> RequestShape {
    RequestShape {
        method: "POST".into(),
        headers: vec![
            ("Authorization".into(), "Bearer t0k3n".into()),
            ("Content-Type".into(), "application/json".into()),
        ],
        body: b"{\"order\":42}".to_vec(),
    }
}

fn connections(seen: &[common::recorder::Seen]) -> usize {
    seen.iter().map(|s| s.peer).collect::<BTreeSet<_>>().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_arrives_with_its_headers_and_body_over_http1() {
    let target = Recorder::start(None, |_| Reply::Http(200)).await;
    let wire = Wire {
        request: post(),
        ..Wire::default()
    };
    let summary = run(format!("http://{}/orders", target.addr), wire).await;
    let seen = target.seen();
    assert!(summary.totals.tally.ok > 20, "{:?}", summary.totals.tally);
    // Each user's last request may be cut by the end of the run.
    let ok = summary.totals.tally.ok;
    assert!((ok..=ok + 20).contains(&(seen.len() as u64)), "{ok}");
    for s in &seen {
        assert_eq!((s.method.as_str(), s.path.as_str()), ("POST", "/orders"));
        assert_eq!(s.headers["authorization"], "Bearer t0k3n");
        assert_eq!(s.headers["content-type"], "application/json");
        assert_eq!(&s.body[..], b"{\"order\":42}");
        assert_eq!(s.version, Version::HTTP_11);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_carries_every_user_on_one_connection() {
    let target = Recorder::start(None, |_| Reply::Http(200)).await;
    let wire = Wire {
        transport: Transport::Http2,
        request: post(),
        ..Wire::default()
    };
    let summary = run(format!("http://{}/orders", target.addr), wire).await;
    let seen = target.seen();
    assert!(summary.totals.tally.ok > 20, "{:?}", summary.totals.tally);
    assert!(seen.iter().all(|s| s.version == Version::HTTP_2));
    assert!(seen.iter().all(|s| &s.body[..] == b"{\"order\":42}"));
    // The first request is the check before the run, on a connection of
    // its own; the run's 20 users are streams on one connection.
    let ok = summary.totals.tally.ok;
    assert!((ok + 1..=ok + 21).contains(&(seen.len() as u64)), "{ok}");
    assert_eq!(connections(&seen[1..]), 1, "20 users on one connection");
    // The client's rows say so: one connection beside the streams.
    let csv = common::fresh_path("wire-h2.csv");
    let target = Recorder::start(None, |_| Reply::Http(200)).await;
    let config = ClientConfig {
        wire: Wire {
            transport: Transport::Http2,
            ..Wire::default()
        },
        threads: Some(1),
        think: ThinkTime::new(ms(5)),
        csv: Some(csv.clone()),
        ..client_config(format!("http://{}/", target.addr))
    };
    client::run(config, std::future::pending()).await.unwrap();
    let mut rows = csv::Reader::from_path(&csv).unwrap();
    let column = rows
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "connections")
        .expect("a connections column over HTTP/2");
    let held: Vec<u64> = rows
        .records()
        .map(|r| r.unwrap()[column].parse().unwrap())
        .collect();
    assert!(!held.is_empty() && held.iter().all(|&n| n == 1), "{held:?}");
    std::fs::remove_file(&csv).unwrap();
    // The same users over HTTP/1.1 need a connection each in flight.
    let target = Recorder::start(None, |_| Reply::Http(200)).await;
    run(format!("http://{}/", target.addr), Wire::default()).await;
    assert!(connections(&target.seen()) > 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_servers_certificate_trusted_by_file_or_insecure() {
    let dir = common::temp_dir("wire-tls");
    let certificate = Certificate::make(&dir);
    for transport in [Transport::Http1, Transport::Http2] {
        let target = Recorder::start(Some(&certificate), |_| Reply::Http(200)).await;
        let url = format!("https://localhost:{}/", target.addr.port());
        for trust in [
            Trust {
                ca_cert: Some(certificate.cert.clone()),
                insecure: false,
            },
            Trust {
                ca_cert: None,
                insecure: true,
            },
        ] {
            let wire = Wire {
                transport,
                trust: trust.clone(),
                ..Wire::default()
            };
            let t = run(url.clone(), wire).await.totals.tally;
            assert!(t.ok > 20 && t.errors == 0, "{transport:?} {trust:?}: {t:?}");
        }
        let want = match transport {
            Transport::Http1 => Version::HTTP_11,
            Transport::Http2 => Version::HTTP_2,
        };
        assert!(target.seen().iter().all(|s| s.version == want));
    }
    // A certificate nobody trusts: the run is refused before it starts.
    let target = Recorder::start(Some(&certificate), |_| Reply::Http(200)).await;
    let other = Certificate::make(&dir.join("other"));
    let wire = Wire {
        trust: Trust {
            ca_cert: Some(other.cert),
            insecure: false,
        },
        ..Wire::default()
    };
    let url = format!("https://localhost:{}/", target.addr.port());
    let refused = client::run(
        ClientConfig {
            wire,
            ..client_config(url)
        },
        std::future::pending(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("the TLS handshake failed"), "{refused}");
    assert!(target.seen().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A gRPC client with gRPC's own retry policy, up to 4 attempts,
/// retrying `retryable`.
fn grpc_client(url: String, retryable: Codes) -> ClientConfig {
    ClientConfig {
        wire: Wire {
            transport: Transport::Http2,
            grpc: Some(GrpcCall {
                message: vec![0x0a, 0x01, 0x78],
                ..GrpcCall::default()
            }),
            ..Wire::default()
        },
        clients: 5,
        threads: Some(1),
        think: ThinkTime::new(ms(5)),
        strategy: Strategy::Shipped(ShippedBackoff::Grpc {
            initial: ms(1),
            multiplier: 2.0,
            max: ms(4),
            implementation: GrpcImplementation::Core,
            retryable,
        }),
        limits: RetryLimits {
            max_attempts: Some(4),
            ..RetryLimits::default()
        },
        duration: Some(ms(300)),
        ..client_config(url)
    }
}

/// A gRPC client's totals against a target answering every call with
/// `status` (and `pushback_ms`), and the target; the client retries
/// `retryable`.
async fn grpc_run(status: u32, pushback_ms: Option<i64>, retryable: Codes) -> (Recorder, Tally) {
    let target = Recorder::start(None, move |_| Reply::Grpc {
        status,
        pushback_ms,
    })
    .await;
    let url = format!("http://{}/", target.addr);
    let tally = client::run(grpc_client(url, retryable), std::future::pending())
        .await
        .unwrap()
        .totals
        .tally;
    (target, tally)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_is_framed_and_its_outcome_is_its_grpc_status() {
    let (target, t) = grpc_run(0, None, Codes::default()).await;
    assert!(t.ok > 10 && t.errors == 0, "{t:?}");
    for s in target.seen() {
        assert_eq!(s.method, "POST");
        assert_eq!(s.path, "/grpc.health.v1.Health/Check");
        assert_eq!(s.headers["content-type"], "application/grpc");
        assert_eq!(s.headers["te"], "trailers");
        assert!(s.headers.contains_key("grpc-timeout"));
        assert_eq!(&s.body[..], &[0, 0, 0, 0, 3, 0x0a, 0x01, 0x78]);
        assert_eq!(s.version, Version::HTTP_2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_retries_its_retryable_codes_and_no_others() {
    let exhausted = Codes::of(&[Code::ResourceExhausted]);
    for (code, codes, retried) in [
        (Code::Unavailable, Codes::default(), true),
        (Code::ResourceExhausted, Codes::default(), false),
        // --grpc-retryable RESOURCE_EXHAUSTED: the other way round.
        (Code::ResourceExhausted, exhausted, true),
        (Code::Unavailable, exhausted, false),
    ] {
        let (_target, t) = grpc_run(code.number(), None, codes).await;
        assert!(t.ok == 0 && t.errors > 10, "{code}: {t:?}");
        if retried {
            // Each request goes four times: three retries to a first.
            assert!(t.retries >= 2 * t.started, "{code}: {t:?}");
        } else {
            assert_eq!(t.retries, 0, "{code}: {t:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trailers_only_pushback_stops_grpc_retries() {
    let (_target, t) = grpc_run(14, Some(-1), Codes::default()).await;
    assert!(t.errors > 10 && t.retries == 0, "{t:?}");
}

/// What the client says, refusing to start against `url` as `wire` asks.
async fn refused(url: String, wire: Wire) -> String {
    let config = ClientConfig {
        wire,
        ..client_config(url)
    };
    client::run(config, std::future::pending())
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_http2_or_an_unserved_grpc_method_is_refused_before_any_load() {
    // A server of HTTP/1.1 only answers the HTTP/2 preface with a 400.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let http1_only = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut tcp, _)) = listener.accept().await {
            let mut buf = [0; 1024];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                )
                .await;
        }
    });
    let h2 = Wire {
        transport: Transport::Http2,
        ..Wire::default()
    };
    let why = refused(format!("http://{addr}/"), h2).await;
    assert!(why.contains("does not speak HTTP/2"), "{why}");
    http1_only.abort();

    let target = Recorder::start(None, |_| Reply::Grpc {
        status: Code::Unimplemented.number(),
        pushback_ms: None,
    })
    .await;
    let grpc = grpc_client(String::new(), Codes::default()).wire;
    let why = refused(format!("http://{}/", target.addr), grpc).await;
    assert!(
        why.contains("does not serve grpc.health.v1.Health/Check"),
        "{why}"
    );
    assert_eq!(target.seen().len(), 1, "only the check, no load");
}
