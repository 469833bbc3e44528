//! Maps of P(recover) against the pause's length: panels of rows, each row
//! a setting, its cells coloured by the share of runs that recovered, its
//! edge marked (T50 with its interval). The sweep's heat map is one panel,
//! a row per setting; a phase diagram is a panel per case with the swept
//! setting up the side, T50 joined across its rows as a contour and T90
//! and T10 dashed beside it.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawResult, WIDTH, register_font, render};

/// One row of a panel: a setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What the row is.
    pub label: String,
    /// (pause, share of runs that recovered), seconds and 0 to 1.
    pub cells: Vec<(f64, f64)>,
    /// Where half the runs recover, seconds.
    pub t50: Option<f64>,
    /// T50's interval, seconds (an end the pauses tried do not bound is
    /// drawn to the edge of the map).
    pub t50_ci: (Option<f64>, Option<f64>),
    /// Where 90 % still recover, seconds.
    pub t90: Option<f64>,
    /// Where 10 % still recover, seconds.
    pub t10: Option<f64>,
}

/// A panel: rows, the first on top of a heat map, at the bottom of a
/// phase panel (whose rows are a setting's values in order).
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The panel's title.
    pub title: String,
    /// Its rows.
    pub rows: Vec<Row>,
    /// Join T50, T90 and T10 across the rows (they are one setting's
    /// values in order).
    pub contours: bool,
}

/// What every panel shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Axes {
    /// Pause between cells, seconds.
    pub step_s: f64,
    /// The longest pause, seconds.
    pub max_pause_s: f64,
    /// What the rows are, for the side of a phase panel.
    pub rows: String,
}

/// The colour of a share of runs that recovered: red for none, through
/// yellow, to green for all.
fn share_color(p: f64) -> RGBColor {
    let x = p.clamp(0.0, 1.0);
    let mix = |a: u8, b: u8, t: f64| (f64::from(a) + (f64::from(b) - f64::from(a)) * t) as u8;
    let (red, yellow, green) = ((0xd7, 0x30, 0x27), (0xfe, 0xe0, 0x8b), (0x1a, 0x98, 0x50));
    let (from, to, t) = if x < 0.5 {
        (red, yellow, x * 2.0)
    } else {
        (yellow, green, x * 2.0 - 1.0)
    };
    RGBColor(
        mix(from.0, to.0, t),
        mix(from.1, to.1, t),
        mix(from.2, to.2, t),
    )
}

/// Pixels a panel takes: its title and axis, and a band per row.
fn panel_height(panel: &Panel) -> u32 {
    110 + 40 * panel.rows.len().max(1) as u32
}

/// The least height of a figure, for the colour scale beside the maps.
const MIN_HEIGHT: u32 = 420;

