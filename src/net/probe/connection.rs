//! One probing client's keep-alive HTTP/1.1 connection and one request on
//! it, bounded by a timeout (over HTTP/2, one connection of its own with
//! one stream at a time).
//!
//! The connection's driver (hyper's `Connection` future) is polled by the
//! client's own task, beside its request, instead of running as a task of
//! its own: dropping the client drops the socket at once, so a level's
//! connections are closed when its clients are, and no answer waits for
//! a second task to be scheduled before the client sees it.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::StatusCode;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::model::deadline::encode_grpc_timeout;
use crate::model::grpc::Code;
use crate::model::wire::Transport;
use crate::net::multiplex::Multiplex;
use crate::net::target::{Answer as Read, BoxError, Target};
use crate::net::tls::Stream;

/// How one request ended.
#[derive(Debug)]
pub(super) enum Answer {
    /// An answer, its body read to the end.
    Status(StatusCode),
    /// A gRPC call's answer with a status other than `OK`.
    Grpc(Code),
    /// No answer: refused, reset, malformed; the connection is closed.
    Broken(BoxError),
    /// Nothing within the timeout; the connection is closed.
    TimedOut,
}

impl Answer {
    /// Whether the answer is a success (2xx).
    pub(super) fn is_ok(&self) -> bool {
        matches!(self, Answer::Status(s) if s.is_success())
    }
}

/// Why a GET on one connection got no answer.
enum Failure {
    /// The connection closed before any answer began: on a reused
    /// connection, the server closed it as it was reused.
    Unanswered(BoxError),
    /// Anything else.
    Other(BoxError),
}

impl Failure {
    fn of(e: hyper::Error) -> Failure {
        if e.is_closed() || e.is_canceled() || e.is_incomplete_message() {
            Failure::Unanswered(e.into())
        } else {
            Failure::Other(e.into())
        }
    }

    fn into_error(self) -> BoxError {
        match self {
            Failure::Unanswered(e) | Failure::Other(e) => e,
        }
    }
}

/// An open connection and its driver.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: Pin<Box<Connection<TokioIo<Stream>, Full<Bytes>>>>,
    /// The driver has returned: the connection is closed.
    ended: bool,
    /// The last answer said `Connection: close`.
    closing: bool,
}

impl Conn {
    async fn open(target: &Target) -> Result<Conn, BoxError> {
        let tcp = TcpStream::connect(target.addr).await?;
        let stream = target.dialer.dial(tcp).await?;
        let (sender, driver) = http1::handshake(TokioIo::new(stream)).await?;
        Ok(Conn {
            sender,
            driver: Box::pin(driver),
            ended: false,
            closing: false,
        })
    }

    /// One request and its whole answer, the driver polled beside it.
    async fn get(&mut self, target: &Target, timeout: Duration) -> Result<Answer, Failure> {
        let Conn {
            sender,
            driver,
            ended,
            closing,
        } = self;
        if *ended {
            return Err(Failure::Unanswered("the connection has closed".into()));
        }
        let request = target.request(&encode_grpc_timeout(timeout));
        let exchange = async {
            sender.ready().await.map_err(Failure::of)?;
            let response = sender.send_request(request).await.map_err(Failure::of)?;
            let status = response.status();
            let answer = target.read(response).await.map_err(Failure::Other)?;
            Ok((counted(status, &answer), answer.closing))
        };
        let mut exchange = std::pin::pin!(exchange);
        let result = tokio::select! {
            biased;
            result = &mut exchange => result,
            _ = driver.as_mut() => {
                // Closed: what it delivered before is still read; anything
                // it did not fails at once.
                *ended = true;
                exchange.await
            }
        };
        let (answer, close) = result?;
        *closing = close;
        Ok(answer)
    }

    /// Whether another GET may go on this connection.
    fn reusable(&self) -> bool {
        !self.ended && !self.closing && !self.sender.is_closed()
    }
}

/// A client of the probe: one keep-alive connection at a time to
/// `target`, opened when needed, closed when a request on it breaks or
/// times out (over HTTP/2, a timeout resets the stream only).
pub(super) struct Client<'t> {
    target: &'t Target,
    timeout: Duration,
    conn: Option<Conn>,
    /// The client's HTTP/2 connection, if it speaks HTTP/2.
    mux: Option<Multiplex>,
}

impl<'t> Client<'t> {
    /// A client with no connection yet; each GET ends within `timeout`.
    pub(super) fn new(target: &'t Target, timeout: Duration) -> Client<'t> {
        Client {
            target,
            timeout,
            conn: None,
            mux: (target.transport == Transport::Http2)
                .then(|| Multiplex::new(target.clone(), None)),
        }
    }

    /// One GET, on the open connection or a new one; connecting counts in
    /// its time.
    pub(super) async fn get(&mut self) -> Answer {
        match tokio::time::timeout(self.timeout, self.exchange()).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                self.conn = None;
                Answer::Broken(e)
            }
            Err(_) => {
                self.conn = None;
                Answer::TimedOut
            }
        }
    }

    async fn exchange(&mut self) -> Result<Answer, BoxError> {
        if let Some(mux) = &self.mux {
            let deadline = tokio::time::Instant::now() + self.timeout;
            let status = mux.send(deadline).await?;
            return Ok(counted_h2(&status));
        }
        if let Some(conn) = self.conn.as_mut() {
            match conn.get(self.target, self.timeout).await {
                Ok(status) => {
                    if !conn.reusable() {
                        self.conn = None;
                    }
                    return Ok(status);
                }
                Err(Failure::Other(e)) => return Err(e),
                // The server closed this connection (its idle timeout) as
                // it was reused: there was no answer, so the GET goes again
                // on a new connection, as HTTP clients do for an idempotent
                // request.
                Err(Failure::Unanswered(_)) => self.conn = None,
            }
        }
        let mut conn = Conn::open(self.target).await?;
        let answer = conn
            .get(self.target, self.timeout)
            .await
            .map_err(Failure::into_error)?;
        if conn.reusable() {
            self.conn = Some(conn);
        }
        Ok(answer)
    }
}

/// `read`, an answer with HTTP status `status`, as the probe counts it: a
/// gRPC call's status other than `OK` counts as its own.
fn counted(status: StatusCode, read: &Read) -> Answer {
    match read.hints.grpc {
        Some(code) if code != Code::Ok => Answer::Grpc(code),
        _ => Answer::Status(status),
    }
}

/// [`counted`] over HTTP/2, where the status is in the hints.
fn counted_h2(read: &Read) -> Answer {
    let status = read
        .hints
        .status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    counted(status, read)
}
