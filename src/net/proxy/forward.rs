//! What the proxy does with each request it reads: while the fault is on,
//! the action its draw gives ([`Action`]); then, unless the fault answered
//! or swallowed it, the request forwarded to the target on a pooled
//! keep-alive connection, its body streamed both ways, and the target's
//! answer passed back as it came (its status, reason, headers and body),
//! hop-by-hop headers dropped each way (RFC 9110, section 7.6.1). A target
//! that does not answer gets its client a 502. A request whose client had
//! gone before it was forwarded goes with its client's departure instead
//! ([`departure`](super::departure)).

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::uri::Scheme;
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::connection::Connection;
use super::departure;
use super::switch::Switch;
use super::unsent::{self, Lent};
use crate::model::fault::{Action, Draws, Reply};
use crate::model::grpc::{CONTENT_TYPE, MESSAGE_HEADER, STATUS_HEADER};
use crate::model::outcome::AMZ_RETRY_AFTER_HEADER;
use crate::model::wire::{Transport, Trust};
use crate::net::endpoint::text;
use crate::net::handler::retry_after_values;
use crate::net::tls::{Dialer, client_config, provider};
use crate::report::proxy::{Occupancy, ProxyEvent, ProxyRecorder};

/// The target's answer to a forwarded request, or why there was none.
type ForwardResult = Result<Response<Incoming>, hyper_util::client::legacy::Error>;

/// A body passed back: the target's, streamed, or the proxy's own.
pub(super) type Body = Either<Incoming, Full<Bytes>>;

/// The headers that concern one connection only, never forwarded (RFC
/// 9110, section 7.6.1), besides those `Connection` names.
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Drops the hop-by-hop headers: those `Connection` names, then the
/// standard ones, all but `TE: trailers`, which says that the sender
/// takes trailers and which gRPC requires of every request (an
/// intermediary that passes trailers on, as this one does, may send it,
/// and HTTP/2 allows that one value of it).
pub(super) fn drop_hop_by_hop(headers: &mut HeaderMap) {
    let trailers = headers
        .get_all(header::TE)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// Forwards requests to the target, the fault between.
pub(super) struct Forward {
    client: Client<HttpsConnector<HttpConnector>, Lent<Incoming>>,
    /// The target's scheme and authority (`http://host:port`, or
    /// `https://`).
    upstream: Uri,
    /// How a request whose client has gone reaches the target.
    departure: departure::Route,
    switch: Arc<Switch>,
    draws: Mutex<Draws>,
    recorder: Arc<ProxyRecorder>,
}

/// Counts its request as gone if dropped before it is settled: hyper
/// drops a request's future when its client goes, polled or not.
struct Unanswered {
    recorder: Arc<ProxyRecorder>,
    settled: bool,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.settled {
            self.recorder.count(ProxyEvent::Gone);
        }
    }
}

