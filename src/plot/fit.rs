//! The chart of a calibration: what a closed-loop probe measured at each
//! concurrency beside what every fitted shape predicts, latency on the
//! left and throughput on the right, both against concurrency on log-log
//! axes, one legend below both.
//!
//! Every shape and the Universal Scalability Law are drawn over N from 1
//! to the largest level probed, the twin chosen thicker, the law dashed.
//! A panel's height takes in what was measured and stretches to take in
//! the predictions, but never past [`WIDEN`] times beyond the measured
//! range: a shape far off leaves the panel, and does not flatten the
//! others.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawResult, PALETTE, register_font, render};
use crate::model::fit::{FitOptions, Fits, Level, ShapeFit, Twin, UslFit};

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 540;
/// Pixels a line of the legend takes.
const ROW: i32 = 22;
/// How far beyond the measured range, as a factor either way, the
/// predictions may take a panel's axis.
const WIDEN: f64 = 4.0;
/// Room around what a panel shows, as a factor either way.
const PAD: f64 = 1.25;
/// Concurrencies at which each curve is evaluated, log-spaced.
const SAMPLES: usize = 240;
/// Exponential, linear, pool: `--model`'s order, as in [`Fits::shapes`].
const SHAPE_COLORS: [RGBColor; 3] = [PALETTE[0], PALETTE[4], PALETTE[2]];
const USL_COLOR: RGBColor = PALETTE[3];
const LEFT_OUT_COLOR: RGBColor = RGBColor(0x99, 0x99, 0x99);

/// A prediction, drawn as a line: its points, colour, width, and whether
/// it is dashed.
struct Line(Vec<(f64, f64)>, RGBColor, u32, bool);

/// A level on a panel: N, its mean latency or throughput, its p50 and
/// p99 on the latency panel, whether it was left out for its errors.
type Measured = (f64, f64, Option<(f64, f64)>, bool);

/// One panel, in its units (milliseconds or requests a second).
struct Panel {
    latency: bool,
    points: Vec<Measured>,
    lines: Vec<Line>,
    /// The law's peak, `(N*, X(N*))`, on the throughput panel if in range.
    peak: Option<(f64, f64)>,
    /// The y axis, from and to.
    y: (f64, f64),
}

/// What a legend entry shows beside its label.
enum Glyph {
    Mean,
    Spread,
    LeftOut,
    Line(RGBColor, u32, bool),
    Peak,
}

