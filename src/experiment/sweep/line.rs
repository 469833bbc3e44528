//! One line of the map: a case under one setting, run at every pause of
//! the grid and wherever the bisection looks, each pause with every seed;
//! its edge estimated from all of them.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::super::error::StormError;
use super::super::scenario::Case;
use super::super::storm::{Flags, Storm};
use super::config::{Setting, SweepConfig, secs};
use super::findings::{Critical, Outside, Point};
use crate::report::estimate::{Crossing, Edge, Proportion, Trials, quantile};
use crate::report::verdict::figures;
use crate::sim::{SimConfig, SimOutcome, WarmedUp};

/// What a line found.
pub(super) struct Done {
    /// Its edge (none when the sweep has one pause only).
    pub critical: Option<Critical>,
    /// Every pause it tried, in order.
    pub points: Vec<Point>,
    /// Virtual-time runs made.
    pub runs: u64,
    /// Events they processed.
    pub events: u64,
}

/// Runs the points of one setting, remembering each pause's runs.
pub(super) struct Line<'a> {
    config: &'a SweepConfig,
    flags: &'a dyn Flags,
    setting: Setting,
    case: Case,
    points: BTreeMap<Duration, Point>,
    /// Each seed's warm-up: its runs differ only from the pause on.
    warm: HashMap<u64, WarmedUp>,
    /// Each seed's configuration as first parsed from the flags; its other
    /// runs differ from it in the pause and the run's length only.
    parsed: HashMap<u64, SimConfig>,
    runs: u64,
    events: u64,
}

