//! A line's runs against a service of the user's (`storm sweep --target
//! URL --outage KIND`): each run a real storm of one run through the
//! target's outage, in place of a run in virtual time, the storm waiting
//! for a calm target before it as every storm against a target does. Each
//! run is written to `runs.csv` as it ends, so that a search stopped part
//! way keeps what it ran, and said with what is known after it and the
//! time the setting's search may still take.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::super::error::{StormError, io_err};
use super::super::scenario::{Case, Engine, Scenario};
use super::super::storm::{Flags, Storm};
use super::config::{Setting, SweepConfig, secs};
use super::findings::{Key, NO_LIMIT};
use crate::report::output::say;
use crate::report::search::Found;

/// The file every run of a measured sweep is written to as it ends.
pub const RUNS_CSV: &str = "runs.csv";

/// The folder under the sweep's where each run's storm writes its files.
const RUNS_DIR: &str = "runs";

/// One storm of a setting against the target: a row of `runs.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredRun {
    /// The case's name.
    #[serde(with = "crate::report::output::csv_text")]
    pub case: String,
    /// Number of clients (empty: open traffic).
    pub clients: Option<u32>,
    /// Sessions arriving a second (empty: a closed population).
    pub arrival_rate: Option<f64>,
    /// Mean think time, seconds (empty: the case's own).
    pub lambda_s: Option<f64>,
    /// Client timeout, seconds.
    pub timeout_s: f64,
    /// The run's place in its setting's search, from 1.
    pub run: u32,
    /// The clients' seed.
    pub seed: u64,
    /// The pause, seconds.
    pub pause_s: f64,
    /// Whether the target came back within the observation window.
    pub recovered: bool,
    /// How long after the resume it came back, seconds.
    pub recovery_s: Option<f64>,
    /// How long the storm took, calm wait included, seconds.
    pub wall_s: f64,
    /// The storm's own files, under the sweep's folder.
    pub folder: String,
}

/// The storm of one run of `case` at `pause` with `seed`, writing into
/// `out`: the sweep's target, outage, protocol and compression, one run,
/// no tail (the verdict does not read it). The case's server flags are
/// the model's (a twin's, in the `twin.toml` that `storm calibrate`
/// writes): no project server runs against a target, so they are left
/// out, and the same file is swept in virtual time and against the
/// service it stands for.
pub(super) fn storm_of(
    config: &SweepConfig,
    case: &Case,
    pause: Duration,
    seed: u64,
    out: PathBuf,
) -> Storm {
    let sweep = &config.storm;
    let mut protocol = sweep.scenario.protocol;
    protocol.pause = pause;
    protocol.tail = Duration::ZERO;
    Storm {
        scenario: Scenario {
            seed,
            engine: Some(Engine::Real),
            runs: Some(1),
            protocol,
            cases: vec![Case {
                server: Vec::new(),
                ..case.clone()
            }],
            ..sweep.scenario.clone()
        },
        engine: Engine::Real,
        parallel: 1,
        out,
        png: false,
        watch: None,
        ..sweep.clone()
    }
}

/// The folder of a setting's runs: its case and load, think time and
/// timeout, as words a file name may hold.
fn setting_folder(config: &SweepConfig, setting: &Setting) -> String {
    let mut name = config.name(setting).to_string();
    if let Some(n) = setting.clients {
        name.push_str(&format!("-{n}-clients"));
    }
    if let Some(r) = setting.arrival_rate {
        name.push_str(&format!("-{r}-per-s"));
    }
    if let Some(t) = setting.think {
        name.push_str(&format!("-think-{}s", secs(t)));
    }
    name.push_str(&format!("-timeout-{}s", secs(setting.timeout)));
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '.' | '_' => c,
            _ => '_',
        })
        .collect()
}

/// Runs `case` (setting `setting`'s) once against the target, as its
/// search's run `run`, and writes the run to `runs.csv`. A stop asked for
/// meanwhile ends the storm (its outage undone, as every storm's) and
/// comes back as [`StormError::Interrupted`], the run not written.
pub(super) fn storm_once(
    config: &SweepConfig,
    flags: &dyn Flags,
    setting: &Setting,
    case: &Case,
    (run, pause, seed): (u32, Duration, u64),
) -> Result<MeasuredRun, StormError> {
    let folder = Path::new(RUNS_DIR)
        .join(setting_folder(config, setting))
        .join(format!("run-{run:03}-pause-{}s", secs(pause)));
    let storm = storm_of(config, case, pause, seed, config.storm.out.join(&folder));
    let began = Instant::now();
    let report = super::super::run_until_stopped(&storm, flags, &config.storm.stop)?;
    let figures = &report
        .runs
        .first()
        .ok_or_else(|| StormError::Child("the storm gave no run".into()))?
        .figures;
    let measured = MeasuredRun {
        case: config.name(setting).to_string(),
        clients: setting.clients,
        arrival_rate: setting.arrival_rate,
        lambda_s: setting.think.map(secs),
        timeout_s: secs(setting.timeout),
        run,
        seed,
        pause_s: secs(pause),
        recovered: figures.recovery_s.is_some(),
        recovery_s: figures.recovery_s,
        wall_s: began.elapsed().as_secs_f64(),
        folder: folder.display().to_string(),
    };
    append(&config.storm.out.join(RUNS_CSV), &measured)?;
    Ok(measured)
}

