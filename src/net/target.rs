//! Where attempts go and what they say: the resolved address, how to
//! reach it (plain or TLS, HTTP/1.1 or HTTP/2), the request every attempt
//! sends (method, headers, body, or a gRPC call), and how its answer is
//! read into an outcome. The client's connections, the probe and a tier's
//! calls all send through it.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Uri};

use super::tls::Dialer;
use crate::model::deadline::GRPC_TIMEOUT_HEADER;
use crate::model::grpc::{self, Code};
use crate::model::outcome::{Hints, PUSHBACK_HEADER};
use crate::model::wire::{Transport, Wire};
use crate::policy::read_hints;

/// `grpc-timeout` as a header name, made once: a name given as text is
/// parsed again at every insert.
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static(GRPC_TIMEOUT_HEADER);

/// An error from the connection or the exchange.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The request every attempt sends, made once.
#[derive(Debug)]
struct Prepared {
    method: Method,
    headers: HeaderMap,
    body: Bytes,
    /// A gRPC call: its answer's status is `grpc-status`.
    grpc: bool,
}

/// Where attempts go and how.
#[derive(Clone)]
pub(crate) struct Target {
    /// The address the host resolved to.
    pub(crate) addr: SocketAddr,
    /// `host:port` as the URL wrote it, for `Host` or `:authority`.
    pub(crate) authority: String,
    /// The same as HTTP/1.1's `Host` header, made once rather than for
    /// every attempt.
    host: HeaderValue,
    /// The path and query requested (a gRPC call's method path).
    pub(crate) path: Uri,
    /// The whole URI, as HTTP/2 sends it (`:scheme`, `:authority`,
    /// `:path`).
    absolute: Uri,
    /// Plain or TLS.
    pub(crate) dialer: Dialer,
    /// HTTP/1.1 or HTTP/2.
    pub(crate) transport: Transport,
    request: Arc<Prepared>,
}

/// A URL taken apart.
struct Parsed {
    url: Uri,
    https: bool,
    host: String,
    port: u16,
}

impl Target {
    /// Resolves an `http://` or `https://` URL, and makes the request
    /// `wire` describes, or says why either cannot be used.
    pub(crate) async fn resolve(url: &str, wire: &Wire) -> Result<Target, String> {
        let parsed = parse(url)?;
        let addr = tokio::net::lookup_host((parsed.host.as_str(), parsed.port))
            .await
            .ok()
            .and_then(|mut addrs| addrs.next());
        Target::at(parsed, addr, wire)
    }

    /// [`Target::resolve`], blocking the thread while a host name is
    /// looked up (for a server's start, before it serves anything).
    pub(crate) fn resolve_now(url: &str, wire: &Wire) -> Result<Target, String> {
        use std::net::ToSocketAddrs;
        let parsed = parse(url)?;
        let addr = (parsed.host.as_str(), parsed.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next());
        Target::at(parsed, addr, wire)
    }

    /// The target of a parsed URL at `addr`, the address its host
    /// resolved to.
    fn at(parsed: Parsed, addr: Option<SocketAddr>, wire: &Wire) -> Result<Target, String> {
        let host = &parsed.host;
        let addr = addr.ok_or_else(|| format!("cannot resolve host '{host}'"))?;
        let path = match &wire.grpc {
            Some(call) => grpc::method_path(&call.method)?,
            None => parsed
                .url
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string(),
        };
        let authority = parsed
            .url
            .authority()
            .expect("a URL with a host")
            .to_string();
        let host_header = HeaderValue::from_str(&authority)
            .map_err(|e| format!("'{authority}' is not a Host header: {e}"))?;
        let scheme = if parsed.https { "https" } else { "http" };
        let absolute = format!("{scheme}://{authority}{path}")
            .parse()
            .map_err(|e| format!("'{path}' is not a path: {e}"))?;
        Ok(Target {
            addr,
            authority,
            host: host_header,
            path: path
                .parse()
                .map_err(|e| format!("'{path}' is not a path: {e}"))?,
            absolute,
            dialer: Dialer::new(parsed.https, host, &wire.trust, wire.transport)?,
            transport: wire.transport,
            request: Arc::new(prepare(wire)?),
        })
    }

