//! The flags of the storm protocol, the flags added to every case, and
//! where results go: shared by `storm`, `storm run` and `storm sweep`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::positive_duration;
use crate::experiment::scenario::{Case, Protocol, Scenario, ScenarioError, split_flags};
use crate::policy::StrategyKind;

/// The protocol and the flags added to every case, shared by `storm` and
/// `storm sweep`.
#[derive(Debug, Clone, Args)]
pub struct ProtocolArgs {
    /// Warm-up before the server is stopped.
    #[arg(long, default_value = "20s", value_parser = positive_duration, value_name = "DURATION")]
    pub warmup: Duration,
    /// Observation after the server resumes: a recovery must start within it.
    #[arg(long, default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub observe: Duration,
    /// Client report interval: the unit of the recovery verdict.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Seed of every client.
    #[arg(long, default_value_t = 2014, value_name = "N")]
    pub seed: u64,
    /// Extra flags for every server, e.g. "--limit 40 --on-disconnect cancel".
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub server_args: Option<String>,
    /// Extra flags for every client, e.g. "--clients 2000 --throttle budget".
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub client_args: Option<String>,
}

impl ProtocolArgs {
    /// A scenario comparing `strategies` with these flags and `pause`:
    /// each case named after its strategy.
    pub fn scenario(
        &self,
        strategies: &[StrategyKind],
        pause: Duration,
    ) -> Result<Scenario, ScenarioError> {
        let flags = |what: &str, text: &Option<String>| {
            split_flags(text.as_deref().unwrap_or(""))
                .map_err(|e| ScenarioError(format!("--{what}-args: {e}")))
        };
        let (server, client) = (
            flags("server", &self.server_args)?,
            flags("client", &self.client_args)?,
        );
        let mut names: Vec<StrategyKind> = Vec::new();
        for &s in strategies {
            if !names.contains(&s) {
                names.push(s);
            }
        }
        Ok(Scenario {
            seed: self.seed,
            engine: None,
            runs: None,
            protocol: Protocol {
                warmup: self.warmup,
                pause,
                observe: self.observe,
                report_interval: self.report_interval,
            },
            cases: names
                .into_iter()
                .map(|s| Case {
                    name: s.name().to_string(),
                    client: ["--strategy".to_string(), s.name().to_string()]
                        .into_iter()
                        .chain(client.iter().cloned())
                        .collect(),
                    server: server.clone(),
                })
                .collect(),
        })
    }
}

/// Where results go and how they are shown, shared by every storm command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Results folder [default: results/<UTC timestamp>; for storm run,
    /// results/<UTC timestamp>-<file name>; for storm sweep,
    /// results/<UTC timestamp>-sweep].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Draw PNG plots instead of SVG.
    #[arg(long)]
    pub png: bool,
    /// No live progress on stdout.
    #[arg(long)]
    pub quiet: bool,
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
