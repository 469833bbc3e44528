//! The map of where each policy breaks. For each case, under each setting
//! (its load as clients or as an arrival rate, think time, timeout, server
//! limit), how often the system recovers against the pause's length, in
//! virtual time: a grid of pauses, each run with several seeds, and a
//! bisection that looks closer at the edge. From every pause tried comes the edge as a curve: T50, where half
//! the runs recover, with its interval, and T90 and T10, where it begins
//! and ends (see [`crate::report::estimate::Edge`]); beside it the critical
//! pause the bisection finds, where most runs still recover.
//!
//! The bisection assumes that a longer pause never helps; the grid, which
//! does not assume it, shows where that fails.
//!
//! With one pause only, each setting is a single point, and the map is
//! over the settings: which loads, timeouts and limits survive that
//! outage.

mod axis;
mod config;
mod findings;
mod line;
mod measured;
mod one_pause;
mod output;
mod summary;
mod validate;

use std::fmt::Display;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use super::error::StormError;
use super::storm::Flags;
use crate::view::Progress;

pub use config::{DEFAULT_LIMIT, Search, Setting, SweepConfig};
pub use findings::{Critical, LineRows, NO_LIMIT, Outside, Point, SweepReport};
pub use measured::RUNS_CSV;
pub use output::write;

/// Runs the sweep on `config.threads` threads, calling `progress` as each
/// setting is done, with its edge (or, with one pause only, its point); a
/// bar of the settings done on a terminal's stderr. Once
/// `config.storm.stop` is set, every thread stops before its next run and
/// the sweep ends [`StormError::Interrupted`], having written nothing;
/// except against a target, where a run costs minutes: there the storm
/// under way is stopped and the sweep's report holds every run made
/// before it, [`SweepReport::stopped`] set.
pub fn run(
    config: &SweepConfig,
    flags: &dyn Flags,
    progress: impl Fn(&dyn Display) + Sync,
) -> Result<SweepReport, StormError> {
    config.validate(flags)?;
    super::folder::claim(&config.storm.out, &[], config.storm.existing, "--out")?;
    let wall = Instant::now();
    // This shard's units (each a setting, or an adaptive search's line of
    // loads), and their settings, each with its place among all of them.
    let all = config.settings();
    let owned: Vec<Vec<usize>> = config
        .units(&all)
        .into_iter()
        .enumerate()
        .filter(|&(u, _)| config.shard.owns(u as u64))
        .map(|(_, unit)| unit)
        .collect();
    let mut places: Vec<usize> = owned.iter().flatten().copied().collect();
    places.sort_unstable();
    let settings: Vec<(usize, Setting)> = places.iter().map(|&i| (i, all[i])).collect();
    let position = |place: usize| places.binary_search(&place).expect("an owned setting");
    let units: Vec<Vec<usize>> = owned
        .iter()
        .map(|unit| unit.iter().map(|&place| position(place)).collect())
        .collect();
    let next = AtomicUsize::new(0);
    let bar = Progress::new(
        settings.len() as u64,
        "settings",
        config.storm.progress,
        false,
    );
    let runs = AtomicU64::new(0);
    type Done = Result<line::Done, StormError>;
    let results: Mutex<Vec<Option<Done>>> = Mutex::new((0..settings.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.clamp(1, units.len().max(1)) {
            scope.spawn(|| {
                while !config.storm.stop.requested() {
                    let Some(unit) = units.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let mut start = None;
                    for &i in unit {
                        if config.storm.stop.requested() {
                            break;
                        }
                        let done = line::Line::new(config, flags, settings[i].1).run(start);
                        if let Ok(done) = &done {
                            start = done.start_next;
                            bar.suspend(|| match &done.critical {
                                Some(critical) => progress(critical),
                                None => done.points.iter().for_each(|p| progress(p)),
                            });
                            let before = runs.fetch_add(done.runs, Ordering::Relaxed);
                            bar.message(format!("{} runs", before + done.runs));
                        }
                        bar.inc(1);
                        results.lock().expect("results lock poisoned")[i] = Some(done);
                    }
                }
            });
        }
    });
    let mut report = SweepReport::default();
    let results = results.into_inner().expect("results lock poisoned");
    let keep = config.measures();
    if config.storm.stop.requested() && !keep {
        return Err(StormError::Interrupted);
    }
    report.stopped = config.storm.stop.requested();
    for (done, &(setting, _)) in results.into_iter().zip(&settings) {
        // Only a stopped search against a target leaves settings unrun.
        let Some(done) = done else { continue };
        let done = done?;
        report.lines.push(LineRows {
            setting,
            critical: usize::from(done.critical.is_some()),
            points: done.points.len(),
        });
        report.critical.extend(done.critical);
        report.points.extend(done.points);
        report.runs += done.runs;
        report.events += done.events;
    }
    report.wall = wall.elapsed();
    Ok(report)
}
