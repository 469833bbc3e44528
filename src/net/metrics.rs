//! The metrics endpoint: `GET /metrics` on a listener of its own
//! (`--metrics-listen`), answering with the program's Prometheus metrics,
//! rendered at each scrape. Apart from the modelled API, so that a scrape
//! never waits in the latency model and a storm never counts a scrape.
//! A connection that does not send its request head in time is closed,
//! and so is one beyond a small bound ([`Limits`]): a small endpoint of
//! [`super::endpoint`]'s.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};

use super::endpoint::{Answer, Endpoint, not_allowed, text};
pub use super::endpoint::{
    EndpointError as MetricsError, HEADER_READ_TIMEOUT, Limits, MAX_CONNECTIONS,
};
use crate::report::metrics::{Exposition, Format};

/// The path the metrics are served on.
pub const METRICS_PATH: &str = "/metrics";

/// A running metrics endpoint; it stops when dropped.
pub struct MetricsEndpoint(Endpoint);

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
        Endpoint::serve("--metrics-listen", addr, limits, move |req| {
            respond(req, metrics.as_ref())
        })
        .map(MetricsEndpoint)
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    /// The URL to scrape.
    pub fn url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.local_addr())
    }
}

/// The answer to one request: the metrics for `GET` (or `HEAD`)
/// `/metrics`, in the format its `Accept` header asks for; 404 or 405
/// otherwise.
fn respond(req: &Request<Incoming>, metrics: &dyn Exposition) -> Answer {
    if req.uri().path() != METRICS_PATH {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return not_allowed("GET, HEAD");
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