/// Draws the measured levels and each fitted curve: two panels side by
/// side, latency against concurrency and throughput against concurrency,
/// both on log-log axes, in milliseconds and requests a second.
///
/// Levels whose error share passes [`FitOptions::default`]'s are drawn
/// hollow and grey; the twin chosen thicker and labelled "(twin)", the
/// Universal Scalability Law dashed, its peak marked where it falls
/// within the levels probed. SVG, or PNG with `png`.
pub fn fit_chart(
    levels: &[Level],
    fits: &Fits,
    title: &str,
    path: &Path,
    png: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    register_font()?;
    let x_hi = f64::from(max_concurrency(levels)) * PAD;
    let panels = [panel(levels, fits, true), panel(levels, fits, false)];
    let (measured, predicted) = legend(levels, fits, &panels[1]);
    let rows = measured.len().max(predicted.len()) as u32;
    let height = 40 + PANEL_HEIGHT + 16 + ROW as u32 * rows;
    render!(path, png, (WIDTH, height), |area: &DrawingArea<
        _,
        Shift,
    >| {
        area.fill(&WHITE)?;
        let area = area.titled(title, ("sans-serif", 22))?;
        let (top, bottom) = area.split_vertically(PANEL_HEIGHT);
        for (panel, cell) in panels.iter().zip(top.split_evenly((1, 2))) {
            draw_panel(&cell, panel, x_hi)?;
        }
        for (entries, x) in [(&measured, 40), (&predicted, 440)] {
            for (i, (glyph, label)) in (0..).zip(entries.iter()) {
                let y = 16 + ROW * i;
                draw_glyph(&bottom, glyph, (x, y))?;
                let font = ("sans-serif", 15).into_font();
                bottom.draw(&Text::new(label.as_str(), (x + 40, y - 8), font))?;
            }
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    });
    Ok(())
}

fn max_concurrency(levels: &[Level]) -> u32 {
    levels.iter().map(|l| l.concurrency).fold(1, u32::max)
}

fn left_out(level: &Level) -> bool {
    level.error_share > FitOptions::default().max_error_share
}

/// Integers from 1 to `max_n`, log-spaced: every one where they are few.
fn sample(max_n: u32) -> Vec<f64> {
    let top = f64::from(max_n.max(1));
    let at = |i: usize| top.powf(i as f64 / (SAMPLES - 1) as f64).round();
    let mut ns: Vec<f64> = (0..SAMPLES).map(at).collect();
    ns.dedup();
    ns
}

/// The latency panel (milliseconds) with `latency`, else throughput.
fn panel(levels: &[Level], fits: &Fits, latency: bool) -> Panel {
    let max_n = max_concurrency(levels);
    let points: Vec<_> = levels
        .iter()
        .map(|l| {
            let n = f64::from(l.concurrency);
            let (r, x) = (l.latency_mean_s * 1e3, l.throughput);
            let value = if latency { r } else { x };
            let spread = (l.latency_p50_s * 1e3, l.latency_p99_s * 1e3);
            (n, value, latency.then_some(spread), left_out(l))
        })
        .filter(|p| valid(p.0) && valid(p.1))
        .collect();
    // Every prediction obeys Little's law: X(N) = N / R(N).
    let ns = sample(max_n);
    let curve = |r: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        let at = |n: f64| if latency { r(n) * 1e3 } else { n / r(n) };
        ns.iter().map(|&n| (n, at(n))).collect()
    };
    let mut lines: Vec<Line> = (0..)
        .zip(&fits.shapes)
        .map(|(i, fit)| {
            let width = if i == fits.best { 4 } else { 2 };
            let color = SHAPE_COLORS[i % SHAPE_COLORS.len()];
            Line(curve(&|n| fit.twin.latency(n as u32)), color, width, false)
        })
        .collect();
    let law = fits.usl.usl;
    lines.push(Line(curve(&|n| law.latency(n)), USL_COLOR, 2, true));
    let probed = 1.0..=f64::from(max_n);
    let peak = law.peak().filter(|n| !latency && probed.contains(n));
    let peak = peak.map(|n| (n, law.throughput(n)));
    let spreads = points.iter().flat_map(|p| p.2).flat_map(|s| [s.0, s.1]);
    let measured: Vec<f64> = points.iter().map(|p| p.1).chain(spreads).collect();
    let predicted = lines.iter().flat_map(|l| l.0.iter().map(|p| p.1));
    let y = y_range(&measured, predicted.chain(peak.map(|p| p.1)));
    let peak = peak.filter(|p| (y.0..=y.1).contains(&p.1));
    Panel {
        latency,
        points,
        lines,
        peak,
        y,
    }
}