impl Forward {
    /// Forwards to `upstream` (its scheme and authority) by `transport`,
    /// over TLS with `trust` if it is `https://`, the fault of `switch`
    /// between, its draws seeded with `seed`. An error if the TLS
    /// configuration cannot be made (an unreadable `--ca-cert`).
    pub(super) fn new(
        upstream: &Uri,
        (transport, trust): (Transport, &Trust),
        switch: Arc<Switch>,
        seed: u64,
        recorder: Arc<ProxyRecorder>,
    ) -> Result<Forward, String> {
        let https = upstream.scheme() == Some(&Scheme::HTTPS);
        let host = upstream.host().unwrap_or("");
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let tls = if https {
            client_config(trust, transport)?
        } else {
            // Never used: the connector speaks TLS to https:// only.
            rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS: {e}"))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        };
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let connector = HttpsConnector::from((http, Arc::new(tls)));
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_timer(TokioTimer::new());
        if transport == Transport::Http2 {
            // Prior knowledge in clear, and the only protocol offered by
            // ALPN over TLS: a target that cannot speak HTTP/2 fails.
            builder.http2_only(true).timer(TokioTimer::new());
        }
        let client = builder.build(connector);
        let mut parts = upstream.clone().into_parts();
        parts.path_and_query = None;
        Ok(Forward {
            client,
            upstream: Uri::from_parts(parts).unwrap_or_else(|_| upstream.clone()),
            departure: departure::Route::new(
                Dialer::new(https, host, trust, transport)?,
                transport,
            ),
            switch,
            draws: Mutex::new(Draws::new(seed)),
            recorder,
        })
    }

    /// What the proxy counts.
    pub(super) fn recorder(&self) -> &Arc<ProxyRecorder> {
        &self.recorder
    }

    /// hyper's service call for a request of `connection`. The request is
    /// counted, and its action drawn, here, as it is read: hyper may drop
    /// the future without ever polling it when its client has gone.
    pub(super) fn handle(
        self: &Arc<Self>,
        req: Request<Incoming>,
        connection: &Arc<Connection>,
    ) -> impl Future<Output = Result<Response<Body>, Infallible>> + Send + use<> {
        let read = Instant::now();
        self.recorder.count(ProxyEvent::Request);
        let action = if self.switch.is_on() {
            let fault = self.switch.fault();
            self.draws
                .lock()
                .expect("draws lock poisoned")
                .action(&fault)
        } else {
            Action::Forward
        };
        let unanswered = Unanswered {
            recorder: self.recorder.clone(),
            settled: false,
        };
        let (this, connection) = (self.clone(), connection.clone());
        // A request to forward goes on in a task of its own, which hyper
        // cannot drop: a request that reached the proxy reaches the
        // target, as one that reached a process is read by it, even when
        // its client has gone meanwhile (a stall's backlog read at its
        // end, a held or delayed request whose client gave up).
        let forwarding = match action {
            Action::Forward | Action::Hold | Action::Delay(_) if forwardable(req.method()) => {
                let (tell, answer) = oneshot::channel();
                tokio::spawn(this.clone().forward_detached(req, action, tell));
                Ok(answer)
            }
            _ => Err(req),
        };
        async move {
            // The guard whole, not its field alone, goes into the future.
            let mut unanswered = unanswered;
            let req = match forwarding {
                Ok(answer) => {
                    let answer = answer.await;
                    unanswered.settled = true;
                    return Ok(match answer {
                        Ok(Ok(response)) => {
                            connection.answering(read, response.status().as_u16());
                            response.map(Either::Left)
                        }
                        Ok(Err(e)) => {
                            this.recorder.count(ProxyEvent::UpstreamError);
                            let why =
                                format!("bad gateway: the target did not answer: {}\n", chain(&e));
                            let mut resp = Response::new(Full::new(Bytes::from(why)));
                            *resp.status_mut() = StatusCode::BAD_GATEWAY;
                            resp.map(Either::Right)
                        }
                        Err(_) => {
                            this.recorder.count(ProxyEvent::UpstreamError);
                            text(
                                StatusCode::BAD_GATEWAY,
                                "bad gateway: the target did not answer\n",
                            )
                            .map(Either::Right)
                        }
                    });
                }
                Err(req) => req,
            };
            let hold = |what| this.recorder.enter(what);
            match action {
                Action::Forward | Action::Hold | Action::Delay(_) => {}
                Action::Swallow => {
                    let _held = hold(Occupancy::Held);
                    // Read whole, so that hyper sees its client go.
                    let mut body = req.into_body();
                    while let Some(Ok(_)) = body.frame().await {}
                    std::future::pending::<()>().await;
                    unreachable!("a swallowed request is never answered");
                }
                Action::Reset => {
                    unanswered.settled = true;
                    connection.reset();
                    std::future::pending::<()>().await;
                }
                Action::Answer { code, retry_after } => {
                    unanswered.settled = true;
                    this.recorder.count(ProxyEvent::Injected);
                    let reply = code.reply(is_grpc(req.headers()));
                    return Ok(injected(reply, retry_after).map(Either::Right));
                }
            }
            // Only a request the proxy cannot forward is left here.
            unanswered.settled = true;
            let why = "not implemented: the fault proxy opens no tunnels\n";
            Ok(text(StatusCode::NOT_IMPLEMENTED, why).map(Either::Right))
        }
    }

    /// Holds `req` as `action` says (until the fault is off, or for its
    /// delay), forwards it, and tells its answer on `tell`. If its client
    /// goes once hyper has begun to write the request to the target, the
    /// request is dropped, which closes that connection: the target sees
    /// its client go, as it would without the proxy. If its client had
    /// gone before (hyper found it gone as it read the request, it gave
    /// up while the request was held, or while the pooled client waited
    /// for a connection), the request is forwarded all the same, on a
    /// connection of its own closed right after it (its client's
    /// departure, [`departure::carry`]): its bytes and its client's FIN
    /// reached the proxy as they would have reached a stopped target.
    async fn forward_detached(
        self: Arc<Self>,
        req: Request<Incoming>,
        action: Action,
        mut tell: oneshot::Sender<ForwardResult>,
    ) {
        {
            let _held = match action {
                Action::Hold | Action::Delay(_) => Some(self.recorder.enter(Occupancy::Held)),
                _ => None,
            };
            match action {
                Action::Hold => self.switch.off().await,
                Action::Delay(wait) => tokio::time::sleep(wait).await,
                _ => {}
            }
        }
        let req = self.outbound(req);
        if tell.is_closed() {
            self.depart(req).await;
            return;
        }
        let (req, unsent) = unsent::lend(req);
        tokio::select! {
            answer = self.forward(req) => {
                let _ = tell.send(answer);
            }
            () = tell.closed() => {
                // The pooled request is dropped by now (select! drops the
                // other branches before this one runs). If hyper had not
                // begun to write it, it was never sent: it goes with its
                // client's departure. If it had, the drop closed that
                // connection right behind it.
                if let Some(req) = unsent.take_back() {
                    self.depart(req).await;
                }
            }
        }
    }

    /// Sends `req`, whose client has gone (already counted), with its
    /// client's departure: in flight until the FIN has followed it.
    async fn depart(&self, req: Request<Incoming>) {
        let _in_flight = self.recorder.enter(Occupancy::InFlight);
        if let Err(e) = self.departure.carry(req).await {
            self.recorder.count(ProxyEvent::UpstreamError);
            warn_once(&format!(
                "a gone client's request could not be carried: {e}"
            ));
        }
    }

    /// `req` as it goes to the target: its URI the target's scheme and
    /// authority with the client's path and query, in the version the
    /// proxy speaks to the target, without its hop-by-hop headers. The
    /// authority a client addressed goes as `Host` over HTTP/1.1 (an
    /// HTTP/2 client's `:authority` included); HTTP/2 carries the
    /// target's own as `:authority`, and no `Host`, which would differ.
    fn outbound(&self, req: Request<Incoming>) -> Request<Incoming> {
        let (mut parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let addressed = parts.uri.authority().cloned();
        let mut uri = self.upstream.clone().into_parts();
        uri.path_and_query = path.parse().ok();
        parts.uri = Uri::from_parts(uri).unwrap_or_else(|_| self.upstream.clone());
        drop_hop_by_hop(&mut parts.headers);
        // Its own version on the next hop, as an intermediary sends.
        match self.departure.transport() {
            Transport::Http1 => {
                parts.version = Version::HTTP_11;
                if let Some(authority) = addressed
                    && !parts.headers.contains_key(header::HOST)
                    && let Ok(host) = HeaderValue::from_str(authority.as_str())
                {
                    parts.headers.insert(header::HOST, host);
                }
            }
            Transport::Http2 => {
                parts.version = Version::HTTP_2;
                parts.headers.remove(header::HOST);
            }
        }
        Request::from_parts(parts, body)
    }

    /// Sends `req`, made [`Forward::outbound`], to the target on a pooled
    /// connection, and gives its answer without its hop-by-hop headers.
    async fn forward(&self, req: Request<Lent<Incoming>>) -> ForwardResult {
        let _in_flight = self.recorder.enter(Occupancy::InFlight);
        let mut response = self.client.request(req).await.inspect_err(|e| {
            warn_once(&format!("the target did not answer: {}", chain(e)));
        })?;
        drop_hop_by_hop(response.headers_mut());
        response.headers_mut().remove(header::TE);
        // hyper writes each answer in its client's version.
        *response.version_mut() = Version::HTTP_11;
        Ok(response)
    }
}

/// An error and its causes, one after another: a TLS handshake's failure
/// is a cause several layers down in hyper's error.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Says `what` on stderr the first time only: a target that fails fails
/// every request, and its clients see a 502 each.
fn warn_once(what: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("warning: {what} (said once)"));
}

/// Whether a request is a gRPC call: its content type is gRPC's
/// (`application/grpc`, or a subtype such as `application/grpc+proto`).
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v.strip_prefix(CONTENT_TYPE)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['+', ';']))
        })
}

