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
mod tests {
    use super::*;

    /// Warm-up 0-5 s, pause 5-10 s, window to 20 s, confirmed to 22 s
    /// (two of the tests' 1 s intervals); the tail after it.
    fn timeline() -> Timeline {
        Timeline {
            start_ms: 0,
            stop_ms: 5_000,
            resume_ms: 10_000,
            end_ms: 20_000,
            confirm_ms: 22_000,
        }
    }

    fn run(ok: &[f64]) -> Figures {
        figures(&ClientRow::each_second(ok), &[], &timeline())
    }

    const DOWN: f64 = 0.0;

    #[test]
    fn recovers() {
        let mut ok = vec![50.0, 100.0, 100.0, 100.0, 100.0];
        ok.extend([DOWN; 5]);
        // After resume: 10, 40, 95 (starts at 12 s), 95, 100 ...
        ok.extend([
            10.0, 40.0, 95.0, 95.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0,
        ]);
        let f = run(&ok);
        assert_eq!(
            f.baseline_ok_per_s, 100.0,
            "the cold first interval is excluded"
        );
        assert!(f.recovered);
        assert_eq!(f.recovery_s, Some(2.0));
        assert_eq!(f.p99_before_ms, Some(110.0));
    }

    #[test]
    fn never_recovers() {
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 15]);
        let f = run(&ok);
        assert!(!f.recovered);
        assert_eq!(f.recovery_s, None);
        assert_eq!(f.p99_after_ms, None);
    }

    #[test]
    fn two_good_intervals_are_not_a_recovery() {
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 5]);
        ok.extend([DOWN, 95.0, 95.0, DOWN, DOWN, DOWN, DOWN, DOWN, 95.0, 95.0]);
        assert!(!run(&ok).recovered);
    }

    #[test]
    fn recovers_then_relapses() {
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 5]);
        // Good for three intervals, then down for the rest of the window.
        ok.extend([95.0, 95.0, 95.0, DOWN, DOWN, DOWN, DOWN, DOWN, DOWN, DOWN]);
        let f = run(&ok);
        assert!(!f.recovered, "a relapse that lasts cancels the recovery");
        // Back again after the relapse: the recovery counts from the return.
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 5]);
        ok.extend([95.0, 95.0, 95.0, DOWN, DOWN, DOWN, 95.0, 95.0, 95.0, 95.0]);
        let f = run(&ok);
        assert!(f.recovered);
        assert_eq!(f.recovery_s, Some(6.0));
    }

    #[test]
    fn a_short_dip_after_recovery_is_noise() {
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 5]);
        ok.extend([95.0, 95.0, 95.0, 80.0, 80.0, 95.0, 95.0, 95.0, 95.0, 95.0]);
        let f = run(&ok);
        assert!(f.recovered);
        assert_eq!(f.recovery_s, Some(0.0));
    }

    #[test]
    fn noisy_baseline_is_averaged() {
        // Baseline intervals 80..120 around a mean of 100: 90 % is 90.
        let mut ok = vec![10.0, 80.0, 120.0, 90.0, 110.0];
        ok.extend([DOWN; 5]);
        ok.extend([89.0, 91.0, 89.0, 91.0, 92.0, 95.0, 90.0, 99.0, 101.0, 97.0]);
        let f = run(&ok);
        assert_eq!(f.baseline_ok_per_s, 100.0);
        assert!(f.recovered);
        // 89 is below 90: the streak starts with the 91 at 13 s.
        assert_eq!(f.recovery_s, Some(3.0));
    }

    #[test]
    fn a_recovery_must_start_within_the_window() {
        // Window ends at 20 s; the rows after it only confirm.
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 15]);
        ok.extend([100.0; 5]);
        let late = run(&ok);
        assert!(!late.recovered, "starting at 20 s is too late");
        assert_eq!(late.back_s, Some(10.0), "but it was back then");
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 14]);
        ok.extend([100.0; 5]);
        let f = run(&ok);
        assert!(f.recovered, "starting at 19 s, confirmed after the window");
        assert_eq!(f.recovery_s, Some(9.0));
    }

    #[test]
    fn the_tail_shows_when_a_run_came_back_and_changes_no_verdict() {
        // Back from 12 s, confirmed by 22 s; the tail after it falls to
        // nothing for good: still recovered, but not back at the end.
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 7]);
        ok.extend([100.0; 10]);
        let judged = run(&ok);
        ok.extend([DOWN; 8]);
        let relapsed = run(&ok);
        assert!(judged.recovered && relapsed.recovered);
        assert_eq!(relapsed.recovery_s, Some(2.0));
        assert_eq!((judged.back_s, relapsed.back_s), (Some(2.0), None));
        // The server's rows in the tail change no figure either: a peak of
        // 5,000 and 9,000 requests held for nobody at its last report.
        let mut rows = server(&[10; 30]);
        rows[25].max_concurrency = 5_000;
        rows[29].abandoned_held = 9_000;
        let f = figures(&ClientRow::each_second(&ok), &rows, &timeline());
        assert_eq!((f.peak_concurrency, f.wasted), (Some(10), Some(0)));
        assert_eq!(f.end_concurrency, Some(10));
    }

    #[test]
    fn a_report_landing_just_after_a_phase_change_belongs_to_the_phase_before() {
        // A real client reports a few milliseconds late: the row ending at
        // 5.012 s is a warm-up interval, the one at 10.012 s a pause one.
        let mut ok = vec![50.0, 100.0, 100.0, 100.0, 100.0];
        ok.extend([DOWN; 5]);
        ok.extend([100.0; 10]);
        let mut rows = ClientRow::each_second(&ok);
        for row in &mut rows {
            row.unix_ms += 12;
        }
        rows[5].sent_per_s = 900.0;
        rows[4].sent_per_s = 0.0;
        let f = figures(&rows, &[], &timeline());
        assert_eq!(f.baseline_ok_per_s, 100.0);
        assert_eq!(f.recovery_s, Some(0.012));
        // From the stop: 15 intervals of 100 started, one of them (not the
        // warm-up's last) with 900 sent: 2300 / 1500.
        assert_eq!(f.amplification, Some(1.53));
    }

    #[test]
    fn open_traffic_counts_its_peak_of_sessions_and_its_refusals() {
        let closed = run(&[100.0; 25]);
        assert_eq!(
            (closed.peak_outstanding, closed.refused_at_source),
            (None, None)
        );
        let mut rows = ClientRow::each_second(&[100.0; 25]);
        for (i, row) in rows.iter_mut().enumerate() {
            row.outstanding = Some(10 * i as u64);
            row.refused_per_s = Some(if i >= 20 { 2.5 } else { 0.0 });
        }
        let f = figures(&rows, &[], &timeline());
        // Held up to the confirmation (rows ending at 1 s to 22 s);
        // refused over every second: 5 intervals of 2.5 a second.
        assert_eq!(f.peak_outstanding, Some(210));
        assert_eq!(f.refused_at_source, Some(13));
        let json = serde_json::to_string(&closed).unwrap();
        assert!(!json.contains("outstanding") && !json.contains("refused"));
    }

    #[test]
    fn the_times_to_half_and_most_of_the_baseline_and_the_best_rate() {
        let mut ok = vec![50.0, 100.0, 100.0, 100.0, 100.0];
        ok.extend([DOWN; 5]);
        // After resume (intervals starting at 10, 11, ... s): 10, 40, 60,
        // 85, 120, then 95 for the rest.
        ok.extend([10.0, 40.0, 60.0, 85.0, 120.0, 95.0, 95.0, 95.0, 95.0, 95.0]);
        let f = run(&ok);
        assert_eq!(f.to_50pct_s, Some(2.0), "60 is the first at 50 or more");
        assert_eq!(f.to_80pct_s, Some(3.0));
        assert_eq!(f.best_ok_per_s, Some(120.0));
        let mut ok = vec![100.0; 5];
        ok.extend([DOWN; 15]);
        let f = run(&ok);
        assert_eq!((f.to_50pct_s, f.to_80pct_s), (None, None));
        assert_eq!(f.best_ok_per_s, Some(0.0));
    }

    /// Server rows one second apart from t = 1 s with these concurrencies.
    fn server(concurrency: &[u64]) -> Vec<ServerRow> {
        concurrency
            .iter()
            .enumerate()
            .map(|(i, &c)| ServerRow {
                unix_ms: 1_000 * (i as u64 + 1),
                elapsed_s: i as f64 + 1.0,
                concurrency: c,
                last_delay_ms: 100.0,
                completed_per_s: 0.0,
                abandoned_per_s: 0.0,
                shed_per_s: 0.0,
                max_concurrency: c,
                abandoned_held: 0,
                abandoned_held_s: 0.0,
                abandoned_time_per_s: 0.0,
                ..ServerRow::default()
            })
            .collect()
    }

    #[test]
    fn a_server_report_just_after_the_confirmation_still_counts() {
        // Concurrency 10 at 1 s, 20 at 2 s, ...: 220 at 22 s, the
        // confirmation. Reported on the dot, as the virtual server does, or
        // 60 ms late, as the real one may: the row at 22.06 s covers
        // 21.06-22.06 s, most of it before the confirmation; the one at
        // 23.06 s does not count.
        let growing: Vec<u64> = (1..=25).map(|i| 10 * i).collect();
        let ok = ClientRow::each_second(&[100.0; 25]);
        let f = figures(&ok, &server(&growing), &timeline());
        assert_eq!(
            (f.peak_concurrency, f.end_concurrency),
            (Some(220), Some(220))
        );
        let mut late = server(&growing);
        for row in &mut late {
            row.unix_ms += 60;
            // Everything held is for clients that have gone: wasted.
            row.abandoned_held = row.concurrency;
        }
        let f = figures(&ok, &late, &timeline());
        assert_eq!(
            (f.peak_concurrency, f.end_concurrency),
            (Some(220), Some(220))
        );
        assert_eq!(f.wasted, Some(220), "held at the last row counted");
    }

    #[test]
    fn calm_comes_after_the_peak_that_follows_the_resume() {
        // Warm-up rows at 2..5 s average 10 (the first, at 1 s, is cold):
        // calm is at most 20. Stopped 5-10 s; after resume (11 s on) the
        // concurrency rises to 900 at 12 s and falls: 25 at 14 s, 18 at
        // 15 s.
        let rows = server(&[
            90, 8, 12, 10, 10, 10, 10, 10, 10, 10, 5, 900, 300, 25, 18, 10, 10,
        ]);
        let f = figures(&ClientRow::each_second(&[100.0; 17]), &rows, &timeline());
        assert_eq!(f.calm_s, Some(5.0));
        assert_eq!(f.end_concurrency, Some(10));
        assert_eq!(f.peak_concurrency, Some(900));
        // A storm that never drains is never calm.
        let rows = server(&[10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 4000, 5000, 6000]);
        let f = figures(&ClientRow::each_second(&[100.0; 13]), &rows, &timeline());
        assert_eq!(f.calm_s, None);
        assert_eq!(f.end_concurrency, Some(6000));
        // Without server rows (a target's storm) nothing of the server's is
        // measured: none, never zero.
        let f = figures(&ClientRow::each_second(&[100.0; 13]), &[], &timeline());
        assert_eq!((f.calm_s, f.end_concurrency), (None, None));
        assert_eq!(
            (f.peak_concurrency, f.wasted, f.wasted_s),
            (None, None, None)
        );
        assert_eq!(f.baseline_ok_per_s, 100.0, "the client's figures stay");
    }

    #[test]
    fn server_figures_and_amplification() {
        let server: Vec<ServerRow> = (1..=20)
            .map(|i| ServerRow {
                unix_ms: i * 1000,
                elapsed_s: i as f64,
                concurrency: if i == 12 { 5000 } else { 10 },
                last_delay_ms: 100.0,
                completed_per_s: 100.0,
                abandoned_per_s: if i > 10 { 50.0 } else { 0.0 },
                shed_per_s: 0.0,
                max_concurrency: if i == 12 { 5000 } else { 10 },
                abandoned_held: 0,
                abandoned_held_s: 0.0,
                abandoned_time_per_s: if i > 10 { 25.0 } else { 0.0 },
                ..ServerRow::default()
            })
            .collect();
        let mut rows = ClientRow::each_second(&[100.0; 20]);
        for row in rows.iter_mut().skip(5) {
            row.sent_per_s = 300.0;
        }
        // An interval that starts no request still sends attempts.
        rows[12].requests_per_s = 0.0;
        rows[12].attempts_per_request = None;
        let f = figures(&rows, &server, &timeline());
        assert_eq!(f.peak_concurrency, Some(5000));
        assert_eq!(f.wasted, Some(500));
        // 10 one-second rows with 25 s of wasted time each.
        assert_eq!(f.wasted_s, Some(250.0));
        // 15 intervals from the stop: 4500 sent over 1400 started.
        assert_eq!(f.amplification, Some(3.21));
    }

    #[test]
    fn a_burst_between_reports_and_work_still_held_at_the_end_count() {
        // A 3 s pause: about 470 requests burst in at the resume and drain
        // within the second, so every report sees 10 in flight; the
        // interval's maximum holds the burst.
        let mut rows = server(&[10; 12]);
        rows[10].max_concurrency = 470;
        // At the end 37,000 requests are held for clients that have gone,
        // for 600,000 s together; 3 more were finished for nobody before.
        rows[11].abandoned_held = 37_000;
        rows[11].abandoned_held_s = 600_000.0;
        rows[5].abandoned_per_s = 3.0;
        rows[5].abandoned_time_per_s = 1.5;
        let f = figures(&ClientRow::each_second(&[100.0; 12]), &rows, &timeline());
        assert_eq!(f.peak_concurrency, Some(470));
        assert_eq!(f.wasted, Some(37_003));
        assert_eq!(f.wasted_s, Some(600_001.5));
        // Rows from before these columns read as their concurrency.
        for row in &mut rows {
            row.max_concurrency = 0;
        }
        assert_eq!(figures(&[], &rows, &timeline()).peak_concurrency, Some(10));
    }
}
