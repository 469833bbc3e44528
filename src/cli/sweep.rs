//! `storm sweep`'s flags, turned into a sweep's configuration.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::generate::GenerateArgs;
use super::outage::OutageArgs;
use super::protocol::{OutputArgs, ProtocolArgs, default_out};
use super::values::{
    duration, http_url, positive, positive_duration, resolve_shard, seconds_or_duration, shard,
    time_scale,
};
use crate::experiment::scenario::{Engine, Scenario, ScenarioError};
use crate::experiment::sweep::{DEFAULT_LIMIT, NO_LIMIT, Search, SweepConfig};
use crate::experiment::{Stop, Storm};
use crate::model::shard::{Shard, ShardSource};
use crate::policy::StrategyKind;

/// Runs a pause of the grid, and of one pause.
const DEFAULT_SEEDS: u32 = 10;
/// The grid's pause step, and the adaptive maps' cells'.
const DEFAULT_STEP: Duration = Duration::from_secs(5);
/// The adaptive search's width of T50's interval.
const DEFAULT_PRECISION: Duration = Duration::from_secs(1);
/// The adaptive search's most runs a setting.
const DEFAULT_MAX_RUNS: u32 = 100;
/// Against a target, where a run is a real storm of a minute or more:
/// T50's interval 4 s wide, at most 30 runs a setting (an hour or so).
const TARGET_PRECISION: Duration = Duration::from_secs(4);
/// Against a target: the most storms a setting.
const TARGET_MAX_RUNS: u32 = 30;

/// How `storm sweep` places each setting's runs along the pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchArg {
    /// Each next run where it tells most about T50 and the slope.
    Adaptive,
    /// Every pause of a grid with every seed, and a bisection.
    Grid,
}

