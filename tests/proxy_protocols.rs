//! The fault proxy (`storm proxy`) in front of targets that speak as the
//! user's services do (issue 60): a request's method, headers and body
//! reach the target as sent; an https:// target is reached by TLS with
//! `--ca-cert` or `--insecure`, a certificate it cannot trust is a 502
//! that says why, and a request whose client went during a stall reaches
//! it followed by TLS's close_notify and the FIN; `--http2` speaks HTTP/2
//! to the target (h2c, or ALPN over TLS) while clients speak HTTP/1.1 or
//! h2c, and a stall keeps an HTTP/2 client's connection open and passes
//! on a stream's reset at its end; `status=unavailable` answers a gRPC
//! request as gRPC does (Trailers-Only, with its pushback).
//!
//! The proxy runs as a child, as in `tests/proxy.rs`; the targets are this
//! test's own (hyper, tokio-rustls), with certificates made at run time
//! by rcgen. Loopback only; every wait bounded.

mod common;
#[allow(dead_code)]
#[path = "common/proxied.rs"]
mod proxied;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

use common::h2::frame;
use common::temp_dir;
use proxied::{PATIENCE, Proxy, SILENCE};

/// A CA made for the test, and a certificate for 127.0.0.1 it signed.
struct Certs {
    /// The CA's certificate, as `--ca-cert` takes it.
    ca_pem: PathBuf,
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Certs {
    fn make(name: &str) -> Certs {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        let dir = temp_dir(name);
        let ca_pem = dir.join("ca.pem");
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        Certs {
            ca_pem,
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        }
    }

    /// A server's TLS configuration offering `alpn`.
    fn acceptor(&self, alpn: &[&[u8]]) -> TlsAcceptor {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert.clone()],
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsAcceptor::from(Arc::new(config))
    }
}

/// What a target saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    version: Version,
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Its client reset it, or went, before it was answered.
    reset: bool,
}

impl Seen {
    fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Tells what it saw when dropped: a request never answered is one whose
/// stream or connection went.
struct Tell {
    seen: Option<Seen>,
    tx: mpsc::UnboundedSender<Seen>,
}

impl Drop for Tell {
    fn drop(&mut self) {
        if let Some(seen) = self.seen.take() {
            let _ = self.tx.send(seen);
        }
    }
}

/// A target on 127.0.0.1 speaking HTTP/1.1 and h2c, or both by ALPN over
/// TLS, which tells each request it reads whole; it answers `200 from
/// the target` if `answers`, else never.
struct Target {
    addr: SocketAddr,
    seen: mpsc::UnboundedReceiver<Seen>,
}

impl Target {
    fn start(rt: &Runtime, tls: Option<TlsAcceptor>, answers: bool) -> Target {
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = mpsc::unbounded_channel();
        rt.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (tx, tls) = (tx.clone(), tls.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| serve(req, tx.clone(), answers));
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let _ = match tls {
                        Some(tls) => {
                            let Ok(stream) = tls.accept(tcp).await else {
                                return;
                            };
                            builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await
                        }
                        None => builder.serve_connection(TokioIo::new(tcp), service).await,
                    };
                });
            }
        });
        Target { addr, seen }
    }

    fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://{}{path}", self.addr)
    }

    /// The next request seen.
    fn next(&mut self, rt: &Runtime) -> Seen {
        rt.block_on(async { tokio::time::timeout(PATIENCE, self.seen.recv()).await })
            .expect("a request reaches the target")
            .unwrap()
    }
}

async fn serve(
    req: Request<Incoming>,
    tx: mpsc::UnboundedSender<Seen>,
    answers: bool,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let (parts, mut body) = req.into_parts();
    let mut tell = Tell {
        seen: Some(Seen {
            version: parts.version,
            method: parts.method.to_string(),
            target: parts.uri.path_and_query().unwrap().to_string(),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
                .collect(),
            body: Vec::new(),
            reset: true,
        }),
        tx,
    };
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            // The stream reset while its body came.
            return Ok(Response::new(Full::new(Bytes::new())));
        };
        if let Ok(data) = frame.into_data() {
            let seen = tell.seen.as_mut().unwrap();
            seen.body.extend_from_slice(&data);
        }
    }
    if !answers {
        std::future::pending::<()>().await;
    }
    tell.seen.as_mut().unwrap().reset = false;
    drop(tell);
    Ok(Response::new(Full::new(Bytes::from_static(
        b"from the target",
    ))))
}