/// The proxy's own answer, by the fault. An HTTP one with `Retry-After`
/// (and the same wait in milliseconds as `x-amz-retry-after`, as the
/// server's shedding sends) when given; gRPC's Trailers-Only, its status
/// and message in the head and nothing after, with the wait as
/// `grpc-retry-pushback-ms` when given.
fn injected(reply: Reply, retry_after: Option<std::time::Duration>) -> Response<Full<Bytes>> {
    match reply {
        Reply::Http(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            let mut resp = text(status, "answered by the fault proxy\n");
            if let Some(wait) = retry_after {
                let (retry_after, amz) = retry_after_values(wait);
                let headers = resp.headers_mut();
                headers.insert(header::RETRY_AFTER, retry_after);
                headers.insert(AMZ_RETRY_AFTER_HEADER, amz);
            }
            resp
        }
        Reply::TrailersOnly(code) => {
            // An empty body: hyper ends the stream with the head (HTTP/2's
            // HEADERS with END_STREAM), which is what Trailers-Only is.
            let mut resp = Response::new(Full::new(Bytes::new()));
            let headers = resp.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
            headers.insert(STATUS_HEADER, HeaderValue::from(code.number()));
            headers.insert(
                MESSAGE_HEADER,
                HeaderValue::from_static("answered by the fault proxy"),
            );
            if let Some(wait) = retry_after {
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                headers.insert(PUSHBACK_HEADER, HeaderValue::from(ms));
            }
            resp
        }
    }
}

