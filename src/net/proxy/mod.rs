//! The fault proxy (`storm proxy`): an HTTP proxy between clients and a
//! service the user runs (HTTP/1.1 or h2c from its clients; HTTP/1.1 or
//! HTTP/2, in clear or over TLS, to the service), forwarding faithfully
//! with keep-alive on both sides until its fault is switched on (SIGUSR1, the live view's key,
//! the control endpoint), then doing to requests and connections what
//! the fault says ([`crate::model::fault`]), until it is switched off
//! (SIGUSR2). It reports what passes through it each interval, as the
//! server does.
//!
//! - [`gate`]: the gate that stops every client connection at once;
//! - `switch`: the fault, on or off, and what turning it does;
//! - `listener`: the accept loop, which the switch pauses, and each
//!   client connection served by hyper;
//! - `connection`: what is known of one client connection;
//! - `forward`: each request's action, and forwarding to the target;
//! - `departure`: a request whose client had gone, forwarded with its
//!   client's departure (the request, then a FIN, or its stream's reset);
//! - `frames`: what an HTTP/2 connection has written, read from its bytes;
//! - `sniff`: which protocol a client connection speaks, from its first read;
//! - `unsent`: a request handed to the pooled client, taken back if its
//!   client goes before any of it is written;
//! - `control`: the control endpoint.

mod connection;
mod control;
mod departure;
mod forward;
mod frames;
pub mod gate;
mod listener;
mod sniff;
mod switch;
mod unsent;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::Uri;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;

pub use control::{ControlEndpoint, FAULT_PATH};
pub use switch::Switch;

use super::accept::listen;
use super::backlog::AcceptQueue;
use super::endpoint::EndpointError;
use super::server::BindError;
use super::signals::UserSignals;
use crate::model::fault::Fault;
use crate::model::wire::{Transport, Trust};
use crate::report::metrics::ProxyMetrics;
use crate::report::output::{CsvRow, CsvSink, say, write_row};
use crate::report::proxy::{ProxyRecorder, ProxyRow, ProxySummary};
use crate::report::rows::unix_ms;
use crate::report::status::{Status, StatusSink};

/// The proxy's configuration: its flags, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyConfig {
    /// Where it listens.
    pub listen: SocketAddr,
    /// The target: `http://host:port` or `https://host:port`, and the
    /// path and query its clients use, which the proxy's own URL carries.
    pub upstream: Uri,
    /// The protocol spoken to the target (clients speak either).
    pub transport: Transport,
    /// Whom the proxy trusts when the target is `https://`.
    pub trust: Trust,
    /// The fault.
    pub fault: Fault,
    /// Whether the fault is on from the start.
    pub fault_on: bool,
    /// How often it reports.
    pub report_interval: Duration,
    /// Where its report rows go, besides the terminal.
    pub csv: Option<PathBuf>,
    /// Its listen backlog.
    pub backlog: u32,
    /// The seed of its draws.
    pub seed: u64,
    /// Where its control endpoint listens, if anywhere.
    pub control: Option<SocketAddr>,
    /// No report line on the terminal (the live view shows them).
    pub quiet: bool,
}