/// Sends `req` to the proxy at `addr` on a connection of its own, in
/// HTTP/1.1 or h2c: the answer's status, headers and body.
fn send(rt: &Runtime, addr: SocketAddr, h2c: bool, req: Request<Full<Bytes>>) -> Response<Bytes> {
    rt.block_on(async {
        let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
        let answer = if h2c {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .unwrap();
            tokio::spawn(conn);
            sender.send_request(req).await.unwrap()
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            sender.send_request(req).await.unwrap()
        };
        let (parts, body) = answer.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Response::from_parts(parts, body)
    })
}

/// A POST with headers and a body, to the proxy at `addr`, path `path`.
fn post(addr: SocketAddr, path: &str, h2c: bool) -> Request<Full<Bytes>> {
    let mut req = Request::post(format!("http://{addr}{path}"))
        .header("authorization", "Bearer t0ken")
        .header("x-multi", "a")
        .header("x-multi", "b")
        .header("content-type", "application/json");
    if h2c {
        req = req.version(Version::HTTP_2);
    }
    req.body(Full::new(Bytes::from_static(b"{\"order\":42}")))
        .unwrap()
}

fn assert_as_sent(seen: &Seen, path: &str) {
    assert_eq!(seen.method, "POST", "{seen:?}");
    assert_eq!(seen.target, path, "{seen:?}");
    assert_eq!(seen.header("authorization"), ["Bearer t0ken"], "{seen:?}");
    assert_eq!(seen.header("x-multi"), ["a", "b"], "{seen:?}");
    assert_eq!(seen.header("content-type"), ["application/json"]);
    assert_eq!(seen.body, b"{\"order\":42}", "{seen:?}");
}

#[test]
fn a_post_reaches_a_tls_target_as_sent_in_either_protocol_from_either_client() {
    let rt = Runtime::new().unwrap();
    let certs = Certs::make("proxy-tls");
    let mut target = Target::start(&rt, Some(certs.acceptor(&[b"h2", b"http/1.1"])), true);
    let url = target.url("https", "/api");
    let ca = certs.ca_pem.to_str().unwrap();
    for (flags, version) in [
        (&["--ca-cert", ca][..], Version::HTTP_11),
        (&["--ca-cert", ca, "--http2"][..], Version::HTTP_2),
        (&["--insecure", "--http2"][..], Version::HTTP_2),
    ] {
        let proxy = Proxy::start(&url, flags);
        for h2c in [false, true] {
            let answer = send(&rt, proxy.addr, h2c, post(proxy.addr, "/api?n=1", h2c));
            assert_eq!(answer.status(), 200, "{flags:?}");
            assert_eq!(answer.body(), "from the target");
            let seen = target.next(&rt);
            assert_as_sent(&seen, "/api?n=1");
            assert_eq!(seen.version, version, "{flags:?}: {seen:?}");
            assert!(!seen.reset);
            // HTTP/1.1 carries the authority the client addressed; HTTP/2
            // the target's own, as :authority.
            let host = seen.header("host");
            if version == Version::HTTP_11 {
                assert_eq!(host, [proxy.addr.to_string()], "{flags:?} {h2c}");
            } else {
                assert!(host.is_empty(), "{seen:?}");
            }
        }
    }
}

#[test]
fn a_certificate_the_proxy_cannot_trust_is_a_502_that_says_why() {
    let rt = Runtime::new().unwrap();
    let (certs, other) = (Certs::make("proxy-tls-bad"), Certs::make("proxy-tls-other"));
    let mut target = Target::start(&rt, Some(certs.acceptor(&[b"http/1.1"])), true);
    let proxy = Proxy::start(
        &target.url("https", "/api"),
        &["--ca-cert", other.ca_pem.to_str().unwrap()],
    );
    let answer = send(&rt, proxy.addr, false, post(proxy.addr, "/api", false));
    assert_eq!(answer.status(), 502);
    let body = String::from_utf8(answer.body().to_vec()).unwrap();
    assert!(
        body.contains("bad gateway") && body.contains("invalid peer certificate"),
        "{body}"
    );
    // Nothing reached it: the handshake failed before any request.
    let nothing = rt.block_on(async { tokio::time::timeout(SILENCE, target.seen.recv()).await });
    assert!(nothing.is_err(), "{nothing:?}");
    let (_, stdout, _) = proxy.terminate();
    assert!(stdout.contains("upstream errors 1"), "{stdout}");
}

