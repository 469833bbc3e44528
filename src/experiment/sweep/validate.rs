//! A sweep's flags checked before anything runs: every setting's, the
//! model's search (the grid's and the adaptive one's bounds) or, against a
//! target, what a real storm a run allows.

use std::path::PathBuf;

use super::super::error::StormError;
use super::super::storm::{Flags, flag_value};
use super::config::{ARRIVAL_RATE, DEFAULT_LIMIT, Search, SweepConfig, secs, without_limit};
use super::findings::NO_LIMIT;
use super::measured;

impl SweepConfig {
    /// Checks every setting's flags before anything runs.
    pub fn validate(&self, flags: &dyn Flags) -> Result<(), StormError> {
        if self.seeds == 0 {
            return Err(StormError::Flags("--seeds: must be at least 1".into()));
        }
        if self.storm.scenario.target.is_some() {
            return self.validate_target(flags);
        }
        if !self.rates.is_empty()
            && let Some(case) = self.storm.scenario.cases.iter().find(|c| {
                flag_value(&c.client, ARRIVAL_RATE).is_some()
                    || flag_value(&c.client, "--clients").is_some()
            })
        {
            return Err(StormError::Flags(format!(
                "--arrival-rate: case {} sets its own load (--arrival-rate or --clients \
                 in its client flags), which the sweep's rates would replace",
                case.name
            )));
        }
        if self.limits != [DEFAULT_LIMIT]
            && let Some((case, model)) = self
                .storm
                .scenario
                .cases
                .iter()
                .find_map(|c| Some((c, without_limit(c)?)))
        {
            return Err(StormError::Flags(format!(
                "--limit does not apply to case {}, a {model} server (--model {model})",
                case.name
            )));
        }
        let longest = match self.pause {
            Some(pause) => pause,
            None if self.search == Search::Adaptive => {
                self.validate_adaptive()?;
                self.max_pause
            }
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

    /// Checks a sweep that measures a target: the adaptive search, one
    /// storm at a time, the sweep's settings only where they apply to a
    /// service, and every setting's storm as `storm --target` checks it.
    fn validate_target(&self, flags: &dyn Flags) -> Result<(), StormError> {
        let refuse = |msg: &str| Err(StormError::Flags(msg.to_string()));
        if self.pause.is_some() || self.search == Search::Grid {
            return refuse(
                "--target: a service's edge is measured by the adaptive search, a storm a \
                 run (--pause and --search grid run the model only)",
            );
        }
        if self.threads > 1 || !self.shard.is_whole() {
            return refuse(
                "--target: the storms share the target and run one at a time in one \
                 process (leave --threads and --shard out)",
            );
        }
        if self.limits != [NO_LIMIT] {
            return refuse(
                "--limit sets the project's server, which does not run against a --target",
            );
        }
        self.validate_adaptive()?;
        for setting in self.settings() {
            let case = self.case_for(&setting);
            measured::storm_of(
                self,
                &case,
                self.max_pause,
                self.storm.scenario.seed,
                PathBuf::new(),
            )
            .validate(flags)?;
        }
        Ok(())
    }

    /// Checks the resolution and the step against the longest pause.
    fn validate_pauses(&self) -> Result<(), StormError> {
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
        Ok(())
    }

    /// Checks the adaptive search of a sweep over the pause.
    fn validate_adaptive(&self) -> Result<(), StormError> {
        self.validate_pauses()?;
        if self.precision.is_zero() || self.max_runs == 0 {
            return Err(StormError::Flags(
                "--precision and --max-runs: must be more than 0".into(),
            ));
        }
        // The search's grid holds T50 to an 800th of the longest pause.
        if self.precision * 400 < self.max_pause {
            return Err(StormError::Flags(format!(
                "--precision: at least {} s with --max-pause {} s (the search holds T50 to \
                 an 800th of the longest pause)",
                secs(self.max_pause / 400),
                secs(self.max_pause)
            )));
        }
        Ok(())
    }

    /// Checks the grid and the bisection of a sweep over the pause.
    fn validate_grid(&self) -> Result<(), StormError> {
        self.validate_pauses()?;
        if self.max_pause.as_nanos() / self.resolution.as_nanos() > 100_000 {
            return Err(StormError::Flags(
                "--resolution: too fine for --max-pause (over 100,000 pauses)".into(),
            ));
        }
        Ok(())
    }
}
