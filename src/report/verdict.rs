//! The figures of one storm run, computed from its report rows: baseline
//! goodput, whether and when the system recovered, how long it took to
//! calm down and to reach half and most of its baseline again, peak
//! concurrency, wasted work, amplification and latency before and after.
//!
//! Pure: rows in, figures out. Times are Unix milliseconds, as in the CSV
//! files, so client and server rows line up. Without server rows (a storm
//! of a service the project did not write) the figures only the project's
//! server measures are not measured: none, never zero.

use serde::Serialize;

use super::rows::{ClientRow, ServerRow};

/// Share of the baseline goodput that counts as recovered.
pub const RECOVERED_SHARE: f64 = 0.9;
/// Consecutive intervals that make a recovery (or, below the line, a relapse).
pub const STREAK: usize = 3;
/// The server is calm again when its concurrency is at most this many times
/// its mean over the warm-up.
pub const CALM_FACTOR: f64 = 2.0;

/// When the protocol's phases happened, in Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Timeline {
    /// The client started.
    pub start_ms: u64,
    /// The server was stopped (SIGSTOP).
    pub stop_ms: u64,
    /// The server was resumed (SIGCONT).
    pub resume_ms: u64,
    /// The observation window ended: a recovery must start by then.
    pub end_ms: u64,
    /// Rows up to here (by their middle) confirm or refute a recovery that
    /// started within the window: the window's end and the intervals a
    /// streak starting at its end needs. The rows after it (the tail) only
    /// show when a run came back, for [`Figures::back_s`].
    pub confirm_ms: u64,
}

impl Timeline {
    /// The phases as planned from `start_ms`: a warm-up, a pause, the
    /// observation window, and the intervals that confirm a recovery.
    pub fn planned(
        start_ms: u64,
        warmup: std::time::Duration,
        pause: std::time::Duration,
        observe: std::time::Duration,
        confirmation: std::time::Duration,
    ) -> Timeline {
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        let stop_ms = start_ms + ms(warmup);
        let resume_ms = stop_ms + ms(pause);
        let end_ms = resume_ms + ms(observe);
        Timeline {
            start_ms,
            stop_ms,
            resume_ms,
            end_ms,
            confirm_ms: end_ms + ms(confirmation),
        }
    }
}

/// The figures of one run. All but `back_s` read the rows up to
/// [`Timeline::confirm_ms`]; `back_s` reads the tail after it too.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Mean OK/s over the warm-up, first interval excluded.
    pub baseline_ok_per_s: f64,
    /// Goodput came back to `RECOVERED_SHARE` of the baseline for `STREAK`
    /// consecutive intervals, the first of them starting within the
    /// observation window, and did not relapse (as many intervals below the
    /// line) afterwards.
    pub recovered: bool,
    /// Seconds from resume to the start of that recovery.
    pub recovery_s: Option<f64>,
    /// Seconds from resume to the start of the same kind of streak, with
    /// no relapse after it to the end of the run, whenever it starts
    /// (within the window or in the tail after it): when the run was back,
    /// for a distribution of recovery times that needs no window.
    pub back_s: Option<f64>,
    /// Highest server concurrency, at any admission (a burst that drains
    /// between two reports counts); none without server rows.
    pub peak_concurrency: Option<u64>,
    /// Requests the server worked on for clients that had gone: finished
    /// for nobody, dropped when it noticed (cancel mode), or still held at
    /// its last report; none without server rows.
    pub wasted: Option<u64>,
    /// The server's time on those requests, seconds: each one's time in the
    /// model, to its completion or drop, or to the last report if still
    /// held; none without server rows.
    pub wasted_s: Option<f64>,
    /// Attempts sent per logical request started, from the stop on.
    pub amplification: Option<f64>,
    /// OK-weighted mean of the intervals' p50 latency before the stop, ms.
    pub p50_before_ms: Option<f64>,
    /// OK-weighted mean of the intervals' p99 latency before the stop, ms.
    pub p99_before_ms: Option<f64>,
    /// The same after recovery (or after resume if it never recovered), ms.
    pub p50_after_ms: Option<f64>,
    /// The same for p99, ms.
    pub p99_after_ms: Option<f64>,
    /// Seconds from resume to the start of the first interval whose
    /// goodput reached half the baseline.
    pub to_50pct_s: Option<f64>,
    /// The same for 80 % of the baseline.
    pub to_80pct_s: Option<f64>,
    /// The best goodput of an interval after the resume, OK/s.
    pub best_ok_per_s: Option<f64>,
    /// Seconds from resume until the server's concurrency, past its peak
    /// after the resume, is back to at most [`CALM_FACTOR`] times its mean
    /// over the warm-up (the first report excluded).
    pub calm_s: Option<f64>,
    /// The server's concurrency at its last report (up to the
    /// confirmation).
    pub end_concurrency: Option<u64>,
    /// Open traffic: the most sessions the client held at a report (up to
    /// the confirmation); absent for a closed population.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_outstanding: Option<u64>,
    /// Open traffic: arrivals the client refused at the source because it
    /// held its bound of sessions (`--max-outstanding`), over the whole
    /// run; absent for a closed population.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_at_source: Option<u64>,
    /// HTTP/2: the most connections the client held open at a report (up
    /// to the confirmation), each carrying many of the attempts in
    /// flight; absent over HTTP/1.1, where each attempt in flight has a
    /// connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_connections: Option<u64>,
}

