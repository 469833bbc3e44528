//! The server's protocols on the wire: HTTP/1.1 and HTTP/2 (h2c) on one
//! listener, HTTP/2's stream limit and its resets, https with ALPN, and
//! gRPC's answers, driven by hyper's own HTTP/2 client and by frames
//! written by hand where a client library would hide them.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::running::{Running, model, ms};
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use retry_storm::model::grpc_status::Overload;
use retry_storm::model::server::{OnDisconnect, ServerConfig, Shedding, TlsFiles};
use retry_storm::model::wire::{Transport, Trust};
use retry_storm::net::server::{Gauges, Server};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Waits until `cond` holds, failing after `within`.
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

fn server(base: Duration, on_disconnect: OnDisconnect) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        model: model(base),
        on_disconnect,
        report_interval: ms(50),
        timer_resolution: Duration::ZERO,
        quiet: true,
        ..ServerConfig::default()
    }
}

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// An HTTP/2 connection by prior knowledge over `io`.
async fn h2<I>(io: I) -> Sender
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(conn);
    sender
}

fn get(path: &str) -> Request<Full<Bytes>> {
    Request::get(format!("http://localhost{path}"))
        .body(Full::default())
        .unwrap()
}

/// A gRPC call to `method` carrying `body` (framed messages, or not).
fn grpc(method: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::post(format!("http://localhost/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// The empty message, framed: what a health check sends.
const EMPTY: [u8; 5] = [0, 0, 0, 0, 0];

/// An answer's status, headers, whole body and trailers.
async fn whole(
    resp: Response<hyper::body::Incoming>,
) -> (
    StatusCode,
    hyper::HeaderMap,
    Bytes,
    Option<hyper::HeaderMap>,
) {
    let (head, body) = resp.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    (head.status, head.headers, collected.to_bytes(), trailers)
}

/// Sends raw bytes over HTTP/1.1 and returns the whole answer.
async fn http1(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_listener_serves_http1_and_h2c() {
    let server = Running::start_config(server(ms(5), OnDisconnect::Continue));
    let mut sender = h2(TcpStream::connect(server.addr).await.unwrap()).await;
    let resp = sender.send_request(get("/api")).await.unwrap();
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let (status, _, body, _) = whole(resp).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"OK"[..]));
    let answer = http1(
        server.addr,
        "GET /api HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let summary = server.stop().await;
    assert_eq!(summary.completed, 2);
}

/// HTTP/2's frames, written and read by hand.
mod frames {
    use super::*;

    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    /// RST_STREAM's and GOAWAY's codes.
    pub const CANCEL: u32 = 0x8;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;

    pub use crate::common::h2::frame;

    /// A GET of /api on `stream`, ended (END_STREAM, END_HEADERS), its
    /// header block in HPACK: `:method GET` and `:scheme http` from the
    /// static table, `:path /api` a literal with the table's name.
    pub fn get_api(stream: u32) -> Vec<u8> {
        let block = [0x82, 0x86, 0x04, 0x04, b'/', b'a', b'p', b'i'];
        frame(HEADERS, 0x5, stream, &block)
    }

    pub fn reset(stream: u32) -> Vec<u8> {
        frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes())
    }

    /// The next frame: its type, flags, stream and payload.
    pub async fn read(s: &mut TcpStream) -> (u8, u8, u32, Vec<u8>) {
        let mut head = [0u8; 9];
        s.read_exact(&mut head).await.unwrap();
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0; len];
        s.read_exact(&mut payload).await.unwrap();
        (head[3], head[4], stream, payload)
    }

    /// Opens an HTTP/2 connection and returns it with the server's first
    /// SETTINGS, as (identifier, value) pairs.
    pub async fn open(addr: SocketAddr) -> (TcpStream, Vec<(u16, u32)>) {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(PREFACE).await.unwrap();
        s.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
        let (kind, flags, _, payload) = read(&mut s).await;
        assert_eq!((kind, flags), (SETTINGS, 0), "the server's SETTINGS first");
        let settings = payload
            .chunks(6)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                )
            })
            .collect();
        s.write_all(&frame(SETTINGS, 0x1, 0, &[])).await.unwrap();
        (s, settings)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_limit_is_what_the_servers_settings_say() {
    for (limit, expected) in [(None, 200), (Some(7), 7)] {
        let mut config = server(ms(5), OnDisconnect::Continue);
        if let Some(limit) = limit {
            config.max_streams = limit;
        }
        let server = Running::start_config(config);
        let (_s, settings) = frames::open(server.addr).await;
        // SETTINGS_MAX_CONCURRENT_STREAMS is identifier 3.
        let max = settings.iter().find(|(id, _)| *id == 3).map(|&(_, v)| v);
        assert_eq!(max, Some(expected), "{settings:?}");
        server.stop().await;
    }
}

