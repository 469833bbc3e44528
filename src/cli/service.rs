//! The server's shape and defences as flags: which model serves the
//! requests (`--model`), a pool's workers and queue, and the defences that
//! guard it, validated together.

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::refusal::refuse_strays;
use super::values::{positive, positive_duration, ratio};
use crate::model::server::{PoolModel, QueueKind, ServiceDistribution, Shape};
use crate::policy::defence::{AdmissionConfig, CoDel, LimiterConfig, LimiterKind};

/// The shapes a server can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModelArg {
    /// The 2014 curve: every request waits base * factor^((c - limit) /
    /// scale) with c in flight
    Exponential,
    /// Every request waits base + slope * c with c in flight
    Linear,
    /// A thread pool: --workers serving one request each for
    /// --service-time, up to --queue waiting, 503 beyond
    Pool,
}

/// How a pool's service times are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DistributionArg {
    /// Exponentially distributed around the mean (M/M/c)
    Exponential,
    /// Always the mean (M/D/c)
    Constant,
}

/// Queue timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueTimeoutArg {
    /// Controlled delay: while the queue has not been empty for
    /// --codel-interval, a request that waited over --codel-target is
    /// dropped when a worker would start it; otherwise one that waited over
    /// the interval
    Codel,
}

/// Queue orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LifoArg {
    /// Newest first while the queue has not been empty within
    /// --codel-interval, oldest first otherwise
    Adaptive,
}

/// Adaptive concurrency limits (Netflix's concurrency-limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LimiterArg {
    /// Additive increase, multiplicative decrease: x0.9 on a drop or a
    /// round trip over 5 s, +1 when half used; 20 to 200
    Aimd,
    /// Follows 1.5 x long-term / latest round trip, +4 allowance,
    /// smoothed; 20 to 200
    Gradient2,
    /// TCP Vegas' queue estimate against log10 thresholds; 1 to 1000
    Vegas,
}

/// Where a pool's requests wait: `--queue K` or `--queue backlog`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueArg {
    /// An application queue of this many places.
    Places(u32),
    /// The listen backlog.
    Backlog,
}

/// Parses `--queue`: a number of places, or `backlog`.
fn queue_arg(s: &str) -> Result<QueueArg, String> {
    match s {
        "backlog" => Ok(QueueArg::Backlog),
        _ => s.parse().map(QueueArg::Places).map_err(|_| {
            format!(
                "expected a number of places (0 to {}) or `backlog`",
                u32::MAX
            )
        }),
    }
}

/// The server's shape and defences.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// What serves the requests.
    #[arg(long, value_enum, default_value_t = ModelArg::Exponential, value_name = "MODEL", help_heading = "Shape")]
    pub model: ModelArg,
    /// Linear: delay added per request in flight [default: 5ms; with the
    /// 100 ms base the server approaches 200 requests a second].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION", help_heading = "Shape")]
    pub slope: Option<Duration>,
    /// Pool: workers, each serving one request at a time [default: 20].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N", help_heading = "Shape")]
    pub workers: Option<u32>,
    /// Pool: mean service time of a request [default: 100ms].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION", help_heading = "Shape")]
    pub service_time: Option<Duration>,
    /// Pool: how service times are drawn [default: exponential].
    #[arg(long, value_enum, value_name = "DIST", help_heading = "Shape")]
    pub service_distribution: Option<DistributionArg>,
    /// Pool: where requests wait for a worker. K: an application queue of
    /// K places, every connection accepted at once and one more request
    /// answered 503 (a thread-pool executor with a bounded queue).
    /// `backlog`: the listen backlog (--backlog), a free worker accepting
    /// the oldest connection, one request a connection, and connection
    /// attempts beyond it dropped unanswered (gunicorn's sync workers)
    /// [default: 1000].
    #[arg(long, value_parser = queue_arg, value_name = "K|backlog", help_heading = "Shape")]
    pub queue: Option<QueueArg>,
    /// Pool: drop requests that waited too long in the queue (503).
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Defences")]
    pub queue_timeout: Option<QueueTimeoutArg>,
    /// CoDel's M: the longest wait while the queue is overloaded [default:
    /// 5ms].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION", help_heading = "Defences")]
    pub codel_target: Option<Duration>,
    /// CoDel's N: the queue counts as overloaded when it has not been empty
    /// for this long, and the longest wait otherwise; adaptive LIFO's
    /// window too [default: 100ms].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION", help_heading = "Defences")]
    pub codel_interval: Option<Duration>,
    /// Pool: the order in which waiting requests are served [default:
    /// oldest first].
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Defences")]
    pub lifo: Option<LifoArg>,
    /// An adaptive concurrency limit: 503 while the limit is in flight, the
    /// limit moved by every answer's round trip (the library's defaults).
    #[arg(long, value_enum, value_name = "ALGORITHM", help_heading = "Defences")]
    pub limiter: Option<LimiterArg>,
    /// Envoy's admission control: reject each request (503) with
    /// probability min(((n - s / threshold) / (n + 1))^(1 / aggression),
    /// max), over the window's n answers of which s succeeded.
    #[arg(long, help_heading = "Defences")]
    pub admission_control: bool,
    /// Admission control: the window of answers [default: 30s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION", help_heading = "Defences")]
    pub admission_window: Option<Duration>,
    /// Admission control: the success rate below which it rejects, 0 to 1
    /// [default: 0.95].
    #[arg(long, value_parser = ratio, value_name = "X", help_heading = "Defences")]
    pub admission_success_rate: Option<f64>,
    /// Admission control: how fast rejection grows as successes fall, at
    /// least 1 [default: 1].
    #[arg(long, value_parser = positive, value_name = "X", help_heading = "Defences")]
    pub admission_aggression: Option<f64>,
    /// Admission control: the highest rejection probability, 0 to 1
    /// [default: 0.8].
    #[arg(long, value_parser = ratio, value_name = "X", help_heading = "Defences")]
    pub admission_max_rejection: Option<f64>,
}

