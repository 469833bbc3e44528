//! Maps of P(recover): panels of rows, each row a setting, its cells
//! coloured by the share of runs that recovered, its edge marked (T50 with
//! its interval). Across goes the pause's length, or, in a map at one
//! pause, a setting. The sweep's heat map is one panel, a row per setting;
//! a phase diagram is a panel per case with the swept setting up the side,
//! T50 joined across its rows as a contour and T90 and T10 dashed beside
//! it.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawResult, WIDTH, register_font, render};

/// One row of a panel: a setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What the row is.
    pub label: String,
    /// (place across, share of runs that recovered): the pause in seconds,
    /// or a column's index; the share from 0 to 1.
    pub cells: Vec<(f64, f64)>,
    /// Where half the runs recover, in the units across (seconds of pause,
    /// or a column's index at one pause).
    pub t50: Option<f64>,
    /// T50's interval, the same units (an end the pauses tried do not
    /// bound is drawn to the edge of the map).
    pub t50_ci: (Option<f64>, Option<f64>),
    /// Where 90 % still recover, the same units.
    pub t90: Option<f64>,
    /// Where 10 % still recover, the same units.
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

impl Row {
    /// A row with no cells and no marks yet.
    pub fn empty(label: String) -> Row {
        Row {
            label,
            cells: Vec::new(),
            t50: None,
            t50_ci: (None, None),
            t90: None,
            t10: None,
        }
    }
}

/// The panel titled `title` among `panels`, added (empty) if there is none
/// yet: panels keep the order of their first rows.
pub fn panel_titled(panels: &mut Vec<Panel>, title: String, contours: bool) -> &mut Panel {
    match panels.iter().position(|p| p.title == title) {
        Some(i) => &mut panels[i],
        None => {
            panels.push(Panel {
                title,
                rows: Vec::new(),
                contours,
            });
            panels.last_mut().expect("just pushed")
        }
    }
}

/// What every panel shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Axes {
    /// What goes across.
    pub across: Across,
    /// What the rows are, for the side of a phase panel.
    pub rows: String,
}

/// What goes across a map.
#[derive(Debug, Clone, PartialEq)]
pub enum Across {
    /// The pause, on a grid.
    Pause {
        /// Pause between cells, seconds.
        step_s: f64,
        /// The longest pause, seconds.
        max_pause_s: f64,
    },
    /// A setting's values, one column each (column i at i), at one pause:
    /// a row's mark is where its share first passes one half.
    Settings {
        /// What the setting is.
        name: String,
        /// Its values, in order.
        labels: Vec<String>,
    },
}

impl Across {
    /// The width of a cell, the right end of the map, and what the axis is.
    fn scale(&self) -> (f64, f64, &str) {
        match self {
            Across::Pause {
                step_s,
                max_pause_s,
            } => (*step_s, max_pause_s + step_s / 2.0, "pause (s)"),
            Across::Settings { name, labels } => (1.0, labels.len() as f64 - 0.5, name),
        }
    }

    /// The label at `x`, if a tick there has one.
    fn label(&self, x: f64) -> String {
        match self {
            Across::Pause { .. } => format!("{x:.0}"),
            Across::Settings { labels, .. } => {
                let i = x.round();
                if (x - i).abs() < 1e-9 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
        }
    }

    /// The legend of a row's marks, line by line.
    fn legend(&self) -> &'static [&'static str] {
        match self {
            Across::Pause { .. } => &["bar: T50", "line: its", "interval"],
            Across::Settings { .. } => &["bar: half", "recover"],
        }
    }
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
        draw_scale(&scale, axes.across.legend())?;
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
    let (step, x_max, x_desc) = axes.across.scale();
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
    let mut mesh = chart.configure_mesh();
    if let Across::Settings {
        labels: columns, ..
    } = &axes.across
    {
        // Ticks every half column, so that every column's middle has one.
        mesh.x_labels(columns.len() * 2 + 1);
    }
    mesh.disable_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| axes.across.label(*x))
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
            // A fifth of a cell wide, but thin where cells are few and wide.
            let half = (step / 10.0).min((x_max + step / 2.0) / 150.0);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(t - half, y + 0.2), (t + half, y + 0.8)],
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

/// The colour scale: all recovered on top, none at the bottom; below it,
/// `legend`, the meaning of a row's marks.
fn draw_scale<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, legend: &[&str]) -> DrawResult
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
    for (i, line) in (0..).zip(legend) {
        area.draw(&Text::new(*line, (0, y + 40 + 16 * i), font.clone()))?;
    }
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
    fn settings_across_label_the_middle_of_each_column_only() {
        let across = Across::Settings {
            name: "clients".into(),
            labels: vec!["250".into(), "1000".into()],
        };
        assert_eq!(across.label(0.0), "250");
        assert_eq!(across.label(1.0), "1000");
        assert_eq!(across.label(0.5), "", "between columns");
        assert_eq!(across.label(-0.5), "");
        assert_eq!(across.label(2.0), "", "past the last column");
        assert_eq!(across.scale(), (1.0, 1.5, "clients"));
        let pause = Across::Pause {
            step_s: 5.0,
            max_pause_s: 60.0,
        };
        assert_eq!(pause.label(20.0), "20");
        assert_eq!(pause.scale(), (5.0, 62.5, "pause (s)"));
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