/// A client's RST_STREAM drops the handler at once: a `cancel` server
/// takes the work out of the model, and the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_stream_cancels_its_work_and_the_connection_stays() {
    let server = Running::start_config(server(Duration::from_secs(60), OnDisconnect::Cancel));
    let g = server.gauges.clone();
    let sender = h2(TcpStream::connect(server.addr).await.unwrap()).await;
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let mut sender = sender.clone();
            tokio::spawn(async move { sender.send_request(get("/api")).await })
        })
        .collect();
    eventually("3 in the model", Duration::from_secs(10), || {
        g.concurrency.load(Ordering::Relaxed) == 3
    })
    .await;
    // Dropping an answer's future makes hyper's client reset its stream.
    for call in &calls {
        call.abort();
    }
    eventually("3 cancelled", Duration::from_secs(10), || {
        g.abandoned.load(Ordering::Relaxed) == 3
    })
    .await;
    assert_eq!(g.concurrency.load(Ordering::Relaxed), 0);
    let mut sender = sender.clone();
    let resp = sender.send_request(get("/elsewhere")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND, "the same connection");
    let summary = server.stop().await;
    assert_eq!((summary.in_flight, summary.completed), (0, 0));
}

/// A server on a thread and runtime of its own, which the test can stop
/// as SIGSTOP would: a task that blocks the runtime until resumed.
struct Pausable {
    addr: SocketAddr,
    gauges: std::sync::Arc<Gauges>,
    runtime: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pausable {
    fn start(config: ServerConfig) -> Pausable {
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let server = Server::bind(ServerConfig {
                    threads: Some(1),
                    ..config
                })
                .unwrap();
                let handle = tokio::runtime::Handle::current();
                ready_tx
                    .send((server.local_addr(), server.gauges(), handle))
                    .unwrap();
                server
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let (addr, gauges, runtime) = ready.recv().unwrap();
        Pausable {
            addr,
            gauges,
            runtime,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Stops the server's runtime; it runs again when the returned sender
    /// sends or is dropped.
    fn pause(&self) -> std::sync::mpsc::Sender<()> {
        let (paused_tx, paused) = std::sync::mpsc::channel();
        let (resume, resumed) = std::sync::mpsc::channel::<()>();
        self.runtime.spawn(async move {
            paused_tx.send(()).unwrap();
            let _ = resumed.recv();
        });
        paused.recv().unwrap();
        resume
    }
}

impl Drop for Pausable {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap();
    }
}

/// Streams a stopped server reads with their resets, as it does when it
/// resumes after its clients timed out: each still reaches the model
/// (and a `cancel` server drops it at once), as an HTTP/1.1 request read
/// from the backlog does; beyond h2's 20 on one connection the server
/// ends the connection with GOAWAY ENHANCE_YOUR_CALM, a rapid-reset
/// defence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_reset_while_the_server_was_stopped_reach_the_model_up_to_h2s_limit() {
    use frames::*;
    for (streams, goaway) in [(10u32, false), (30, true)] {
        let server = Pausable::start(server(Duration::from_secs(60), OnDisconnect::Cancel));
        let (mut s, _) = open(server.addr).await;
        let resume = server.pause();
        let mut sent = Vec::new();
        for i in 0..streams {
            sent.extend(get_api(2 * i + 1));
            sent.extend(reset(2 * i + 1));
        }
        sent.extend(frame(PING, 0, 0, b"12345678"));
        s.write_all(&sent).await.unwrap();
        drop(resume);
        // Until the PING's answer, or the GOAWAY before it.
        let ended = loop {
            let (kind, flags, _, payload) = read(&mut s).await;
            match kind {
                GOAWAY => break Some(u32::from_be_bytes(payload[4..8].try_into().unwrap())),
                PING if flags == 0x1 => break None,
                _ => {}
            }
        };
        if goaway {
            assert_eq!(ended, Some(ENHANCE_YOUR_CALM), "{streams} reset streams");
        } else {
            assert_eq!(ended, None, "{streams} reset streams");
            let g = server.gauges.clone();
            eventually(
                "each stream counted, then cancelled",
                Duration::from_secs(10),
                || g.abandoned.load(Ordering::Relaxed) == u64::from(streams),
            )
            .await;
            assert_eq!(g.concurrency.load(Ordering::Relaxed), 0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_is_answered_with_its_message_then_status_zero() {
    let server = Running::start_config(server(ms(5), OnDisconnect::Continue));
    let mut sender = h2(TcpStream::connect(server.addr).await.unwrap()).await;
    for (method, message) in [
        (
            "grpc.health.v1.Health/Check",
            &[0, 0, 0, 0, 2, 0x08, 0x01][..],
        ),
        ("any.Service/Method", &EMPTY[..]),
    ] {
        let resp = sender.send_request(grpc(method, EMPTY.to_vec())).await;
        let (status, headers, body, trailers) = whole(resp.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{method}");
        assert_eq!(headers["content-type"], "application/grpc");
        assert!(!headers.contains_key("grpc-status"), "in the trailers");
        assert_eq!(&body[..], message, "{method}");
        let trailers = trailers.expect("trailers");
        assert_eq!(trailers["grpc-status"], "0", "{method}");
    }
    let summary = server.stop().await;
    assert_eq!(summary.completed, 2, "each call went through the model");
}

/// A refused call's answer is Trailers-Only: its status in the headers
/// of an answer that ends with them.
async fn trailers_only(sender: &mut Sender, req: Request<Full<Bytes>>) -> hyper::HeaderMap {
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.body().is_end_stream(), "END_STREAM on the HEADERS");
    let (_, headers, body, trailers) = whole(resp).await;
    assert!(
        body.is_empty() && trailers.is_none(),
        "{body:?} {trailers:?}"
    );
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_answered_trailers_only_with_the_code_asked_and_pushback() {
    for (overload, code) in [
        (Overload::Unavailable, "14"),
        (Overload::ResourceExhausted, "8"),
    ] {
        let server = Running::start_config(ServerConfig {
            shed: Some(Shedding {
                above: 1,
                status: 429,
                retry_after: Duration::from_secs(1),
            }),
            pushback_ms: Some(250),
            grpc_overload: overload,
            ..server(Duration::from_secs(60), OnDisconnect::Cancel)
        });
        let g = server.gauges.clone();
        let mut sender = h2(TcpStream::connect(server.addr).await.unwrap()).await;
        let mut first = sender.clone();
        let held =
            tokio::spawn(async move { first.send_request(grpc("a.B/C", EMPTY.to_vec())).await });
        eventually(
            "the first call in the model",
            Duration::from_secs(10),
            || g.concurrency.load(Ordering::Relaxed) == 1,
        )
        .await;
        let h = trailers_only(&mut sender, grpc("a.B/C", EMPTY.to_vec())).await;
        assert_eq!(h["grpc-status"], code, "{overload}");
        assert_eq!(h["grpc-message"], "overloaded, retry later");
        assert_eq!(h["grpc-retry-pushback-ms"], "250");
        assert_eq!(h["content-type"], "application/grpc");
        assert!(!h.contains_key("retry-after"), "HTTP's hint stays HTTP's");
        held.abort();
        let summary = server.stop().await;
        assert_eq!(summary.shed, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_backend_maps_its_status_without_pushback() {
    let server = Running::start_config(ServerConfig {
        fail: Some(retry_storm::model::server::Failing {
            rate: 1.0,
            status: 503,
        }),
        pushback_ms: Some(250),
        ..server(ms(5), OnDisconnect::Continue)
    });
    let mut sender = h2(TcpStream::connect(server.addr).await.unwrap()).await;
    let h = trailers_only(&mut sender, grpc("a.B/C", EMPTY.to_vec())).await;
    assert_eq!(h["grpc-status"], "14", "503 maps to UNAVAILABLE");
    assert!(!h.contains_key("grpc-retry-pushback-ms"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_call_is_an_error_and_never_reaches_the_model() {
    let server = Running::start_config(server(ms(5), OnDisconnect::Continue));
    let mut sender = h2(TcpStream::connect(server.addr).await.unwrap()).await;
    for (method, body, code) in [
        ("a.B/C", vec![0, 0, 0, 0, 9, 1], "13"),
        ("a.B/C", vec![1, 0, 0, 0, 0], "13"),
        ("a.B/C", vec![], "13"),
        ("nomethod", EMPTY.to_vec(), "12"),
    ] {
        let h = trailers_only(&mut sender, grpc(method, body.clone())).await;
        assert_eq!(h["grpc-status"], code, "{method} {body:?}");
    }
    // gRPC over HTTP/1.1: no trailers to answer with.
    let answer = http1(
        server.addr,
        "POST /a.B/C HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\n\
         Content-Length: 5\r\nConnection: close\r\n\r\n\0\0\0\0\0",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 505"), "{answer}");
    let summary = server.stop().await;
    assert_eq!(summary.completed + summary.peak_concurrency, 0);
}

/// A folder of its own under the system's temporary one, removed when
/// dropped, holding a certificate for localhost and its key.
struct Certificate(PathBuf);

impl Certificate {
    fn new(name: &str) -> Certificate {
        let dir = std::env::temp_dir().join(format!(
            "retry-storm-protocols-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.join("cert.pem"), made.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).unwrap();
        Certificate(dir)
    }

    fn files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.0.join("cert.pem"),
            key: self.0.join("key.pem"),
        }
    }
}

impl Drop for Certificate {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_h2_and_http1_by_alpn() {
    let certificate = Certificate::new("alpn");
    let files = certificate.files();
    let server = Running::start_config(ServerConfig {
        tls: Some(files.clone()),
        ..server(ms(5), OnDisconnect::Continue)
    });
    let trust = Trust {
        ca_cert: Some(files.cert.clone()),
        insecure: false,
    };
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    for transport in [Transport::Http2, Transport::Http1] {
        let config = retry_storm::net::tls::client_config(&trust, transport).unwrap();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let tcp = TcpStream::connect(server.addr).await.unwrap();
        let tls = connector.connect(name.clone(), tcp).await.unwrap();
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let (status, body) = match transport {
            Transport::Http2 => {
                assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
                let resp = h2(tls).await.send_request(get("/api")).await.unwrap();
                assert_eq!(resp.version(), hyper::Version::HTTP_2);
                let (status, _, body, _) = whole(resp).await;
                (status, body)
            }
            Transport::Http1 => {
                assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
                let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                    .await
                    .unwrap();
                tokio::spawn(conn);
                let resp = sender.send_request(get("/api")).await.unwrap();
                assert_eq!(resp.version(), hyper::Version::HTTP_11);
                let (status, _, body, _) = whole(resp).await;
                (status, body)
            }
        };
        assert_eq!(
            (status, &body[..]),
            (StatusCode::OK, &b"OK"[..]),
            "{transport:?}"
        );
    }
    // In clear, the handshake fails and the server goes on.
    let answer = http1(
        server.addr,
        "GET /api HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(!answer.contains("200 OK"), "{answer}");
    let summary = server.stop().await;
    assert_eq!(summary.completed, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_certificate_file_stops_the_server_before_it_listens() {
    let certificate = Certificate::new("bad");
    let mut files = certificate.files();
    files.key = files.cert.clone();
    let err = Server::bind(ServerConfig {
        tls: Some(files),
        ..server(ms(5), OnDisconnect::Continue)
    })
    .err()
    .expect("refused");
    assert!(err.to_string().starts_with("--tls-key"), "{err}");
}