/// Why the proxy could not start.
#[derive(Debug)]
pub enum ProxyError {
    /// The listen address could not be bound, or the CSV file created, as
    /// for the server.
    Bind(BindError),
    /// The control endpoint's address could not be bound.
    Control(EndpointError),
    /// The target's TLS configuration could not be made.
    Tls(String),
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyError::Bind(e) => e.fmt(f),
            ProxyError::Control(e) => e.fmt(f),
            ProxyError::Tls(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ProxyError {}

/// A bound proxy, ready to run.
pub struct Proxy {
    listener: TcpListener,
    config: ProxyConfig,
    csv: Option<CsvSink<ProxyRow>>,
    status: Option<StatusSink>,
    recorder: Arc<ProxyRecorder>,
    switch: Arc<Switch>,
    queue: Arc<AcceptQueue>,
    forward: Arc<forward::Forward>,
    control: Option<ControlEndpoint>,
}

impl Proxy {
    /// Binds the listen socket with the configured backlog, the control
    /// endpoint if asked for, and creates the CSV file; the fault is on if
    /// the configuration says so. Its counts feed `metrics` too, if
    /// given. Must be called inside a tokio runtime.
    pub fn bind(
        config: ProxyConfig,
        metrics: Option<Arc<ProxyMetrics>>,
    ) -> Result<Proxy, ProxyError> {
        let addr = config.listen;
        let error = |source| ProxyError::Bind(BindError::Listen { addr, source });
        let listener = listen(addr, config.backlog).map_err(error)?;
        let queue = Arc::new(AcceptQueue::of(&listener).map_err(error)?);
        let csv = CsvSink::with_header_if(config.csv.as_deref(), ProxyRow::HEADER)
            .map_err(|e| ProxyError::Bind(BindError::Csv(e)))?;
        let recorder = Arc::new(ProxyRecorder::with_metrics(metrics));
        let switch = Switch::new(
            config.fault,
            queue.clone(),
            config.backlog,
            recorder.clone(),
        );
        let forward = Arc::new(
            forward::Forward::new(
                &config.upstream,
                (config.transport, &config.trust),
                switch.clone(),
                config.seed,
                recorder.clone(),
            )
            .map_err(ProxyError::Tls)?,
        );
        let control = config
            .control
            .map(|addr| ControlEndpoint::serve(addr, switch.clone()))
            .transpose()
            .map_err(ProxyError::Control)?;
        if config.fault_on {
            switch.turn(true);
        }
        Ok(Proxy {
            listener,
            config,
            csv,
            status: None,
            recorder,
            switch,
            queue,
            forward,
            control,
        })
    }

    /// Writes status lines to `sink` too: where the proxy listens, then
    /// every report row.
    pub fn with_status(mut self, sink: StatusSink) -> Proxy {
        self.status = Some(sink);
        self
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The URL clients use: the proxy's address, then the target's path
    /// and query.
    pub fn url(&self) -> String {
        let path = self
            .config
            .upstream
            .path_and_query()
            .map_or("", |p| p.as_str());
        format!("http://{}{path}", self.local_addr())
    }

    /// The fault's switch.
    pub fn switch(&self) -> Arc<Switch> {
        self.switch.clone()
    }

    /// The control endpoint's URL, if it is served.
    pub fn control_url(&self) -> Option<String> {
        self.control.as_ref().map(ControlEndpoint::url)
    }

    /// Serves until `shutdown` completes, with the fault switched on by
    /// SIGUSR1 and off by SIGUSR2 from `signals`; then writes the last
    /// report and returns the run's totals. The status line saying where
    /// it listens goes out first: whoever waits for it may signal the
    /// proxy from then on, so `shutdown` and `signals` should already be
    /// handling their signals.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()>,
        mut signals: UserSignals,
    ) -> ProxySummary {
        let url = self.url();
        let Proxy {
            listener,
            config,
            mut csv,
            mut status,
            recorder,
            switch,
            queue,
            forward,
            control,
        } = self;
        StatusSink::send_to(&mut status, &Status::Listening { url });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let accepting = tokio::spawn(listener::accept_loop(
            listener,
            switch.clone(),
            forward,
            async move {
                let _ = stop_rx.await;
            },
        ));
        let epoch = Instant::now();
        let every = config.report_interval;
        let mut report = tokio::time::interval_at(epoch + every, every);
        report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = epoch;
        let mut write = |measured: Duration| {
            let queued = queue.waiting().unwrap_or(0);
            let row = recorder.row(measured, queued, unix_ms(), epoch.elapsed());
            if !config.quiet {
                say(&row);
            }
            write_row(&mut csv, &row);
            StatusSink::send_to(&mut status, &Status::ProxyRow(row));
        };
        let mut shutdown = pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                on = signals.next() => {
                    switch.turn(on);
                }
                _ = report.tick() => {
                    let now = Instant::now();
                    write(now - last);
                    last = now;
                }
            }
        }
        let _ = stop_tx.send(());
        let _ = accepting.await;
        write(Instant::now() - last);
        drop(control);
        recorder.summary()
    }
}

/// The proxy's start-up line: where it listens, the target, the fault and
/// how to switch it.
pub fn describe(config: &ProxyConfig, url: &str) -> String {
    let state = if config.fault_on { "on" } else { "off" };
    let pid = std::process::id();
    format!(
        "listening on {url}: fault proxy to {}{}, fault {} ({state}; kill -USR1 {pid} turns it \
         on, kill -USR2 {pid} off): {}, backlog {}, seed {}",
        config.upstream,
        match config.transport {
            Transport::Http1 => "",
            Transport::Http2 => " by HTTP/2",
        },
        config.fault,
        config.fault.describe(),
        config.backlog,
        config.seed
    )
}
