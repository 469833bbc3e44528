//! The HTTP server whose latency explodes with concurrency.
//!
//! Connections are served by hyper; the latency model lives in one actor task
//! that owns the completion scheduler, so the modelled work of a request
//! lives outside hyper's handler future. When a client goes away, hyper drops
//! that future, but in `continue` mode the request keeps counting until its
//! modelled completion, as in the 2014 original.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use hyper::service::service_fn;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;

use super::accept::{accept_loop, listen};
use super::backlog::AcceptQueue;
pub use super::backlog::{Worker, Workers};
use super::connection::Serving;
use super::handler::Handler;
use super::lanes::{self, Lanes};
pub use super::model_actor::Gauges;
use super::model_actor::ModelActor;
use super::server_tls;
use super::tier::Caller;
use super::timer::Alarm;
use crate::model::server::{DEFAULT_BACKLOG, QueueKind, ServerConfig, Shape};
use crate::policy::format_retry_after;
use crate::report::metrics::{ClientMetrics, ServerMetrics};
use crate::report::output::{CsvError, CsvSink, server_csv};
use crate::report::rows::{ServerRow, format_delay};
use crate::report::status::{Status, StatusSink};
use crate::report::summary::{Reporter, ServerSummary};

pub use super::handler::API_PATH;

/// The kernel's maximum listen backlog (`/proc/sys/net/core/somaxconn`),
/// or [`DEFAULT_BACKLOG`] where it cannot be read.
pub fn default_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_BACKLOG)
}

/// The file descriptors a server with `backlog` needs: a full backlog
/// plus the connections being served.
pub fn descriptors_needed(backlog: u32) -> u64 {
    u64::from(backlog) + 1024
}

/// Why the server could not start.
#[derive(Debug)]
pub enum BindError {
    /// The listen address could not be bound.
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
    /// The CSV file could not be created.
    Csv(CsvError),
    /// No timerfd for the model's completions (no file descriptor left).
    Timer(io::Error),
    /// A tier's call inward cannot be made (its URL does not resolve).
    Call(String),
    /// The certificate or key to serve https with cannot be used.
    Tls(String),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::Listen { addr, source } if source.kind() == io::ErrorKind::AddrInUse => {
                write!(
                    f,
                    "--listen {addr}: address already in use (is another server or proxy running? \
                     stop it or pick another port)"
                )
            }
            BindError::Listen { addr, source } => write!(f, "--listen {addr}: {source}"),
            BindError::Csv(e) => e.fmt(f),
            BindError::Timer(e) => write!(f, "cannot create a timer: {e}"),
            BindError::Call(why) | BindError::Tls(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for BindError {}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    /// Rings at the model's next completion.
    alarm: Alarm,
    config: ServerConfig,
    csv: Option<CsvSink<ServerRow>>,
    status: Option<StatusSink>,
    gauges: Arc<Gauges>,
    metrics: Option<Arc<ServerMetrics>>,
    /// As a tier: its calls inward, and what reports them.
    caller: Option<(Arc<Caller>, Reporter)>,
    /// The TLS handshake of https, if served.
    tls: Option<TlsAcceptor>,
}

impl Server {
    /// Binds the listen socket with the configured backlog and creates the
    /// CSV file. Must be called inside a tokio runtime.
    pub fn bind(config: ServerConfig) -> Result<Server, BindError> {
        Server::bind_with(config, |_| None)
    }

    /// [`Server::bind`], and, as a tier, the metrics its calls inward
    /// feed: `calls` is given the address bound (which may name the tier)
    /// once it is, and returns them, if any. It is not called for a server
    /// that calls nothing.
    pub fn bind_with(
        config: ServerConfig,
        calls: impl FnOnce(SocketAddr) -> Option<Arc<ClientMetrics>>,
    ) -> Result<Server, BindError> {
        let addr = config.listen;
        // HTTP/2 is offered by ALPN where it is served (not to a pool
        // waiting in the backlog).
        let tls = match &config.tls {
            Some(files) => Some(
                server_tls::acceptor(files, !config.waits_in_backlog()).map_err(BindError::Tls)?,
            ),
            None => None,
        };
        let listener =
            listen(addr, config.backlog).map_err(|source| BindError::Listen { addr, source })?;
        let alarm = Alarm::new(config.timer_resolution).map_err(BindError::Timer)?;
        let csv = server_csv(&config).map_err(BindError::Csv)?;
        let caller = match &config.call {
            Some(call) => {
                let bound = listener
                    .local_addr()
                    .map_err(|source| BindError::Listen { addr, source })?;
                Some((
                    Caller::start(call, calls(bound)).map_err(BindError::Call)?,
                    Reporter::for_calls(&call.client).map_err(BindError::Csv)?,
                ))
            }
            None => None,
        };
        Ok(Server {
            listener,
            alarm,
            config,
            csv,
            status: None,
            gauges: Arc::default(),
            metrics: None,
            caller,
            tls,
        })
    }

