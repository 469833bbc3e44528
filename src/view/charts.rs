//! The charts over time: which series each one holds, taken from a run's
//! rows, with its shaded spans, drawn as a ratatui chart.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::symbols::Marker;
use ratatui::text::Span as Text;
use ratatui::widgets::{Axis, Block, Chart, Dataset, GraphType, Widget};

use super::state::{Board, Shade};
use super::style::{Line, Look, SHADE};
use crate::report::rows::{ClientRow, ServerRow};

/// One chart: its series over time (seconds from the run's origin) and
/// the spans it shades.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// Its title.
    pub title: String,
    /// Each series and its points.
    pub series: Vec<(Line, Vec<(f64, f64)>)>,
    /// What the shaded spans mean, and the spans, in seconds.
    pub shade: (Shade, Vec<(f64, f64)>),
    /// The end of the time axis, seconds.
    pub x_max: f64,
}

/// Where the rows of `run` are on the time axis, and what it shades.
pub(super) struct Axes {
    /// Time zero, Unix milliseconds.
    pub(super) origin_ms: u64,
    /// The end of the time axis, seconds.
    pub(super) x_max: f64,
    /// What the shaded spans mean, and the spans, in seconds.
    pub(super) shade: (Shade, Vec<(f64, f64)>),
}

/// The axes of run `run`'s charts at `now_ms`.
pub(super) fn axes(board: &Board, run: usize, now_ms: u64) -> Axes {
    let origin_ms = board.origin_ms(run);
    let at = |ms: u64| ms.saturating_sub(origin_ms) as f64 / 1e3;
    let (shade, spans) = board.shaded(run, now_ms);
    Axes {
        origin_ms,
        x_max: board.x_max(run, now_ms),
        shade: (
            shade,
            spans.iter().map(|s| (at(s.from_ms), at(s.to_ms))).collect(),
        ),
    }
}

fn client_series(rows: &[ClientRow], origin_ms: u64, line: Line) -> (Line, Vec<(f64, f64)>) {
    let value = |r: &ClientRow| match line {
        Line::Ok => r.ok_per_s,
        Line::Errors => r.errors_per_s,
        Line::Timeouts => r.timeouts_per_s,
        _ => r.in_flight as f64,
    };
    let points = rows
        .iter()
        .map(|r| (r.unix_ms.saturating_sub(origin_ms) as f64 / 1e3, value(r)))
        .collect();
    (line, points)
}

fn server_series(
    rows: &[ServerRow],
    origin_ms: u64,
    line: Line,
) -> Option<(Line, Vec<(f64, f64)>)> {
    let value = |r: &ServerRow| -> Option<f64> {
        Some(match line {
            Line::Concurrency => r.concurrency as f64,
            Line::Queue => r.queue? as f64,
            Line::Completed => r.completed_per_s,
            Line::Abandoned => r.abandoned_per_s,
            _ => {
                r.shed_per_s
                    + [
                        r.refused_per_s,
                        r.limited_per_s,
                        r.rejected_per_s,
                        r.dropped_per_s,
                        r.failed_per_s,
                    ]
                    .iter()
                    .flatten()
                    .sum::<f64>()
            }
        })
    };
    let points: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.unix_ms.saturating_sub(origin_ms) as f64 / 1e3, value(r)?)))
        .collect();
    // A queue only where the server has one.
    (line != Line::Queue || !points.is_empty()).then_some((line, points))
}

/// The client's attempts per second: OK, errors, timeouts.
pub fn attempts(board: &Board, run: usize, now_ms: u64) -> Plot {
    let a = axes(board, run, now_ms);
    let rows = &board.runs[run].client;
    Plot {
        title: "attempts per second".into(),
        series: [Line::Ok, Line::Errors, Line::Timeouts]
            .into_iter()
            .map(|l| client_series(rows, a.origin_ms, l))
            .collect(),
        shade: a.shade,
        x_max: a.x_max,
    }
}

/// The client's attempts in flight.
pub fn in_flight(board: &Board, run: usize, now_ms: u64) -> Plot {
    let a = axes(board, run, now_ms);
    Plot {
        title: "attempts in flight".into(),
        series: vec![client_series(
            &board.runs[run].client,
            a.origin_ms,
            Line::InFlight,
        )],
        shade: a.shade,
        x_max: a.x_max,
    }
}

/// The server's concurrency, and its queue where it has one.
pub fn concurrency(board: &Board, run: usize, now_ms: u64) -> Plot {
    let a = axes(board, run, now_ms);
    let rows = &board.runs[run].server;
    let series: Vec<_> = [Line::Concurrency, Line::Queue]
        .into_iter()
        .filter_map(|l| server_series(rows, a.origin_ms, l))
        .collect();
    Plot {
        title: if series.len() > 1 {
            "server concurrency and queue".into()
        } else {
            "server concurrency".into()
        },
        series,
        shade: a.shade,
        x_max: a.x_max,
    }
}

/// The server's answers per second: completed, abandoned, turned away.
pub fn answers(board: &Board, run: usize, now_ms: u64) -> Plot {
    let a = axes(board, run, now_ms);
    let rows = &board.runs[run].server;
    Plot {
        title: "server answers per second".into(),
        series: [Line::Completed, Line::Abandoned, Line::Refused]
            .into_iter()
            .filter_map(|l| server_series(rows, a.origin_ms, l))
            .collect(),
        shade: a.shade,
        x_max: a.x_max,
    }
}