/// One client interval: its span and goodput.
struct Interval<'a> {
    start_ms: u64,
    end_ms: u64,
    row: &'a ClientRow,
}

impl Interval<'_> {
    /// The middle of the span. An interval belongs to the phase its middle
    /// falls in: a real client's report lands a few milliseconds after a
    /// phase change, a virtual one exactly on it, and both must be judged
    /// alike.
    fn mid_ms(&self) -> u64 {
        self.start_ms + (self.end_ms - self.start_ms) / 2
    }
}

/// Client rows with the span each covers (from the previous row's end, or
/// from the client's start for the first).
fn intervals<'a>(rows: &'a [ClientRow], start_ms: u64) -> Vec<Interval<'a>> {
    let mut previous = start_ms;
    rows.iter()
        .map(|row| {
            let interval = Interval {
                start_ms: previous.min(row.unix_ms),
                end_ms: row.unix_ms,
                row,
            };
            previous = row.unix_ms;
            interval
        })
        .collect()
}

/// Mean of `value` weighted by `weight` over rows where `value` exists.
fn weighted(rows: &[&ClientRow], value: impl Fn(&ClientRow) -> Option<f64>) -> Option<f64> {
    let (mut sum, mut total) = (0.0, 0.0);
    for row in rows {
        if let Some(v) = value(row) {
            sum += v * row.ok_per_s;
            total += row.ok_per_s;
        }
    }
    (total > 0.0).then(|| sum / total)
}

/// Finds the start of the recovery: the first interval that begins a run of
/// `STREAK` good intervals after which no run of `STREAK` bad ones follows
/// within the window. Returns its index.
fn recovery_index(good: &[bool]) -> Option<usize> {
    let mut candidate: Option<usize> = None;
    let mut run_good = 0;
    let mut run_bad = 0;
    for (i, &g) in good.iter().enumerate() {
        if g {
            run_good += 1;
            run_bad = 0;
            if run_good == STREAK && candidate.is_none() {
                candidate = Some(i + 1 - STREAK);
            }
        } else {
            run_bad += 1;
            run_good = 0;
            if run_bad == STREAK {
                // A relapse: any earlier recovery does not count.
                candidate = None;
            }
        }
    }
    candidate
}

/// How many of the server's rows lie before `ms` by their middle (between
/// the report before and this one; the first row by its own time), as a
/// client interval does: the real server's report a few milliseconds after
/// the confirmation still belongs before it, as the virtual one's on the
/// dot does. With rows and `ms` on whole report intervals, as in every
/// protocol of whole seconds, these are the rows at or before `ms`.
fn rows_before(server: &[ServerRow], ms: u64) -> usize {
    let mut previous = None;
    server
        .iter()
        .take_while(|r| {
            let start = previous.replace(r.unix_ms).unwrap_or(r.unix_ms);
            (start + r.unix_ms) / 2 < ms
        })
        .count()
}

