//! The server's configuration: its shape (a delay curve or a thread pool),
//! its listen backlog, what it does with work whose client has gone, and
//! the defences that guard it. Both engines take the same configuration.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::grpc::Code;
use super::latency::{Curve, LatencyModel};
use super::tier::TierCall;
use super::timescale::compress;
use super::wire::{DEFAULT_MAX_STREAMS, DEFAULT_PENDING_RESETS};
use crate::policy::defence::{AdmissionConfig, CoDel, LimiterConfig, LimiterKind};

/// The listen backlog where none is given and the kernel's cannot be read:
/// Linux's default maximum (`net.core.somaxconn`) since 5.4. The virtual
/// engine uses it too, so that its results do not depend on the host.
pub const DEFAULT_BACKLOG: u32 = 4096;

/// What the server does with a request whose client has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDisconnect {
    /// Keep the work and let it count until its modelled completion (the
    /// original's behaviour: the server never notices).
    Continue,
    /// Drop the work at once, as a server that notices disconnects would.
    Cancel,
}

impl OnDisconnect {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            OnDisconnect::Continue => "continue",
            OnDisconnect::Cancel => "cancel",
        }
    }
}

/// How a pool's service times are drawn, around their mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceDistribution {
    /// Exponentially distributed (an M/M/c queue).
    Exponential,
    /// Always the mean (M/D/c).
    Constant,
}

impl ServiceDistribution {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ServiceDistribution::Exponential => "exponential",
            ServiceDistribution::Constant => "constant",
        }
    }
}

/// Where a pool's requests wait for a worker. Named by the servers that
/// work each way: they differ in what a client sees when the queue is
/// full and in how long a gone client's request stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueKind {
    /// A bounded queue in the application: every connection is accepted
    /// at once and its request waits for a worker in a queue of
    /// [`PoolModel::queue`] places, one more answered 503 at once (a
    /// thread-pool executor with a bounded queue, as Java's
    /// `ThreadPoolExecutor` or Jetty's `QueuedThreadPool` are).
    #[default]
    Application,
    /// The kernel's listen backlog: a free worker accepts the oldest
    /// waiting connection and reads its request, whether its client is
    /// still there or not. At most `backlog + 1` connections wait (Linux's
    /// accept queue); beyond them a connection attempt is dropped without
    /// an answer, and the client's kernel retransmits its SYN after 1 s,
    /// 3 s, 7 s... Each connection carries one request and is closed after
    /// its answer. gunicorn's sync workers work this way, and so does a
    /// Tomcat whose connections are all taken (`acceptCount`).
    Backlog,
}

impl QueueKind {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Application => "application",
            QueueKind::Backlog => "backlog",
        }
    }
}

/// A thread pool with a queue, and the defences that act on its queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolModel {
    /// Workers, each serving one request at a time.
    pub workers: u32,
    /// Mean service time of a request.
    pub service_time: Duration,
    /// How service times are drawn.
    pub distribution: ServiceDistribution,
    /// Most requests that may wait for a worker in an application queue;
    /// one more is refused.
    pub queue: u32,
    /// Where requests wait: an application queue of [`PoolModel::queue`]
    /// places, or the listen backlog of [`ServerConfig::backlog`].
    pub kind: QueueKind,
    /// The controlled-delay queue timeout, if on.
    pub codel: Option<CoDel>,
    /// Adaptive LIFO, if on: newest first while the queue has not been
    /// empty within this interval.
    pub lifo: Option<Duration>,
}

impl Default for PoolModel {
    /// 20 workers, exponential service times of mean 100 ms (200 requests
    /// a second), a queue of 1000, oldest first, no queue timeout.
    fn default() -> Self {
        PoolModel {
            workers: 20,
            service_time: Duration::from_millis(100),
            distribution: ServiceDistribution::Exponential,
            queue: 1000,
            kind: QueueKind::Application,
            codel: None,
            lifo: None,
        }
    }
}