/// The smallest of 1, 2 and 5 times a power of ten at or above `v` (and
/// at least 1).
pub fn ceiling(v: f64) -> f64 {
    if v.is_nan() || v <= 1.0 {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&c| c >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * power)
}

/// A number for an axis: whole above 10, one decimal below; thousands
/// with a `k`.
pub fn number(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 10.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Seconds for the time axis: `45s`, `2m30s`.
pub fn clock(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s < 120 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Draws `plot` in `area` of `buf`, inside `block`.
pub fn render(plot: &Plot, block: Block<'_>, look: Look, area: Rect, buf: &mut Buffer) {
    let top = plot
        .series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let y_max = ceiling(top);
    // The shade first, so that the series draw over it: each span filled
    // from the axis to the top.
    let fills: Vec<[(f64, f64); 2]> = plot
        .shade
        .1
        .iter()
        .filter(|(from, to)| to > from)
        .map(|&(from, to)| [(from, y_max), (to.min(plot.x_max), y_max)])
        .collect();
    let mut datasets = Vec::new();
    for (i, fill) in fills.iter().enumerate() {
        let mut d = Dataset::default()
            .data(fill)
            .graph_type(GraphType::Area)
            .fill_to_y(0.0)
            .marker(Marker::Custom(SHADE))
            .style(look.shade());
        if i == 0 {
            d = d.name(format!("{SHADE} {}", plot.shade.0.name()));
        }
        datasets.push(d);
    }
    // The first series last, on top of the others: the one that matters
    // stays in sight where they meet (all at zero, say).
    for (line, points) in plot.series.iter().rev() {
        datasets.push(
            Dataset::default()
                .name(format!("{} {}", line.glyph(), line.name()))
                .data(points)
                .graph_type(GraphType::Line)
                .marker(line.marker())
                .style(look.line(*line)),
        );
    }
    let x_labels = [0.0, plot.x_max / 2.0, plot.x_max].map(|s| Text::raw(clock(s)));
    let y_labels = [0.0, y_max / 2.0, y_max].map(|v| Text::raw(number(v)));
    Chart::new(datasets)
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([0.0, plot.x_max])
                .labels(x_labels)
                .style(look.dim()),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y_max])
                .labels(y_labels)
                .style(look.dim()),
        )
        .hidden_legend_constraints((Constraint::Ratio(2, 3), Constraint::Ratio(2, 3)))
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status::Status;
    use crate::view::feed::{Feed, Setup};
    use std::time::Duration;

    #[test]
    fn axes_end_on_round_numbers() {
        assert_eq!(ceiling(0.0), 1.0);
        assert_eq!(ceiling(f64::NAN), 1.0);
        assert_eq!(ceiling(3.0), 5.0);
        assert_eq!(ceiling(100.0), 100.0);
        assert_eq!(ceiling(101.0), 200.0);
        assert_eq!(ceiling(4961.0), 5000.0);
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(50.0), "50");
        assert_eq!(number(20_000.0), "20k");
        assert_eq!(clock(45.2), "45s");
        assert_eq!(clock(150.0), "2m30s");
    }

    fn server_board(queue: bool) -> Board {
        let mut board = Board::new(
            Setup::Server {
                title: String::new(),
                interval: Duration::from_secs(1),
            },
            0,
        );
        for (at, concurrency) in [(11_000, 10), (12_000, 12), (30_000, 4_000)] {
            let row = ServerRow {
                unix_ms: at,
                elapsed_s: (at - 10_000) as f64 / 1e3,
                concurrency,
                completed_per_s: 90.0,
                queue: queue.then_some(3),
                ..ServerRow::default()
            };
            board.apply(
                Feed::Status {
                    run: 0,
                    status: Status::ServerRow(row),
                },
                |_, _| String::new(),
            );
        }
        board
    }

    #[test]
    fn a_server_chart_has_its_queue_only_with_one_and_shades_its_silence() {
        let plain = concurrency(&server_board(false), 0, 31_000);
        assert_eq!(plain.series.len(), 1);
        assert_eq!(
            plain.series[0].1,
            vec![(1.0, 10.0), (2.0, 12.0), (20.0, 4000.0)]
        );
        assert_eq!(plain.shade, (Shade::Stopped, vec![(2.0, 19.0)]));
        let pool = concurrency(&server_board(true), 0, 31_000);
        assert_eq!(pool.series[1].0, Line::Queue);
        assert_eq!(answers(&server_board(false), 0, 31_000).series.len(), 3);
    }

    #[test]
    fn a_chart_draws_its_series_its_shade_and_its_legend() {
        let plot = concurrency(&server_board(false), 0, 31_000);
        let area = Rect::new(0, 0, 60, 14);
        let mut buf = Buffer::empty(area);
        render(
            &plot,
            Block::bordered().title(plot.title.clone()),
            Look { colour: false },
            area,
            &mut buf,
        );
        let text: String = buf.content().iter().map(|c| c.symbol()).collect();
        assert!(text.contains("server concurrency"), "{text}");
        assert!(
            text.contains("░ stopped") && text.contains("⠒ concurrency"),
            "{text}"
        );
        assert!(
            text.matches('░').count() > 20,
            "the silence is shaded: {text}"
        );
        assert!(text.contains("5000") && text.contains("21s"), "{text}");
    }
}