    /// Writes status lines to `sink` too: where the server listens, then
    /// every report row.
    pub fn with_status(mut self, sink: StatusSink) -> Server {
        self.status = Some(sink);
        self
    }

    /// Feeds `metrics` as requests come and go (for `--metrics-listen`).
    pub fn with_metrics(mut self, metrics: Arc<ServerMetrics>) -> Server {
        self.metrics = Some(metrics);
        self
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Live figures, updated as the server runs.
    pub fn gauges(&self) -> Arc<Gauges> {
        self.gauges.clone()
    }

    /// The URL of the modelled API: `https://` where TLS is served.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{API_PATH}", self.local_addr())
    }

    /// Serves until `shutdown` completes, then writes the last report and
    /// returns the run's totals. The status line saying where it listens
    /// goes out first: whoever waits for it may stop the server from then
    /// on, so `shutdown` should already be listening for signals.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> ServerSummary {
        let url = self.url();
        let Server {
            listener,
            alarm,
            config,
            csv,
            mut status,
            gauges,
            metrics,
            caller,
            tls,
        } = self;
        StatusSink::send_to(&mut status, &Status::Listening { url });
        // A tier's calls report on the same status lines as its server.
        let calls_status = caller.as_ref().and(status.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let workers = match config.shape {
            Shape::Pool(pool) if config.waits_in_backlog() => Some(Workers::new(pool.workers)),
            _ => None,
        };
        let accept_queue = workers.as_ref().and(AcceptQueue::of(&listener).ok());
        let model = ModelActor::new(&config, csv, status, gauges.clone(), rx)
            .with_metrics(metrics)
            .with_accept_queue(accept_queue);
        let actor = tokio::spawn(model.run(alarm, stop_rx));
        // A tier reports its calls on the server's interval.
        let (tier, calls) = match caller {
            Some((caller, reporter)) => {
                let (stop, stopped) = oneshot::channel();
                let every = config.report_interval;
                let reporter = reporter.with_status(calls_status);
                let report = tokio::spawn(caller.clone().report(reporter, every, stopped));
                (Some(caller), Some((stop, report)))
            }
            None => (None, None),
        };
        let shared = Arc::new(Handler::new(&config, tx, tier));
        // A pool waiting in the backlog serves one request a connection,
        // as a sync worker does.
        let keep_alive = workers.is_none();
        let serving = Arc::new(Serving::new(&config, keep_alive, tls));
        let serve = move |stream: TcpStream, worker: Option<Worker>| {
            let handler = shared.clone();
            let serving = serving.clone();
            tokio::spawn(async move {
                // The connection's worker goes with its first request into
                // the model; unused, it is given back with the connection.
                let worker = std::sync::Mutex::new(worker);
                let service = service_fn(move |req| {
                    let worker = worker.lock().ok().and_then(|mut w| w.take());
                    handler.call(req, worker)
                });
                serving.serve(stream, service).await;
            });
        };
        let count = lanes::count(config.threads);
        let errors = &gauges.accept_errors;
        let lanes = accept_into_lanes(listener, errors, shutdown, count, workers, serve).await;
        let _ = stop_tx.send(());
        if let Some((stop, report)) = calls {
            let _ = stop.send(());
            let _ = report.await;
        }
        let summary = actor.await.expect("the model task does not panic");
        // The other lanes' connections are dropped once the model is done,
        // as the calling runtime's are when it ends.
        lanes.stop();
        summary
    }
}

/// Accepts connections until `shutdown`, as [`accept_loop`] does, and deals
/// them to `count` lanes ([`Lanes`]): the calling thread's runtime and
/// `count - 1` threads of their own. Each goes to the first lane while
/// that lane is not busy, else to the least busy ([`lanes::choose`]), so a
/// light load wakes one thread only. `serve` is called on the runtime of
/// the connection's lane, and should spawn its work there.
///
/// One listener keeps one accept queue, so the backlog means what it says
/// (how many connections pile up while the server is stopped); a listener
/// per lane (`SO_REUSEPORT`) would split it by a hash of each connection's
/// addresses. A connection crosses to its lane once, when accepted; every
/// request on it then stays on its lane. The lanes go on serving their
/// connections until the returned [`Lanes`] are stopped.
pub async fn accept_into_lanes<S>(
    listener: TcpListener,
    errors: &AtomicU64,
    shutdown: impl Future<Output = ()>,
    count: usize,
    workers: Option<Workers>,
    serve: S,
) -> Lanes
where
    S: Fn(TcpStream, Option<Worker>) + Send + Clone + 'static,
{
    let count = count.max(1);
    let mut senders = Vec::with_capacity(count - 1);
    let mut receivers = Vec::with_capacity(count - 1);
    for _ in 1..count {
        let (tx, rx) = mpsc::unbounded_channel::<(std::net::TcpStream, Option<Worker>)>();
        senders.push(tx);
        receivers.push(Some(rx));
    }
    let receivers = Arc::new(std::sync::Mutex::new(receivers));
    let on_lane = serve.clone();
    let spawned = Lanes::spawn(count, "server", move |lane| {
        let (serve, receivers) = (on_lane.clone(), receivers.clone());
        async move {
            let taken = receivers.lock().expect("lanes lock poisoned")[lane - 1].take();
            let Some(mut streams) = taken else { return };
            while let Some((stream, worker)) = streams.recv().await {
                // Registered with this lane's runtime from here on.
                if let Ok(stream) = TcpStream::from_std(stream) {
                    serve(stream, worker);
                }
            }
        }
    });
    let lanes = spawned.unwrap_or_else(|e| {
        eprintln!("warning: cannot start the threads of the lanes ({e}): serving on one");
        Lanes::none()
    });
    let mut handles = vec![tokio::runtime::Handle::current()];
    handles.extend_from_slice(lanes.handles());
    let mut load = lanes::Load::new(handles);
    accept_loop(listener, errors, shutdown, workers, |stream, worker| {
        let lane = lanes::choose(load.shares());
        if lane == 0 {
            serve(stream, worker);
        } else if let Ok(stream) = stream.into_std() {
            let _ = senders[lane - 1].send((stream, worker));
        }
    })
    .await;
    lanes
}

/// A warning for a listen address outside loopback: this server is a load
/// generator's target, built to be overloaded, and should not be exposed.
pub fn exposure_warning(listen: SocketAddr) -> Option<String> {
    outside_loopback(
        listen,
        "this server exists to be overloaded by a load generator",
    )
}

/// A warning for a listen address outside loopback, saying `why` the
/// program should not be exposed.
pub fn outside_loopback(listen: SocketAddr, why: &str) -> Option<String> {
    (!listen.ip().is_loopback()).then(|| {
        format!(
            "warning: listening on {listen}, outside loopback: {why}; keep it on 127.0.0.1 \
             unless you mean it"
        )
    })
}

/// Human-readable description of a model, for the server's start-up line.
pub fn describe(config: &ServerConfig, addr: SocketAddr) -> String {
    let m = &config.model;
    let shape = match config.shape {
        Shape::Exponential => format!(
            "base delay {}, limit {}, factor {}, scale {}, max delay {}",
            format_delay(m.base),
            m.limit,
            m.factor,
            m.scale,
            format_delay(m.max_delay)
        ),
        Shape::Linear { slope } => format!(
            "linear: base delay {} plus {} per request in flight, max delay {}",
            format_delay(m.base),
            format_delay(slope),
            format_delay(m.max_delay)
        ),
        Shape::Pool(p) => format!(
            "pool of {} workers, {} service time {} ({:.0} req/s), queue {}{}{}",
            p.workers,
            p.distribution.name(),
            format_delay(p.service_time),
            p.capacity(),
            match p.kind {
                QueueKind::Application => p.queue.to_string(),
                QueueKind::Backlog => "in the listen backlog, one request a connection".into(),
            },
            match p.codel {
                Some(c) => format!(
                    ", CoDel {}/{}",
                    format_delay(c.target),
                    format_delay(c.interval)
                ),
                None => String::new(),
            },
            match p.lifo {
                Some(n) => format!(", adaptive LIFO over {}", format_delay(n)),
                None => String::new(),
            }
        ),
    };
    let mut defences = String::new();
    if let Some(f) = config.fail {
        defences.push_str(&format!(
            ", failing {} of requests with {}",
            f.rate, f.status
        ));
    }
    if let Some(s) = config.shed {
        defences.push_str(&format!(
            ", shedding at {} with {} and Retry-After {}",
            s.above,
            s.status,
            format_retry_after(s.retry_after)
        ));
    }
    if let Some(l) = config.limiter {
        defences.push_str(&format!(", {} limiter", l.kind.name()));
    }
    if let Some(a) = config.admission {
        defences.push_str(&format!(
            ", admission control over {} (success rate {}, aggression {}, at most {})",
            format_delay(a.window),
            a.success_rate,
            a.aggression,
            a.max_rejection
        ));
    }
    if config.draws() {
        defences.push_str(&format!(", seed {}", config.seed));
    }
    if let Some(call) = &config.call {
        defences.push_str(&call.describe());
    }
    let (scheme, http2) = match (&config.tls, config.waits_in_backlog()) {
        (Some(_), true) => ("https", ""),
        (None, true) => ("http", ""),
        (Some(_), false) => ("https", ", HTTP/2 by ALPN"),
        (None, false) => ("http", ", HTTP/2 by prior knowledge"),
    };
    let http2 = match http2 {
        "" => String::new(),
        how => format!(
            "{how} ({} streams a connection), gRPC overload {}",
            config.max_streams, config.grpc_overload
        ),
    };
    format!(
        "listening on {scheme}://{addr}{API_PATH}: {shape}, backlog {}, on disconnect \
         {}{defences}{http2}",
        config.backlog,
        config.on_disconnect.name(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection goes to the first lane while it is idle, and to
    /// another once the first has been busy.
    #[tokio::test(flavor = "current_thread")]
    async fn connections_go_to_another_lane_once_the_first_is_busy() {
        let listener = listen("127.0.0.1:0".parse().unwrap(), 64).unwrap();
        let addr = listener.local_addr().unwrap();
        let (served_tx, mut served) = mpsc::unbounded_channel();
        let serve = move |_stream: TcpStream, _: Option<Worker>| {
            let lane = std::thread::current().name().map(str::to_string);
            served_tx.send(lane).unwrap();
        };
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let errors = AtomicU64::new(0);
        let accepting = tokio::spawn(async move {
            let stop = async move {
                let _ = stop_rx.await;
            };
            accept_into_lanes(listener, &errors, stop, 2, None, serve).await
        });
        let first = std::net::TcpStream::connect(addr).unwrap();
        let on_first = served.recv().await.unwrap();
        // The first lane (this test's thread) busy for three periods of
        // the load's sampling.
        tokio::task::spawn(async {
            std::thread::sleep(lanes::Load::EVERY * 3);
        })
        .await
        .unwrap();
        let second = std::net::TcpStream::connect(addr).unwrap();
        let on_second = served.recv().await.unwrap();
        stop_tx.send(()).unwrap();
        accepting.await.unwrap().stop();
        drop((first, second));
        assert_eq!(on_first, std::thread::current().name().map(str::to_string));
        assert_eq!(on_second.as_deref(), Some("server-1"));
    }

    #[test]
    fn only_non_loopback_addresses_get_a_warning() {
        assert_eq!(exposure_warning("127.0.0.1:8070".parse().unwrap()), None);
        assert_eq!(exposure_warning("127.9.9.9:1".parse().unwrap()), None);
        assert_eq!(exposure_warning("[::1]:8070".parse().unwrap()), None);
        let w = exposure_warning("0.0.0.0:8070".parse().unwrap()).unwrap();
        assert!(w.contains("0.0.0.0:8070") && w.contains("loopback"), "{w}");
        assert!(exposure_warning("[::]:8070".parse().unwrap()).is_some());
    }
}
