//! `storm sweep`'s flags, turned into a sweep's configuration.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::generate::GenerateArgs;
use super::protocol::{OutputArgs, ProtocolArgs, default_out};
use super::values::positive_duration;
use crate::experiment::Storm;
use crate::experiment::scenario::{Engine, ScenarioError};
use crate::experiment::sweep::SweepConfig;
use crate::policy::StrategyKind;

/// `storm sweep`: where each policy breaks. For each strategy (and each
/// number of clients, timeout and server limit given), the critical pause:
/// the longest pause after which the system still recovers, by bisection in
/// virtual time; and a heat map of recovery time by pause.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Strategies to map, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "NAMES")]
    pub strategies: Vec<StrategyKind>,
    /// Numbers of clients, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000", value_name = "N,...",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub clients: Vec<u32>,
    /// Client timeouts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2s", value_parser = positive_duration,
          value_name = "DURATION,...")]
    pub timeout: Vec<Duration>,
    /// Server limits (concurrency where latency starts to grow), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "30",
        value_name = "N,..."
    )]
    pub limit: Vec<u64>,
    /// Seeds per point (from --seed on); a point recovers when most do.
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub seeds: u32,
    /// Longest pause tried.
    #[arg(long, default_value = "120s", value_parser = positive_duration, value_name = "DURATION")]
    pub max_pause: Duration,
    /// Precision of the critical pause.
    #[arg(long, default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub resolution: Duration,
    /// Pause step of the heat map.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub step: Duration,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Print the number of runs and events, and their rate.
    #[arg(long, short)]
    pub verbose: bool,
    /// The protocol and the flags of every case.
    #[command(flatten)]
    pub protocol: ProtocolArgs,
    /// Results and how they are shown.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

impl SweepArgs {
    /// Builds the sweep's configuration.
    pub fn config(&self) -> Result<SweepConfig, ScenarioError> {
        let strategies = if self.strategies.is_empty() {
            StrategyKind::ALL.to_vec()
        } else {
            self.strategies.clone()
        };
        let threads = self.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |n| n as usize,
        );
        let scenario = self.protocol.scenario(&strategies, Duration::ZERO)?;
        let storm = Storm {
            scenario,
            engine: Engine::Sim,
            time_scale: 1.0,
            parallel: 0,
            out: self
                .output
                .out
                .clone()
                .unwrap_or_else(|| default_out(Some("sweep"))),
            png: self.output.png,
            progress: !self.output.quiet,
            verbose: self.verbose,
            program: PathBuf::new(),
        };
        Ok(SweepConfig {
            storm,
            clients: self.clients.clone(),
            timeouts: self.timeout.clone(),
            limits: self.limit.clone(),
            seeds: self.seeds,
            max_pause: self.max_pause,
            resolution: self.resolution,
            step: self.step,
            threads,
        })
    }
}