/// The shape and defences the flags ask for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Service {
    /// What serves the requests.
    pub shape: Shape,
    /// The limiter, if any.
    pub limiter: Option<LimiterConfig>,
    /// Admission control, if on.
    pub admission: Option<AdmissionConfig>,
}

impl ServiceArgs {
    /// Checks the flags together (each given only where it applies) and
    /// builds the shape and defences.
    pub fn service(&self) -> Result<Service, String> {
        let model = match self.model {
            ModelArg::Exponential => "exponential",
            ModelArg::Linear => "linear",
            ModelArg::Pool => "pool",
        };
        let pool: &[&str] = &["pool"];
        refuse_strays(
            &[
                ("--slope", self.slope.is_some(), &["linear"]),
                ("--workers", self.workers.is_some(), pool),
                ("--service-time", self.service_time.is_some(), pool),
                (
                    "--service-distribution",
                    self.service_distribution.is_some(),
                    pool,
                ),
                ("--queue", self.queue.is_some(), pool),
                ("--queue-timeout", self.queue_timeout.is_some(), pool),
                ("--lifo", self.lifo.is_some(), pool),
            ],
            model,
            "--model",
        )?;
        if self.queue == Some(QueueArg::Backlog) {
            let queue_only = [
                ("--queue-timeout", self.queue_timeout.is_some()),
                ("--lifo", self.lifo.is_some()),
            ];
            if let Some((flag, _)) = queue_only.iter().find(|(_, given)| *given) {
                return Err(format!(
                    "{flag} does not apply to --queue backlog: the kernel's accept queue is \
                     first in, first out and drops nothing for its age (it applies to an \
                     application queue, --queue K)"
                ));
            }
        }
        let codel = if self.queue_timeout.is_some() {
            "codel"
        } else {
            "off"
        };
        let interval_users: &[&str] = if self.lifo.is_some() {
            &["codel", "off"]
        } else {
            &["codel"]
        };
        refuse_strays(
            &[
                ("--codel-target", self.codel_target.is_some(), &["codel"]),
                (
                    "--codel-interval",
                    self.codel_interval.is_some(),
                    interval_users,
                ),
            ],
            codel,
            "--queue-timeout",
        )?;
        let admission = if self.admission_control { "on" } else { "off" };
        refuse_strays(
            &[
                (
                    "--admission-window",
                    self.admission_window.is_some(),
                    &["on"],
                ),
                (
                    "--admission-success-rate",
                    self.admission_success_rate.is_some(),
                    &["on"],
                ),
                (
                    "--admission-aggression",
                    self.admission_aggression.is_some(),
                    &["on"],
                ),
                (
                    "--admission-max-rejection",
                    self.admission_max_rejection.is_some(),
                    &["on"],
                ),
            ],
            admission,
            "--admission-control",
        )?;
        if self.admission_aggression.is_some_and(|a| a < 1.0) {
            return Err("--admission-aggression must be at least 1".into());
        }
        let defaults = CoDel::default();
        let pool = PoolModel::default();
        let interval = self.codel_interval.unwrap_or(defaults.interval);
        let shape = match self.model {
            ModelArg::Exponential => Shape::Exponential,
            ModelArg::Linear => Shape::Linear {
                slope: self.slope.unwrap_or(Duration::from_millis(5)),
            },
            ModelArg::Pool => Shape::Pool(PoolModel {
                workers: self.workers.unwrap_or(pool.workers),
                service_time: self.service_time.unwrap_or(pool.service_time),
                distribution: match self.service_distribution {
                    Some(DistributionArg::Constant) => ServiceDistribution::Constant,
                    Some(DistributionArg::Exponential) => ServiceDistribution::Exponential,
                    None => pool.distribution,
                },
                queue: match self.queue {
                    Some(QueueArg::Places(k)) => k,
                    _ => pool.queue,
                },
                kind: match self.queue {
                    Some(QueueArg::Backlog) => QueueKind::Backlog,
                    _ => QueueKind::Application,
                },
                codel: self.queue_timeout.map(|_| CoDel {
                    target: self.codel_target.unwrap_or(defaults.target),
                    interval,
                }),
                lifo: self.lifo.map(|_| interval),
            }),
        };
        let admission_defaults = AdmissionConfig::default();
        Ok(Service {
            shape,
            limiter: self.limiter.map(|l| {
                LimiterConfig::new(match l {
                    LimiterArg::Aimd => LimiterKind::Aimd,
                    LimiterArg::Gradient2 => LimiterKind::Gradient2,
                    LimiterArg::Vegas => LimiterKind::Vegas,
                })
            }),
            admission: self.admission_control.then(|| AdmissionConfig {
                window: self.admission_window.unwrap_or(admission_defaults.window),
                success_rate: self
                    .admission_success_rate
                    .unwrap_or(admission_defaults.success_rate),
                aggression: self
                    .admission_aggression
                    .unwrap_or(admission_defaults.aggression),
                max_rejection: self
                    .admission_max_rejection
                    .unwrap_or(admission_defaults.max_rejection),
                bucket: admission_defaults.bucket,
            }),
        })
    }
}