#[test]
fn a_request_whose_client_went_in_a_stall_reaches_a_tls_target_then_close_notify_and_fin() {
    let rt = Runtime::new().unwrap();
    let certs = Certs::make("proxy-tls-gone");
    let acceptor = certs.acceptor(&[b"http/1.1"]);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("https://{}/api", listener.local_addr().unwrap());
    // Reads one connection to its end: what came, and whether it ended
    // with TLS's close_notify (read_to_end is Ok) rather than a bare FIN
    // (an unexpected EOF) or a reset.
    let reading = rt.spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut read = Vec::new();
        let ended = tokio::time::timeout(PATIENCE, tls.read_to_end(&mut read)).await;
        (String::from_utf8(read).unwrap(), format!("{ended:?}"))
    });
    let ca = certs.ca_pem.to_str().unwrap();
    let mut proxy = Proxy::start(&url, &["--ca-cert", ca, "--fault", "stall"]);
    let mut conn = std::net::TcpStream::connect(proxy.addr).unwrap();
    proxy.row_where("the connection accepted", |r| r.connections == 1);
    proxy.switch("USR1");
    let body = "{\"order\":42}";
    write!(
        conn,
        "POST /api?gone HTTP/1.1\r\nhost: x\r\nx-custom: kept\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    drop(conn);
    proxy.switch("USR2");
    let (read, ended) = rt.block_on(reading).unwrap();
    assert!(read.starts_with("POST /api?gone HTTP/1.1\r\n"), "{read:?}");
    assert!(read.contains("x-custom: kept\r\n"), "{read:?}");
    assert!(read.ends_with(&format!("\r\n\r\n{body}")), "{read:?}");
    assert_eq!(
        ended,
        format!("Ok(Ok({}))", read.len()),
        "close_notify, then FIN"
    );
    let (_, stdout, _) = proxy.terminate();
    assert!(stdout.contains("upstream errors 0, gone 1"), "{stdout}");
}

