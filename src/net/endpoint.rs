//! A small HTTP endpoint on a listener of its own, apart from a program's
//! real work: the metrics endpoint (`--metrics-listen`) and the fault
//! proxy's control endpoint (`--control`). Every answer is made at once
//! from the request's head; a connection that does not send its request
//! head in time is closed, and so is one beyond a small bound
//! ([`Limits`]).

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::accept::{accept_loop, listen};

/// Connections a client of the endpoint may queue (a few at most).
const BACKLOG: u32 = 64;

/// How long a connection may take to send a whole request head, from its
/// opening or (kept alive) from the previous answer, before the endpoint
/// closes it without an answer. A scraper sends its head in one write as
/// soon as it connects; 5 s leave room for that write to be lost twice
/// on a real network (TCP resends after 1 s, then 2 s more), and are half
/// of the 10 s a Prometheus scrape may take by default. A kept-alive
/// connection idle for longer is closed too: a scrape every second keeps
/// its connection, a scrape every 15 s (Prometheus's default) opens one
/// each time.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections the endpoint holds at once; one more is closed as soon as
/// it is accepted. A few scrapers and a curl need a handful; the bound
/// keeps a flood of connections that send nothing from taking the
/// descriptors the program's real work needs.
pub const MAX_CONNECTIONS: usize = 32;

/// What the endpoint grants its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a request head may take to arrive whole.
    pub header_read_timeout: Duration,
    /// Connections held at once.
    pub max_connections: usize,
}

impl Default for Limits {
    /// [`HEADER_READ_TIMEOUT`] and [`MAX_CONNECTIONS`].
    fn default() -> Self {
        Limits {
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// The endpoint's address could not be bound.
#[derive(Debug)]
pub struct EndpointError {
    /// The flag that named it (`--metrics-listen`).
    pub flag: &'static str,
    /// The address asked for.
    pub addr: SocketAddr,
    /// What the system said.
    pub source: io::Error,
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (flag, addr) = (self.flag, self.addr);
        if self.source.kind() == io::ErrorKind::AddrInUse {
            write!(
                f,
                "{flag} {addr}: address already in use (by another program, or by \
                 --listen?); pick another port"
            )
        } else {
            write!(f, "{flag} {addr}: {}", self.source)
        }
    }
}

impl std::error::Error for EndpointError {}

/// What an endpoint answers a request with.
pub type Answer = Response<Full<Bytes>>;

/// A running endpoint; it stops when dropped.
pub struct Endpoint {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Endpoint {
    /// Binds `addr` (named by `flag`, for messages) and answers every
    /// request there with `respond`, within `limits`, from now on. Must be
    /// called inside a tokio runtime.
    pub fn serve(
        flag: &'static str,
        addr: SocketAddr,
        limits: Limits,
        respond: impl Fn(&Request<Incoming>) -> Answer + Send + Sync + 'static,
    ) -> Result<Endpoint, EndpointError> {
        let error = |source| EndpointError { flag, addr, source };
        let listener = listen(addr, BACKLOG).map_err(error)?;
        let bound = listener.local_addr().map_err(error)?;
        let respond = Arc::new(respond);
        let task = tokio::spawn(async move {
            let errors = AtomicU64::new(0);
            let open = Arc::new(Semaphore::new(limits.max_connections));
            accept_loop(
                listener,
                &errors,
                std::future::pending(),
                None,
                |stream, _| {
                    // Beyond the bound, the connection is dropped: closed.
                    let Ok(held) = open.clone().try_acquire_owned() else {
                        return;
                    };
                    let respond = respond.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let answer = respond(&req);
                            async move { Ok::<_, Infallible>(answer) }
                        });
                        // A client's errors end its connection, nothing more.
                        let _ = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(limits.header_read_timeout)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        drop(held);
                    });
                },
            )
            .await;
        });
        Ok(Endpoint { addr: bound, task })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An answer with `status` and a plain-text `body`.
pub fn text(status: StatusCode, body: &'static str) -> Answer {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp
}

/// 405 Method Not Allowed, naming the methods `allowed`.
pub fn not_allowed(allowed: &'static str) -> Answer {
    let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    resp.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allowed));
    resp
}
