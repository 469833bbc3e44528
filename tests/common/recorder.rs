//! A target that records what it was sent (method, path, headers, body,
//! protocol) and answers as a test asks: HTTP/1.1 and HTTP/2 in clear on
//! one port, or TLS with ALPN, its certificate made by rcgen as it starts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// One request as the target read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub version: Version,
    /// The client's end of the connection it came on.
    pub peer: SocketAddr,
}

/// How the target answers.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    /// An HTTP status, empty body.
    Http(u16),
    /// A gRPC answer: a message then trailers with `grpc-status`, or, for
    /// an error, Trailers-Only; with a pushback in milliseconds.
    Grpc {
        status: u32,
        pushback_ms: Option<i64>,
    },
}

/// A certificate and key for `localhost`, written as PEM files into `dir`.
pub struct Certificate {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certificate {
    pub fn make(dir: &Path) -> Certificate {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        Certificate { cert, key }
    }

    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&self.key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

/// The running target.
pub struct Recorder {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn answer(reply: Reply) -> Response<Body> {
    match reply {
        Reply::Http(status) => Response::builder()
            .status(status)
            .body(Full::new(Bytes::new()).boxed())
            .unwrap(),
        Reply::Grpc {
            status,
            pushback_ms,
        } => {
            let mut fields = HeaderMap::new();
            fields.insert("grpc-status", HeaderValue::from(status));
            if let Some(ms) = pushback_ms {
                fields.insert("grpc-retry-pushback-ms", HeaderValue::from(ms));
            }
            let builder = Response::builder()
                .status(200)
                .header("content-type", "application/grpc");
            if status == 0 {
                let frames = vec![
                    Frame::data(Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1])),
                    Frame::trailers(fields),
                ];
                builder.body(Frames(frames.into()).boxed()).unwrap()
            } else {
                let mut response = builder.body(Full::new(Bytes::new()).boxed()).unwrap();
                response.headers_mut().extend(fields);
                response
            }
        }
    }
}

/// A body of the frames given, one a poll: data, then trailers.
struct Frames(std::collections::VecDeque<Frame<Bytes>>);

impl hyper::body::Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.get_mut().0.pop_front().map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

impl Recorder {
    /// A target on 127.0.0.1, in clear or by TLS with `tls`, answering
    /// each request as `reply` says.
    pub async fn start(
        tls: Option<&Certificate>,
        reply: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let acceptor = tls.map(Certificate::acceptor);
        let (log, reply) = (seen.clone(), Arc::new(reply));
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, peer)) = listener.accept().await else {
                    return;
                };
                let (log, reply, acceptor) = (log.clone(), reply.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (log, reply) = (log.clone(), reply.clone());
                        async move {
                            let (parts, body) = req.into_parts();
                            // A request its client cut short (the run's
                            // end) is not recorded.
                            let Ok(body) = body.collect().await.map(|c| c.to_bytes()) else {
                                return Ok(answer(Reply::Http(400)));
                            };
                            let seen = Seen {
                                method: parts.method.to_string(),
                                path: parts.uri.path().to_string(),
                                headers: parts.headers,
                                body,
                                version: parts.version,
                                peer,
                            };
                            let response = answer(reply(&seen));
                            log.lock().unwrap().push(seen);
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    match acceptor {
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                        }
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                            }
                        }
                    }
                });
            }
        });
        Recorder { addr, seen, task }
    }

    /// What it has been sent so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// A gRPC target in clear that serves no method: every call answered
    /// UNIMPLEMENTED (12).
    pub async fn unimplemented() -> Recorder {
        Recorder::start(None, |_| Reply::Grpc {
            status: 12,
            pushback_ms: None,
        })
        .await
    }

    /// That the one request it was sent asked for `path`: the check
    /// before any load, and no load after it.
    pub fn saw_the_check_alone(&self, path: &str) {
        let seen = self.seen();
        assert_eq!(seen.len(), 1, "the check alone, no load");
        assert_eq!(seen[0].path, path);
    }
}
