//! The map of where each policy breaks. For each case, under each setting
//! (clients, timeout, server limit), the critical pause: the longest pause
//! after which the system still recovers within the observation window,
//! found by bisection in virtual time, each point judged over several
//! seeds. A grid of pauses beside it gives the heat map.
//!
//! The bisection assumes that a longer pause never helps; the grid, which
//! does not assume it, shows where that fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::StormError;
use super::scenario::{Case, format_duration};
use super::storm::{Flags, Storm};
use crate::plot::{self, HeatRow, HeatmapScale};
use crate::report::verdict::figures;
use crate::sim;

/// A whole sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The experiment every point runs (cases, protocol, base seed); its
    /// pause is set per point, its engine is virtual.
    pub storm: Storm,
    /// Numbers of clients to sweep.
    pub clients: Vec<u32>,
    /// Client timeouts to sweep.
    pub timeouts: Vec<Duration>,
    /// Server limits (concurrency where latency starts to grow) to sweep.
    pub limits: Vec<u64>,
    /// Seeds per point (base seed, base + 1, ...); a point recovers when
    /// most of them do.
    pub seeds: u32,
    /// Longest pause tried.
    pub max_pause: Duration,
    /// Precision of the critical pause.
    pub resolution: Duration,
    /// Pause step of the heat map's grid.
    pub step: Duration,
    /// Worker threads.
    pub threads: usize,
}

/// One line of the map: a case under one setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The case, by its place in the scenario.
    pub case: usize,
    /// Number of clients.
    pub clients: u32,
    /// Client timeout.
    pub timeout: Duration,
    /// Server limit.
    pub limit: u64,
}

/// One point of the grid: a setting and a pause, judged over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The case's name (with `--strategies`, the strategy's).
    pub strategy: String,
    /// Number of clients.
    pub clients: u32,
    /// Client timeout, seconds.
    pub timeout_s: f64,
    /// Server limit.
    pub server_limit: u64,
    /// Pause, seconds.
    pub pause_s: f64,
    /// Seeds run.
    pub seeds: u32,
    /// Seeds whose run recovered.
    pub recovered_seeds: u32,
    /// Whether most seeds recovered.
    pub recovered: bool,
    /// Median recovery time over the seeds (a run that never recovers
    /// counts as infinitely slow), seconds; empty when most never recover.
    pub recovery_s: Option<f64>,
}

/// A setting's critical pause.
#[derive(Debug, Clone, Serialize)]
pub struct Critical {
    /// The case's name (with `--strategies`, the strategy's).
    pub strategy: String,
    /// Number of clients.
    pub clients: u32,
    /// The longest pause after which the system still recovers, seconds
    /// (to the sweep's resolution).
    pub critical_pause_s: f64,
    /// Client timeout, seconds.
    pub timeout_s: f64,
    /// Server limit.
    pub server_limit: u64,
    /// Seeds per point.
    pub seeds: u32,
    /// The longest pause tried still recovers: the critical pause is at
    /// least this.
    pub at_least: bool,
    /// Even without a pause the system does not hold its load.
    pub overloaded: bool,
    /// Median recovery time at the critical pause, seconds.
    pub recovery_s: Option<f64>,
}

/// What a sweep found.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// One per setting, in order.
    pub critical: Vec<Critical>,
    /// The heat map's points, by setting then pause.
    pub grid: Vec<Point>,
    /// Virtual-time runs made.
    pub runs: u64,
    /// Events they processed.
    pub events: u64,
    /// Real time the sweep took.
    pub wall: Duration,
}

