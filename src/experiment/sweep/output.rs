//! What a sweep writes: `critical.csv` (every setting's edge),
//! `phase.csv` (every pause tried), `summary.md`, the heat map (a row per
//! setting) and the phase diagram (a panel per case, the swept setting up
//! the side).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::super::error::StormError;
use super::config::{SweepConfig, secs};
use super::findings::{Critical, Outside, Point, SweepReport};
use crate::plot::{self, Axes, Panel, Row};

/// The settings that vary across a sweep, in the order they are named.
const AXES: [Axis; 4] = [Axis::Clients, Axis::Think, Axis::Timeout, Axis::Limit];

/// A setting a sweep may vary besides the pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Axis {
    Clients,
    Think,
    Timeout,
    Limit,
}

impl Axis {
    /// The setting's value at a critical row, as shown.
    fn value(self, c: &Critical) -> String {
        match self {
            Axis::Clients => c.clients.to_string(),
            Axis::Think => c.lambda_s.map_or("-".into(), |t| t.to_string()),
            Axis::Timeout => c.timeout_s.to_string(),
            Axis::Limit => c.server_limit.to_string(),
        }
    }

    /// The setting's value at a critical row, as a number to order rows by
    /// (a case's own think time first).
    fn number(self, c: &Critical) -> f64 {
        match self {
            Axis::Clients => f64::from(c.clients),
            Axis::Think => c.lambda_s.unwrap_or(f64::NEG_INFINITY),
            Axis::Timeout => c.timeout_s,
            Axis::Limit => c.server_limit as f64,
        }
    }

    /// The setting with its value, for a label.
    fn describe(self, c: &Critical) -> String {
        let v = self.value(c);
        match self {
            Axis::Clients => format!("{v} clients"),
            Axis::Think => format!("think {v} s"),
            Axis::Timeout => format!("timeout {v} s"),
            Axis::Limit => format!("limit {v}"),
        }
    }

    /// What the setting is, for an axis.
    fn name(self) -> &'static str {
        match self {
            Axis::Clients => "clients",
            Axis::Think => "mean think time (s)",
            Axis::Timeout => "client timeout (s)",
            Axis::Limit => "server limit",
        }
    }
}

