//! What a sweep writes: `critical.csv` (every setting's edge),
//! `phase.csv` (every pause tried), `summary.md`, the heat map (a row per
//! setting) and the phase diagram (a panel per case, the swept setting up
//! the side); at one pause, `phase.csv`, `summary.md` and the map over the
//! settings ([`super::one_pause`]).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::super::error::StormError;
use super::axis::{except, swept, title, varying};
use super::config::{Search, SweepConfig, secs};
use super::findings::{Critical, Key, Point, SweepReport};
use super::one_pause;
use super::summary::summary;
use crate::plot::{self, Across, Axes, Panel, Row, panel_titled};
use crate::report::search::LN_9;

/// How a map's cells are coloured: by the share of the runs made at each
/// pause of the grid, or by the curve the adaptive search fitted.
#[derive(Debug, Clone, Copy)]
struct Cells {
    step_s: f64,
    max_pause_s: f64,
    fitted: bool,
}

impl Cells {
    fn of(config: &SweepConfig) -> Cells {
        Cells {
            step_s: secs(config.step),
            max_pause_s: secs(config.max_pause),
            fitted: config.search == Search::Adaptive,
        }
    }

    /// What a map says each cell is, after "share of".
    fn what(self, config: &SweepConfig) -> String {
        if self.fitted {
            "runs that recover on the adaptive search's curve".to_string()
        } else {
            format!("{} runs that recover", config.seeds)
        }
    }
}

/// A critical row's map row: its pauses and its edge.
fn row(report: &SweepReport, c: &Critical, label: String, how: Cells) -> Row {
    let step_s = how.step_s;
    let on_grid = |pause: f64| (pause / step_s - (pause / step_s).round()).abs() < 1e-9;
    let points = report
        .points
        .iter()
        .filter(|p| Key::from(*p) == Key::from(c));
    let cells = match (how.fitted, c.t90_s, c.t50_s, c.t10_s) {
        (true, Some(t90), Some(t50), Some(t10)) => fitted(t90, t50, t10, how),
        (true, ..) => nearest_steps(points, how.step_s),
        (false, ..) => points
            .filter(|p| on_grid(p.pause_s))
            .map(|p| (p.pause_s, p.p_recovered))
            .collect(),
    };
    Row {
        label,
        cells,
        t50: c.t50_s,
        t50_ci: (c.t50_ci_low_s, c.t50_ci_high_s),
        t90: c.t90_s,
        t10: c.t10_s,
    }
}

/// The share that recovered of the runs nearest each step of the map,
/// pooled: an adaptive search's row whose edge is not all within the
/// pauses (it ran few pauses, none need be on a step).
fn nearest_steps<'a>(points: impl Iterator<Item = &'a Point>, step_s: f64) -> Vec<(f64, f64)> {
    let mut cells: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
    for p in points {
        let cell = cells
            .entry((p.pause_s / step_s).round() as u64)
            .or_default();
        cell.0 += p.recovered_runs;
        cell.1 += p.runs;
    }
    cells
        .into_iter()
        .filter(|(_, (_, runs))| *runs > 0)
        .map(|(k, (recovered, runs))| (k as f64 * step_s, f64::from(recovered) / f64::from(runs)))
        .collect()
}

/// The logistic curve through T90, T50 and T10 at each step of the map
/// (its scale `(T10 - T90) / 2 ln 9`; a step where T90 and T10 meet).
fn fitted(t90: f64, t50: f64, t10: f64, how: Cells) -> Vec<(f64, f64)> {
    let scale = (t10 - t90) / (2.0 * LN_9);
    let mut cells = Vec::new();
    let mut pause = 0.0;
    while pause <= how.max_pause_s + 1e-9 {
        let p = if scale > 0.0 {
            1.0 / (1.0 + ((pause - t50) / scale).exp())
        } else if pause <= t50 {
            1.0
        } else {
            0.0
        };
        cells.push((pause, p));
        pause += how.step_s;
    }
    cells
}

/// The keys of every setting's edge.
fn keys(report: &SweepReport) -> Vec<Key<'_>> {
    report.critical.iter().map(Key::from).collect()
}

/// The heat map: one panel, a row per setting, labelled with its case and
/// what varies.
fn heat_panel(report: &SweepReport, how: Cells) -> Panel {
    let vary = varying(&keys(report));
    let rows = report
        .critical
        .iter()
        .map(|c| row(report, c, title(&c.into(), &vary), how))
        .collect();
    Panel {
        title: String::new(),
        rows,
        contours: false,
    }
}

