//! The figures of the last interval, as lines of text: a client's, a
//! server's, and a storm run's with its verdict so far.

use std::time::Duration;

use ratatui::text::Line as Text;

use super::forming::{Tone, verdict};
use super::state::Board;
use super::style::Look;
use crate::report::rows::{ClientRow, ServerRow, format_delay};

fn rate(v: f64) -> String {
    format!("{v:.2}/s")
}

fn latency(v: Option<f64>) -> String {
    v.map_or("-".into(), |ms| format!("{ms:.1} ms"))
}

fn pair(name: &str, value: String) -> Text<'static> {
    Text::raw(format!("{name:<14}{value}"))
}

/// The last client row's figures.
pub fn client_figures(row: Option<&ClientRow>) -> Vec<Text<'static>> {
    let Some(r) = row else {
        return vec![Text::raw("waiting for the first report...")];
    };
    let mut lines = vec![
        pair("OK", rate(r.ok_per_s)),
        pair("errors", rate(r.errors_per_s)),
        pair("timeouts", rate(r.timeouts_per_s)),
        pair("retries", rate(r.retries_per_s)),
        pair("gave up", rate(r.gave_up_per_s)),
        pair("throttled", rate(r.throttled_per_s)),
        pair("in flight", r.in_flight.to_string()),
        pair(
            "attempts/req",
            r.attempts_per_request
                .map_or("-".into(), |a| format!("{a:.2}")),
        ),
        pair("latency p50", latency(r.p50_ms)),
        pair("latency p99", latency(r.p99_ms)),
        pair("latency max", latency(r.max_ms)),
    ];
    lines.extend(open_figures(r));
    lines
}

/// Open traffic's figures of a client row: the sessions held and the
/// arrivals refused at the source (none for a closed population).
fn open_figures(r: &ClientRow) -> Vec<Text<'static>> {
    match (r.outstanding, r.refused_per_s) {
        (Some(held), Some(refused)) => vec![
            pair("outstanding", held.to_string()),
            pair("refused", rate(refused)),
        ],
        _ => Vec::new(),
    }
}

/// The last server row's figures.
pub fn server_figures(row: Option<&ServerRow>) -> Vec<Text<'static>> {
    let Some(r) = row else {
        return vec![Text::raw("waiting for the first report...")];
    };
    let mut lines = vec![
        pair(
            "concurrency",
            format!("{} (max {})", r.concurrency, r.max_concurrency),
        ),
        pair(
            "delay",
            format_delay(Duration::from_secs_f64(r.last_delay_ms.max(0.0) / 1e3)),
        ),
        pair("completed", rate(r.completed_per_s)),
        pair("abandoned", rate(r.abandoned_per_s)),
        pair("shed", rate(r.shed_per_s)),
    ];
    if let (Some(queue), Some(max), Some(busy)) = (r.queue, r.max_queue, r.busy) {
        lines.push(pair("queue", format!("{queue} (max {max})")));
        lines.push(pair("busy", busy.to_string()));
    }
    for (name, v) in [
        ("refused", r.refused_per_s),
        ("limited", r.limited_per_s),
        ("rejected", r.rejected_per_s),
        ("dropped", r.dropped_per_s),
        ("failed", r.failed_per_s),
    ] {
        if let Some(v) = v {
            lines.push(pair(name, rate(v)));
        }
    }
    if let Some(limit) = r.limit {
        lines.push(pair("limit", limit.to_string()));
    }
    lines.push(pair("held for gone", r.abandoned_held.to_string()));
    lines
}

/// A storm run's last interval and its verdict so far.
pub fn storm_figures(board: &Board, run: usize, look: Look, now_ms: u64) -> Vec<Text<'static>> {
    let state = &board.runs[run];
    let mut lines = Vec::new();
    if let Some(r) = state.client.last() {
        lines.push(pair("OK", rate(r.ok_per_s)));
        lines.push(pair("errors", rate(r.errors_per_s)));
        lines.push(pair("timeouts", rate(r.timeouts_per_s)));
        lines.push(pair("retries", rate(r.retries_per_s)));
        lines.push(pair("latency p50", latency(r.p50_ms)));
        lines.push(pair("latency p99", latency(r.p99_ms)));
        lines.push(pair("latency max", latency(r.max_ms)));
        lines.extend(open_figures(r));
    }
    if let Some(r) = state.server.last() {
        lines.push(pair("concurrency", r.concurrency.to_string()));
        if let Some(queue) = r.queue {
            lines.push(pair("queue", queue.to_string()));
        }
    }
    let Some(v) = verdict(board, run, now_ms) else {
        return lines;
    };
    let f = &v.figures;
    let style = match v.tone {
        Tone::Good => look.good(),
        Tone::Bad => look.bad(),
        Tone::Open => look.strong(),
    };
    lines.push(Text::raw(""));
    lines.push(Text::styled("verdict so far", look.strong()));
    lines.push(Text::styled(v.headline, style));
    lines.push(pair("baseline", format!("{:.1} OK/s", f.baseline_ok_per_s)));
    lines.push(pair("peak conc.", f.peak_concurrency.to_string()));
    lines.push(pair(
        "amplification",
        f.amplification.map_or("-".into(), |a| format!("{a:.2}")),
    ));
    lines.push(pair("p99 before", latency(f.p99_before_ms)));
    lines.push(pair("p99 after", latency(f.p99_after_ms)));
    lines.push(pair("wasted", f.wasted.to_string()));
    lines
}