/// `storm sweep [FILE]`: where each policy breaks. For each case (the
/// scenario file's, or one per strategy), under each number of clients
/// (or arrival rate), think time, timeout and server limit given, how
/// often the system
/// recovers against the pause, in virtual time: T50 (where half the runs
/// recover) with its interval, T90 and T10; critical.csv, phase.csv, a
/// heat map and a phase diagram. With --pause, how often each setting
/// recovers from that one pause, mapped over two settings.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// A scenario file whose cases to map (its protocol and seed too,
    /// unless given below) [default: one case per --strategies].
    #[arg(value_name = "FILE", conflicts_with = "strategies")]
    pub file: Option<PathBuf>,
    /// Strategies to map, comma-separated, one case each [default: all].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "NAMES")]
    pub strategies: Vec<StrategyKind>,
    /// Numbers of clients, comma-separated, for each closed case; a case
    /// whose client flags hold --arrival-rate is open traffic at its own
    /// rate, and gets none.
    #[arg(long, value_delimiter = ',', default_value = "1000", value_name = "N,...",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub clients: Vec<u32>,
    /// Arrival rates (sessions a second), comma-separated, instead of
    /// --clients: every case runs as open traffic at each, keeping its own
    /// --session-requests (its flags may not set --arrival-rate or
    /// --clients) [default: --clients for a closed case, its own rate for
    /// an open one].
    #[arg(long, value_delimiter = ',', value_parser = positive, value_name = "R,...",
          conflicts_with = "clients")]
    pub arrival_rate: Vec<f64>,
    /// Mean think times, comma-separated (seconds or durations) [default:
    /// each case's own].
    #[arg(long, value_delimiter = ',', value_parser = seconds_or_duration,
          value_name = "SECONDS,...")]
    pub lambda: Vec<Duration>,
    /// Client timeouts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2s", value_parser = positive_duration,
          value_name = "DURATION,...")]
    pub timeout: Vec<Duration>,
    /// Server limits (concurrency where latency starts to grow),
    /// comma-separated [default: 30].
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub limit: Vec<u64>,
    /// How each setting's runs are placed along the pause: adaptive, each
    /// next run (a seed of its own) where it tells most about T50 and the
    /// slope, until T50 is known to --precision or --max-runs are made, a
    /// map's next load starting from its neighbour's T50; grid, every
    /// --step with --seeds runs each, and a bisection of the critical
    /// pause.
    #[arg(long, value_enum, default_value_t = SearchArg::Adaptive, value_name = "HOW")]
    pub search: SearchArg,
    /// Adaptive: a setting is done once T50's 95 % interval is this
    /// narrow [default: 1s; 4s with --target].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub precision: Option<Duration>,
    /// Adaptive: the most runs a setting takes, its interval as narrow as
    /// they make it [default: 100; 30 with --target].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs: Option<u32>,
    /// Grid and --pause: runs per pause, seeds from --seed on; most
    /// recovering is the bisection's test. Fewer than 4 cannot bound T50's
    /// interval at either end [default: 10].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub seeds: Option<u32>,
    /// Longest pause tried.
    #[arg(long, default_value = "120s", value_parser = positive_duration, value_name = "DURATION")]
    pub max_pause: Duration,
    /// One pause only: run each setting at this pause, and map P(recover)
    /// over the settings (the first that varies across, the second up the
    /// side) instead of over the pause; no edge, no critical.csv.
    #[arg(long, value_parser = duration, value_name = "DURATION",
          conflicts_with_all = ["max_pause", "resolution", "step"])]
    pub pause: Option<Duration>,
    /// Precision of the critical pause: the bisection's, and the finest
    /// lattice of pauses the adaptive search tries (half --precision if
    /// that is finer).
    #[arg(long, default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub resolution: Duration,
    /// Grid: its pause step; adaptive: the step of the maps' cells
    /// [default: 5s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub step: Option<Duration>,
    /// Run only shard I of N of the settings (I counts from 0): those
    /// whose place among all settings is I modulo N (with the adaptive
    /// search, whole lines of a case's loads, so that each load starts
    /// from its neighbour as in one process), written with a
    /// shard.json for `storm merge`, which puts the shards together as one
    /// process would have written them. [default: from
    /// SLURM_ARRAY_TASK_ID/COUNT, SLURM_PROCID/SLURM_NTASKS or
    /// JOB_COMPLETION_INDEX/JOB_COMPLETIONS; else every setting]
    #[arg(long, value_parser = shard, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Print the number of runs and events, and their rate.
    #[arg(long, short)]
    pub verbose: bool,
    /// Measure the edge of a service of yours at URL instead of the
    /// model's: each run of the adaptive search a real storm of one run
    /// through --outage, one at a time, the target calm before each; every
    /// run written to runs.csv as it ends and its storm's files kept under
    /// runs/; Ctrl-C stops the storm under way and writes the edges of the
    /// runs made [default: the scenario's target].
    #[arg(long, value_name = "URL", value_parser = http_url)]
    pub target: Option<String>,
    /// How the --target's outage is caused.
    #[command(flatten)]
    pub outage: OutageArgs,
    /// How long the --target must answer promptly, without a break,
    /// before each storm [default: the scenario's calm, else 30s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION", requires = "target")]
    pub calm: Option<Duration>,
    /// With --target: divide every duration of the storms by ten (the
    /// clients' timeouts, think times, retry delays, phases and pauses;
    /// not the target's own times).
    #[arg(long, requires = "target")]
    pub quick: bool,
    /// With --target: divide every duration of the storms by K, as
    /// --quick does by ten.
    #[arg(long, value_parser = time_scale, value_name = "K", conflicts_with = "quick",
          requires = "target")]
    pub time_scale: Option<f64>,
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
    /// The share of the settings to run and where it was named: the flag,
    /// else a cluster engine's environment, else every setting.
    pub fn shard(&self) -> Result<(Shard, ShardSource), ScenarioError> {
        resolve_shard(self.shard).map_err(ScenarioError)
    }

    /// Refuses the flags of one way of placing runs given with the other.
    fn check_search(&self) -> Result<(), ScenarioError> {
        let adaptive = self.pause.is_none() && self.search == SearchArg::Adaptive;
        if adaptive && self.seeds.is_some() {
            return Err(ScenarioError(
                "--seeds sets the grid's runs a pause: the adaptive search gives each run a \
                 seed of its own (--max-runs bounds them); add --search grid for the grid"
                    .into(),
            ));
        }
        if !adaptive && (self.precision.is_some() || self.max_runs.is_some()) {
            return Err(ScenarioError(format!(
                "--precision and --max-runs bound the adaptive search, not {}",
                if self.pause.is_some() {
                    "one pause (--pause)"
                } else {
                    "the grid (--search grid)"
                }
            )));
        }
        Ok(())
    }

    /// Builds the sweep's configuration.
    pub fn config(&self) -> Result<SweepConfig, ScenarioError> {
        self.check_search()?;
        let (scenario, suffix) = match &self.file {
            Some(file) => {
                let stem = file
                    .file_stem()
                    .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
                (
                    self.protocol.apply(Scenario::load(file)?)?,
                    format!("{stem}-sweep"),
                )
            }
            None => {
                let strategies = if self.strategies.is_empty() {
                    StrategyKind::ALL.to_vec()
                } else {
                    self.strategies.clone()
                };
                let scenario = self.protocol.scenario(&strategies, Duration::ZERO)?;
                (scenario, "sweep".to_string())
            }
        };
        let mut scenario = scenario;
        scenario.target = self.target.clone().or(scenario.target);
        scenario.outage = self.outage.over(scenario.outage.take())?;
        scenario.protocol.calm = self.calm.unwrap_or(scenario.protocol.calm);
        let target = scenario.target.is_some();
        self.protocol
            .refuse_server_args_with(scenario.target.as_deref())?;
        let threads = match (target, self.threads) {
            // The storms share the target: one at a time (validated).
            (true, None) => 1,
            (_, Some(n)) => n as usize,
            (false, None) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let storm = Storm {
            scenario: Scenario {
                runs: None,
                ..scenario
            },
            engine: if target { Engine::Real } else { Engine::Sim },
            time_scale: match (self.quick, self.time_scale) {
                (true, _) => 10.0,
                (false, Some(k)) => k,
                (false, None) => 1.0,
            },
            parallel: 0,
            out: self
                .output
                .out
                .clone()
                .unwrap_or_else(|| default_out(Some(&suffix))),
            existing: self.output.existing(),
            png: self.output.png,
            progress: !self.output.quiet,
            watch: None,
            verbose: self.verbose,
            program: PathBuf::new(),
            shard: Shard::WHOLE,
            stop: Stop::new(),
        };
        Ok(SweepConfig {
            storm,
            clients: self.clients.clone(),
            rates: self.arrival_rate.clone(),
            thinks: self.lambda.clone(),
            timeouts: self.timeout.clone(),
            // A limit given against a target is refused by the validation.
            limits: match (target, self.limit.is_empty()) {
                (true, true) => vec![NO_LIMIT],
                (false, true) => vec![DEFAULT_LIMIT],
                (_, false) => self.limit.clone(),
            },
            seeds: self.seeds.unwrap_or(DEFAULT_SEEDS),
            search: match self.search {
                SearchArg::Adaptive => Search::Adaptive,
                SearchArg::Grid => Search::Grid,
            },
            precision: self.precision.unwrap_or(if target {
                TARGET_PRECISION
            } else {
                DEFAULT_PRECISION
            }),
            max_runs: self.max_runs.unwrap_or(if target {
                TARGET_MAX_RUNS
            } else {
                DEFAULT_MAX_RUNS
            }),
            pause: self.pause,
            max_pause: self.max_pause,
            resolution: self.resolution,
            step: self.step.unwrap_or(DEFAULT_STEP),
            threads,
            // The environment is read by the program (`storm sweep`), not
            // here: a merge rebuilds a shard's configuration from its flags.
            shard: self.shard.unwrap_or_default(),
        })
    }
}
