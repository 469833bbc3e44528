//! One line of the map: a case under one setting. On the grid, run at
//! every pause of it and wherever the bisection looks, each pause with
//! every seed, its edge estimated from all of them; with the adaptive
//! search, run where each next run tells most, a seed a run, its edge the
//! search's posterior.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::super::error::StormError;
use super::super::scenario::Case;
use super::super::storm::{Flags, Storm};
use super::config::{Search, Setting, SweepConfig, secs};
use super::findings::{Critical, Outside, Point};
use super::measured;
use crate::report::estimate::{Crossing, Edge, Proportion, Trials, quantile};
use crate::report::search::EdgeSearch;
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
    /// Where the next load's search starts: this one's T50, within the
    /// pauses tried (none on the grid and at one pause).
    pub start_next: Option<f64>,
}

/// What the bisection (or, for the adaptive search, its T50 rounded down
/// to the resolution) says of the critical pause.
struct Bisected {
    pause: Duration,
    at_least: bool,
    overloaded: bool,
    recovery_s: Option<f64>,
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

    /// The line's runs, placed as the sweep asks, and its edge; or, when
    /// the sweep has one pause only, that pause. The adaptive search tries
    /// `start` first, if given.
    pub fn run(mut self, start: Option<f64>) -> Result<Done, StormError> {
        // Against a target only the adaptive search runs (validated).
        if self.config.measures() {
            return self.adaptive_line(start);
        }
        if let Some(pause) = self.config.pause {
            self.point(pause)?;
            return Ok(self.done(None, None));
        }
        match self.config.search {
            Search::Grid => self.grid_line(),
            Search::Adaptive => self.adaptive_line(start),
        }
    }

    /// The bisection, the grid, and the edge from every pause tried.
    fn grid_line(mut self) -> Result<Done, StormError> {
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
        let bisected = Bisected {
            pause: critical_pause,
            at_least,
            overloaded,
            recovery_s: self.points[&critical_pause].recovery_s,
        };
        let critical = self.critical(&Edge::estimate(&trials), &bisected, self.config.seeds);
        Ok(self.done(Some(critical), None))
    }

    /// Runs, each with a seed of its own, where the search says each tells
    /// most, until it has settled or made the most runs allowed; the edge
    /// from its posterior.
    fn adaptive_line(mut self, start: Option<f64>) -> Result<Done, StormError> {
        let c = self.config;
        let max = secs(c.max_pause);
        let mut search = EdgeSearch::new(max, secs(c.lattice()));
        let mut outcomes: BTreeMap<Duration, Vec<Option<f64>>> = BTreeMap::new();
        // Each storm's length against a target, for the time left.
        let mut walls = Vec::new();
        // One run at least: a precision wider than the prior's interval
        // would settle before any.
        while search.runs() < c.max_runs
            && (search.runs() == 0 || !search.settled(secs(c.precision)))
        {
            let pause_s = match start {
                Some(t) if search.runs() == 0 => search.nearest(t),
                _ => search.next(),
            };
            let pause = Duration::from_micros((pause_s * 1e6).round() as u64);
            let seed = c.storm.scenario.seed.wrapping_add(u64::from(search.runs()));
            if !c.measures() {
                let recovery = self.fresh(pause, seed)?;
                search.observe(pause_s, recovery.is_some());
                outcomes.entry(pause).or_default().push(recovery);
                continue;
            }
            let at = (search.runs() + 1, pause, seed);
            let run = match measured::storm_once(c, self.flags, &self.setting, &self.case, at) {
                Ok(run) => run,
                // What was run before the stop stays: the edge from it.
                Err(StormError::Interrupted | StormError::InterruptedBeforeLoad) => break,
                Err(e) => return Err(e),
            };
            self.runs += 1;
            walls.push(run.wall_s);
            search.observe(pause_s, run.recovered);
            outcomes.entry(pause).or_default().push(run.recovery_s);
            let settled = search.settled(secs(c.precision));
            measured::tell(c, &run, (&search.found(), settled), &walls);
        }
        if search.runs() == 0 {
            return Ok(self.done(None, None));
        }
        for (pause, recoveries) in outcomes {
            let point = self.point_of(pause, &recoveries);
            self.points.insert(pause, point);
        }
        let edge = search.edge();
        let resolution = secs(c.resolution);
        let critical_s = match edge.t50 {
            Crossing::At(t) => ((t / resolution + 1e-9).floor() * resolution).min(max),
            Crossing::Above => max,
            Crossing::Below => 0.0,
        };
        let bisected = Bisected {
            pause: Duration::from_secs_f64(critical_s),
            at_least: edge.t50 == Crossing::Above,
            overloaded: edge.t50 == Crossing::Below,
            recovery_s: None,
        };
        let critical = self.critical(&edge, &bisected, search.runs());
        let start_next = Some(search.found().t50.clamp(0.0, max));
        Ok(self.done(Some(critical), start_next))
    }