/// Appends `row` to the CSV at `path`, with the header first if the file
/// is new.
fn append(path: &Path, row: &MeasuredRun) -> Result<(), StormError> {
    let fresh = !path.exists();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err(format!("write {}", path.display())))?;
    let mut w = csv::WriterBuilder::new()
        .has_headers(fresh)
        .from_writer(file);
    w.serialize(row)
        .and_then(|()| w.flush().map_err(csv::Error::from))
        .map_err(|e| StormError::Child(format!("write {}: {e}", path.display())))
}

/// How many more runs a search that has made `runs` with T50's interval
/// `width_s` wide may need to bring it to `precision_s`: the interval
/// narrowing as one over the square root of the runs, within what
/// `max_runs` leaves (at least one while unsettled).
pub fn runs_left(runs: u32, width_s: f64, precision_s: f64, max_runs: u32) -> u32 {
    let left = max_runs.saturating_sub(runs);
    if width_s <= precision_s || left == 0 {
        return 0;
    }
    let needed = (f64::from(runs.max(1)) * (width_s / precision_s).powi(2)).ceil();
    (needed - f64::from(runs)).clamp(1.0, f64::from(left)) as u32
}

/// Says what the run just made found, and how far the setting's search
/// may still go: settled (as the search says: T50's interval narrow
/// enough, or wholly beyond the pauses), or its runs left (at most) and
/// the time they may take at the runs' mean length so far.
pub(super) fn tell(
    config: &SweepConfig,
    last: &MeasuredRun,
    (found, settled): (&Found, bool),
    walls: &[f64],
) {
    if !config.storm.progress {
        return;
    }
    let width = found.t50_ci.1 - found.t50_ci.0;
    let left = runs_left(last.run, width, secs(config.precision), config.max_runs);
    let mean = walls.iter().sum::<f64>() / walls.len().max(1) as f64;
    let outcome = match last.recovery_s {
        Some(r) => format!("came back {r:.1} s after the resume"),
        None => "stayed down".to_string(),
    };
    let rest = if settled {
        "settled".to_string()
    } else if last.run >= config.max_runs {
        "its most runs made (--max-runs)".to_string()
    } else {
        format!(
            "about {left} more run(s), {:.0} min",
            (f64::from(left) * mean / 60.0).ceil()
        )
    };
    let setting = Key {
        case: &last.case,
        clients: last.clients,
        arrival_rate: last.arrival_rate,
        lambda_s: last.lambda_s,
        timeout_s: last.timeout_s,
        limit: NO_LIMIT,
    };
    // The prior reaches beyond the pauses a run may have: said as the
    // edge's rows say it.
    let max = secs(config.max_pause);
    let low = found.t50_ci.0.max(0.0);
    let high = if found.t50_ci.1 > max {
        "more".to_string()
    } else {
        format!("{:.1}", found.t50_ci.1)
    };
    let t50 = if found.t50 < 0.0 {
        "under 0 s".to_string()
    } else if found.t50 > max {
        format!("over {max} s")
    } else {
        format!("{:.1} s", found.t50)
    };
    say(format!(
        "{setting}: run {} at a {} s pause {outcome}; T50 {t50} (95 % {low:.1}-{high}); {rest}",
        last.run, last.pause_s,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_left_follow_the_square_of_the_intervals_excess() {
        // 4 runs, an interval 10 s wide, 5 s asked: 4 x (10/5)^2 = 16
        // runs in all, 12 more.
        assert_eq!(runs_left(4, 10.0, 5.0, 100), 12);
        // Within what --max-runs leaves.
        assert_eq!(runs_left(4, 10.0, 5.0, 10), 6);
        // Settled, or the budget spent: none.
        assert_eq!(runs_left(4, 4.0, 5.0, 100), 0);
        assert_eq!(runs_left(10, 10.0, 5.0, 10), 0);
        // Just wider than asked: one at least.
        assert_eq!(runs_left(9, 5.01, 5.0, 100), 1);
        // Before any run, counted as one.
        assert_eq!(runs_left(0, 20.0, 10.0, 100), 4);
    }
}