impl fmt::Display for Critical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {} clients, timeout {} s, limit {}: ",
            self.strategy, self.clients, self.timeout_s, self.server_limit
        )?;
        if self.overloaded {
            write!(f, "overloaded even without a pause")
        } else if self.at_least {
            write!(
                f,
                "recovers from every pause tried (>= {} s)",
                self.critical_pause_s
            )
        } else {
            write!(f, "critical pause {} s", self.critical_pause_s)
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl SweepConfig {
    /// Every setting, cases outermost.
    pub fn settings(&self) -> Vec<Setting> {
        let mut out = Vec::new();
        for case in 0..self.storm.scenario.cases.len() {
            for &clients in &self.clients {
                for &timeout in &self.timeouts {
                    for &limit in &self.limits {
                        out.push(Setting {
                            case,
                            clients,
                            timeout,
                            limit,
                        });
                    }
                }
            }
        }
        out
    }

    /// The name of a setting's case.
    fn name(&self, setting: &Setting) -> &str {
        &self.storm.scenario.cases[setting.case].name
    }

    /// A setting's case: the scenario's, with the setting's clients,
    /// timeout and server limit.
    fn case_for(&self, setting: &Setting) -> Case {
        let mut case = self.storm.scenario.cases[setting.case].clone();
        case.client.extend([
            "--clients".to_string(),
            setting.clients.to_string(),
            "--timeout".to_string(),
            format_duration(setting.timeout),
        ]);
        case.server
            .extend(["--limit".to_string(), setting.limit.to_string()]);
        case
    }

    /// The storm of one run: the sweep's, with this pause and seed.
    fn storm_for(&self, pause: Duration, seed: u64) -> Storm {
        let mut storm = self.storm.clone();
        storm.scenario.protocol.pause = pause;
        storm.scenario.seed = seed;
        storm
    }

    /// Checks every setting's flags before anything runs.
    pub fn validate(&self, flags: &dyn Flags) -> Result<(), StormError> {
        if self.seeds == 0 {
            return Err(StormError::Flags("--seeds: must be at least 1".into()));
        }
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
        for setting in self.settings() {
            self.storm_for(self.max_pause, self.storm.scenario.seed)
                .sim_config(&self.case_for(&setting), 0, flags)?;
        }
        Ok(())
    }
}

/// Runs the points of one setting, remembering each pause's verdict.
struct Line<'a> {
    config: &'a SweepConfig,
    flags: &'a dyn Flags,
    setting: Setting,
    case: Case,
    points: BTreeMap<Duration, Point>,
    runs: u64,
    events: u64,
}

