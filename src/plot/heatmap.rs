//! The heat map of a sweep: one row per setting, pause length across,
//! each cell coloured by median recovery time.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawResult, WIDTH, register_font, render};

/// One row of the heat map: a setting, its cells and its critical pause.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatRow {
    /// What the row is (a case, and what varies between rows).
    pub label: String,
    /// (pause, median recovery time or `None` for never), seconds.
    pub cells: Vec<(f64, Option<f64>)>,
    /// The critical pause, seconds; `None` when even no pause recovers.
    pub critical_s: Option<f64>,
}

/// The heat map's axes, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapScale {
    /// Pause between cells.
    pub step_s: f64,
    /// Longest pause.
    pub max_pause_s: f64,
    /// Observation window: the colour scale's end.
    pub observe_s: f64,
}

/// Colour of a heat-map cell that never recovers.
const NEVER_COLOR: RGBColor = RGBColor(0x40, 0x40, 0x40);

/// A recovery time's colour: green for at once, through yellow, to red at
/// the end of the observation window.
fn recovery_color(recovery_s: f64, observe_s: f64) -> RGBColor {
    let x = (recovery_s / observe_s.max(1e-9)).clamp(0.0, 1.0);
    let mix = |a: u8, b: u8, t: f64| (f64::from(a) + (f64::from(b) - f64::from(a)) * t) as u8;
    let (green, yellow, red) = ((0x1a, 0x98, 0x50), (0xfe, 0xe0, 0x8b), (0xd7, 0x30, 0x27));
    let (from, to, t) = if x < 0.5 {
        (green, yellow, x * 2.0)
    } else {
        (yellow, red, x * 2.0 - 1.0)
    };
    RGBColor(
        mix(from.0, to.0, t),
        mix(from.1, to.1, t),
        mix(from.2, to.2, t),
    )
}

/// Draws the heat map of a sweep into `path` (PNG with `png`): one row per
/// setting, the first on top, pause length across, each cell coloured by
/// median recovery time, "never" in dark grey with a cross, and each row's
/// critical pause marked.
pub fn draw_heatmap(path: &Path, rows: &[HeatRow], scale: HeatmapScale, png: bool) -> DrawResult {
    register_font()?;
    let size = (WIDTH, 150 + 30 * rows.len().max(1) as u32);
    render!(path, png, size, |area| heatmap(area, rows, scale));
    Ok(())
}

fn heatmap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[HeatRow],
    scale: HeatmapScale,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let (map, legend) = area.split_horizontally(area.dim_in_pixel().0 - 130);
    let step = scale.step_s;
    let x_max = scale.max_pause_s + step / 2.0;
    let observe = scale.observe_s;
    let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
    let n = labels.len() as i32;
    let mut chart = ChartBuilder::on(&map)
        .caption(
            "recovery time by pause length (median over seeds)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(260)
        .build_cartesian_2d(-step / 2.0..x_max, (0..n).into_segmented())?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("pause (s); black bar: critical pause")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_labels(labels.len())
        .y_label_formatter(&|v| match v {
            // The first setting on top.
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => labels
                .get((n - 1 - *i) as usize)
                .map(|l| l.to_string())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .draw()?;
    for (row, heat) in rows.iter().enumerate() {
        let y = n - 1 - row as i32;
        for &(pause_s, recovery_s) in &heat.cells {
            let (x0, x1) = (pause_s - step / 2.0, pause_s + step / 2.0);
            let cell = [
                (x0, SegmentValue::Exact(y)),
                (x1, SegmentValue::Exact(y + 1)),
            ];
            match recovery_s {
                Some(r) => {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        cell,
                        recovery_color(r, observe).filled(),
                    )))?;
                }
                None => {
                    chart
                        .draw_series(std::iter::once(Rectangle::new(cell, NEVER_COLOR.filled())))?;
                    chart.draw_series(std::iter::once(Text::new(
                        "x",
                        (pause_s - step / 8.0, SegmentValue::CenterOf(y)),
                        ("sans-serif", 14).into_font().color(&WHITE.mix(0.8)),
                    )))?;
                }
            }
        }
        if let Some(x) = heat.critical_s {
            chart.draw_series(std::iter::once(Rectangle::new(
                [
                    (x - step / 12.0, SegmentValue::Exact(y)),
                    (x + step / 12.0, SegmentValue::Exact(y + 1)),
                ],
                BLACK.filled(),
            )))?;
        }
    }
    // The colour scale.
    let legend = legend.margin(60, 60, 10, 10);
    let (_, h) = legend.dim_in_pixel();
    let bands = 12;
    let band = (h as i32 - 60) / bands;
    for i in 0..bands {
        let r = observe * f64::from(i) / f64::from(bands - 1);
        legend.draw(&Rectangle::new(
            [(0, i * band), (24, (i + 1) * band)],
            recovery_color(r, observe).filled(),
        ))?;
    }
    let font = ("sans-serif", 14).into_font();
    legend.draw(&Text::new("0 s", (30, 0), font.clone()))?;
    legend.draw(&Text::new(
        format!("{observe:.0} s"),
        (30, bands * band - 14),
        font.clone(),
    ))?;
    let y = bands * band + 16;
    legend.draw(&Rectangle::new(
        [(0, y), (24, y + band)],
        NEVER_COLOR.filled(),
    ))?;
    legend.draw(&Text::new("never", (30, y), font))?;
    Ok(())
}