/// The phase diagram: a panel per case (and per value of any other setting
/// that varies), the first setting swept within a case up the side; with
/// none swept, the heat map.
fn phase_panels(report: &SweepReport, how: Cells) -> (Vec<Panel>, String) {
    let keys = keys(report);
    let Some(&up) = swept(&keys).first() else {
        return (vec![heat_panel(report, how)], "case".to_string());
    };
    let others = &except(&varying(&keys), &[up]);
    let mut panels: Vec<Panel> = Vec::new();
    // Rows go up in the order of their values, whatever order they were
    // given in.
    let mut critical: Vec<&Critical> = report.critical.iter().collect();
    critical.sort_by(|a, b| up.number(&(*a).into()).total_cmp(&up.number(&(*b).into())));
    for c in critical {
        let key = Key::from(c);
        let r = row(report, c, up.value(&key), how);
        panel_titled(&mut panels, title(&key, others), true)
            .rows
            .push(r);
    }
    (panels, up.name().to_string())
}

/// Writes `critical.csv`, `phase.csv`, `summary.md`, the heat map and the
/// phase diagram into the results folder; at one pause, `phase.csv`,
/// `summary.md` and the map over the settings.
pub fn write(config: &SweepConfig, report: &SweepReport, command: &str) -> Result<(), StormError> {
    let out = &config.storm.out;
    std::fs::create_dir_all(out)
        .map_err(|e| StormError::Io(format!("create {}", out.display()), e))?;
    write_csv(out.join("phase.csv"), &report.points)?;
    let ext = plot::extension(config.storm.png);
    let draw = |name: &str, title: &str, panels: &[Panel], axes: &Axes| {
        let path: PathBuf = out.join(format!("{name}.{ext}"));
        plot::draw_panels(&path, title, panels, axes, config.storm.png)
            .map_err(|e| StormError::Child(format!("{name}: {e}")))
    };
    let runs = config.seeds;
    if let Some(pause) = config.pause {
        let (panels, axes) = one_pause::panels(report, secs(pause));
        draw(
            "phase",
            &format!(
                "P(recover) after a {} s pause, {runs} runs a point; bars where half recover",
                secs(pause)
            ),
            &panels,
            &axes,
        )?;
        return write_text(
            &out.join("summary.md"),
            &one_pause::summary(config, report, command, secs(pause)),
        );
    }
    write_csv(out.join("critical.csv"), &report.critical)?;
    let how = Cells::of(config);
    let pauses = |rows: String| Axes {
        across: Across::Pause {
            step_s: how.step_s,
            max_pause_s: how.max_pause_s,
        },
        rows,
    };
    draw(
        "heatmap",
        &format!("share of {}, by pause", how.what(config)),
        &[heat_panel(report, how)],
        &pauses(String::new()),
    )?;
    let (panels, up) = phase_panels(report, how);
    let points = if how.fitted {
        "fitted by the adaptive search".to_string()
    } else {
        format!("{runs} runs a point")
    };
    draw(
        "phase",
        &format!("P(recover) by pause and {up}, {points}; T50 contour, T90 and T10 dashed"),
        &panels,
        &pauses(up),
    )?;
    write_text(&out.join("summary.md"), &summary(config, report, command))
}

fn write_text(path: &Path, text: &str) -> Result<(), StormError> {
    std::fs::write(path, text).map_err(|e| StormError::Io(format!("write {}", path.display()), e))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn how() -> Cells {
        Cells {
            step_s: 5.0,
            max_pause_s: 20.0,
            fitted: true,
        }
    }

    #[test]
    fn a_fitted_row_is_the_logistic_through_its_edge() {
        // T90 10 - 2 ln 9, T50 10, T10 10 + 2 ln 9: scale 2 s. At 10 s one
        // half, at 5 s 1 / (1 + e^-2.5) = 0.924142.
        let cells = fitted(10.0 - 2.0 * LN_9, 10.0, 10.0 + 2.0 * LN_9, how());
        let pauses: Vec<f64> = cells.iter().map(|c| c.0).collect();
        assert_eq!(pauses, vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        assert!((cells[2].1 - 0.5).abs() < 1e-12);
        assert!((cells[1].1 - 0.924_142).abs() < 1e-6);
        assert!((cells[1].1 + cells[3].1 - 1.0).abs() < 1e-12, "symmetric");
        // A knife edge (T90 = T10) is a step.
        let knife: Vec<f64> = fitted(12.0, 12.0, 12.0, how())
            .iter()
            .map(|c| c.1)
            .collect();
        assert_eq!(knife, vec![1.0, 1.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn a_row_without_its_whole_edge_shows_the_runs_nearest_each_step() {
        let point = |pause_s: f64, runs: u32, recovered_runs: u32| Point {
            case: "fixed".into(),
            clients: Some(250),
            arrival_rate: None,
            lambda_s: None,
            timeout_s: 2.0,
            server_limit: 30,
            pause_s,
            runs,
            recovered_runs,
            p_recovered: f64::from(recovered_runs) / f64::from(runs),
            p_low: 0.0,
            p_high: 1.0,
            recovery_s: None,
        };
        // 29.5 s and 30 s pool at 30 s (3 of 4), 60 s alone.
        let points = [point(29.5, 1, 0), point(30.0, 3, 3), point(60.0, 4, 4)];
        assert_eq!(
            nearest_steps(points.iter(), 5.0),
            vec![(30.0, 0.75), (60.0, 1.0)]
        );
    }
}