impl Line<'_> {
    fn point(&mut self, pause: Duration) -> Result<&Point, StormError> {
        if !self.points.contains_key(&pause) {
            let point = self.judge(pause)?;
            self.points.insert(pause, point);
        }
        Ok(&self.points[&pause])
    }

    fn recovers(&mut self, pause: Duration) -> Result<bool, StormError> {
        Ok(self.point(pause)?.recovered)
    }

    fn judge(&mut self, pause: Duration) -> Result<Point, StormError> {
        let c = self.config;
        let s = self.setting;
        let mut recoveries = Vec::new();
        for i in 0..c.seeds {
            let seed = c.storm.scenario.seed.wrapping_add(u64::from(i));
            let storm = c.storm_for(pause, seed);
            let mut run = storm.sim_config(&self.case, 0, self.flags)?;
            run.server.csv = None;
            run.client.csv = None;
            let out = sim::run(&run).map_err(|e| StormError::Child(e.to_string()))?;
            self.runs += 1;
            self.events += out.events;
            let f = figures(&out.client.rows, &out.server_rows, &storm.timeline(0));
            recoveries.push(f.recovery_s.filter(|_| f.recovered));
        }
        let recovered_seeds = recoveries.iter().filter(|r| r.is_some()).count() as u32;
        // The median, a run that never recovers counting as slowest.
        recoveries.sort_by(|a, b| match (a, b) {
            (Some(a), Some(b)) => a.total_cmp(b),
            (a, b) => b.is_some().cmp(&a.is_some()),
        });
        let recovery_s = recoveries[recoveries.len() / 2];
        Ok(Point {
            strategy: c.name(&s).to_string(),
            clients: s.clients,
            timeout_s: secs(s.timeout),
            server_limit: s.limit,
            pause_s: secs(pause),
            seeds: c.seeds,
            recovered_seeds,
            recovered: recovery_s.is_some(),
            recovery_s,
        })
    }

    /// Bisection over the pauses tried: multiples of the resolution, and
    /// the longest pause itself.
    fn critical(&mut self) -> Result<Critical, StormError> {
        let c = self.config;
        let pauses = candidates(c.max_pause, c.resolution);
        let top = pauses.len() - 1;
        let (mut lo, mut hi) = (0, top);
        let (overloaded, at_least) = if !self.recovers(pauses[0])? {
            (true, false)
        } else if self.recovers(pauses[top])? {
            lo = top;
            (false, true)
        } else {
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if self.recovers(pauses[mid])? {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (false, false)
        };
        let critical = pauses[lo];
        let recovery_s = self.point(critical)?.recovery_s;
        let s = self.setting;
        Ok(Critical {
            strategy: c.name(&s).to_string(),
            clients: s.clients,
            critical_pause_s: secs(critical),
            timeout_s: secs(s.timeout),
            server_limit: s.limit,
            seeds: c.seeds,
            at_least,
            overloaded,
            recovery_s,
        })
    }

    /// The heat map's pauses: every step up to the longest pause.
    fn grid(&mut self) -> Result<Vec<Point>, StormError> {
        let c = self.config;
        let mut out = Vec::new();
        let mut pause = Duration::ZERO;
        while pause <= c.max_pause {
            out.push(self.point(pause)?.clone());
            pause += c.step;
        }
        Ok(out)
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

/// Runs the sweep on `config.threads` threads, calling `progress` as each
/// setting is done.
pub fn run(
    config: &SweepConfig,
    flags: &dyn Flags,
    progress: impl Fn(&Critical) + Sync,
) -> Result<SweepReport, StormError> {
    config.validate(flags)?;
    let wall = Instant::now();
    let settings = config.settings();
    let next = AtomicUsize::new(0);
    type Done = Result<(Critical, Vec<Point>, u64, u64), StormError>;
    let results: Mutex<Vec<Option<Done>>> = Mutex::new((0..settings.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.clamp(1, settings.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&setting) = settings.get(i) else {
                        break;
                    };
                    let mut line = Line {
                        config,
                        flags,
                        setting,
                        case: config.case_for(&setting),
                        points: BTreeMap::new(),
                        runs: 0,
                        events: 0,
                    };
                    let done = line.critical().and_then(|critical| {
                        let grid = line.grid()?;
                        Ok((critical, grid, line.runs, line.events))
                    });
                    if let Ok((critical, ..)) = &done {
                        progress(critical);
                    }
                    results.lock().expect("results lock poisoned")[i] = Some(done);
                }
            });
        }
    });
    let mut report = SweepReport {
        critical: Vec::new(),
        grid: Vec::new(),
        runs: 0,
        events: 0,
        wall: Duration::ZERO,
    };
    for done in results.into_inner().expect("results lock poisoned") {
        let (critical, grid, runs, events) = done.expect("every setting was run")?;
        report.critical.push(critical);
        report.grid.extend(grid);
        report.runs += runs;
        report.events += events;
    }
    report.wall = wall.elapsed();
    Ok(report)
}

/// Writes `critical.csv`, `grid.csv`, `summary.md` and the heat map into
/// the results folder.
pub fn write(config: &SweepConfig, report: &SweepReport, command: &str) -> Result<(), StormError> {
    let out = &config.storm.out;
    std::fs::create_dir_all(out)
        .map_err(|e| StormError::Io(format!("create {}", out.display()), e))?;
    write_csv(out.join("critical.csv"), &report.critical)?;
    write_csv(out.join("grid.csv"), &report.grid)?;
    let ext = if config.storm.png { "png" } else { "svg" };
    let map = out.join(format!("heatmap.{ext}"));
    let scale = HeatmapScale {
        step_s: secs(config.step),
        max_pause_s: secs(config.max_pause),
        observe_s: secs(config.storm.scenario.protocol.observe),
    };
    plot::draw_heatmap(&map, &heat_rows(report), scale, config.storm.png)
        .map_err(|e| StormError::Child(format!("heat map: {e}")))?;
    std::fs::write(out.join("summary.md"), summary(config, report, command))
        .map_err(|e| StormError::Io("write summary.md".into(), e))
}