/// A value a log axis can show.
fn valid(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// The least and greatest of the valid `values`.
fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let mut valid_values = values.filter(|&v| valid(v));
    let first = valid_values.next()?;
    Some(valid_values.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
}

/// A panel's y axis: the measured range, stretched to the predictions
/// but at most [`WIDEN`] times beyond it either way, with room around.
fn y_range(measured: &[f64], predicted: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let (lo, hi) = bounds(measured.iter().copied())
        .or_else(|| bounds(predicted.clone()))
        .unwrap_or((1.0, 1.0));
    let clamped = predicted.map(|v| v.clamp(lo / WIDEN, hi * WIDEN));
    let (p_lo, p_hi) = bounds(clamped).unwrap_or((lo, hi));
    (lo.min(p_lo) / PAD, hi.max(p_hi) * PAD)
}

/// The parts of a line on log-log axes that lie between `lo` and `hi`,
/// cut where it crosses either (found in log space); a point that no log
/// axis can show breaks it.
fn clip(points: &[(f64, f64)], (lo, hi): (f64, f64)) -> Vec<Vec<(f64, f64)>> {
    let (lo, hi) = (lo.ln(), hi.ln());
    let mut parts = vec![Vec::new()];
    for pair in points.windows(2) {
        let [(xa, ya), (xb, yb)] = [pair[0], pair[1]];
        let (la, lb) = (ya.ln(), yb.ln());
        // Where along the segment (0 to 1) it is within the band.
        let (t0, t1) = if ![xa, ya, xb, yb].into_iter().all(valid) {
            (1.0, 0.0)
        } else if la == lb {
            if (lo..=hi).contains(&la) {
                (0.0, 1.0)
            } else {
                (1.0, 0.0)
            }
        } else {
            let (t_lo, t_hi) = ((lo - la) / (lb - la), (hi - la) / (lb - la));
            (t_lo.min(t_hi).max(0.0), t_lo.max(t_hi).min(1.0))
        };
        let part = parts.last_mut().expect("a part");
        if t0 > t1 {
            if !part.is_empty() {
                parts.push(Vec::new());
            }
            continue;
        }
        let at = |t: f64| match t {
            0.0 | 1.0 => pair[t as usize],
            _ => (
                (xa.ln() * (1.0 - t) + xb.ln() * t).exp(),
                (la + (lb - la) * t).exp(),
            ),
        };
        if part.is_empty() {
            part.push(at(t0));
        }
        part.push(at(t1));
        if t1 < 1.0 {
            parts.push(Vec::new());
        }
    }
    parts.retain(|p| p.len() > 1);
    parts
}

/// Tick marks for a log axis from `lo` to `hi`: powers of ten, or 1-2-5
/// and finer steps between them where the range is short.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const STEPS: [&[f64]; 4] = [
        &[1.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
        &[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0],
    ];
    let decades = lo.log10().floor() as i32..=hi.log10().ceil() as i32;
    let mut ticks = Vec::new();
    for mantissas in STEPS {
        let at = |e: i32| mantissas.iter().map(move |m| m * 10f64.powi(e));
        let all = decades.clone().flat_map(at);
        ticks = all.filter(|t| (lo..=hi).contains(t)).collect();
        if ticks.len() >= 4 {
            break;
        }
    }
    let stride = ticks.len().div_ceil(10).max(1);
    ticks.into_iter().step_by(stride).collect()
}

/// Tick marks for concurrency: powers of two up to `hi`, fewer if many.
fn power_ticks(hi: f64) -> Vec<f64> {
    let powers = (0..64).map(|k| 2f64.powi(k));
    let ticks: Vec<f64> = powers.take_while(|&t| t <= hi).collect();
    let stride = ticks.len().div_ceil(10).max(1);
    ticks.into_iter().step_by(stride).collect()
}