impl PoolModel {
    /// `workers` serving exactly `service_time` each, with `queue` places:
    /// a pool whose every instant can be worked out by hand.
    pub fn constant(workers: u32, service_time: Duration, queue: u32) -> Self {
        PoolModel {
            workers,
            service_time,
            distribution: ServiceDistribution::Constant,
            queue,
            ..PoolModel::default()
        }
    }

    /// `workers` serving exactly `service_time` each, their requests
    /// waiting in the listen backlog: worked out by hand as
    /// [`PoolModel::constant`] is.
    pub fn backlog(workers: u32, service_time: Duration) -> Self {
        PoolModel {
            kind: QueueKind::Backlog,
            ..PoolModel::constant(workers, service_time, 0)
        }
    }

    /// Requests a second the pool can serve: workers over the mean
    /// service time.
    pub fn capacity(&self) -> f64 {
        f64::from(self.workers) / self.service_time.as_secs_f64()
    }
}

/// What serves the requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// The 2014 curve, with the parameters in [`ServerConfig::model`].
    Exponential,
    /// A delay of `base + slope * concurrency` (base and cap from
    /// [`ServerConfig::model`]).
    Linear {
        /// Added per request in flight.
        slope: Duration,
    },
    /// A thread pool with a queue.
    Pool(PoolModel),
}

impl Shape {
    /// The name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Shape::Exponential => "exponential",
            Shape::Linear { .. } => "linear",
            Shape::Pool(_) => "pool",
        }
    }
}

/// Load shedding: the server's push-back when it is over a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shedding {
    /// Requests in flight at which new ones are refused (so concurrency
    /// never exceeds it).
    pub above: u64,
    /// HTTP status of the refusal: 503 (overload) or 429 (rate limit).
    pub status: u16,
    /// Value of the `Retry-After` header sent with it.
    pub retry_after: Duration,
}

/// A failing backend: a fraction of requests answered at once with an
/// error, before any defence or any work (a fault injected in front of the
/// server, as Envoy's fault filter aborts a percentage of requests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Failing {
    /// The fraction of requests that fail, from 0 to 1, each drawn
    /// independently from the server's seed.
    pub rate: f64,
    /// HTTP status of the failure (400 to 599; 429 is a throttling answer).
    pub status: u16,
}

/// Everything the server needs to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Address to listen on (the virtual engine has none).
    pub listen: SocketAddr,
    /// The exponential curve's parameters (the linear curve uses its base
    /// delay and cap).
    pub model: LatencyModel,
    /// What serves the requests.
    pub shape: Shape,
    /// Listen backlog: how many connections the kernel queues while the
    /// server does not accept (for example while it is stopped).
    pub backlog: u32,
    /// What happens to abandoned requests.
    pub on_disconnect: OnDisconnect,
    /// Push-back: with this many requests in flight, refuse new ones at once.
    pub shed: Option<Shedding>,
    /// gRPC's pushback sent with every refusal (`grpc-retry-pushback-ms`):
    /// milliseconds, negative meaning "do not retry".
    pub pushback_ms: Option<i64>,
    /// A failing backend: a fraction of requests answered at once with an
    /// error, if on.
    pub fail: Option<Failing>,
    /// An adaptive concurrency limit, if on.
    pub limiter: Option<LimiterConfig>,
    /// Envoy's admission control, if on.
    pub admission: Option<AdmissionConfig>,
    /// As a tier of a chain: the call made inward after its own work,
    /// whose end decides the answer. `None`: a backend, answering OK.
    pub call: Option<Box<TierCall>>,
    /// Seed of the server's own draws: service times, admission control's
    /// rejections, Vegas' probes, the failures of a failing backend.
    pub seed: u64,
    /// How often to report.
    pub report_interval: Duration,
    /// How long a request head may take to arrive before the connection is
    /// closed (slow senders).
    pub header_read_timeout: Duration,
    /// Step of the timer that ends modelled delays (zero: exact).
    pub timer_resolution: Duration,
    /// Threads of the real server, each serving its share of the
    /// connections on a runtime of its own (`None`: one per core).
    pub threads: Option<u32>,
    /// Where to write report rows, if anywhere.
    pub csv: Option<PathBuf>,
    /// Print nothing on stdout (for tests and embedding).
    pub quiet: bool,
    /// The streams one HTTP/2 connection may carry at once
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_streams: u32,
    /// HTTP/2: the streams a connection may reset before the server
    /// accepted them, past which it is closed with GOAWAY
    /// `ENHANCE_YOUR_CALM` (`model::multiplex::too_many_resets`).
    pub pending_resets: u32,
    /// The gRPC code a refusal for overload is answered with.
    pub grpc_overload: Overload,
    /// The certificate and key to serve https with, if any.
    pub tls: Option<TlsFiles>,
}