/// The heat map's rows: one per setting, labelled with its case and, of
/// its clients, timeout and server limit, what varies between settings.
fn heat_rows(report: &SweepReport) -> Vec<HeatRow> {
    let varies = |f: &dyn Fn(&Critical) -> String| {
        report.critical.iter().map(f).collect::<BTreeSet<_>>().len() > 1
    };
    let (by_clients, by_timeout, by_limit) = (
        varies(&|c| c.clients.to_string()),
        varies(&|c| c.timeout_s.to_string()),
        varies(&|c| c.server_limit.to_string()),
    );
    report
        .critical
        .iter()
        .map(|c| {
            let mut label = c.strategy.clone();
            if by_clients {
                label.push_str(&format!(", {} clients", c.clients));
            }
            if by_timeout {
                label.push_str(&format!(", timeout {} s", c.timeout_s));
            }
            if by_limit {
                label.push_str(&format!(", limit {}", c.server_limit));
            }
            let cells = report
                .grid
                .iter()
                .filter(|p| {
                    p.strategy == c.strategy
                        && p.clients == c.clients
                        && p.timeout_s == c.timeout_s
                        && p.server_limit == c.server_limit
                })
                .map(|p| (p.pause_s, p.recovery_s))
                .collect();
            HeatRow {
                label,
                cells,
                critical_s: (!c.overloaded).then_some(c.critical_pause_s),
            }
        })
        .collect()
}

fn write_csv<T: Serialize>(path: PathBuf, rows: &[T]) -> Result<(), StormError> {
    let fail = |e: csv::Error| StormError::Io(path.display().to_string(), io::Error::other(e));
    let mut w = csv::Writer::from_path(&path).map_err(fail)?;
    for row in rows {
        w.serialize(row).map_err(fail)?;
    }
    w.flush()
        .map_err(|e| StormError::Io(path.display().to_string(), e))
}

/// The sweep's Markdown summary.
pub fn summary(config: &SweepConfig, report: &SweepReport, command: &str) -> String {
    let s = &config.storm.scenario.protocol;
    let seed = config.storm.scenario.seed;
    let mut md = format!(
        "# Critical pauses\n\n`{command}`\n\n\
         Virtual time. Warm-up {} s, observation {} s, report interval {} s; pauses from 0 \
         to {} s, critical pause to {} s, heat map every {} s; {} seed(s) per point from \
         seed {} (a point recovers when most seeds do). {} runs, {} events, {:.1} s.\n\n\
         | strategy | clients | timeout (s) | server limit | critical pause (s) | recovery there (s) |\n\
         | --- | --- | --- | --- | --- | --- |\n",
        secs(s.warmup),
        secs(s.observe),
        secs(s.report_interval),
        secs(config.max_pause),
        secs(config.resolution),
        secs(config.step),
        config.seeds,
        seed,
        report.runs,
        report.events,
        report.wall.as_secs_f64(),
    );
    for c in &report.critical {
        let pause = if c.overloaded {
            "overloaded".to_string()
        } else if c.at_least {
            format!(">= {}", c.critical_pause_s)
        } else {
            c.critical_pause_s.to_string()
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.strategy,
            c.clients,
            c.timeout_s,
            c.server_limit,
            pause,
            c.recovery_s.map_or("-".into(), |r| format!("{r:.1}")),
        ));
    }
    md.push_str(
        "\nCritical pause: the longest pause after which goodput is back to 90 % of the \
         baseline for three report intervals, starting within the observation window, \
         by bisection. The heat map (grid.csv) colours each pause by median recovery time; \
         \"never\" where most seeds do not recover.\n",
    );
    md
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
