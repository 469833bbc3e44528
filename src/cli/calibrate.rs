//! `storm calibrate`'s flags, turned into a calibration's configuration.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::generate::GenerateArgs;
use super::outage::OutageArgs;
use super::protocol::{OutputArgs, ProtocolArgs, default_out};
use super::values::{http_url, positive_duration, probability};
use super::wire::WireArgs;
use crate::experiment::calibrate::{CalibrateConfig, Verify};
use crate::experiment::outage::Outage;
use crate::experiment::scenario::{Engine, ScenarioError};
use crate::experiment::sweep::{Search, SweepConfig};
use crate::experiment::{Stop, Storm};
use crate::model::fit::FitOptions;
use crate::model::shard::Shard;
use crate::net::probe::ProbeConfig;
use crate::policy::StrategyKind;

/// `storm calibrate --target URL`: a virtual twin of a service of yours.
/// A closed-loop probe at rising concurrency (levels.csv), a probe of
/// whether the service finishes work for clients that have gone, the
/// project's server shapes and the Universal Scalability Law fitted to
/// what was measured (calibration.md, fit.svg), the best written as a
/// scenario (twin.toml) and swept in virtual time: each policy's T50 with
/// its interval (predict/). With --verify, storms against the service at
/// pauses around each T50, P(recovered) beside the prediction (verify/).
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The service to calibrate: an http:// or https:// URL, asked as the
    /// request flags say (a GET by default); the storms of --verify's
    /// clients are given the same flags.
    #[arg(long, value_name = "URL", value_parser = http_url,
          required_unless_present = "generate")]
    pub target: Option<String>,
    /// Concurrencies to probe, rising, comma-separated [default: 1, 2, 4,
    /// ... up to --max-concurrency].
    #[arg(long, value_delimiter = ',', value_name = "N,...",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub levels: Vec<u32>,
    /// The largest concurrency of the default levels (itself probed last
    /// if not a power of two).
    #[arg(long, default_value_t = 256, value_name = "N", conflicts_with = "levels",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrency: u32,
    /// How long each level runs before it is measured.
    #[arg(long, default_value = "2s", value_parser = positive_duration, value_name = "DURATION")]
    pub level_warmup: Duration,
    /// How long each level is measured, after its warm-up.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub hold: Duration,
    /// Stop the probe after the first level whose p99 latency passes this.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub max_latency: Duration,
    /// Stop the probe after the first level whose share of failed
    /// requests passes this; such levels are left out of the fit.
    #[arg(long, default_value_t = 0.01, value_parser = probability, value_name = "SHARE")]
    pub max_errors: f64,
    /// A probe's request unanswered this long fails (and its connection
    /// is closed).
    #[arg(long, default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
    /// Do not probe whether the service finishes work for clients that
    /// have gone: the twin then goes on with it (the server's default).
    #[arg(long)]
    pub no_gone: bool,
    /// Batches of requests the order probe sends at once to the idle
    /// service, to tell a pool (answers in waves, first come, first
    /// served) from a curve (answers together, the service shared): as
    /// many requests as the closed loop's concurrency at which latency
    /// had grown four times, at least 16. 0: not probed (the fit alone
    /// chooses the twin's shape).
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub batches: u32,
    /// Connections the burst probe opens at once, a request each, to tell
    /// where the service keeps requests it cannot start yet (its listen
    /// backlog, a queue that refuses, one that holds them all): more than
    /// its queue holds (Linux's listen backlog is at most 4,096 by
    /// default); at most 20,000, within the ephemeral ports of one
    /// address. 0: not probed (a pool's twin keeps the fit's queue: 1,000
    /// places, or as many as the closed loop held).
    #[arg(long, default_value_t = 5000, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=20_000))]
    pub burst: u32,
    /// Policies to predict, comma-separated: a case each in twin.toml.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "NAMES",
        default_value = "fixed,exponential-2014"
    )]
    pub strategies: Vec<StrategyKind>,
    /// Users of each case, in the twin and in the storms of --verify.
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub clients: u32,
    /// Their timeout.
    #[arg(long, default_value = "2s", value_parser = positive_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Write the twin without sweeping it.
    #[arg(long, conflicts_with = "verify")]
    pub no_predict: bool,
    /// Runs of the twin per pause, seeds from --seed on.
    #[arg(long, default_value_t = 20, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub seeds: u32,
    /// Longest pause the prediction tries.
    #[arg(long, default_value = "120s", value_parser = positive_duration, value_name = "DURATION")]
    pub max_pause: Duration,
    /// Check the prediction: storm the service at three pauses around each
    /// policy's predicted T50, through --outage, and set P(recovered)
    /// beside the twin's at the same pause.
    #[arg(long)]
    pub verify: bool,
    /// Storms per pause and policy of --verify.
    #[arg(long, default_value_t = 5, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub verify_runs: u32,
    /// The outage of --verify's storms [default: stall, a fault proxy of
    /// the storm's own that stalls as a stopped process does].
    #[command(flatten)]
    pub outage: OutageArgs,
    /// How long the service must answer promptly, without a break, before
    /// each storm of --verify.
    #[arg(long, default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub calm: Duration,
    /// The target is a stand-in ten times faster than the service it
    /// stands for (the project's server with --time-scale 10): the fit
    /// takes its times multiplied by ten, and the storms of --verify run
    /// with every duration divided by ten, as `storm --quick`.
    #[arg(long)]
    pub quick: bool,
    /// Worker threads of the prediction [default: one per core].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// The twin's protocol and the flags added to its cases (--server-args
    /// to add what the probe cannot tell: a defence, a queue's length).
    #[command(flatten)]
    pub protocol: ProtocolArgs,
    /// How the probe's requests go on the wire, as the client's.
    #[command(flatten)]
    pub wire: WireArgs,
    /// Results and how they are shown.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

