//! What a sweep covers: its settings, and the case and storm of each run.

use std::time::Duration;

use super::super::error::StormError;
use super::super::scenario::{Case, format_duration};
use super::super::storm::{Flags, Storm, flag_value};
use crate::model::shard::Shard;

/// A whole sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The experiment every point runs (cases, protocol, base seed); its
    /// pause is set per point, its engine is virtual.
    pub storm: Storm,
    /// Numbers of clients to sweep.
    pub clients: Vec<u32>,
    /// Mean think times to sweep (none: the cases' own).
    pub thinks: Vec<Duration>,
    /// Client timeouts to sweep.
    pub timeouts: Vec<Duration>,
    /// Server limits (concurrency where latency starts to grow) to sweep.
    pub limits: Vec<u64>,
    /// Seeds per pause (base seed, base + 1, ...).
    pub seeds: u32,
    /// One pause only: each setting is then a single point, and the map is
    /// over the settings instead of the pause (no edge, no bisection).
    pub pause: Option<Duration>,
    /// Longest pause tried.
    pub max_pause: Duration,
    /// Precision of the bisection's critical pause.
    pub resolution: Duration,
    /// Pause step of the grid.
    pub step: Duration,
    /// Worker threads.
    pub threads: usize,
    /// The share of the settings this process runs.
    pub shard: Shard,
}

/// One line of the map: a case under one setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The case, by its place in the scenario.
    pub case: usize,
    /// Number of clients.
    pub clients: u32,
    /// Mean think time, if the sweep sets it.
    pub think: Option<Duration>,
    /// Client timeout.
    pub timeout: Duration,
    /// Server limit.
    pub limit: u64,
}

/// The 2014 server's limit, the sweep's default.
const DEFAULT_LIMIT: u64 = 30;

/// Whether `case`'s server is a thread pool, which has no limit.
fn is_pool(case: &Case) -> bool {
    flag_value(&case.server, "--model") == Some("pool")
}

pub(super) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl SweepConfig {
    /// Every setting, cases outermost.
    pub fn settings(&self) -> Vec<Setting> {
        let thinks: Vec<Option<Duration>> = if self.thinks.is_empty() {
            vec![None]
        } else {
            self.thinks.iter().copied().map(Some).collect()
        };
        let mut out = Vec::new();
        for case in 0..self.storm.scenario.cases.len() {
            for &clients in &self.clients {
                for &think in &thinks {
                    for &timeout in &self.timeouts {
                        for &limit in &self.limits {
                            out.push(Setting {
                                case,
                                clients,
                                think,
                                timeout,
                                limit,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The name of a setting's case.
    pub(super) fn name(&self, setting: &Setting) -> &str {
        &self.storm.scenario.cases[setting.case].name
    }

    /// A setting's case: the scenario's, with the setting's clients, think
    /// time, timeout and server limit.
    pub(super) fn case_for(&self, setting: &Setting) -> Case {
        let mut case = self.storm.scenario.cases[setting.case].clone();
        case.client.extend([
            "--clients".to_string(),
            setting.clients.to_string(),
            "--timeout".to_string(),
            format_duration(setting.timeout),
        ]);
        if let Some(think) = setting.think {
            case.client
                .extend(["--lambda".to_string(), format_duration(think)]);
        }
        // A pool has no limit: the sweep's (its default, as validation
        // refuses any other) does not apply to it.
        if !is_pool(&case) {
            case.server
                .extend(["--limit".to_string(), setting.limit.to_string()]);
        }
        case
    }

    /// The storm of one run: the sweep's, with this pause and seed.
    pub(super) fn storm_for(&self, pause: Duration, seed: u64) -> Storm {
        let mut storm = self.storm.clone();
        storm.scenario.protocol.pause = pause;
        // The verdict does not read the tail; a sweep has no use for it.
        storm.scenario.protocol.tail = Duration::ZERO;
        storm.scenario.seed = seed;
        storm
    }

    /// Checks every setting's flags before anything runs.
    pub fn validate(&self, flags: &dyn Flags) -> Result<(), StormError> {
        if self.seeds == 0 {
            return Err(StormError::Flags("--seeds: must be at least 1".into()));
        }
        if self.limits != [DEFAULT_LIMIT]
            && let Some(pool) = self.storm.scenario.cases.iter().find(|c| is_pool(c))
        {
            return Err(StormError::Flags(format!(
                "--limit does not apply to case {}, a pool (--model pool)",
                pool.name
            )));
        }
        let longest = match self.pause {
            Some(pause) => pause,
            None => {
                self.validate_grid()?;
                self.max_pause
            }
        };
        self.storm_for(longest, self.storm.scenario.seed)
            .scenario
            .protocol
            .check()
            .map_err(|e| StormError::Flags(e.to_string()))?;
        for setting in self.settings() {
            self.storm_for(longest, self.storm.scenario.seed)
                .sim_config(&self.case_for(&setting), 0, flags)?;
        }
        Ok(())
    }

    /// Checks the grid and the bisection of a sweep over the pause.
    fn validate_grid(&self) -> Result<(), StormError> {
        if self.resolution.is_zero() || self.step.is_zero() {
            return Err(StormError::Flags(
                "--resolution and --step: must be longer than 0".into(),
            ));
        }
        if self.resolution > self.max_pause || self.step > self.max_pause {
            return Err(StormError::Flags(format!(
                "--resolution and --step: must not exceed --max-pause ({} s)",
                secs(self.max_pause)
            )));
        }
        if self.max_pause.as_nanos() / self.resolution.as_nanos() > 100_000 {
            return Err(StormError::Flags(
                "--resolution: too fine for --max-pause (over 100,000 pauses)".into(),
            ));
        }
        Ok(())
    }
}
