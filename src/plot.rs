//! Plots of a storm: per strategy, the client's OK/error/timeout rates over
//! time with the pause shaded and the server's concurrency on a second axis;
//! and one overlay of goodput across strategies. SVG by default, PNG on
//! request, drawn with plotters.

use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::stats::{ClientRow, ServerRow};
use crate::storm::{RunReport, RunRows, StormConfig, StormReport};
use crate::sweep::{SweepConfig, SweepReport};

type DrawResult = Result<(), Box<dyn Error>>;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 560;
const OK_COLOR: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const ERROR_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const TIMEOUT_COLOR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const CONCURRENCY_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const PAUSE_COLOR: RGBColor = RGBColor(0xcc, 0xcc, 0xcc);
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// Seconds since the client started, for a Unix-millisecond stamp.
fn secs(unix_ms: u64, start_ms: u64) -> f64 {
    unix_ms.saturating_sub(start_ms) as f64 / 1000.0
}

/// Makes text possible: plotters lays out and draws text with a TrueType
/// font registered for "sans-serif"; this takes the first of the usual
/// system fonts it finds, once per process.
fn register_font() -> Result<(), Box<dyn Error>> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| load_font().map_err(|e| e.to_string()))
        .clone()
        .map_err(Into::into)
}

fn load_font() -> Result<(), Box<dyn Error>> {
    const CANDIDATES: [&str; 4] = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ];
    let bytes = CANDIDATES
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .ok_or(
            "PNG plots need a TrueType font (DejaVu Sans or Liberation Sans); none found: use SVG",
        )?;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| "the font could not be loaded")?;
    Ok(())
}

/// Renders `$draw` (a function of a drawing area) into `$path`, as PNG or
/// SVG: plotters' backends are distinct types, so each gets its own call.
macro_rules! render {
    ($path:expr, $png:expr, $draw:expr) => {
        render!($path, $png, (WIDTH, HEIGHT), $draw)
    };
    ($path:expr, $png:expr, $size:expr, $draw:expr) => {{
        let (width, height): (u32, u32) = $size;
        if $png {
            let mut pixels = vec![0u8; (width * height * 3) as usize];
            {
                let area =
                    BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
                $draw(&area)?;
                area.present()?;
            }
            write_png($path, &pixels, (width, height))?;
        } else {
            let area = SVGBackend::new($path, (width, height)).into_drawing_area();
            $draw(&area)?;
            area.present()?;
        }
    }};
}

/// Encodes an RGB buffer of `size` as a PNG file.
fn write_png(path: &Path, pixels: &[u8], (width, height): (u32, u32)) -> DrawResult {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(pixels)?;
    Ok(())
}

/// Draws every plot of a storm into its results folder; `rows` are the
/// runs' report rows, in the order of `report.runs`.
pub fn draw_all(config: &StormConfig, report: &StormReport, rows: &[RunRows]) -> DrawResult {
    register_font()?;
    let ext = if config.png { "png" } else { "svg" };
    let mut goodput = Vec::new();
    for (run, rows) in report.runs.iter().zip(rows) {
        let path = config.out.join(format!("{}.{ext}", run.strategy));
        render!(&path, config.png, |area| draw_run(
            area,
            run,
            &rows.client,
            &rows.server
        ));
        goodput.push((run, rows.client.as_slice()));
    }
    let path = config.out.join(format!("goodput.{ext}"));
    render!(&path, config.png, |area| draw_overlay(area, &goodput));
    Ok(())
}

/// Shades the pause (the server stopped) across the chart's height.
fn shade_pause<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    run: &RunReport,
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
        .label("server stopped")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], PAUSE_COLOR.filled()));
    Ok(())
}

fn verdict(run: &RunReport) -> String {
    match run.figures.recovery_s {
        Some(s) if run.figures.recovered => format!("recovered {s:.1} s after resume"),
        _ => "did not recover".to_string(),
    }
}

/// The series' labels, in the chart's upper right corner.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

