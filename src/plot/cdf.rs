//! The recovery-time distribution of a storm: for every case, the share of
//! its runs back at 90 % of their baseline by each time after the resume.
//! It needs no observation window; the window is drawn for reference.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawResult, PALETTE, draw_legend, register_font, render};

/// One case's curve: when each of its runs was back, `None` for a run
/// that never was.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryCurve<'a> {
    /// The case's name.
    pub name: &'a str,
    /// Seconds from resume to being back, one per run.
    pub back_s: Vec<Option<f64>>,
}

impl RecoveryCurve<'_> {
    /// The curve's steps: `(time, share of runs back by then)`, from
    /// `(0, share back at once)` to `(span_s, share back at the end)`.
    pub fn steps(&self, span_s: f64) -> Vec<(f64, f64)> {
        let n = self.back_s.len().max(1) as f64;
        let mut times: Vec<f64> = self.back_s.iter().flatten().copied().collect();
        times.sort_by(f64::total_cmp);
        let at_once = times.iter().filter(|&&t| t <= 0.0).count();
        let mut steps = vec![(0.0, at_once as f64 / n)];
        for (i, &t) in times.iter().enumerate().filter(|&(_, &t)| t > 0.0) {
            steps.push((t, i as f64 / n));
            steps.push((t, (i + 1) as f64 / n));
        }
        let end = steps.last().map_or(0.0, |s| s.1);
        steps.push((span_s, end));
        steps
    }
}

/// Draws the curves of every case into `path` (PNG with `png`): time after
/// resume across, to `span_s` (the last time a run could show it was
/// back); the observation window's end, `window_s`, as a dashed line if
/// it ends before.
pub fn recovery_cdf(
    path: &Path,
    curves: &[RecoveryCurve],
    window_s: f64,
    span_s: f64,
    png: bool,
) -> DrawResult {
    register_font()?;
    render!(path, png, |area| draw(area, curves, window_s, span_s));
    Ok(())
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    curves: &[RecoveryCurve],
    window_s: f64,
    span_s: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let runs = curves.iter().map(|c| c.back_s.len()).max().unwrap_or(0);
    // Room above the curves for the legend, a line per curve.
    let y_max = 1.1 + 0.065 * (curves.len() + 1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("recovery time: share of runs back at 90 % of the baseline ({runs} per case)"),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span_s, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds after the resume")
        .y_desc("share of runs back")
        .y_label_formatter(&|y| {
            if *y <= 1.0 {
                format!("{y:.1}")
            } else {
                String::new()
            }
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if window_s > 0.0 && window_s < span_s {
        chart
            .draw_series(DashedLineSeries::new(
                [(window_s, 0.0), (window_s, 1.0)],
                6,
                4,
                BLACK.mix(0.5).stroke_width(1),
            ))?
            .label("end of the observation window")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLACK.mix(0.5)));
    }
    for (i, curve) in curves.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let back = curve.back_s.iter().flatten().count();
        chart
            .draw_series(LineSeries::new(curve.steps(span_s), color.stroke_width(2)))?
            .label(format!(
                "{} ({back} of {} back)",
                curve.name,
                curve.back_s.len()
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_rise_by_one_run_at_each_recovery() {
        // Four runs: back at once, at 10 s and at 30 s; one never.
        let curve = RecoveryCurve {
            name: "x",
            back_s: vec![Some(30.0), None, Some(0.0), Some(10.0)],
        };
        assert_eq!(
            curve.steps(70.0),
            vec![
                (0.0, 0.25),
                (10.0, 0.25),
                (10.0, 0.5),
                (30.0, 0.5),
                (30.0, 0.75),
                (70.0, 0.75)
            ]
        );
        let never = RecoveryCurve {
            name: "y",
            back_s: vec![None, None],
        };
        assert_eq!(never.steps(70.0), vec![(0.0, 0.0), (70.0, 0.0)]);
    }
}