    /// The request of one attempt, saying it may take `left` more
    /// (`grpc-timeout`, which a tier passes on and a gRPC server honours).
    pub(crate) fn request(&self, left: &str) -> Request<Full<Bytes>> {
        let prepared = &self.request;
        let uri = match self.transport {
            Transport::Http1 => self.path.clone(),
            Transport::Http2 => self.absolute.clone(),
        };
        let mut request = Request::new(Full::new(prepared.body.clone()));
        *request.method_mut() = prepared.method.clone();
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        if self.transport == Transport::Http1 {
            headers.insert(header::HOST, self.host.clone());
        }
        if !prepared.headers.is_empty() {
            headers.extend(prepared.headers.clone());
        }
        if let Ok(left) = HeaderValue::from_str(left) {
            headers.insert(GRPC_TIMEOUT, left);
        }
        request
    }
}

impl Target {
    /// Whether attempts are gRPC calls.
    pub(crate) fn is_grpc(&self) -> bool {
        self.request.grpc
    }
}

/// An answer read to its end.
#[derive(Debug)]
pub(crate) struct Answer {
    /// A success: a 2xx, or gRPC's `OK`.
    pub(crate) ok: bool,
    /// What it told a retry policy (of a plain success, only its status).
    pub(crate) hints: Hints,
    /// The server said it closes the connection after this answer.
    pub(crate) closing: bool,
}

impl Target {
    /// Reads `response` to its end (body and trailers) and classifies it.
    pub(crate) async fn read(&self, response: Response<Incoming>) -> Result<Answer, BoxError> {
        // Taken apart, so that the headers are kept without a copy while
        // the body is read.
        let (parts, body) = response.into_parts();
        let status = parts.status;
        let headers = parts.headers;
        // A server that closes after its answer (one request a connection,
        // as gunicorn's sync workers) says so: the connection is not kept.
        let closing = headers
            .get(header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        let collected = body.collect().await?;
        if !self.request.grpc && status.is_success() {
            // A success tells a retry policy nothing: its headers are not
            // looked up, nor the clock read for them.
            let hints = Hints {
                status: Some(status.as_u16()),
                ..Hints::default()
            };
            return Ok(Answer {
                ok: true,
                hints,
                closing,
            });
        }
        let trailers = collected.trailers();
        // A Trailers-Only answer holds its status in its headers.
        let field = |name: &str| {
            trailers
                .and_then(|t| t.get(name))
                .or_else(|| headers.get(name))
                .and_then(|v| v.to_str().ok())
        };
        let mut hints = read_hints(status.as_u16(), field, std::time::SystemTime::now());
        let ok = if self.request.grpc {
            let code = Code::of_answer(status.as_u16(), field(grpc::STATUS_HEADER));
            hints.grpc = Some(code);
            hints.pushback_ms = field(PUSHBACK_HEADER).and_then(|v| v.trim().parse().ok());
            code == Code::Ok
        } else {
            false
        };
        Ok(Answer { ok, hints, closing })
    }
}

/// Checks that `url` is an `http://` or `https://` URL with a host,
/// without resolving it.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    parse(url).map(drop)
}

/// Checks that `wire` makes a request to `url`: its method, headers,
/// gRPC method and TLS trust (a `--ca-cert` file read), without resolving
/// the host, so that a bad flag is refused before anything is sent.
pub(crate) fn check_wire(url: &str, wire: &Wire) -> Result<(), String> {
    let nowhere = SocketAddr::from(([127, 0, 0, 1], 0));
    Target::at(parse(url)?, Some(nowhere), wire).map(drop)
}