/// Draws `panels` into `path` (PNG with `png`), two side by side when
/// there are several, with the colour scale on the right.
pub fn draw_panels(
    path: &Path,
    title: &str,
    panels: &[Panel],
    axes: &Axes,
    png: bool,
) -> DrawResult {
    register_font()?;
    let columns = if panels.len() > 1 { 2 } else { 1 };
    let mut grid_rows: Vec<u32> = panels
        .chunks(columns)
        .map(|row| row.iter().map(panel_height).max().unwrap_or(0))
        .collect();
    // A short figure still needs room for the scale: the panels share it.
    let needed = grid_rows.iter().sum::<u32>().max(1);
    if needed + 50 < MIN_HEIGHT {
        for h in &mut grid_rows {
            *h = *h * (MIN_HEIGHT - 50) / needed;
        }
    }
    let height = 50 + grid_rows.iter().sum::<u32>();
    render!(path, png, (WIDTH, height), |area: &DrawingArea<
        _,
        Shift,
    >| {
        area.fill(&WHITE)?;
        let area = area.titled(title, ("sans-serif", 22))?;
        let (maps, scale) = area.split_horizontally(WIDTH - 110);
        draw_scale(&scale)?;
        let mut rest = maps;
        for (row, height) in panels.chunks(columns).zip(&grid_rows) {
            let (band, below) = rest.split_vertically(*height);
            rest = below;
            let cells = band.split_evenly((1, columns));
            for (panel, cell) in row.iter().zip(&cells) {
                draw_panel(cell, panel, axes)?;
            }
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    });
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    axes: &Axes,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let step = axes.step_s;
    let x_max = axes.max_pause_s + step / 2.0;
    let labels: Vec<&str> = panel.rows.iter().map(|r| r.label.as_str()).collect();
    let n = labels.len() as i32;
    // Row i's band starts at y = i from the bottom in a phase panel, from
    // the top in a heat map; the map is its own inverse.
    let row_at = |i: i32| if panel.contours { i } else { n - 1 - i };
    let label_width = labels.iter().map(|l| l.len()).max().unwrap_or(4) as u32 * 8 + 20;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(label_width.min(320))
        .build_cartesian_2d(-step / 2.0..x_max, 0.0..f64::from(n))?;
    let y_desc = if panel.contours {
        axes.rows.as_str()
    } else {
        ""
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("pause (s)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_labels(labels.len() * 2 + 1)
        .y_label_formatter(&|y| {
            // Label the middle of each row's band.
            let band = y - y.floor();
            let i = row_at(y.floor() as i32);
            if (band - 0.5).abs() < 1e-9 && (0..n).contains(&i) {
                labels[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .draw()?;
    let y_of = |i: usize| f64::from(row_at(i as i32));
    for (i, row) in panel.rows.iter().enumerate() {
        let y = y_of(i);
        chart.draw_series(row.cells.iter().map(|&(pause, p)| {
            Rectangle::new(
                [(pause - step / 2.0, y), (pause + step / 2.0, y + 1.0)],
                share_color(p).filled(),
            )
        }))?;
        // T50 with its interval, across the middle of the row; an
        // interval that the pauses tried bound at neither end says nothing.
        let mid = y + 0.5;
        if row.t50_ci.0.is_some() || row.t50_ci.1.is_some() {
            let low = row.t50_ci.0.unwrap_or(-step / 2.0);
            let high = row.t50_ci.1.unwrap_or(x_max);
            chart.draw_series(std::iter::once(PathElement::new(
                [(low, mid), (high, mid)],
                BLACK.stroke_width(2),
            )))?;
        }
        if let Some(t) = row.t50 {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(t - step / 10.0, y + 0.2), (t + step / 10.0, y + 0.8)],
                BLACK.filled(),
            )))?;
        }
    }
    if panel.contours {
        let points = |f: fn(&Row) -> Option<f64>| -> Vec<Option<(f64, f64)>> {
            panel
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| f(r).map(|t| (t, y_of(i) + 0.5)))
                .collect()
        };
        for part in contour(&points(|r| r.t50)) {
            chart.draw_series(std::iter::once(PathElement::new(
                part,
                BLACK.stroke_width(3),
            )))?;
        }
        for f in [(|r: &Row| r.t90) as fn(&Row) -> Option<f64>, |r| r.t10] {
            for part in contour(&points(f)) {
                chart.draw_series(DashedLineSeries::new(part, 5, 4, BLACK.stroke_width(1)))?;
            }
        }
    }
    Ok(())
}

/// A contour through the rows, broken where a row has no value: a line
/// joins only neighbouring rows.
fn contour(points: &[Option<(f64, f64)>]) -> Vec<Vec<(f64, f64)>> {
    points
        .split(Option::is_none)
        .map(|part| part.iter().flatten().copied().collect::<Vec<_>>())
        .filter(|part| part.len() > 1)
        .collect()
}

/// The colour scale: all recovered on top, none at the bottom.
fn draw_scale<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let area = area.margin(60, 60, 10, 10);
    let (_, h) = area.dim_in_pixel();
    let bands = 12;
    let band = (h as i32 - 80) / bands;
    for i in 0..bands {
        let p = 1.0 - f64::from(i) / f64::from(bands - 1);
        area.draw(&Rectangle::new(
            [(0, i * band), (24, (i + 1) * band)],
            share_color(p).filled(),
        ))?;
    }
    let font = ("sans-serif", 14).into_font();
    area.draw(&Text::new("all", (30, 0), font.clone()))?;
    area.draw(&Text::new("none", (30, bands * band - 14), font.clone()))?;
    let y = bands * band + 12;
    area.draw(&Text::new("runs that", (0, y), font.clone()))?;
    area.draw(&Text::new("recovered", (0, y + 16), font.clone()))?;
    area.draw(&Text::new("bar: T50", (0, y + 40), font.clone()))?;
    area.draw(&Text::new("line: its", (0, y + 56), font.clone()))?;
    area.draw(&Text::new("interval", (0, y + 72), font))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_run_from_red_through_yellow_to_green() {
        assert_eq!(share_color(0.0), RGBColor(0xd7, 0x30, 0x27));
        assert_eq!(share_color(0.5), RGBColor(0xfe, 0xe0, 0x8b));
        assert_eq!(share_color(1.0), RGBColor(0x1a, 0x98, 0x50));
        assert_eq!(share_color(7.0), share_color(1.0), "clamped");
    }

    #[test]
    fn contours_break_where_a_row_has_no_value() {
        let a = Some((1.0, 0.5));
        let b = Some((2.0, 1.5));
        let c = Some((3.0, 3.5));
        assert_eq!(
            contour(&[a, b, None, c]),
            vec![vec![(1.0, 0.5), (2.0, 1.5)]],
            "a lone row makes no line"
        );
        assert_eq!(contour(&[a, b, c]).len(), 1);
        assert!(contour(&[None, a, None]).is_empty());
    }
}
