//! A fault proxy's panel: its requests and answers per second, its
//! connections, held requests and listen queue, the intervals with its
//! fault on shaded, and the last row's figures.

use ratatui::text::Line as Text;

use super::charts::{Plot, axes};
use super::figures::{latency, pair, rate};
use super::state::Board;
use super::style::{Line, Look};
use crate::report::proxy::ProxyRow;

/// A series of the proxy's rows.
fn series(board: &Board, run: usize, now_ms: u64, title: &str, lines: &[Line]) -> Plot {
    let a = axes(board, run, now_ms);
    let rows = &board.runs[run].proxy;
    let value = |line: Line, r: &ProxyRow| match line {
        Line::Requests => r.requests_per_s,
        Line::Passed => r.answers_2xx_per_s,
        Line::Injected => r.injected_per_s + r.resets_per_s,
        Line::Connections => r.connections as f64,
        Line::Held => r.held as f64,
        _ => r.queued as f64,
    };
    Plot {
        title: title.into(),
        series: lines
            .iter()
            .map(|&line| {
                let points = rows
                    .iter()
                    .map(|r| {
                        let at = r.unix_ms.saturating_sub(a.origin_ms) as f64 / 1e3;
                        (at, value(line, r))
                    })
                    .collect();
                (line, points)
            })
            .collect(),
        shade: a.shade,
        x_max: a.x_max,
    }
}

/// Requests read, the target's 2xx answers passed back, and the fault's
/// own answers and resets, per second.
pub fn traffic(board: &Board, run: usize, now_ms: u64) -> Plot {
    let lines = [Line::Requests, Line::Passed, Line::Injected];
    series(board, run, now_ms, "requests per second", &lines)
}

/// Client connections open, requests held by the fault, and connections
/// waiting in the listen queue.
pub fn occupancy(board: &Board, run: usize, now_ms: u64) -> Plot {
    let lines = [Line::Connections, Line::Held, Line::Queue];
    series(board, run, now_ms, "connections, held, queued", &lines)
}

/// The last proxy row's figures.
pub fn proxy_figures(row: Option<&ProxyRow>, look: Look) -> Vec<Text<'static>> {
    let Some(r) = row else {
        return vec![Text::raw("waiting for the first report...")];
    };
    let fault = if r.faulted {
        Text::styled("fault         ON", look.bad())
    } else {
        Text::styled("fault         off", look.good())
    };
    let mut lines = vec![fault];
    lines.extend(
        [
            ("connections", r.connections),
            ("queued", r.queued),
            ("in flight", r.in_flight),
            ("held", r.held),
        ]
        .map(|(name, n)| pair(name, n.to_string())),
    );
    lines.extend(
        [
            ("requests", r.requests_per_s),
            ("2xx", r.answers_2xx_per_s),
            ("4xx", r.answers_4xx_per_s),
            ("5xx", r.answers_5xx_per_s),
            ("other", r.answers_other_per_s),
            ("injected", r.injected_per_s),
            ("resets", r.resets_per_s),
            ("upstream err.", r.upstream_errors_per_s),
            ("gone", r.gone_per_s),
        ]
        .map(|(name, v)| pair(name, rate(v))),
    );
    lines.extend(
        [
            ("latency p50", r.p50_ms),
            ("latency p99", r.p99_ms),
            ("latency max", r.max_ms),
        ]
        .map(|(name, ms)| pair(name, latency(ms))),
    );
    lines
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::report::status::Status;
    use crate::view::draw::rendered;
    use crate::view::feed::{Feed, Setup};
    use crate::view::state::Shade;

    /// A proxy by hand: the fault on in its third and fourth seconds.
    fn board() -> Board {
        let mut board = Board::new(
            Setup::Proxy {
                title: "listening on http://127.0.0.1:8081/api: fault proxy to ...".into(),
                interval: Duration::from_secs(1),
            },
            10_000,
        );
        board.own_key = Some("f: fault on/off".into());
        for second in 1..=5u64 {
            let faulted = (3..=4).contains(&second);
            let row = ProxyRow {
                unix_ms: 10_000 + second * 1_000,
                elapsed_s: second as f64,
                faulted,
                connections: 40,
                queued: if faulted { 120 } else { 0 },
                held: if faulted { 7 } else { 0 },
                requests_per_s: 100.0,
                answers_2xx_per_s: if faulted { 0.0 } else { 99.0 },
                injected_per_s: if faulted { 50.0 } else { 0.0 },
                p99_ms: Some(104.5),
                ..ProxyRow::default()
            };
            let status = Status::ProxyRow(row);
            board.apply(Feed::Status { run: 0, status }, |_, _| String::new());
        }
        board
    }

    #[test]
    fn the_fault_is_shaded_and_its_rates_charted() {
        let board = board();
        let plot = traffic(&board, 0, 16_000);
        assert_eq!(plot.shade, (Shade::Faulted, vec![(2.0, 4.0)]));
        let injected = &plot.series[2];
        assert_eq!(injected.0, Line::Injected);
        assert_eq!(injected.1[2], (3.0, 50.0));
        let held = &occupancy(&board, 0, 16_000).series[1];
        assert_eq!((held.0, held.1[3]), (Line::Held, (4.0, 7.0)));
    }

    #[test]
    fn the_screen_shows_the_figures_the_fault_and_its_key() {
        let text = rendered(&board(), 120, 40, 16_000);
        for shown in [
            " proxy ",
            "requests per second",
            "connections, held, queued",
            "░ fault on",
            "fault         off",
            "requests      100.00/s",
            "latency p99   104.5 ms",
            "f: fault on/off",
        ] {
            assert!(text.contains(shown), "{shown}: {text}");
        }
    }
}