/// The code a refusal for overload is answered with (`--grpc-overload`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Overload {
    /// `UNAVAILABLE` (14): what gRPC's retry policy retries when it names
    /// no codes of its own (gRFC A6's example).
    #[default]
    Unavailable,
    /// `RESOURCE_EXHAUSTED` (8): the server's capacity is used up; not
    /// retried unless the policy lists it.
    ResourceExhausted,
}

impl Overload {
    /// The code this overload is answered with.
    pub fn code(self) -> Code {
        match self {
            Overload::Unavailable => Code::Unavailable,
            Overload::ResourceExhausted => Code::ResourceExhausted,
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Overload::Unavailable => "unavailable",
            Overload::ResourceExhausted => "resource-exhausted",
        }
    }
}

impl fmt::Display for Overload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The PEM files a server serves https with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8070)),
            model: LatencyModel::default(),
            shape: Shape::Exponential,
            backlog: DEFAULT_BACKLOG,
            on_disconnect: OnDisconnect::Continue,
            shed: None,
            pushback_ms: None,
            fail: None,
            limiter: None,
            admission: None,
            call: None,
            seed: 0,
            report_interval: Duration::from_secs(1),
            header_read_timeout: Duration::from_secs(60),
            timer_resolution: Duration::from_micros(500),
            threads: None,
            csv: None,
            quiet: false,
            max_streams: DEFAULT_MAX_STREAMS,
            pending_resets: DEFAULT_PENDING_RESETS,
            grpc_overload: Overload::default(),
            tls: None,
        }
    }
}

impl ServerConfig {
    /// The same server with time compressed `k` times: the modelled delays,
    /// `Retry-After` and the report interval divided by `k`. The header-read
    /// timeout (a guard against stalled senders), the timer's step (a cost
    /// of the machine) and a failing backend's fraction (no time in it)
    /// stay as given.
    pub fn scaled(mut self, k: f64) -> ServerConfig {
        self.model.base = compress(self.model.base, k);
        self.model.max_delay = compress(self.model.max_delay, k);
        if let Some(shed) = &mut self.shed {
            shed.retry_after = compress(shed.retry_after, k);
        }
        match &mut self.shape {
            Shape::Exponential => {}
            Shape::Linear { slope } => *slope = compress(*slope, k),
            Shape::Pool(pool) => {
                pool.service_time = compress(pool.service_time, k);
                pool.codel = pool.codel.map(|c| c.scaled(k));
                pool.lifo = pool.lifo.map(|n| compress(n, k));
            }
        }
        self.limiter = self.limiter.map(|l| l.scaled(k));
        // A delay is compressed; "do not retry" stays as it is.
        self.pushback_ms = self.pushback_ms.map(|ms| {
            if ms > 0 {
                (ms as f64 / k).round() as i64
            } else {
                ms
            }
        });
        self.admission = self.admission.map(|a| a.scaled(k));
        if let Some(call) = &mut self.call {
            call.client = call.client.clone().scaled(k);
        }
        self.report_interval = compress(self.report_interval, k);
        self
    }

