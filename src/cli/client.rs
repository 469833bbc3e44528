//! The `client` program's flags and `client plan`'s, turned into validated
//! configurations.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use super::burst::BurstArgs;
use super::generate::GenerateArgs;
use super::report::ReportArgs;
use super::retry::{HedgingArgs, LimitArgs, StrategyArgs, ThrottleArgs};
use super::runtime::RuntimeArgs;
use super::traffic::TrafficArgs;
use super::values::{
    duration, http_url, positive, positive_duration, resolve_shard, seconds_or_duration, shard,
    time_scale, timer_resolution, wall_clock,
};
use super::view::ViewArgs;
use super::wire::WireArgs;
use crate::model::arrivals::ThinkTime;
use crate::model::client::ClientConfig;
use crate::model::planner::PlanRequest;
use crate::model::shard::{Shard, ShardSource};
use crate::policy::StrategyKind;

/// N simulated users sending Poisson traffic and retrying failed and
/// timed-out requests under a chosen strategy; prints OK/error/timeout rates
/// every report interval. `client plan` prints a strategy's schedule without
/// sending anything.
#[derive(Debug, Parser)]
#[command(
    name = "client",
    version,
    propagate_version = true,
    about,
    long_about = None,
    allow_negative_numbers = true,
    args_conflicts_with_subcommands = true
)]
pub struct ClientCli {
    /// What to do (default: run the load).
    #[command(subcommand)]
    pub command: Option<ClientCommand>,
    /// The load's flags.
    #[command(flatten)]
    pub run: ClientArgs,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

/// Subcommands of `client`.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Print a strategy's retry schedule: retry number, sleep before it and
    /// time elapsed since the first failure. No network.
    Plan(PlanArgs),
}

/// Flags of a client run.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// URL every attempt requests (http:// or https://).
    #[arg(long, default_value = "http://127.0.0.1:8070/api", value_parser = http_url)]
    pub url: String,
    /// Number of simulated users, each with at most one request in flight.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub clients: u32,
    /// Open or partly-open traffic instead of a closed population.
    #[command(flatten)]
    pub traffic: TrafficArgs,
    /// How requests go on the wire.
    #[command(flatten)]
    pub wire: WireArgs,
    /// Mean think time between a user's requests, in seconds (or a duration
    /// such as 500ms); total demand is about CLIENTS / LAMBDA req/s.
    #[arg(long, default_value = "10", value_parser = seconds_or_duration, value_name = "SECONDS")]
    pub lambda: Duration,
    /// Time an attempt may take before it counts as timed out and its
    /// connection is closed.
    #[arg(long, default_value = "2s", value_parser = positive_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// How often to print a report line (and write a CSV row).
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Stop after this long [default: run until Ctrl-C].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Start the users evenly over this time instead of all at once (a
    /// large population started at once opens every connection in the same
    /// second).
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    pub ramp_up: Duration,
    /// Step of the timer that starts attempts (an attempt starts at the
    /// first step at or after its instant): 0s is exact, and each step that
    /// rings costs a wake-up of the process (about 20 µs of CPU here), so a
    /// coarser step is cheaper. Not scaled by --time-scale.
    #[arg(long, default_value = "500us", value_parser = timer_resolution, value_name = "DURATION")]
    pub timer_resolution: Duration,
    /// The async runtime.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Seed of every random draw (think times, jitter) [default: random,
    /// printed at start].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Where report rows go.
    #[command(flatten)]
    pub report: ReportArgs,
    /// How the run is shown.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Write an HDR interval log here: one histogram per report interval
    /// of the latency of successful attempts (untagged) and of successful
    /// requests (tag `request`), in microseconds; the HdrHistogram log
    /// format, V2 compressed, which `storm merge` and Java's
    /// HistogramLogProcessor read.
    #[arg(long, value_name = "PATH")]
    pub hlog: Option<PathBuf>,
    /// Run only shard I of N of the population (I counts from 0): users
    /// I, I+N, I+2N, ... of --clients, each seeded by its global index, so
    /// that the shards together run exactly the users one process would.
    /// Needs --seed. [default: from SLURM_ARRAY_TASK_ID/COUNT,
    /// SLURM_PROCID/SLURM_NTASKS or JOB_COMPLETION_INDEX/JOB_COMPLETIONS;
    /// else the whole population]
    #[arg(long, value_parser = shard, value_name = "I/N", help_heading = "Scale-out")]
    pub shard: Option<Shard>,
    /// Start at this wall-clock instant (RFC 3339, or Unix seconds), so
    /// that shards launched at slightly different moments start together
    /// and report on the same interval boundaries [default: at once].
    #[arg(long, value_parser = wall_clock, value_name = "TIME", help_heading = "Scale-out")]
    pub start_at: Option<SystemTime>,
    /// Compress time: divide every duration given (think time, timeout,
    /// retry delays, windows, report interval, run length) by K and multiply
    /// rates by it, for quick experiments.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale, value_name = "K")]
    pub time_scale: f64,
    /// Retry strategy.
    #[command(flatten)]
    pub retry: StrategyArgs,
    /// Retry limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Hedging instead of retries.
    #[command(flatten)]
    pub hedging: HedgingArgs,
    /// Retry throttle.
    #[command(flatten)]
    pub throttle: ThrottleArgs,
}

fn conflict(msg: String) -> clap::Error {
    ClientCli::command().error(ErrorKind::ArgumentConflict, msg)
}

impl ClientArgs {
    /// The shard this process runs and where it was named: the flag, else
    /// the cluster engine's environment, else the whole population.
    pub fn shard(&self) -> Result<(Shard, ShardSource), clap::Error> {
        resolve_shard(self.shard)
            .map_err(|e| ClientCli::command().error(ErrorKind::ValueValidation, e))
    }

