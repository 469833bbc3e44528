//! `--metrics-listen`: the metrics a program serves, the endpoint that
//! serves them, and what the start line says about it.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use crate::net::metrics::MetricsEndpoint;
use crate::report::metrics::Exposition;

/// A program's metrics and their endpoint, when `--metrics-listen` asks
/// for them; the endpoint stops when this is dropped.
pub(super) struct Served<M> {
    /// The metrics, for the program to feed.
    pub metrics: Option<Arc<M>>,
    endpoint: Option<MetricsEndpoint>,
}

impl<M: Exposition + 'static> Served<M> {
    /// Serves the metrics `make` builds on `addr`, if given; says why on
    /// stderr and exits 2 if the address cannot be bound. Must be called
    /// inside the runtime.
    pub fn start(addr: Option<SocketAddr>, make: impl FnOnce() -> M) -> Result<Self, ExitCode> {
        let Some(addr) = addr else {
            return Ok(Served {
                metrics: None,
                endpoint: None,
            });
        };
        let metrics = Arc::new(make());
        match MetricsEndpoint::serve(addr, metrics.clone()) {
            Ok(endpoint) => Ok(Served {
                metrics: Some(metrics),
                endpoint: Some(endpoint),
            }),
            Err(e) => {
                eprintln!("error: {e}");
                Err(ExitCode::from(2))
            }
        }
    }

    /// What the start line adds: where the metrics are served, if they are.
    pub fn note(&self) -> String {
        self.endpoint
            .as_ref()
            .map_or(String::new(), |e| format!("; metrics on {}", e.url()))
    }
}
