//! One request to a target, alone on a connection of its own, within a
//! limit: what the storm sends to check a target before any load and to
//! wait until it is calm before each run, and what the client sends
//! before its run ([`super::preflight`]). It goes as the target's wire
//! says (plain or TLS, HTTP/1.1 or HTTP/2, a gRPC call), and comes back
//! as the answer's status (a gRPC call's `grpc-status` too), or as why
//! none came, told apart as those callers need: no connection in time,
//! silence once connected, a failure that no retry can mend (a TLS
//! handshake that fails, a server that does not speak the protocol asked
//! for), or any other failure.

use std::fmt;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::h2;
use super::target::Target;
use crate::model::deadline::encode_grpc_timeout;
use crate::model::grpc::Code;
use crate::model::wire::Transport;

/// An answer: its status line, and a gRPC call's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The protocol it came by.
    pub(crate) version: Version,
    /// Its HTTP status.
    pub(crate) status: StatusCode,
    /// A gRPC call's status (`grpc-status`, or the HTTP status mapped).
    pub(crate) grpc: Option<Code>,
}

impl fmt::Display for Reply {
    /// `HTTP/1.1 503 Service Unavailable`, and for a gRPC call
    /// `, grpc-status UNAVAILABLE` after it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}", self.version, self.status)?;
        match self.grpc {
            Some(code) => write!(f, ", grpc-status {code}"),
            None => Ok(()),
        }
    }
}

/// Why a request had no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unanswered {
    /// No connection within the limit: nothing answers at that address,
    /// or its listen queue is full.
    Unconnected,
    /// The connection was made, then nothing came within the limit: a
    /// target busy with work before it, or stopped.
    Silent,
    /// A failure no retry can mend, said in full: a TLS handshake that
    /// failed, a server that does not speak the protocol asked for.
    Never(String),
    /// Any other failure, said in full: a connection refused, closed
    /// without an answer, reset.
    Failed(String),
}

/// The connection's driver, a task of its own, aborted when the exchange
/// is over or dropped: the socket closes with it.
struct Driver(JoinHandle<Result<(), hyper::Error>>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Driver {
    /// Why the request failed with `e`: when the connection ended under
    /// it, the request only says it was canceled, and the connection's
    /// own error (an answer that is not HTTP, say) is the reason.
    async fn why(&mut self, e: hyper::Error) -> hyper::Error {
        if !(e.is_canceled() || e.is_closed()) {
            return e;
        }
        match (&mut self.0).await {
            Ok(Err(ended)) => ended,
            _ => e,
        }
    }
}

/// The answer `sent` brings on the connection `driver` drives, with the
/// driver kept alive beside it; or, when it fails, the connection's own
/// reason ([`Driver::why`]).
async fn answered(
    mut driver: Driver,
    sent: impl Future<Output = Result<Response<Incoming>, hyper::Error>>,
) -> Result<(Response<Incoming>, Driver), hyper::Error> {
    match sent.await {
        Ok(response) => Ok((response, driver)),
        Err(e) => Err(driver.why(e).await),
    }
}

/// One request to `target`, as its wire says, on a connection of its
/// own: its answer, or why none came within `limit` (connecting
/// included). Over HTTP/1.1 it asks the server to close the connection
/// after its answer; a plain answer is taken at its status line, a gRPC
/// call's is read to its trailers for its status.
pub(crate) async fn send(target: &Target, limit: Duration) -> Result<Reply, Unanswered> {
    let deadline = Instant::now() + limit;
    let authority = &target.authority;
    let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(target.addr)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => {
            return Err(Unanswered::Failed(format!(
                "cannot connect to {authority}: {e}"
            )));
        }
        Err(_) => return Err(Unanswered::Unconnected),
    };
    match tokio::time::timeout_at(deadline, exchange(target, tcp, limit)).await {
        Ok(reply) => reply,
        Err(_) => Err(Unanswered::Silent),
    }
}

