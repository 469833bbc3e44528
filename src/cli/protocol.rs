//! The flags of the storm protocol, the flags added to every case, and
//! where results go: shared by `storm`, `storm run` and `storm sweep`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::positive_duration;
use crate::experiment::folder::Existing;
use crate::experiment::scenario::{Case, Protocol, Scenario, ScenarioError, split_flags};
use crate::policy::StrategyKind;

/// The protocol and the flags added to every case, shared by `storm` and
/// `storm sweep`. With a scenario file (`storm sweep FILE`), those given
/// override the file's.
#[derive(Debug, Clone, Args)]
pub struct ProtocolArgs {
    /// Warm-up before the server is stopped [default: 20s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub warmup: Option<Duration>,
    /// Observation after the server resumes: a recovery must start within
    /// it [default: 60s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub observe: Option<Duration>,
    /// Client report interval: the unit of the recovery verdict [default:
    /// 5s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Option<Duration>,
    /// Seed of every client (repetition i: seed + i - 1) [default: 2014].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Extra flags for every server, e.g. "--limit 40 --on-disconnect cancel".
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub server_args: Option<String>,
    /// Extra flags for every client, e.g. "--clients 2000 --throttle budget".
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub client_args: Option<String>,
}

/// The seed of a storm given none.
const DEFAULT_SEED: u64 = 2014;

impl ProtocolArgs {
    /// Refuses `--server-args` against a target (`target`, its URL): no
    /// project server runs there.
    pub fn refuse_server_args_with(&self, target: Option<&str>) -> Result<(), ScenarioError> {
        match (target, &self.server_args) {
            (Some(url), Some(_)) => Err(ScenarioError(format!(
                "--server-args with --target {url}: no project server runs; set the \
                 target's flags where you start it"
            ))),
            _ => Ok(()),
        }
    }

    /// A scenario comparing `strategies` with these flags and `pause`:
    /// each case named after its strategy.
    pub fn scenario(
        &self,
        strategies: &[StrategyKind],
        pause: Duration,
    ) -> Result<Scenario, ScenarioError> {
        let mut names: Vec<StrategyKind> = Vec::new();
        for &s in strategies {
            if !names.contains(&s) {
                names.push(s);
            }
        }
        let scenario = Scenario {
            seed: DEFAULT_SEED,
            engine: None,
            runs: None,
            target: None,
            outage: None,
            protocol: Protocol {
                pause,
                ..Protocol::default()
            },
            cases: names
                .into_iter()
                .map(|s| {
                    Case::direct(
                        s.name().to_string(),
                        vec!["--strategy".to_string(), s.name().to_string()],
                        Vec::new(),
                    )
                })
                .collect(),
        };
        self.apply(scenario)
    }

    /// `scenario` with the flags given here: the protocol's phases and the
    /// seed in their place, the extra flags after every case's own.
    pub fn apply(&self, mut scenario: Scenario) -> Result<Scenario, ScenarioError> {
        let flags = |what: &str, text: &Option<String>| {
            split_flags(text.as_deref().unwrap_or(""))
                .map_err(|e| ScenarioError(format!("--{what}-args: {e}")))
        };
        let (server, client) = (
            flags("server", &self.server_args)?,
            flags("client", &self.client_args)?,
        );
        let p = &mut scenario.protocol;
        p.warmup = self.warmup.unwrap_or(p.warmup);
        p.observe = self.observe.unwrap_or(p.observe);
        p.report_interval = self.report_interval.unwrap_or(p.report_interval);
        scenario.seed = self.seed.unwrap_or(scenario.seed);
        for case in &mut scenario.cases {
            case.server.extend(server.iter().cloned());
            case.client.extend(client.iter().cloned());
        }
        Ok(scenario)
    }
}

/// Where results go and how they are shown, shared by every storm command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Results folder [default: results/<UTC timestamp>; for storm run,
    /// results/<UTC timestamp>-<file name>; for storm sweep,
    /// results/<UTC timestamp>-sweep, or -<file name>-sweep with a file].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Draw PNG plots instead of SVG.
    #[arg(long)]
    pub png: bool,
    /// No live progress on stdout.
    #[arg(long)]
    pub quiet: bool,
    /// Let --out name a folder that holds an earlier run's results, and
    /// remove them first [default: refuse a folder that holds any file].
    #[arg(long)]
    pub replace: bool,
}

impl OutputArgs {
    /// What to do with a results folder that already holds files.
    pub fn existing(&self) -> Existing {
        existing(self.replace)
    }
}

/// What `--replace` says of a results folder that already holds files.
pub(super) fn existing(replace: bool) -> Existing {
    if replace {
        Existing::Replace
    } else {
        Existing::Refuse
    }
}

/// A folder name from the current time: `2026-11-22T01-02-03Z`.
fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-")
}

/// The default results folder: `results/<UTC timestamp>[-suffix]`.
pub(super) fn default_out(suffix: Option<&str>) -> PathBuf {
    let name = match suffix {
        Some(suffix) => format!("{}-{suffix}", timestamp()),
        None => timestamp(),
    };
    PathBuf::from("results").join(name)
}