/// The outage of `--verify` given no other: the proxy's stall.
const DEFAULT_OUTAGE: &str = "stall";

/// 1, 2, 4, ... up to `max`, and `max` itself if it is not one of them.
pub fn doubling(max: u32) -> Vec<u32> {
    let mut levels: Vec<u32> = std::iter::successors(Some(1u32), |&n| n.checked_mul(2))
        .take_while(|&n| n <= max)
        .collect();
    if levels.last() != Some(&max) {
        levels.push(max);
    }
    levels
}

impl CalibrateArgs {
    /// The calibration these flags ask for; `program` is this program, to
    /// run the storms' clients.
    pub fn config(
        &self,
        program: PathBuf,
        command: String,
    ) -> Result<CalibrateConfig, ScenarioError> {
        let target = self
            .target
            .clone()
            .ok_or_else(|| ScenarioError("--target URL is needed".into()))?;
        let levels = if self.levels.is_empty() {
            doubling(self.max_concurrency)
        } else {
            self.levels.clone()
        };
        if levels.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ScenarioError(format!(
                "--levels {}: must rise, each once (the probe stops at the first level past \
                 its bounds)",
                levels
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        }
        let wire = self.wire.wire().map_err(ScenarioError)?;
        let mut cases = self
            .protocol
            .scenario(&self.strategies, Duration::from_secs(20))?;
        for case in &mut cases.cases {
            // After the strategy, before the user's own flags.
            let own = case.client.split_off(2);
            case.client.extend([
                "--clients".to_string(),
                self.clients.to_string(),
                "--timeout".to_string(),
                crate::experiment::scenario::format_duration(self.timeout),
            ]);
            // The twin's clients speak as the probe did (the virtual engine
            // reads the transport), and so do --verify's.
            case.client.extend(self.wire.argv());
            case.client.extend(own);
        }
        let out = self
            .output
            .out
            .clone()
            .unwrap_or_else(|| default_out(Some("calibrate")));
        let outage = self.outage.over(None)?.map_or_else(
            || DEFAULT_OUTAGE.parse::<Outage>().map_err(ScenarioError),
            Ok,
        )?;
        let threads = self.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |n| n as usize,
        );
        let storm = Storm {
            scenario: cases.clone(),
            engine: Engine::Sim,
            time_scale: 1.0,
            parallel: 0,
            out: out.join("predict"),
            existing: self.output.existing(),
            png: self.output.png,
            progress: !self.output.quiet,
            watch: None,
            verbose: false,
            program,
            shard: Shard::WHOLE,
            stop: Stop::new(),
        };
        let predict = SweepConfig {
            storm,
            clients: vec![self.clients],
            rates: Vec::new(),
            thinks: Vec::new(),
            timeouts: vec![self.timeout],
            limits: vec![30],
            seeds: self.seeds,
            // The twin's prediction keeps --seeds runs at every pause tried.
            search: Search::Grid,
            precision: Duration::from_secs(1),
            max_runs: 100,
            pause: None,
            max_pause: self.max_pause,
            resolution: Duration::from_secs(1),
            step: Duration::from_secs(5),
            threads,
            shard: Shard::WHOLE,
        };
        Ok(CalibrateConfig {
            probe: ProbeConfig {
                target,
                wire,
                levels,
                warmup: self.level_warmup,
                hold: self.hold,
                max_latency: self.max_latency,
                max_error_share: self.max_errors,
                timeout: self.request_timeout,
            },
            gone: !self.no_gone,
            batches: self.batches,
            burst: self.burst,
            fit: FitOptions {
                max_error_share: self.max_errors,
            },
            cases,
            predict: (!self.no_predict).then_some(predict),
            verify: self.verify.then_some(Verify {
                runs: self.verify_runs,
                outage,
            }),
            out,
            existing: self.output.existing(),
            png: self.output.png,
            time_scale: if self.quick { 10.0 } else { 1.0 },
            command,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_levels_double_up_to_the_largest() {
        assert_eq!(doubling(256), [1, 2, 4, 8, 16, 32, 64, 128, 256]);
        assert_eq!(doubling(100), [1, 2, 4, 8, 16, 32, 64, 100]);
        assert_eq!(doubling(1), [1]);
    }
}