/// The trailer by which a gRPC server tells its client when to retry, in
/// milliseconds (gRFC A6).
const PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// Whether the proxy can forward requests of `method`: not CONNECT, a
/// tunnel this proxy does not open (it answers 501).
fn forwardable(method: &Method) -> bool {
    method != Method::CONNECT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::grpc::Code;

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, X-Secret"),
            ("connection", "close"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("te", "gzip"),
            ("te", "Trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-secret", "hop"),
            ("host", "127.0.0.1:8081"),
            ("x-custom", "kept"),
            ("content-length", "5"),
            ("trailer", "x-checksum"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        drop_hop_by_hop(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(
            left,
            ["content-length", "host", "te", "trailer", "x-custom"]
        );
        assert_eq!(headers[header::TE], "trailers", "TE: trailers alone stays");
        let mut gzip = HeaderMap::new();
        gzip.insert(header::TE, HeaderValue::from_static("gzip"));
        drop_hop_by_hop(&mut gzip);
        assert!(gzip.is_empty());
    }

    #[test]
    fn an_injected_answer_says_when_to_retry_in_seconds_and_milliseconds() {
        let resp = injected(
            Reply::Http(503),
            Some(std::time::Duration::from_millis(2_500)),
        );
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "2.5");
        assert_eq!(resp.headers()[AMZ_RETRY_AFTER_HEADER], "2500");
        let bare = injected(Reply::Http(429), None);
        assert_eq!(bare.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(bare.headers().get(header::RETRY_AFTER).is_none());
        assert!(!forwardable(&Method::CONNECT) && forwardable(&Method::POST));
    }

    #[test]
    fn a_grpc_answer_is_trailers_only_with_its_pushback_in_milliseconds() {
        let resp = injected(
            Reply::TrailersOnly(Code::ResourceExhausted),
            Some(std::time::Duration::from_millis(1_250)),
        );
        assert_eq!(resp.status(), StatusCode::OK);
        let headers = resp.headers();
        assert_eq!(headers[header::CONTENT_TYPE], "application/grpc");
        assert_eq!(headers["grpc-status"], "8");
        assert_eq!(headers["grpc-message"], "answered by the fault proxy");
        assert_eq!(headers["grpc-retry-pushback-ms"], "1250");
        assert!(headers.get(header::RETRY_AFTER).is_none());
        assert!(hyper::body::Body::is_end_stream(resp.body()));
        let bare = injected(Reply::TrailersOnly(Code::Unavailable), None);
        assert_eq!(bare.headers()["grpc-status"], "14");
        assert!(bare.headers().get("grpc-retry-pushback-ms").is_none());
    }

    #[test]
    fn grpc_requests_are_known_by_their_content_type() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            is_grpc(&headers)
        };
        assert!(with("application/grpc"));
        assert!(with("application/grpc+proto"));
        assert!(with("Application/GRPC; charset=x"));
        assert!(!with("application/grpc-web"));
        assert!(!with("application/json"));
        assert!(!is_grpc(&HeaderMap::new()));
    }
}