/// `v` to three significant digits, without trailing zeros.
fn sig(v: f64) -> String {
    if !valid(v.abs()) {
        return format!("{v}");
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

fn ms(d: std::time::Duration) -> String {
    format!("{}ms", sig(d.as_secs_f64() * 1e3))
}

/// A shape's legend label: its parameters and error, "(twin)" if chosen.
fn shape_label(fit: &ShapeFit, twin: bool) -> String {
    let shape = match fit.twin {
        Twin::Exponential {
            base,
            limit,
            factor,
            scale,
        } => format!(
            "exponential base={} limit={limit} factor={factor} scale={scale}",
            ms(base)
        ),
        Twin::Linear { base, slope } => format!("linear base={} slope={}", ms(base), ms(slope)),
        Twin::Pool {
            workers,
            service_time,
            ..
        } => format!("pool W={workers} S={}", ms(service_time)),
    };
    let chosen = if twin { " (twin)" } else { "" };
    format!("{shape}, error {:.3}{chosen}", fit.score.error)
}

/// The Universal Scalability Law's legend label.
fn usl_label(fit: &UslFit) -> String {
    let law = fit.usl;
    let kappa = match law.kappa {
        0.0 => "0".to_string(),
        k => format!("{k:.1e}"),
    };
    let (sigma, lambda, error) = (law.sigma, sig(law.lambda), fit.score.error);
    format!("USL σ={sigma:.3} κ={kappa} λ={lambda}/s, error {error:.3}")
}

/// A column of the legend: a glyph and its label each line.
type Entries = Vec<(Glyph, String)>;

/// The legend: the measurements' column and the predictions'.
fn legend(levels: &[Level], fits: &Fits, throughput: &Panel) -> (Entries, Entries) {
    let mean = "measured: mean latency, throughput".to_string();
    let spread = "measured: latency p50 to p99".to_string();
    let mut measured = vec![(Glyph::Mean, mean), (Glyph::Spread, spread)];
    let out = levels.iter().filter(|l| left_out(l)).count();
    if out > 0 {
        let share = sig(FitOptions::default().max_error_share * 100.0);
        let all = levels.len();
        let label = format!("left out: over {share} % errors ({out} of {all})");
        measured.push((Glyph::LeftOut, label));
    }
    if let Some((n, x)) = throughput.peak {
        measured.push((Glyph::Peak, format!("USL peak N*={}, {}/s", sig(n), sig(x))));
    }
    let labels = fits.shapes.iter().enumerate();
    let labels = labels.map(|(i, fit)| shape_label(fit, i == fits.best));
    let labels = labels.chain([usl_label(&fits.usl)]);
    let glyphs = throughput.lines.iter().map(|l| Glyph::Line(l.1, l.2, l.3));
    (measured, glyphs.zip(labels).collect())
}

fn draw_glyph<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    glyph: &Glyph,
    (x, y): (i32, i32),
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let middle = (x + 15, y);
    match *glyph {
        Glyph::Mean => area.draw(&Circle::new(middle, 4, BLACK.filled()))?,
        Glyph::Spread => {
            let bar = [(x + 15, y - 8), (x + 15, y + 8)];
            area.draw(&PathElement::new(bar, BLACK.mix(0.45).stroke_width(2)))?
        }
        Glyph::LeftOut => area.draw(&Circle::new(middle, 4, LEFT_OUT_COLOR.stroke_width(1)))?,
        Glyph::Line(color, width, dashed) => {
            let dashes: &[i32] = if dashed { &[0, 12, 24] } else { &[0] };
            let length = if dashed { 7 } else { 30 };
            for from in dashes {
                let dash = [(x + from, y), (x + from + length, y)];
                area.draw(&PathElement::new(dash, color.stroke_width(width)))?;
            }
        }
        Glyph::Peak => area.draw(&TriangleMarker::new(middle, 7, USL_COLOR.filled()))?,
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    x_hi: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (y_lo, y_hi) = panel.y;
    let (x_ticks, y_ticks) = (power_ticks(x_hi), log_ticks(y_lo, y_hi));
    let x_axis = (1.0 / PAD..x_hi).log_scale().with_key_points(x_ticks);
    let y_axis = (y_lo..y_hi).log_scale().with_key_points(y_ticks);
    let (caption, y_desc) = if panel.latency {
        ("latency against concurrency", "mean latency (ms)")
    } else {
        ("throughput against concurrency", "throughput (requests/s)")
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_axis, y_axis)?;
    chart
        .configure_mesh()
        .x_desc("concurrency N (clients)")
        .y_desc(y_desc)
        .x_label_formatter(&|v| sig(*v))
        .y_label_formatter(&|v| sig(*v))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    for Line(points, color, width, dashed) in &panel.lines {
        let style = color.stroke_width(*width);
        if let [(n, v)] = points[..] {
            // One level at N = 1: the prediction is a point.
            if (y_lo..=y_hi).contains(&v) {
                chart.draw_series([Cross::new((n, v), 6, style)])?;
            }
        }
        for part in clip(points, panel.y) {
            if *dashed {
                chart.draw_series(DashedLineSeries::new(part, 8, 5, style))?;
            } else {
                chart.draw_series(LineSeries::new(part, style))?;
            }
        }
    }
    if let Some((n, x)) = panel.peak {
        let drop = [(n, y_lo), (n, x)];
        chart.draw_series(DashedLineSeries::new(drop, 4, 4, USL_COLOR.stroke_width(1)))?;
        chart.draw_series([TriangleMarker::new((n, x), 7, USL_COLOR.filled())])?;
    }
    for &(n, value, spread, out) in &panel.points {
        let color = if out { LEFT_OUT_COLOR } else { BLACK };
        if let Some((p50, p99)) = spread.filter(|s| valid(s.0) && valid(s.1)) {
            let bar = [(n, p50), (n, p99)];
            chart.draw_series([PathElement::new(bar, color.mix(0.45).stroke_width(2))])?;
        }
        let style = ShapeStyle {
            filled: !out,
            ..color.into()
        };
        chart.draw_series([Circle::new((n, value), 4, style)])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::model::fit::{Family, Score, fit};

    const POOL: Twin = Twin::Pool {
        workers: 20,
        service_time: Duration::from_millis(50),
        distribution: Family::Exponential,
        queue: 1000,
    };

    /// A pool's levels at N = 1, 2, 4, ..., 256 from its own predictions
    /// (exponential spread unsaturated, narrower beyond), each figure off
    /// by its own seeded draw within 3 %, and one at 512 left out.
    fn probe(seed: u64) -> Vec<Level> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut off = || 1.0 + rng.random_range(-0.03..=0.03);
        let mut level = |n: u32| {
            let (p50, p99) = if n <= 20 { (0.69, 4.6) } else { (0.97, 1.5) };
            let r = POOL.latency(n);
            Level {
                concurrency: n,
                throughput: POOL.throughput(n) * off(),
                latency_mean_s: r * off(),
                latency_p50_s: r * p50 * off(),
                latency_p99_s: r * p99 * off(),
                error_share: if n == 512 { 0.2 } else { 0.0 },
            }
        };
        (0..=9).map(|k| level(1 << k)).collect()
    }

    /// Draws the chart into a scratch file and gives back its bytes.
    fn draw(levels: &[Level], fits: &Fits, name: &str, png: bool) -> Vec<u8> {
        let name = format!("retry-storm-fit-{}-{name}", std::process::id());
        let path = std::env::temp_dir().join(name);
        fit_chart(levels, fits, "calibration: a pool", &path, png).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    fn svg(levels: &[Level], fits: &Fits, name: &str) -> String {
        let text = String::from_utf8(draw(levels, fits, name, false)).unwrap();
        assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
        text
    }

    #[test]
    fn the_chart_shows_the_levels_every_fit_and_the_twin() {
        let levels = probe(7);
        let fits = fit(&levels, &FitOptions::default()).unwrap();
        assert_eq!((fits.best().twin.name(), fits.failing), ("pool", 1));
        let text = svg(&levels, &fits, "pool.svg");
        assert!(text.len() > 20_000, "{} bytes", text.len());
        let shapes = fits.shapes.iter().enumerate();
        let mut labels: Vec<_> = shapes
            .map(|(i, s)| shape_label(s, i == fits.best))
            .collect();
        labels.push(usl_label(&fits.usl));
        let peak = format!("USL peak N*={}, ", sig(fits.usl.usl.peak().unwrap()));
        let others = [
            "calibration: a pool",
            "left out: over 1 % errors (1 of 10)",
            "measured: mean latency, throughput",
            "measured: latency p50 to p99",
            "mean latency (ms)",
            "throughput (requests/s)",
            "concurrency N (clients)",
            &peak,
        ];
        for label in labels.iter().map(String::as_str).chain(others) {
            assert!(text.contains(label), "no {label:?}");
        }
        // The twin, and only it, is marked, thicker on each panel and in
        // the legend.
        let twin: Vec<_> = text.lines().filter(|l| l.ends_with("(twin)")).collect();
        assert!(
            matches!(twin[..], [l] if l.starts_with("pool W=20 S=")),
            "{twin:?}"
        );
        assert_eq!(text.matches(r#"stroke-width="4" points"#).count(), 3);
        // Every level on both panels, two glyphs in the legend; the one
        // left out hollow and grey in all three places.
        assert_eq!(text.matches("<circle").count(), 2 * levels.len() + 2);
        let hollow = r##"fill="none" stroke="#999999""##;
        let circles = text.lines().filter(|l| l.starts_with("<circle"));
        assert_eq!(circles.filter(|l| l.contains(hollow)).count(), 3);
        // As PNG: the size of the canvas, and far from a blank page.
        let png = std::io::Cursor::new(draw(&levels, &fits, "pool.png", true));
        let mut reader = png::Decoder::new(png).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!(info.width, WIDTH);
        assert!(info.height > PANEL_HEIGHT);
        let inked = pixels.chunks(3).filter(|p| p.iter().any(|&c| c < 128));
        assert!(inked.count() > 20_000);
    }

    #[test]
    fn a_wild_shape_one_level_or_a_flat_service_still_draw() {
        let levels = probe(3);
        let mut fits = fit(&levels, &FitOptions::default()).unwrap();
        // Doubling with every client: ten minutes (the curve's cap) soon.
        let wild = Twin::Exponential {
            base: Duration::from_millis(50),
            limit: 1,
            factor: 2.0,
            scale: 1.0,
        };
        fits.shapes[0].twin = wild;
        let latency = panel(&levels, &fits, true);
        let (_, hi) = latency.y;
        let measured = levels.iter().map(|l| l.latency_p99_s * 1e3);
        assert!(hi <= measured.fold(0.0, f64::max) * WIDEN * PAD * 1.000_001);
        let parts = clip(&latency.lines[0].0, latency.y);
        let (n, top) = *parts.last().unwrap().last().unwrap();
        assert!(
            (top / hi - 1.0).abs() < 1e-9 && n < 20.0,
            "leaves at the top"
        );
        svg(&levels, &fits, "wild.svg");
        // One level: each prediction a cross, on both panels.
        let text = svg(&levels[..1], &fits, "one.svg");
        assert_eq!(text.matches("<circle").count(), 2 + 1);
        for color in SHAPE_COLORS.iter().chain([&USL_COLOR]) {
            let stroke = format!("stroke=\"#{:02X}{:02X}{:02X}\"", color.0, color.1, color.2);
            let cross = |l: &&str| l.starts_with("<line") && l.contains(&stroke);
            assert_eq!(text.lines().filter(cross).count(), 2 * 2, "{stroke}");
        }
        // A service whose latency never moves: the axis still spans.
        let flat: Vec<Level> = (0..6)
            .map(|k| Level {
                concurrency: 1 << k,
                throughput: f64::from(1u32 << k) / 0.05,
                latency_mean_s: 0.05,
                latency_p50_s: 0.05,
                latency_p99_s: 0.05,
                error_share: 0.0,
            })
            .collect();
        let fits = fit(&flat, &FitOptions::default()).unwrap();
        let (lo, hi) = panel(&flat, &fits, true).y;
        assert!(lo < 50.0 && hi > 50.0 && log_ticks(lo, hi).len() >= 2);
        assert!(svg(&flat, &fits, "flat.svg").contains("κ=0 "));
    }

    #[test]
    fn a_line_is_cut_where_it_leaves_the_panel() {
        // Up from 1 to 100 and back down, in a panel from 2 to 50: in at
        // y = 2 and out at 50, in log space, on the way up and down.
        let line = [(1.0, 1.0), (10.0, 100.0), (100.0, 1.0)];
        let parts = clip(&line, (2.0, 50.0));
        let x = |y: f64| 10f64.powf(y.ln() / 100f64.ln());
        let want = [(x(2.0), 2.0), (x(50.0), 50.0)];
        assert_eq!(parts.len(), 2, "{parts:?}");
        for (got, want) in parts[0].iter().zip(want) {
            assert!((got.0 / want.0 - 1.0).abs() < 1e-9 && (got.1 / want.1 - 1.0).abs() < 1e-9);
        }
        let back_in = parts[1][0].0 * x(50.0) / 100.0;
        assert!((back_in - 1.0).abs() < 1e-9, "{parts:?}");
        // Inside all along: whole; outside, or no value: nothing.
        assert_eq!(clip(&line, (0.5, 200.0)), vec![line.to_vec()]);
        assert!(clip(&line, (200.0, 300.0)).is_empty());
        assert!(clip(&[(1.0, 5.0), (2.0, f64::INFINITY)], (1.0, 10.0)).is_empty());
    }

    #[test]
    fn labels_and_ticks_read_as_meant() {
        let mut fit = ShapeFit {
            twin: POOL,
            score: Score {
                latency: 0.034,
                throughput: 0.021,
                error: 0.028,
            },
            notes: Vec::new(),
        };
        if let Twin::Pool { service_time, .. } = &mut fit.twin {
            *service_time = Duration::from_micros(49_760);
        }
        let label = "pool W=20 S=49.8ms, error 0.028";
        assert_eq!(shape_label(&fit, false), label);
        assert_eq!(shape_label(&fit, true), format!("{label} (twin)"));
        let numbers = [49.76, 0.1 * 3.0, 1.0, 99.96, 12_345.0].map(sig);
        assert_eq!(numbers, ["49.8", "0.3", "1", "100", "12345"]);
        assert_eq!(log_ticks(0.9, 1100.0), [1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(40.0, 65.0), [40.0, 50.0, 60.0]);
        assert!(log_ticks(1e-6, 1e9).len() <= 10);
        assert_eq!(
            (power_ticks(5.0), power_ticks(1.25)),
            (vec![1.0, 2.0, 4.0], vec![1.0])
        );
        let many = sample(1000);
        assert_eq!(
            (many[29], many.last(), sample(1)),
            (30.0, Some(&1000.0), vec![1.0])
        );
    }
}