/// `url` taken apart: an `http://` or `https://` URL with a host.
fn parse(url: &str) -> Result<Parsed, String> {
    let parsed: Uri = url
        .parse()
        .map_err(|e| format!("'{url}' is not a URL: {e}"))?;
    let https = match parsed.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(format!("'{url}' is not an http:// or https:// URL")),
    };
    let host = parsed
        .host()
        .ok_or_else(|| format!("'{url}' has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parsed.port_u16().unwrap_or(if https { 443 } else { 80 });
    Ok(Parsed {
        url: parsed,
        https,
        host,
        port,
    })
}

/// The request `wire` describes, its method and headers checked.
fn prepare(wire: &Wire) -> Result<Prepared, String> {
    let shape = &wire.request;
    let mut headers = HeaderMap::new();
    for (name, value) in &shape.headers {
        let header = format!("--header '{name}: {value}'");
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("{header}: not a header name: {e}"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|e| format!("{header}: not a header value: {e}"))?;
        headers.append(name, value);
    }
    match &wire.grpc {
        Some(call) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(grpc::CONTENT_TYPE),
            );
            headers.insert(header::TE, HeaderValue::from_static("trailers"));
            Ok(Prepared {
                method: Method::POST,
                headers,
                body: Bytes::from(grpc::frame(&call.message)),
                grpc: true,
            })
        }
        None => Ok(Prepared {
            method: Method::from_bytes(shape.method.as_bytes())
                .map_err(|_| format!("--method '{}' is not an HTTP method", shape.method))?,
            headers,
            body: Bytes::from(shape.body.clone()),
            grpc: false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::{GrpcCall, RequestShape, Trust};

    fn target(url: &str, wire: &Wire) -> Result<Target, String> {
        Target::resolve_now(url, wire)
    }

    #[test]
    fn a_plain_get_by_default() {
        let t = target("http://127.0.0.1:8070/api?x=1", &Wire::default()).unwrap();
        let r = t.request("1S");
        assert_eq!(r.method(), Method::GET);
        assert_eq!(r.uri(), "/api?x=1");
        assert_eq!(r.headers()[header::HOST], "127.0.0.1:8070");
        assert_eq!(r.headers()[GRPC_TIMEOUT_HEADER], "1S");
        assert!(!t.request.grpc);
    }

    #[test]
    fn method_headers_and_body_are_sent_as_given() {
        let wire = Wire {
            request: RequestShape {
                method: "POST".into(),
                headers: vec![
                    ("Authorization".into(), "Bearer t".into()),
                    ("x-tag".into(), "a".into()),
                    ("x-tag".into(), "b".into()),
                ],
                body: b"{\"k\":1}".to_vec(),
            },
            ..Wire::default()
        };
        let t = target("http://127.0.0.1:8070/", &wire).unwrap();
        let r = t.request("1S");
        assert_eq!(r.method(), Method::POST);
        assert_eq!(r.headers()["authorization"], "Bearer t");
        let tags: Vec<_> = r.headers().get_all("x-tag").iter().collect();
        assert_eq!(tags, ["a", "b"]);
        assert_eq!(r.body().size_hint_exact(), Some(7));
    }

    #[test]
    fn http2_sends_the_whole_uri_and_no_host_header() {
        let wire = Wire {
            transport: Transport::Http2,
            ..Wire::default()
        };
        let t = target("http://127.0.0.1:8070/api", &wire).unwrap();
        let r = t.request("1S");
        assert_eq!(r.uri(), "http://127.0.0.1:8070/api");
        assert!(r.headers().get(header::HOST).is_none());
    }

    #[test]
    fn a_grpc_call_posts_its_framed_message_to_the_method() {
        let wire = Wire {
            transport: Transport::Http2,
            grpc: Some(GrpcCall {
                message: vec![1, 2, 3],
                ..GrpcCall::default()
            }),
            trust: Trust {
                ca_cert: None,
                insecure: true,
            },
            ..Wire::default()
        };
        let t = target("https://localhost:8443/ignored", &wire).unwrap();
        let r = t.request("100m");
        assert_eq!(r.method(), Method::POST);
        assert_eq!(
            r.uri(),
            "https://localhost:8443/grpc.health.v1.Health/Check"
        );
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/grpc");
        assert_eq!(r.headers()[header::TE], "trailers");
        assert_eq!(r.body().size_hint_exact(), Some(8));
        assert!(t.request.grpc);
    }

    #[test]
    fn bad_urls_methods_and_headers_are_named() {
        let e = |url: &str, wire: &Wire| target(url, wire).err().unwrap();
        assert!(e("ftp://h/", &Wire::default()).contains("http:// or https://"));
        let bad_method = Wire {
            request: RequestShape {
                method: "GE T".into(),
                ..RequestShape::default()
            },
            ..Wire::default()
        };
        assert!(e("http://127.0.0.1:1/", &bad_method).contains("--method 'GE T'"));
        let bad_value = Wire {
            request: RequestShape {
                headers: vec![("x".into(), "a\nb".into())],
                ..RequestShape::default()
            },
            ..Wire::default()
        };
        assert!(e("http://127.0.0.1:1/", &bad_value).contains("not a header value"));
    }

    #[test]
    fn https_defaults_to_port_443() {
        let p = parse("https://example.com/x").unwrap();
        assert!(p.https);
        assert_eq!(p.port, 443);
        assert_eq!(parse("http://[::1]/").unwrap().host, "::1");
    }

    /// The body's exact length, as hyper reads it.
    trait Exact {
        fn size_hint_exact(&self) -> Option<u64>;
    }

    impl Exact for Full<Bytes> {
        fn size_hint_exact(&self) -> Option<u64> {
            hyper::body::Body::size_hint(self).exact()
        }
    }
}
