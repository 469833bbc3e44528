//! The metrics endpoint: `GET /metrics` on a listener of its own
//! (`--metrics-listen`), answering with the program's Prometheus metrics,
//! rendered at each scrape. Apart from the modelled API, so that a scrape
//! never waits in the latency model and a storm never counts a scrape.
//! A connection that does not send its request head in time is closed,
//! and so is one beyond a small bound ([`Limits`]).

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
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::server::{accept_loop, listen};
use crate::report::metrics::{Exposition, Format};

/// The path the metrics are served on.
pub const METRICS_PATH: &str = "/metrics";

/// Connections a scraper may queue (a few scrapers at most).
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

/// The metrics address could not be bound.
#[derive(Debug)]
pub struct MetricsError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// What the system said.
    pub source: io::Error,
}

impl fmt::Display for MetricsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addr = self.addr;
        if self.source.kind() == io::ErrorKind::AddrInUse {
            write!(
                f,
                "--metrics-listen {addr}: address already in use (by another program, or by \
                 --listen?); pick another port"
            )
        } else {
            write!(f, "--metrics-listen {addr}: {}", self.source)
        }
    }
}

impl std::error::Error for MetricsError {}

/// A running metrics endpoint; it stops when dropped.
pub struct MetricsEndpoint {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsEndpoint {
    /// Binds `addr` and serves `metrics` there from now on, with the
    /// default [`Limits`]. Must be called inside a tokio runtime.
    pub fn serve(
        addr: SocketAddr,
        metrics: Arc<dyn Exposition>,
    ) -> Result<MetricsEndpoint, MetricsError> {
        Self::serve_with(addr, metrics, Limits::default())
    }

    /// Binds `addr` and serves `metrics` there from now on, within
    /// `limits`. Must be called inside a tokio runtime.
    pub fn serve_with(
        addr: SocketAddr,
        metrics: Arc<dyn Exposition>,
        limits: Limits,
    ) -> Result<MetricsEndpoint, MetricsError> {
        let listener = listen(addr, BACKLOG).map_err(|source| MetricsError { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| MetricsError { addr, source })?;
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
                    let metrics = metrics.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let response = respond(&req, metrics.as_ref());
                            async move { Ok::<_, Infallible>(response) }
                        });
                        // A scraper's errors end its connection, nothing more.
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
        Ok(MetricsEndpoint { addr: bound, task })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to scrape.
    pub fn url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.addr)
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The answer to one request: the metrics for `GET` (or `HEAD`)
/// `/metrics`, in the format its `Accept` header asks for; 404 or 405
/// otherwise.
fn respond(req: &Request<Incoming>, metrics: &dyn Exposition) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *resp.status_mut() = status;
        resp
    };
    if req.uri().path() != METRICS_PATH {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        resp.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::accepted(accept);
    let mut resp = Response::new(Full::new(Bytes::from(format.encode(metrics.render()))));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(format.content_type()),
    );
    resp
}