#[test]
fn grpc_requests_get_trailers_only_and_others_the_http_status_it_maps_to() {
    let rt = Runtime::new().unwrap();
    let target = Target::start(&rt, None, true);
    let mut proxy = Proxy::start(
        &target.url("http", "/api"),
        &[
            "--http2",
            "--fault",
            "status=unavailable,retry-after=1500ms",
        ],
    );
    let addr = proxy.addr;
    let grpc = |h2c: bool| {
        let mut req = Request::post(format!("http://{addr}/grpc.health.v1.Health/Check"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if h2c {
            req = req.version(Version::HTTP_2);
        }
        req.body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
            .unwrap()
    };
    proxy.switch("USR1");
    let answer = send(&rt, proxy.addr, true, grpc(true));
    assert_eq!(answer.status(), 200);
    let headers = answer.headers();
    assert_eq!(headers["content-type"], "application/grpc");
    assert_eq!(headers["grpc-status"], "14");
    assert_eq!(headers["grpc-message"], "answered by the fault proxy");
    assert_eq!(headers["grpc-retry-pushback-ms"], "1500");
    assert!(answer.body().is_empty(), "Trailers-Only: the head alone");
    let plain = send(&rt, proxy.addr, false, post(proxy.addr, "/api", false));
    assert_eq!(plain.status(), 503);
    assert_eq!(plain.headers()["retry-after"], "1.5");
    let (_, stdout, _) = proxy.terminate();
    assert!(stdout.contains("injected 2"), "{stdout}");
}

#[test]
fn grpc_passes_through_over_h2c_with_te_trailers_and_a_stall_passes_a_streams_reset_on() {
    let rt = Runtime::new().unwrap();
    let mut target = Target::start(&rt, None, false);
    let mut proxy = Proxy::start(
        &target.url("http", "/api"),
        &["--http2", "--fault", "stall"],
    );
    // An HTTP/2 client written by hand, so that its frames are in the
    // proxy's socket before the stall ends: the preface and SETTINGS,
    // then during the stall a gRPC call's HEADERS and DATA, and its
    // RST_STREAM (CANCEL), as a client whose deadline ran out sends.
    let mut conn = std::net::TcpStream::connect(proxy.addr).unwrap();
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    conn.write_all(&frame(0x4, 0, 0, &[])).unwrap();
    // Whatever the proxy writes on a new connection (its SETTINGS, their
    // acknowledgement) read before the stall: a PING's answer comes after.
    conn.write_all(&frame(0x6, 0, 0, b"before!!")).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    read_until(&mut conn, &frame(0x6, 0x1, 0, b"before!!"));
    proxy.switch("USR1");
    let block = hpack(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/pkg.Svc/Call"),
        (":authority", "proxied.example"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-timeout", "100m"),
    ]);
    conn.write_all(&frame(0x1, 0x4, 1, &block)).unwrap();
    conn.write_all(&frame(0x0, 0x1, 1, &[0, 0, 0, 0, 2, 0x08, 0x01]))
        .unwrap();
    conn.write_all(&frame(0x3, 0, 1, &8u32.to_be_bytes()))
        .unwrap();
    // The stall keeps the connection open and silent.
    conn.set_read_timeout(Some(SILENCE)).unwrap();
    let mut buf = [0u8; 1024];
    let during = conn.read(&mut buf);
    assert!(
        during
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "nothing, and no end, during the stall: {during:?}"
    );
    proxy.switch("USR2");
    let seen = target.next(&rt);
    assert_eq!(seen.version, Version::HTTP_2);
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.target, "/pkg.Svc/Call");
    assert_eq!(seen.header("te"), ["trailers"], "gRPC's TE passes");
    assert_eq!(seen.header("grpc-timeout"), ["100m"]);
    assert_eq!(seen.body, [0, 0, 0, 0, 2, 0x08, 0x01], "{seen:?}");
    assert!(seen.reset, "the stream reset after the request: {seen:?}");
    // The client's connection is still open: a PING is answered.
    conn.write_all(&frame(0x6, 0, 0, b"after!!!")).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    read_until(&mut conn, &frame(0x6, 0x1, 0, b"after!!!"));
    let (_, stdout, _) = proxy.terminate();
    assert!(stdout.contains("gone 1"), "{stdout}");
}

/// Reads `conn` until `needle` has come.
fn read_until(conn: &mut std::net::TcpStream, needle: &[u8]) {
    let (mut got, mut buf) = (Vec::new(), [0u8; 1024]);
    while !got.windows(needle.len()).any(|w| w == needle) {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "the proxy closed the connection: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// A header block of literal fields without indexing (RFC 7541, section
/// 6.2.2), names and values short and not Huffman-coded.
fn hpack(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0);
        for s in [name, value] {
            assert!(s.len() < 127);
            out.push(s.len() as u8);
            out.extend(s.as_bytes());
        }
    }
    out
}

#[test]
fn ca_cert_and_insecure_are_refused_before_anything_runs_when_wrong() {
    let out = common::command(proxied::STORM)
        .args(["proxy", "--listen", "127.0.0.1:0"])
        .args([
            "--upstream",
            "https://127.0.0.1:1/",
            "--ca-cert",
            "/nonexistent/ca.pem",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--ca-cert /nonexistent/ca.pem"), "{err}");
}

#[test]
fn a_fractions_fault_takes_one_stream_and_leaves_the_others_on_its_connection() {
    let rt = Runtime::new().unwrap();
    let mut target = Target::start(&rt, None, true);
    // Seed 1 draws the first request into the fraction of 0.99.
    let mut proxy = Proxy::start(
        &target.url("http", "/api"),
        &[
            "--http2",
            "--fault",
            "blackhole,fraction=0.99",
            "--fault-on",
            "--seed",
            "1",
        ],
    );
    let addr = proxy.addr;
    let (mut sender, swallowed) = rt.block_on(async {
        let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut first = sender.clone();
        let swallowed = tokio::spawn(async move {
            let req = post(addr, "/api?swallowed", true);
            first.send_request(req).await.map(|r| r.status())
        });
        (sender, swallowed)
    });
    proxy.row_where("the first stream held", |r| r.held == 1);
    proxy.switch("USR2");
    // The same connection's next stream goes through.
    let answer = rt.block_on(sender.send_request(post(addr, "/api?next", true)));
    assert_eq!(answer.unwrap().status(), 200);
    let seen = target.next(&rt);
    assert_as_sent(&seen, "/api?next");
    assert!(!swallowed.is_finished(), "the swallowed stream stays open");
    // Its client resets it: gone, never forwarded.
    swallowed.abort();
    proxy.row_where("the swallowed stream gone", |r| {
        r.held == 0 && r.gone_per_s > 0.0
    });
    let (_, stdout, _) = proxy.terminate();
    assert!(stdout.contains("gone 1"), "{stdout}");
    let nothing = rt.block_on(async { tokio::time::timeout(SILENCE, target.seen.recv()).await });
    assert!(nothing.is_err(), "{nothing:?}");
}