    /// The delay curve, unless the server is a pool.
    pub fn curve(&self) -> Option<Curve> {
        match self.shape {
            Shape::Exponential => Some(Curve::Exponential(self.model)),
            Shape::Linear { slope } => Some(Curve::Linear {
                base: self.model.base,
                slope,
                max_delay: self.model.max_delay,
            }),
            Shape::Pool(_) => None,
        }
    }

    /// Takes `other`'s seed if this server draws nothing: its seed is then
    /// unused, and one given no `--seed` has a random one, so that two
    /// configurations of the same server compare equal.
    pub fn unused_seed_as(&mut self, other: &ServerConfig) {
        if !self.draws() {
            self.seed = other.seed;
        }
    }

    /// Whether the server draws random numbers (so that its seed matters).
    pub fn draws(&self) -> bool {
        let exponential_service = matches!(
            self.shape,
            Shape::Pool(PoolModel {
                distribution: ServiceDistribution::Exponential,
                ..
            })
        );
        let vegas = self.limiter.is_some_and(|l| l.kind == LimiterKind::Vegas);
        exponential_service || vegas || self.admission.is_some() || self.fail.is_some()
    }

    /// Whether requests wait in the listen backlog (a pool with
    /// [`QueueKind::Backlog`]): the server then accepts a connection only
    /// when a worker is free, and closes each after its answer.
    pub fn waits_in_backlog(&self) -> bool {
        matches!(
            self.shape,
            Shape::Pool(PoolModel {
                kind: QueueKind::Backlog,
                ..
            })
        )
    }

    /// Whether the server reports a pool's figures and its defences'
    /// (queue, workers, refusals, limit): with a pool, a limiter or
    /// admission control. The 2014 server's report stays as it was.
    pub fn reports_defences(&self) -> bool {
        matches!(self.shape, Shape::Pool(_)) || self.limiter.is_some() || self.admission.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_divides_the_models_times_but_not_the_machines() {
        let config = ServerConfig {
            shed: Some(Shedding {
                above: 5,
                status: 503,
                retry_after: Duration::from_secs(1),
            }),
            ..ServerConfig::default()
        }
        .scaled(10.0);
        assert_eq!(config.model.base, Duration::from_millis(10));
        let pool = ServerConfig {
            shape: Shape::Pool(PoolModel {
                codel: Some(CoDel::default()),
                lifo: Some(Duration::from_millis(100)),
                ..PoolModel::default()
            }),
            admission: Some(AdmissionConfig::default()),
            ..ServerConfig::default()
        }
        .scaled(10.0);
        let Shape::Pool(p) = pool.shape else {
            panic!("still a pool");
        };
        assert_eq!(p.service_time, Duration::from_millis(10));
        assert_eq!(p.codel.unwrap().interval, Duration::from_millis(10));
        assert_eq!(p.lifo, Some(Duration::from_millis(10)));
        assert_eq!(p.workers, 20);
        assert_eq!(p.capacity(), 2000.0, "twenty workers at 10 ms");
        assert_eq!(pool.admission.unwrap().window, Duration::from_secs(3));
        assert!(pool.draws() && pool.reports_defences());
        let failing = ServerConfig {
            fail: Some(Failing {
                rate: 0.25,
                status: 500,
            }),
            ..ServerConfig::default()
        };
        assert_eq!(failing.clone().scaled(10.0).fail, failing.fail);
        assert!(failing.draws() && !failing.reports_defences());
        assert!(!ServerConfig::default().draws());
        assert!(!ServerConfig::default().reports_defences());
        assert_eq!(config.model.max_delay, Duration::from_secs(60));
        assert_eq!(config.shed.unwrap().retry_after, Duration::from_millis(100));
        assert_eq!(config.report_interval, Duration::from_millis(100));
        assert_eq!(config.header_read_timeout, Duration::from_secs(60));
        assert_eq!(config.timer_resolution, Duration::from_micros(500));
    }
}