/// The settings that take more than one value in `report`.
fn varying(report: &SweepReport) -> Vec<Axis> {
    AXES.into_iter()
        .filter(|a| {
            report
                .critical
                .iter()
                .map(|c| a.value(c))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .collect()
}

/// A critical row's map row: its pauses and its edge.
fn row(report: &SweepReport, c: &Critical, label: String, step_s: f64) -> Row {
    let on_grid = |pause: f64| (pause / step_s - (pause / step_s).round()).abs() < 1e-9;
    let cells = report
        .points
        .iter()
        .filter(|p| same_setting(p, c) && on_grid(p.pause_s))
        .map(|p| (p.pause_s, p.p_recovered))
        .collect();
    Row {
        label,
        cells,
        t50: c.t50_s,
        t50_ci: (c.t50_ci_low_s, c.t50_ci_high_s),
        t90: c.t90_s,
        t10: c.t10_s,
    }
}

fn same_setting(p: &Point, c: &Critical) -> bool {
    p.case == c.case
        && p.clients == c.clients
        && p.lambda_s == c.lambda_s
        && p.timeout_s == c.timeout_s
        && p.server_limit == c.server_limit
}

/// The heat map: one panel, a row per setting, labelled with its case and
/// what varies.
fn heat_panel(report: &SweepReport, step_s: f64) -> Panel {
    let vary = varying(report);
    let rows = report
        .critical
        .iter()
        .map(|c| {
            let mut label = c.case.clone();
            for axis in &vary {
                label.push_str(&format!(", {}", axis.describe(c)));
            }
            row(report, c, label, step_s)
        })
        .collect();
    Panel {
        title: String::new(),
        rows,
        contours: false,
    }
}

/// The phase diagram: a panel per case (and per value of any setting that
/// varies besides the first), the first varying setting up the side.
fn phase_panels(report: &SweepReport, step_s: f64) -> (Vec<Panel>, String) {
    let vary = varying(report);
    let Some((&up, others)) = vary.split_first() else {
        return (vec![heat_panel(report, step_s)], "case".to_string());
    };
    let mut panels: Vec<(String, Panel)> = Vec::new();
    // Rows go up in the order of their values, whatever order they were
    // given in.
    let mut critical: Vec<&Critical> = report.critical.iter().collect();
    critical.sort_by(|a, b| up.number(a).total_cmp(&up.number(b)));
    for c in critical {
        let mut title = c.case.clone();
        for axis in others {
            title.push_str(&format!(", {}", axis.describe(c)));
        }
        let label = up.value(c);
        let r = row(report, c, label, step_s);
        match panels.iter_mut().find(|(t, _)| *t == title) {
            Some((_, panel)) => panel.rows.push(r),
            None => panels.push((
                title.clone(),
                Panel {
                    title,
                    rows: vec![r],
                    contours: true,
                },
            )),
        }
    }
    (
        panels.into_iter().map(|(_, p)| p).collect(),
        up.name().to_string(),
    )
}

/// Writes `critical.csv`, `phase.csv`, `summary.md`, the heat map and the
/// phase diagram into the results folder.
pub fn write(config: &SweepConfig, report: &SweepReport, command: &str) -> Result<(), StormError> {
    let out = &config.storm.out;
    std::fs::create_dir_all(out)
        .map_err(|e| StormError::Io(format!("create {}", out.display()), e))?;
    write_csv(out.join("critical.csv"), &report.critical)?;
    write_csv(out.join("phase.csv"), &report.points)?;
    let step_s = secs(config.step);
    let ext = if config.storm.png { "png" } else { "svg" };
    let draw = |name: &str, title: &str, panels: &[Panel], rows: String| {
        let axes = Axes {
            step_s,
            max_pause_s: secs(config.max_pause),
            rows,
        };
        let path: PathBuf = out.join(format!("{name}.{ext}"));
        plot::draw_panels(&path, title, panels, &axes, config.storm.png)
            .map_err(|e| StormError::Child(format!("{name}: {e}")))
    };
    let runs = config.seeds;
    draw(
        "heatmap",
        &format!("share of {runs} runs that recover, by pause"),
        &[heat_panel(report, step_s)],
        String::new(),
    )?;
    let (panels, up) = phase_panels(report, step_s);
    draw(
        "phase",
        &format!(
            "P(recover) by pause and {up}, {runs} runs a point; T50 contour, T90 and T10 dashed"
        ),
        &panels,
        up,
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

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// A setting's T50 and its interval, said in words where the pauses tried
/// do not hold it.
fn t50(c: &Critical, max_pause_s: f64) -> (String, String) {
    let interval = match (c.t50_ci_low_s, c.t50_ci_high_s) {
        (Some(low), None) if low >= max_pause_s => format!("> {max_pause_s}"),
        (low, high) => format!(
            "{}-{}",
            low.map_or("0".into(), |t| format!("{t:.1}")),
            high.map_or(format!(">{max_pause_s}"), |t| format!("{t:.1}"))
        ),
    };
    let value = match (c.t50_s, c.t50_outside) {
        (Some(t), _) => format!("{t:.1}"),
        (None, Some(Outside::Shorter)) => "fails at 0".into(),
        (None, _) => format!("> {max_pause_s}"),
    };
    (value, interval)
}

/// The sweep's Markdown summary.
pub fn summary(config: &SweepConfig, report: &SweepReport, command: &str) -> String {
    let s = &config.storm.scenario.protocol;
    let seed = config.storm.scenario.seed;
    let max = secs(config.max_pause);
    let mut md = format!(
        "# Where recovery stops\n\n`{command}`\n\n\
         Virtual time. Warm-up {} s, observation {} s, report interval {} s; pauses from 0 \
         to {max} s every {} s, and wherever the bisection looked (to {} s); {} runs a \
         pause, seeds {seed} on. {} runs, {} events, {:.1} s.\n\n\
         | case | clients | think (s) | timeout (s) | server limit | T50 (s) | T50 95 % interval (s) | T90 (s) | T10 (s) | critical pause (s) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        secs(s.warmup),
        secs(s.observe),
        secs(s.report_interval),
        secs(config.step),
        secs(config.resolution),
        config.seeds,
        report.runs,
        report.events,
        report.wall.as_secs_f64(),
    );
    for c in &report.critical {
        let critical = if c.overloaded {
            "overloaded".to_string()
        } else if c.at_least {
            format!(">= {}", c.critical_pause_s)
        } else {
            c.critical_pause_s.to_string()
        };
        let (t50, interval) = t50(c, max);
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {t50} | {interval} | {} | {} | {critical} |\n",
            c.case,
            c.clients,
            c.lambda_s.map_or("-".into(), |t| t.to_string()),
            c.timeout_s,
            c.server_limit,
            opt(c.t90_s),
            opt(c.t10_s),
        ));
    }
    md.push_str(
        "\nA run recovers when its goodput is back to 90 % of the baseline for three report \
         intervals, the first starting within the observation window. T50: the pause at \
         which half the runs recover, from an isotonic fit of the share that recovered \
         against the pause (it never rises with the pause), linear between the pauses \
         tried; its interval runs from the longest pause whose share is above one half at \
         95 % confidence (Wilson) to the shortest pause whose share is below it. T90 and \
         T10: where 90 % and 10 % still recover, how sharp the edge is. Critical pause: the \
         longest after which most runs recover, by bisection. A dash: outside the pauses \
         tried. phase.csv holds every pause tried; the maps colour each pause of the grid \
         by the share that recovered.\n",
    );
    md
}