impl<'a> Line<'a> {
    /// A line for `setting`, with nothing run yet.
    pub fn new(config: &'a SweepConfig, flags: &'a dyn Flags, setting: Setting) -> Line<'a> {
        Line {
            config,
            flags,
            setting,
            case: config.case_for(&setting),
            points: BTreeMap::new(),
            warm: HashMap::new(),
            parsed: HashMap::new(),
            runs: 0,
            events: 0,
        }
    }

    /// The bisection, the grid, and the edge from every pause tried; or,
    /// when the sweep has one pause only, that pause.
    pub fn run(mut self) -> Result<Done, StormError> {
        if let Some(pause) = self.config.pause {
            self.point(pause)?;
            return Ok(self.done(None));
        }
        let (critical_pause, at_least, overloaded) = self.bisect()?;
        self.grid()?;
        let trials: Vec<Trials> = self
            .points
            .values()
            .map(|p| Trials {
                pause_s: p.pause_s,
                runs: p.runs,
                recovered: p.recovered_runs,
            })
            .collect();
        let edge = Edge::estimate(&trials);
        let c = self.config;
        let s = self.setting;
        let critical = Critical {
            case: c.name(&s).to_string(),
            clients: s.clients,
            arrival_rate: s.arrival_rate,
            lambda_s: s.think.map(secs),
            timeout_s: secs(s.timeout),
            server_limit: s.limit,
            seeds: c.seeds,
            critical_pause_s: secs(critical_pause),
            at_least,
            overloaded,
            recovery_s: self.points[&critical_pause].recovery_s,
            t50_s: centis(edge.t50.pause()),
            t50_ci_low_s: centis(edge.t50_ci.0),
            t50_ci_high_s: centis(edge.t50_ci.1),
            t10_s: centis(edge.t10.pause()),
            t90_s: centis(edge.t90.pause()),
            t50_outside: match edge.t50 {
                Crossing::At(_) => None,
                Crossing::Above => Some(Outside::Longer),
                Crossing::Below => Some(Outside::Shorter),
            },
        };
        Ok(self.done(Some(critical)))
    }

    /// What the line found: its edge, if any, and every pause it tried.
    fn done(self, critical: Option<Critical>) -> Done {
        Done {
            critical,
            points: self.points.into_values().collect(),
            runs: self.runs,
            events: self.events,
        }
    }

    fn point(&mut self, pause: Duration) -> Result<&Point, StormError> {
        if !self.points.contains_key(&pause) {
            let point = self.judge(pause)?;
            self.points.insert(pause, point);
        }
        Ok(&self.points[&pause])
    }

    fn recovers(&mut self, pause: Duration) -> Result<bool, StormError> {
        Ok(self.point(pause)?.recovered())
    }

    /// Runs `pause` with every seed.
    fn judge(&mut self, pause: Duration) -> Result<Point, StormError> {
        let c = self.config;
        let s = self.setting;
        let mut recoveries = Vec::new();
        for i in 0..c.seeds {
            let seed = c.storm.scenario.seed.wrapping_add(u64::from(i));
            let storm = c.storm_for(pause, seed);
            let run = self.configured(&storm)?;
            let out = self.made(seed, &run)?;
            self.runs += 1;
            self.events += out.events;
            let f = figures(&out.client.rows, &out.server_rows, &storm.timeline(0));
            recoveries.push(f.recovery_s);
        }
        let recovered = recoveries.iter().filter(|r| r.is_some()).count() as u32;
        let p = Proportion::of(recovered, c.seeds);
        Ok(Point {
            case: c.name(&s).to_string(),
            clients: s.clients,
            arrival_rate: s.arrival_rate,
            lambda_s: s.think.map(secs),
            timeout_s: secs(s.timeout),
            server_limit: s.limit,
            pause_s: secs(pause),
            runs: c.seeds,
            recovered_runs: recovered,
            p_recovered: p.p,
            p_low: p.low,
            p_high: p.high,
            // The median, a run that never recovers counting as slowest.
            recovery_s: quantile(&recoveries, 0.5),
        })
    }

    /// The configuration of `storm`'s run: its seed's first, parsed from
    /// the flags, given `storm`'s pause.
    fn configured(&mut self, storm: &Storm) -> Result<SimConfig, StormError> {
        let seed = storm.scenario.seed;
        if let Some(first) = self.parsed.get(&seed) {
            let run = storm.repaused(first);
            debug_assert_eq!(run, {
                let mut parsed = self.parse(storm)?;
                parsed.server.unused_seed_as(&run.server);
                parsed
            });
            return Ok(run);
        }
        let run = self.parse(storm)?;
        self.parsed.insert(seed, run.clone());
        Ok(run)
    }

    /// `storm`'s run as its flags give it, writing no file.
    fn parse(&self, storm: &Storm) -> Result<SimConfig, StormError> {
        let mut run = storm.sim_config(&self.case, 0, self.flags)?;
        run.server.csv = None;
        run.client.csv = None;
        run.client.hlog = None;
        for tier in &mut run.tiers {
            tier.csv = None;
            if let Some(call) = &mut tier.call {
                call.client.csv = None;
            }
        }
        Ok(run)
    }

    /// The run `config` of `seed`, from the seed's warm-up (made first if
    /// need be, its events counted then); none once a stop is asked for.
    fn made(&mut self, seed: u64, config: &SimConfig) -> Result<SimOutcome, StormError> {
        if self.config.storm.stop.requested() {
            return Err(StormError::Interrupted);
        }
        let failed = |e: crate::sim::SimError| StormError::Child(e.to_string());
        let warm = match self.warm.entry(seed) {
            Entry::Occupied(warm) => warm.into_mut(),
            Entry::Vacant(place) => {
                let warm = WarmedUp::new(config).map_err(failed)?;
                self.events += warm.events();
                place.insert(warm)
            }
        };
        warm.finish(config).map_err(failed)
    }

    /// Bisection over the pauses a critical pause may be: multiples of the
    /// resolution, and the longest pause itself. Returns the critical
    /// pause, whether even the longest pause recovers, and whether even
    /// none does.
    fn bisect(&mut self) -> Result<(Duration, bool, bool), StormError> {
        let c = self.config;
        let pauses = candidates(c.max_pause, c.resolution);
        let top = pauses.len() - 1;
        if !self.recovers(pauses[0])? {
            return Ok((pauses[0], false, true));
        }
        if self.recovers(pauses[top])? {
            return Ok((pauses[top], true, false));
        }
        let (mut lo, mut hi) = (0, top);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.recovers(pauses[mid])? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok((pauses[lo], false, false))
    }

    /// Every step of the grid up to the longest pause.
    fn grid(&mut self) -> Result<(), StormError> {
        let c = self.config;
        let mut pause = Duration::ZERO;
        while pause <= c.max_pause {
            self.point(pause)?;
            pause += c.step;
        }
        Ok(())
    }
}

/// The pauses a bisection may try: 0, every multiple of `resolution` below
/// `max`, and `max`.
fn candidates(max: Duration, resolution: Duration) -> Vec<Duration> {
    let mut out = Vec::new();
    let mut pause = Duration::ZERO;
    while pause < max {
        out.push(pause);
        pause += resolution;
    }
    out.push(max);
    out
}

/// Rounds an interpolated pause to hundredths of a second: the grid is
/// whole steps, so finer digits are noise in the tables.
fn centis(pause: Option<f64>) -> Option<f64> {
    pause.map(|t| (t * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_pause_is_a_candidate_even_off_the_resolution() {
        let s = Duration::from_secs;
        assert_eq!(candidates(s(10), s(3)), vec![s(0), s(3), s(6), s(9), s(10)]);
        assert_eq!(candidates(s(10), s(5)), vec![s(0), s(5), s(10)]);
    }
}