    /// The setting's row of `critical.csv`: its edge, and what the
    /// bisection found, from `seeds` runs a pause (the adaptive search: its
    /// runs).
    fn critical(&self, edge: &Edge, bisected: &Bisected, seeds: u32) -> Critical {
        let c = self.config;
        let s = self.setting;
        Critical {
            case: c.name(&s).to_string(),
            clients: s.clients,
            arrival_rate: s.arrival_rate,
            lambda_s: s.think.map(secs),
            timeout_s: secs(s.timeout),
            server_limit: s.limit,
            seeds,
            critical_pause_s: secs(bisected.pause),
            at_least: bisected.at_least,
            overloaded: bisected.overloaded,
            recovery_s: bisected.recovery_s,
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
        }
    }

    /// What the line found: its edge, if any, and every pause it tried.
    fn done(self, critical: Option<Critical>, start_next: Option<f64>) -> Done {
        Done {
            critical,
            points: self.points.into_values().collect(),
            runs: self.runs,
            events: self.events,
            start_next,
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
        let mut recoveries = Vec::new();
        for i in 0..c.seeds {
            let seed = c.storm.scenario.seed.wrapping_add(u64::from(i));
            let storm = c.storm_for(pause, seed);
            let run = self.configured(&storm)?;
            let out = self.made(seed, &run)?;
            recoveries.push(self.recovery(&storm, &out));
        }
        Ok(self.point_of(pause, &recoveries))
    }

    /// Runs `pause` once with `seed`, from a warm-up of its own that is
    /// not kept: no other run has that seed. Its recovery time, if it
    /// recovered.
    fn fresh(&mut self, pause: Duration, seed: u64) -> Result<Option<f64>, StormError> {
        if self.config.storm.stop.requested() {
            return Err(StormError::Interrupted);
        }
        let storm = self.config.storm_for(pause, seed);
        let run = self.parse(&storm)?;
        let failed = |e: crate::sim::SimError| StormError::Child(e.to_string());
        let mut warm = WarmedUp::new(&run).map_err(failed)?;
        self.events += warm.events();
        let out = warm.finish(&run).map_err(failed)?;
        Ok(self.recovery(&storm, &out))
    }

    /// A run's recovery time, if it recovered, counting it and its events.
    fn recovery(&mut self, storm: &Storm, out: &SimOutcome) -> Option<f64> {
        self.runs += 1;
        self.events += out.events;
        figures(&out.client.rows, &out.server_rows, &storm.timeline(0)).recovery_s
    }

    /// The row of `pause`, from its runs' recovery times.
    fn point_of(&self, pause: Duration, recoveries: &[Option<f64>]) -> Point {
        let c = self.config;
        let s = self.setting;
        let runs = recoveries.len() as u32;
        let recovered = recoveries.iter().filter(|r| r.is_some()).count() as u32;
        let p = Proportion::of(recovered, runs);
        Point {
            case: c.name(&s).to_string(),
            clients: s.clients,
            arrival_rate: s.arrival_rate,
            lambda_s: s.think.map(secs),
            timeout_s: secs(s.timeout),
            server_limit: s.limit,
            pause_s: secs(pause),
            runs,
            recovered_runs: recovered,
            p_recovered: p.p,
            p_low: p.low,
            p_high: p.high,
            // The median, a run that never recovers counting as slowest.
            recovery_s: quantile(recoveries, 0.5),
        }
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
