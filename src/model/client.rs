//! The client's configuration: its users, their think times, timeout and
//! retry policy, and how the run is reported. Both engines take the same
//! configuration.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::arrivals::ThinkTime;
use super::open::OpenTraffic;
use super::shard::Shard;
use super::timescale::compress;
use super::user::Rules;
use super::wire::Wire;
use crate::policy::{Hedging, RetryLimits, Strategy, ThrottleConfig};

/// Everything the client needs to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The `http://host:port/path` URL every attempt requests (the virtual
    /// engine has none).
    pub url: String,
    /// Number of simulated users in the whole population (all shards):
    /// a closed population. None under open traffic.
    pub clients: u32,
    /// Sessions arriving whatever the service does, instead of a closed
    /// population (docs/traffic.md).
    pub open: Option<OpenTraffic>,
    /// Which of the population's users this process runs.
    pub shard: Shard,
    /// When the run starts on the wall clock (shards launched apart start
    /// together and report on the same boundaries); `None`: at once.
    pub start_at: Option<SystemTime>,
    /// Think-time distribution between a user's logical requests.
    pub think: ThinkTime,
    /// Time an attempt may take, from its intended start.
    pub timeout: Duration,
    /// Delay schedule between attempts.
    pub strategy: Strategy,
    /// Attempt limit, deadline and `Retry-After` handling.
    pub limits: RetryLimits,
    /// gRPC's hedging instead of retries, if chosen.
    pub hedging: Option<Hedging>,
    /// Throttle shared by all users, if any.
    pub throttle: Option<ThrottleConfig>,
    /// How often to report.
    pub report_interval: Duration,
    /// Stop after this long (otherwise when asked to).
    pub duration: Option<Duration>,
    /// Users start evenly over this time (zero: all at once).
    pub ramp_up: Duration,
    /// Step of the timer that starts attempts (zero: exact).
    pub timer_resolution: Duration,
    /// Threads of the real engine, each running its share of the users on
    /// a runtime of its own (`None`: one per core).
    pub threads: Option<u32>,
    /// Seed of every random draw.
    pub seed: u64,
    /// Where to write report rows, if anywhere.
    pub csv: Option<PathBuf>,
    /// Where to write the HDR interval log (latencies of each report
    /// interval), if anywhere.
    pub hlog: Option<PathBuf>,
    /// Print nothing on stdout (for tests and embedding).
    pub quiet: bool,
    /// How attempts go on the wire: protocol, request, TLS, gRPC.
    pub wire: Wire,
}

impl ClientConfig {
    /// A quiet client of one user to `url` with the given policy, no
    /// throttle, hedging, output or time limit, exact timers: what a
    /// tier's call and a test start from.
    pub fn with_policy(
        url: String,
        timeout: Duration,
        strategy: Strategy,
        limits: RetryLimits,
    ) -> ClientConfig {
        ClientConfig {
            url,
            clients: 1,
            open: None,
            shard: Shard::WHOLE,
            start_at: None,
            think: ThinkTime::new(Duration::from_secs(1)),
            timeout,
            strategy,
            limits,
            hedging: None,
            throttle: None,
            report_interval: Duration::from_secs(1),
            duration: None,
            ramp_up: Duration::ZERO,
            timer_resolution: Duration::ZERO,
            threads: None,
            seed: 0,
            csv: None,
            hlog: None,
            quiet: true,
            wire: Wire::default(),
        }
    }

    /// When user `index` starts thinking, since the start of the run.
    pub fn start_of(&self, index: u32) -> Duration {
        let share = f64::from(index) / f64::from(self.clients.max(1));
        self.ramp_up.mul_f64(share)
    }

    /// The global indices of this process's users.
    pub fn users(&self) -> impl Iterator<Item = u32> + use<> {
        self.shard.indices(self.clients)
    }

    /// The rules every user follows.
    pub fn rules(&self) -> Rules {
        Rules {
            think: self.think,
            timeout: self.timeout,
            strategy: self.strategy,
            limits: self.limits,
            hedging: self.hedging,
        }
    }

    /// The retry policy's name, for summaries: the strategy's, or
    /// `hedging`.
    pub fn policy_name(&self) -> &'static str {
        match self.hedging {
            Some(_) => "hedging",
            None => self.strategy.name(),
        }
    }

    /// The same client with time compressed `k` times: think time, timeout,
    /// the strategy's delays, the hedging delay, the throttle's windows, the deadline, the
    /// report interval, the run's length and the ramp-up divided by `k`
    /// (rates multiplied by it). The timer's step, a cost of the machine,
    /// stays as given.
    pub fn scaled(mut self, k: f64) -> ClientConfig {
        self.think = ThinkTime::new(compress(self.think.mean(), k));
        self.timeout = compress(self.timeout, k);
        self.strategy = self.strategy.scaled(k);
        self.hedging = self.hedging.map(|h| h.scaled(k));
        self.throttle = self.throttle.map(|t| t.scaled(k));
        self.limits.deadline = self.limits.deadline.map(|d| compress(d, k));
        self.report_interval = compress(self.report_interval, k);
        self.duration = self.duration.map(|d| compress(d, k));
        self.ramp_up = compress(self.ramp_up, k);
        self.open = self.open.map(|o| o.scaled(k));
        self
    }

    /// Logical requests a second this process's users and sessions ask
    /// for, when nothing fails.
    pub fn demand(&self) -> f64 {
        let think = self.think.mean().as_secs_f64();
        let closed = match think > 0.0 {
            true => self.users().count() as f64 / think,
            false => f64::INFINITY,
        };
        let closed = if self.clients == 0 { 0.0 } else { closed };
        closed
            + self
                .open
                .map_or(0.0, |o| o.demand() / f64::from(self.shard.count))
    }
}