    /// Checks the flags together and builds the client's configuration:
    /// the shard of `--shard`, or the whole population. The environment is
    /// not read, so that a storm's virtual runs stay whole wherever the
    /// storm runs.
    pub fn config(&self) -> Result<ClientConfig, clap::Error> {
        self.config_of(self.shard.unwrap_or_default())
    }

    /// The client program's configuration: [`ClientArgs::config`] with the
    /// shard of [`ClientArgs::shard`], and where that shard was named.
    pub fn sharded_config(&self) -> Result<(ClientConfig, ShardSource), clap::Error> {
        let (shard, source) = self.shard()?;
        Ok((self.config_of(shard)?, source))
    }

    fn config_of(&self, shard: Shard) -> Result<ClientConfig, clap::Error> {
        if !shard.is_whole() && self.seed.is_none() {
            return Err(conflict(format!(
                "shard {shard} needs --seed: every shard must draw from the same seed to run \
                 its part of one population"
            )));
        }
        let hedging = self
            .hedging
            .hedging(&self.retry, &self.limits)
            .map_err(conflict)?;
        // A hedged request is never retried: --implementation and
        // --grpc-retryable, the retry flags hedging takes, are hedging's.
        let strategy = match hedging {
            Some(_) => StrategyArgs {
                implementation: None,
                grpc_retryable: None,
                ..self.retry.clone()
            }
            .strategy(),
            None => self.retry.strategy(),
        }
        .map_err(conflict)?;
        let throttle = self
            .throttle
            .throttle(self.hedging.default_throttle(&strategy))
            .map_err(conflict)?;
        let open = self.traffic.open().map_err(conflict)?;
        let config = ClientConfig {
            url: self.url.clone(),
            clients: if open.is_some() { 0 } else { self.clients },
            open,
            shard,
            start_at: self.start_at,
            think: ThinkTime::new(self.lambda),
            timeout: self.timeout,
            strategy,
            limits: self.limits.limits(self.retry.kind()),
            hedging,
            throttle,
            report_interval: self.report_interval,
            duration: self.duration,
            ramp_up: self.ramp_up,
            timer_resolution: self.timer_resolution,
            threads: self.runtime.threads,
            seed: self.seed.unwrap_or_else(rand::random),
            csv: self.report.csv.clone(),
            hlog: self.hlog.clone(),
            quiet: false,
            wire: self.wire.wire().map_err(conflict)?,
        };
        Ok(config.scaled(self.time_scale))
    }
}

/// Output format of `client plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// An aligned table for the terminal.
    Table,
    /// CSV, times in seconds with three decimals.
    Csv,
}

/// Flags of `client plan`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct PlanArgs {
    /// Retry strategy and its flags.
    #[command(flatten)]
    pub retry: StrategyArgs,
    /// Retries to show (attempts after the first).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000), value_name = "N")]
    pub attempts: u32,
    /// Stop the table where --max-attempts would give up.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Geometric schedule: pick r = 1 + X, so that each sleep is about X
    /// times the time already waited (sets --factor; --jitter defaults to 0).
    #[arg(long, value_parser = positive, value_name = "X", conflicts_with = "factor")]
    pub target_ratio: Option<f64>,
    /// Mean think time, seconds (exponential-2014 starts from it).
    #[arg(long, default_value = "10", value_parser = seconds_or_duration, value_name = "SECONDS")]
    pub lambda: Duration,
    /// Draws for random strategies (min/median/max over them).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000), value_name = "N")]
    pub samples: u32,
    /// Seed of the draws.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Table)]
    pub format: PlanFormat,
    /// The throttle a burst of failures is put through.
    #[command(flatten)]
    pub throttle: ThrottleArgs,
    /// A burst of failures for the throttle.
    #[command(flatten)]
    pub burst: BurstArgs,
    /// Print a man page or shell completions instead of a plan.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

/// A usage error of `client plan`, with that subcommand's usage.
fn plan_conflict(msg: String) -> clap::Error {
    let mut client = ClientCli::command();
    match client.find_subcommand_mut("plan") {
        Some(plan) => plan
            .clone()
            .bin_name("client plan")
            .error(ErrorKind::ArgumentConflict, msg),
        None => client.error(ErrorKind::ArgumentConflict, msg),
    }
}

impl PlanArgs {
    /// Builds the planner's input, or says which flags are wrong.
    pub fn request(&self) -> Result<PlanRequest, clap::Error> {
        let mut retry = self.retry.clone();
        if let Some(x) = self.target_ratio {
            if retry.kind() != StrategyKind::Exponential {
                return Err(plan_conflict(
                    "--target-ratio applies to --strategy exponential (the geometric schedule)"
                        .to_string(),
                ));
            }
            retry.factor = Some(1.0 + x);
            retry.jitter.get_or_insert(0.0);
        }
        let strategy = retry.strategy().map_err(plan_conflict)?;
        let max_attempts = LimitArgs {
            max_attempts: self.max_attempts,
            deadline: None,
            respect_retry_after: false,
        }
        .limits(retry.kind())
        .max_attempts;
        let limit = max_attempts.map(|attempts| attempts.saturating_sub(1));
        let throttle = self
            .throttle
            .throttle(strategy.default_throttle())
            .map_err(plan_conflict)?;
        let burst = self
            .burst
            .request(throttle, max_attempts, self.seed)
            .map_err(plan_conflict)?;
        Ok(PlanRequest {
            burst,
            strategy,
            think: ThinkTime::new(self.lambda),
            retries: limit.map_or(self.attempts, |l| l.min(self.attempts)),
            samples: self.samples,
            seed: self.seed,
        })
    }
}

#[cfg(test)]
mod tests;