/// One strategy: client rates, server concurrency, the pause shaded.
fn draw_run<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    run: &RunReport,
    client: &[ClientRow],
    server: &[ServerRow],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
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
    let c_max = server
        .iter()
        .map(|r| r.concurrency)
        .max()
        .unwrap_or(0)
        .max(10) as f64
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}: {}", run.strategy, verdict(run)),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?
        .set_secondary_coord(0.0..x_max, 0.0..c_max);
    chart
        .configure_mesh()
        .x_desc("seconds since the client started")
        .y_desc("attempts per second")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("server concurrency")
        .draw()?;
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
    chart
        .draw_secondary_series(LineSeries::new(
            server
                .iter()
                .map(|r| (secs(r.unix_ms, start), r.concurrency as f64)),
            CONCURRENCY_COLOR.stroke_width(1),
        ))?
        .label("server concurrency (right axis)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], CONCURRENCY_COLOR));
    draw_legend(&mut chart)
}

/// Goodput of every strategy on one chart, the pause shaded.
fn draw_overlay<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[(&RunReport, &[ClientRow])],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let x_max = runs
        .iter()
        .flat_map(|(run, rows)| rows.iter().map(|r| secs(r.unix_ms, run.timeline.start_ms)))
        .fold(1.0, f64::max);
    let y_max = runs
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.ok_per_s))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption("goodput (OK/s) by strategy", ("sans-serif", 22))
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
    if let Some((run, _)) = runs.first() {
        shade_pause(&mut chart, run, y_max)?;
    }
    for (i, (run, rows)) in runs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let start = run.timeline.start_ms;
        chart
            .draw_series(LineSeries::new(
                rows.iter().map(|r| (secs(r.unix_ms, start), r.ok_per_s)),
                color.stroke_width(2),
            ))?
            .label(format!("{} ({})", run.strategy, verdict(run)))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart)
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

/// The heat map of a sweep: one row per setting, pause length across,
/// each cell coloured by median recovery time, "never" in dark grey with a
/// cross, and each row's critical pause marked.
pub fn draw_heatmap(path: &Path, config: &SweepConfig, report: &SweepReport) -> DrawResult {
    register_font()?;
    let rows = report.critical.len().max(1);
    let size = (WIDTH, 150 + 30 * rows as u32);
    render!(path, config.storm.png, size, |area| heatmap(
        area, config, report
    ));
    Ok(())
}

fn heatmap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    config: &SweepConfig,
    report: &SweepReport,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let (map, legend) = area.split_horizontally(area.dim_in_pixel().0 - 130);
    let step = config.step.as_secs_f64();
    let x_max = config.max_pause.as_secs_f64() + step / 2.0;
    let observe = config.storm.observe.as_secs_f64();
    // Name what varies, and only that.
    let varies = |f: &dyn Fn(&crate::sweep::Critical) -> String| {
        report
            .critical
            .iter()
            .map(f)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    };
    let (by_clients, by_timeout, by_limit) = (
        varies(&|c| c.clients.to_string()),
        varies(&|c| c.timeout_s.to_string()),
        varies(&|c| c.server_limit.to_string()),
    );
    let labels: Vec<String> = report
        .critical
        .iter()
        .map(|c| {
            let mut label = c.strategy.to_string();
            if by_clients {
                label.push_str(&format!(", {} clients", c.clients));
            }
            if by_timeout {
                label.push_str(&format!(", timeout {} s", c.timeout_s));
            }
            if by_limit {
                label.push_str(&format!(", limit {}", c.server_limit));
            }
            label
        })
        .collect();
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
                .cloned()
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .draw()?;
    for (row, critical) in report.critical.iter().enumerate() {
        let y = n - 1 - row as i32;
        let points = report.grid.iter().filter(|p| {
            p.strategy == critical.strategy
                && p.clients == critical.clients
                && p.timeout_s == critical.timeout_s
                && p.server_limit == critical.server_limit
        });
        for p in points {
            let (x0, x1) = (p.pause_s - step / 2.0, p.pause_s + step / 2.0);
            let cell = [
                (x0, SegmentValue::Exact(y)),
                (x1, SegmentValue::Exact(y + 1)),
            ];
            match p.recovery_s {
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
                        (p.pause_s - step / 8.0, SegmentValue::CenterOf(y)),
                        ("sans-serif", 14).into_font().color(&WHITE.mix(0.8)),
                    )))?;
                }
            }
        }
        if !critical.overloaded {
            let x = critical.critical_pause_s;
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
