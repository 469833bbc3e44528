//! The figures of the last interval, as lines of text: a client's, a
//! server's (a tier's with its calls inward), and a storm run's with its
//! verdict so far and its tiers'.

use std::time::Duration;

use ratatui::text::Line as Text;

use super::forming::{Tone, verdict};
use super::state::{Board, RunState, TierState};
use super::style::Look;
use crate::report::rows::{ClientRow, ServerRow, format_delay};

/// A rate, as the figures show it.
pub(super) fn rate(v: f64) -> String {
    format!("{v:.2}/s")
}

/// A latency, as the figures show it.
pub(super) fn latency(v: Option<f64>) -> String {
    v.map_or("-".into(), |ms| format!("{ms:.1} ms"))
}

/// A figure's line: its name, then its value.
pub(super) fn pair(name: &str, value: String) -> Text<'static> {
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
fn server_figures(row: Option<&ServerRow>) -> Vec<Text<'static>> {
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

/// A server's figures, and, as a tier, its calls' below them.
pub fn tier_figures(run: &RunState, look: Look) -> Vec<Text<'static>> {
    let mut lines = server_figures(run.server.last());
    if let Some(r) = run.calls.last() {
        lines.push(Text::raw(""));
        lines.push(Text::styled("calls inward", look.strong()));
        lines.extend(calls_figures(r));
    }
    lines
}

/// A tier's calls inward, from its last row of them: each call is a
/// session of one request, so that the calls in flight are the sessions
/// held and the failed ones those given up (answered 503 or 504).
fn calls_figures(r: &ClientRow) -> Vec<Text<'static>> {
    vec![
        pair("calls", rate(r.requests_per_s)),
        pair("OK", rate(r.ok_per_s)),
        pair("failed", rate(r.gave_up_per_s)),
        pair("attempts", rate(r.sent_per_s)),
        pair("retries", rate(r.retries_per_s)),
        pair("in flight", r.outstanding.unwrap_or(0).to_string()),
        pair("callers gone", r.gone_per_s.map_or("-".into(), rate)),
        pair("latency p99", latency(r.p99_ms)),
    ]
}

/// A storm run's tiers, from the client's side inward, three lines each:
/// the tier's concurrency (its name's line, in bold), its calls' OK and
/// failed rates, and the calls in flight and whose caller had gone.
fn storm_tiers(tiers: &[TierState], look: Look) -> Vec<Text<'static>> {
    let mut lines = Vec::new();
    for (i, tier) in tiers.iter().enumerate() {
        let concurrency = tier
            .server
            .last()
            .map_or("-".into(), |r| r.concurrency.to_string());
        lines.push(Text::styled(
            format!("{:<14}concurrency {concurrency}", format!("tier {}", i + 1)),
            look.strong(),
        ));
        let Some(c) = tier.calls.last() else {
            continue;
        };
        lines.push(pair(
            "calls",
            format!("{:.1} OK/s, {:.1} failed/s", c.ok_per_s, c.gave_up_per_s),
        ));
        let gone = c.gone_per_s.map_or("-".into(), |g| format!("{g:.1}/s"));
        lines.push(pair(
            "in flight",
            format!("{}, callers gone {gone}", c.outstanding.unwrap_or(0)),
        ));
    }
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
        // Through a chain, the server is its backend.
        let name = if state.tiers.is_empty() {
            "concurrency"
        } else {
            "backend conc."
        };
        lines.push(pair(name, r.concurrency.to_string()));
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
    let count = |c: Option<u64>| c.map_or("-".into(), |c| c.to_string());
    lines.push(pair("peak conc.", count(f.peak_concurrency)));
    lines.push(pair(
        "amplification",
        f.amplification.map_or("-".into(), |a| format!("{a:.2}")),
    ));
    lines.push(pair("p99 before", latency(f.p99_before_ms)));
    lines.push(pair("p99 after", latency(f.p99_after_ms)));
    lines.push(pair("wasted", count(f.wasted)));
    if !state.tiers.is_empty() {
        lines.push(Text::raw(""));
        lines.extend(storm_tiers(&state.tiers, look));
    }
    lines
}
