//! A storm's charts: one per case (rates, concurrency, the pause shaded)
//! and the goodput of every case on one chart.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::canvas::{
    CONCURRENCY_COLOR, DrawResult, ERROR_COLOR, OK_COLOR, PALETTE, PAUSE_COLOR, TIMEOUT_COLOR,
    draw_legend, extension, register_font, render, secs,
};
use crate::report::proxy::ProxyRow;
use crate::report::rows::{ClientRow, ServerRow};
use crate::report::verdict::Timeline;

/// One case of a storm, as its charts need it.
#[derive(Debug, Clone, Copy)]
pub struct RunChart<'a> {
    /// The case's name: its chart is `NAME.svg` (or `.png`).
    pub name: &'a str,
    /// Seconds from resume to recovery, if it recovered.
    pub recovery_s: Option<f64>,
    /// When its phases happened.
    pub timeline: Timeline,
    /// The client's report rows.
    pub client: &'a [ClientRow],
    /// The server's report rows: none against a target, whose concurrency
    /// is not measured (no right axis, unless through a fault proxy).
    pub server: &'a [ServerRow],
    /// The fault proxy's report rows, against a target through one: what
    /// it holds goes on the right axis instead.
    pub proxy: &'a [ProxyRow],
}

impl RunChart<'_> {
    /// The right axis: its name and its points (seconds since the client
    /// started, value); none if nothing measured it.
    fn right_axis(&self) -> Option<(&'static str, Vec<(f64, f64)>)> {
        let start = self.timeline.start_ms;
        if !self.server.is_empty() {
            let points = self.server.iter();
            let points = points.map(|r| (secs(r.unix_ms, start), r.concurrency as f64));
            return Some(("server concurrency", points.collect()));
        }
        // Requests the proxy held to the target or for the fault, and
        // connections waiting in its listen queue: a stall's backlog.
        let points = self.proxy.iter().map(|r| {
            let held = r.in_flight + r.held + r.queued;
            (secs(r.unix_ms, start), held as f64)
        });
        let points: Vec<(f64, f64)> = points.collect();
        (!points.is_empty()).then_some(("held at the fault proxy", points))
    }
}

/// Draws every chart of a storm into `dir`: one per case and
/// `goodput.svg` (PNG files with `png`).
pub fn storm_charts(dir: &Path, runs: &[RunChart], png: bool) -> DrawResult {
    register_font()?;
    let ext = extension(png);
    for run in runs {
        let path = dir.join(format!("{}.{ext}", run.name));
        render!(&path, png, |area| draw_run(area, run));
    }
    let path = dir.join(format!("goodput.{ext}"));
    render!(&path, png, |area| draw_overlay(area, runs));
    Ok(())
}

/// Shades the pause (the server stopped, or a target's outage) across
/// the chart's height.
fn shade_pause<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    run: &RunChart,
    y_max: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let t = &run.timeline;
    let (stop, resume) = (secs(t.stop_ms, t.start_ms), secs(t.resume_ms, t.start_ms));
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(stop, 0.0), (resume, y_max)],
            PAUSE_COLOR.mix(0.5).filled(),
        )))?
        .label(if run.server.is_empty() {
            "outage"
        } else {
            "server stopped"
        })
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], PAUSE_COLOR.filled()));
    Ok(())
}

fn verdict(run: &RunChart) -> String {
    match run.recovery_s {
        Some(s) => format!("recovered {s:.1} s after resume"),
        None => "did not recover".to_string(),
    }
}

/// One case: client rates, server concurrency (if measured), the pause
/// shaded.
fn draw_run<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, run: &RunChart) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let client = run.client;
    let right = run.right_axis();
    area.fill(&WHITE)?;
    let start = run.timeline.start_ms;
    let x_max = client
        .iter()
        .map(|r| secs(r.unix_ms, start))
        .fold(1.0, f64::max);
    let y_max = client
        .iter()
        .map(|r| r.ok_per_s.max(r.errors_per_s).max(r.timeouts_per_s))
        .fold(1.0, f64::max)
        * 1.1;
    let c_max = right
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(10.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}: {}", run.name, verdict(run)),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(if right.is_some() { 70 } else { 20 })
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?
        .set_secondary_coord(0.0..x_max, 0.0..c_max);
    chart
        .configure_mesh()
        .x_desc("seconds since the client started")
        .y_desc("attempts per second")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if let Some((name, _)) = &right {
        chart.configure_secondary_axes().y_desc(*name).draw()?;
    }
    shade_pause(&mut chart, run, y_max)?;
    type Series = (&'static str, RGBColor, fn(&ClientRow) -> f64);
    let series: [Series; 3] = [
        ("OK/s", OK_COLOR, |r| r.ok_per_s),
        ("errors/s", ERROR_COLOR, |r| r.errors_per_s),
        ("timeouts/s", TIMEOUT_COLOR, |r| r.timeouts_per_s),
    ];
    for (label, color, value) in series {
        chart
            .draw_series(LineSeries::new(
                client.iter().map(|r| (secs(r.unix_ms, start), value(r))),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    if let Some((name, points)) = right {
        chart
            .draw_secondary_series(LineSeries::new(points, CONCURRENCY_COLOR.stroke_width(1)))?
            .label(format!("{name} (right axis)"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], CONCURRENCY_COLOR));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Goodput of every case on one chart, the pause shaded.
fn draw_overlay<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, runs: &[RunChart]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let x_max = runs
        .iter()
        .flat_map(|run| {
            run.client
                .iter()
                .map(|r| secs(r.unix_ms, run.timeline.start_ms))
        })
        .fold(1.0, f64::max);
    let y_max = runs
        .iter()
        .flat_map(|run| run.client.iter().map(|r| r.ok_per_s))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption("goodput (OK/s) by case", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the client started")
        .y_desc("OK per second")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if let Some(run) = runs.first() {
        shade_pause(&mut chart, run, y_max)?;
    }
    for (i, run) in runs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let start = run.timeline.start_ms;
        chart
            .draw_series(LineSeries::new(
                run.client
                    .iter()
                    .map(|r| (secs(r.unix_ms, start), r.ok_per_s)),
                color.stroke_width(2),
            ))?
            .label(format!("{} ({})", run.name, verdict(run)))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}