/// Computes a run's figures from its rows.
pub fn figures(client: &[ClientRow], server: &[ServerRow], timeline: &Timeline) -> Figures {
    let all = intervals(client, timeline.start_ms);
    // The verdict and every figure but `back_s` read the run up to the
    // confirmation, so that the tail after it changes none of them.
    let spans: Vec<&Interval> = all
        .iter()
        .filter(|s| s.mid_ms() < timeline.confirm_ms)
        .collect();
    let server = &server[..rows_before(server, timeline.confirm_ms)];
    let measured = !server.is_empty();
    // Baseline: warm-up intervals, the first one excluded (it starts cold).
    let warm: Vec<&ClientRow> = spans
        .iter()
        .skip(1)
        .filter(|s| s.mid_ms() <= timeline.stop_ms)
        .map(|s| s.row)
        .collect();
    let baseline = if warm.is_empty() {
        0.0
    } else {
        warm.iter().map(|r| r.ok_per_s).sum::<f64>() / warm.len() as f64
    };

    // Intervals after the resume: to the confirmation for the verdict, to
    // the end of the tail for when the run was back.
    let since_resume = |ms: u64| ms.saturating_sub(timeline.resume_ms) as f64 / 1000.0;
    let resumed = |s: &&Interval| s.mid_ms() > timeline.resume_ms;
    let after: Vec<&Interval> = spans.iter().copied().filter(resumed).collect();
    let to_the_end: Vec<&Interval> = all.iter().filter(resumed).collect();
    let streak_start = |intervals: &[&Interval]| {
        let good: Vec<bool> = intervals
            .iter()
            .map(|s| baseline > 0.0 && s.row.ok_per_s >= RECOVERED_SHARE * baseline)
            .collect();
        recovery_index(&good).map(|i| intervals[i].start_ms)
    };
    let recovery = streak_start(&after).filter(|&ms| ms < timeline.end_ms);
    let recovery_s = recovery.map(since_resume);
    let back_s = streak_start(&to_the_end).map(since_resume);

    // Amplification over the stop and after: attempts sent per request
    // started, summed over the intervals (some start no request at all).
    let (mut sent, mut started) = (0.0, 0.0);
    for s in spans.iter().filter(|s| s.mid_ms() > timeline.stop_ms) {
        let secs = (s.end_ms - s.start_ms) as f64 / 1000.0;
        sent += s.row.sent_per_s * secs;
        started += s.row.requests_per_s * secs;
    }

    // Wasted work: what left the model for nobody, interval by interval,
    // and what it still held for nobody at the end.
    let (mut wasted, mut wasted_s) = (0.0, 0.0);
    let mut previous = None;
    for row in server {
        let secs = previous
            .map_or(row.elapsed_s, |p| row.elapsed_s - p)
            .max(0.0);
        wasted += row.abandoned_per_s * secs;
        wasted_s += row.abandoned_time_per_s * secs;
        previous = Some(row.elapsed_s);
    }
    if let Some(last) = server.last() {
        wasted += last.abandoned_held as f64;
        wasted_s += last.abandoned_held_s;
    }

    let reached = |share: f64| {
        after
            .iter()
            .find(|s| baseline > 0.0 && s.row.ok_per_s >= share * baseline)
            .map(|s| since_resume(s.start_ms))
    };
    let best_ok_per_s = after.iter().map(|s| s.row.ok_per_s).reduce(f64::max);

    let since = recovery.unwrap_or(timeline.resume_ms);
    let later: Vec<&ClientRow> = spans
        .iter()
        .filter(|s| s.start_ms >= since)
        .map(|s| s.row)
        .collect();
    Figures {
        baseline_ok_per_s: (baseline * 100.0).round() / 100.0,
        recovered: recovery.is_some(),
        recovery_s,
        back_s,
        peak_concurrency: server
            .iter()
            .map(|r| r.max_concurrency.max(r.concurrency))
            .max(),
        wasted: measured.then_some(wasted.round() as u64),
        wasted_s: measured.then_some((wasted_s * 10.0).round() / 10.0),
        amplification: (started > 0.0).then(|| ((sent / started) * 100.0).round() / 100.0),
        p50_before_ms: weighted(&warm, |r| r.p50_ms),
        p99_before_ms: weighted(&warm, |r| r.p99_ms),
        p50_after_ms: weighted(&later, |r| r.p50_ms),
        p99_after_ms: weighted(&later, |r| r.p99_ms),
        to_50pct_s: reached(0.5),
        to_80pct_s: reached(0.8),
        best_ok_per_s,
        calm_s: calm(server, timeline).map(since_resume),
        end_concurrency: server.last().map(|r| r.concurrency),
        peak_outstanding: spans.iter().filter_map(|s| s.row.outstanding).max(),
        refused_at_source: refused_at_source(&all),
        peak_connections: spans.iter().filter_map(|s| s.row.connections).max(),
    }
}

/// Arrivals refused at the source over every interval, if the client
/// sent open traffic.
fn refused_at_source(intervals: &[Interval]) -> Option<u64> {
    let mut refused = None;
    for s in intervals {
        let rate = s.row.refused_per_s?;
        let secs = (s.end_ms - s.start_ms) as f64 / 1000.0;
        *refused.get_or_insert(0.0) += rate * secs;
    }
    refused.map(|r: f64| r.round() as u64)
}

/// When the server is calm again after the resume: the first report, at or
/// after the highest concurrency since the resume, with a concurrency of at
/// most [`CALM_FACTOR`] times the warm-up's mean (and at least 1). Returns
/// that report's Unix milliseconds.
fn calm(server: &[ServerRow], timeline: &Timeline) -> Option<u64> {
    let warm: Vec<u64> = server
        .iter()
        .skip(1)
        .filter(|r| r.unix_ms <= timeline.stop_ms)
        .map(|r| r.concurrency)
        .collect();
    let mean = warm.iter().sum::<u64>() as f64 / warm.len().max(1) as f64;
    let line = (CALM_FACTOR * mean).max(1.0);
    let after: Vec<&ServerRow> = server
        .iter()
        .filter(|r| r.unix_ms > timeline.resume_ms)
        .collect();
    let peak = after.iter().map(|r| r.concurrency).max()?;
    let at_peak = after.iter().position(|r| r.concurrency == peak)?;
    after[at_peak..]
        .iter()
        .find(|r| r.concurrency as f64 <= line)
        .map(|r| r.unix_ms)
}

#[cfg(test)]
mod tests;