/// The handshakes, the request and its answer on `tcp`.
async fn exchange(target: &Target, tcp: TcpStream, limit: Duration) -> Result<Reply, Unanswered> {
    let authority = &target.authority;
    let stream = target.dialer.dial(tcp).await.map_err(|e| {
        if tls_failed(&e) {
            Unanswered::Never(format!("{authority}: the TLS handshake failed: {e}"))
        } else {
            Unanswered::Failed(format!("no answer from {authority}: {e}"))
        }
    })?;
    let mut request = target.request(&encode_grpc_timeout(limit));
    let hyper_failed = |e: hyper::Error| failure(target, e);
    let (response, _driver) = match target.transport {
        Transport::Http1 => {
            request
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            // `Host:` as people and the older raw request write it.
            let (mut sender, connection) = http1::Builder::new()
                .title_case_headers(true)
                .handshake(TokioIo::new(stream))
                .await
                .map_err(hyper_failed)?;
            let sent = async {
                sender.ready().await?;
                sender.send_request(request).await
            };
            answered(Driver(tokio::spawn(connection)), sent)
                .await
                .map_err(hyper_failed)?
        }
        Transport::Http2 => {
            let (mut sender, connection) =
                h2::handshake(target, stream).await.map_err(|e| match e {
                    h2::Refused::NoAlpn => Unanswered::Never(format!(
                        "{authority}: it does not speak HTTP/2: it did not accept h2 by ALPN"
                    )),
                    h2::Refused::Handshake(e) => hyper_failed(e),
                })?;
            let sent = async {
                sender.ready().await?;
                sender.send_request(request).await
            };
            answered(Driver(tokio::spawn(connection)), sent)
                .await
                .map_err(hyper_failed)?
        }
    };
    let (version, status) = (response.version(), response.status());
    let grpc = if target.is_grpc() {
        let answer = target.read(response).await.map_err(|e| {
            Unanswered::Failed(format!("{authority} broke off its answer ({status}): {e}"))
        })?;
        answer.hints.grpc
    } else {
        None
    };
    Ok(Reply {
        version,
        status,
        grpc,
    })
}

/// Whether `e`, from a TLS dial, is the handshake's own failure (a
/// certificate not trusted, a server that does not speak TLS), not the
/// connection's.
fn tls_failed(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// Whether `e` says that the server sent bytes before any answer was due
/// (an SSH banner, an HTTP/2 server's SETTINGS): hyper 1
/// (`proto/h1/dispatch.rs`) ends the connection with an "unexpected
/// message", the request canceled with it as its cause, and has no `is_`
/// method for it.
fn unexpected(e: &hyper::Error) -> bool {
    use std::error::Error;
    let said = |e: &dyn Error| e.to_string().contains("unexpected message");
    said(e) || e.source().is_some_and(said)
}

/// What hyper's failure `e` on a connection to `target` says.
fn failure(target: &Target, e: hyper::Error) -> Unanswered {
    let authority = &target.authority;
    match target.transport {
        // A server without h2c answers the preface in HTTP/1.1 and
        // closes: anything but a timeout says it does not speak it.
        Transport::Http2 if !e.is_timeout() => {
            Unanswered::Never(format!("{authority}: it does not speak HTTP/2: {e}"))
        }
        Transport::Http1 if e.is_parse() || unexpected(&e) => {
            let hint = if target.dialer.is_tls() {
                ""
            } else {
                " (a server of HTTP/2 only answers so: give its clients --http2)"
            };
            Unanswered::Never(format!(
                "{authority} answered something that is not HTTP/1.1{hint}: {e}"
            ))
        }
        _ if e.is_incomplete_message() || e.is_closed() => Unanswered::Failed(format!(
            "{authority} closed the connection without an answer"
        )),
        _ => Unanswered::Failed(format!("no answer from {authority}: {e}")),
    }
}
