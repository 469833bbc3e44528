//! Tests of the verdict and its figures.
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
fn http2_counts_its_peak_of_connections_up_to_the_confirmation() {
    let h1 = run(&[100.0; 25]);
    assert_eq!(h1.peak_connections, None);
    let mut rows = ClientRow::each_second(&[100.0; 25]);
    for (i, row) in rows.iter_mut().enumerate() {
        row.connections = Some(i as u64 + 1);
    }
    let f = figures(&rows, &[], &timeline());
    // Rows ending at 1 s to 22 s count: their 22nd holds 22.
    assert_eq!(f.peak_connections, Some(22));
    let json = serde_json::to_string(&h1).unwrap();
    assert!(!json.contains("connections"));
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
