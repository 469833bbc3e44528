use super::*;
use crate::report::rows::ClientRow;

fn attempt(outcome: Outcome, is_retry: bool, ms: u64) -> AttemptRecord {
    AttemptRecord {
        outcome,
        is_retry,
        rejected_locally: false,
        latency: Duration::from_millis(ms),
        lateness: Duration::from_micros(ms),
    }
}

#[test]
fn rates_use_the_measured_interval() {
    let r = ClientRecorder::new();
    for _ in 0..300 {
        r.attempt_started();
        r.attempt_finished(attempt(Outcome::Ok, false, 100));
    }
    for _ in 0..30 {
        r.attempt_started();
        r.attempt_finished(attempt(Outcome::Timeout, true, 2000));
    }
    r.attempt_started();
    let mut c = Interval::default();
    r.take_interval(&mut c);
    let mut totals = ClientCounts::default();
    totals.add(&c);
    // A 5 s interval that really lasted 6 s.
    let row = ClientRow::new(
        &totals,
        Duration::from_secs(6),
        r.in_flight(),
        0,
        Duration::ZERO,
    );
    assert_eq!(row.ok_per_s, 50.0);
    assert_eq!(row.timeouts_per_s, 5.0);
    assert_eq!(row.retries_per_s, 5.0);
    assert_eq!(row.in_flight, 1);
    assert_eq!(row.attempts_per_request, Some(1.1));
    let p50 = row.p50_ms.unwrap();
    assert!((p50 - 100.0).abs() < 0.1, "{p50}");
    assert!(
        row.to_string()
            .starts_with("OK: 50.00 req/sec, errors: 0.00 req/sec, timedout: 5.00 req/sec")
    );
}

#[test]
fn requests_fill_the_attempt_buckets_and_count_give_ups() {
    let r = ClientRecorder::new();
    for attempts in [1, 1, 2, 5, 6, 10, 11, 400] {
        r.request_finished(RequestRecord {
            attempts,
            latency: Some(Duration::from_millis(5)),
            throttled: false,
        });
    }
    r.request_finished(RequestRecord {
        attempts: 3,
        latency: None,
        throttled: true,
    });
    r.attempt_started();
    r.attempt_finished(AttemptRecord {
        rejected_locally: true,
        ..attempt(Outcome::Error, true, 0)
    });
    let mut c = Interval::default();
    r.take_interval(&mut c);
    assert_eq!(c.tally.attempts_per_request, [2, 1, 1, 0, 1, 2, 2]);
    assert_eq!(c.tally.gave_up, 1);
    assert_eq!(c.tally.throttled, 2);
    assert_eq!(c.tally.errors, 1);
    assert_eq!(c.tally.rejected, 1);
    assert_eq!(c.tally.sent(), 0);
    assert_eq!(c.request_latency.len(), 8);
    let row = ClientRow::of_interval(
        &mut c,
        &latency_histogram(),
        Duration::from_secs(1),
        0,
        0,
        Duration::ZERO,
    );
    assert!(
        row.to_string()
            .contains("gave up: 1.00 req/sec, throttled: 2.00 req/sec")
    );
}

#[test]
fn taking_an_interval_resets_counts_but_not_in_flight() {
    let r = ClientRecorder::new();
    r.attempt_started();
    r.attempt_started();
    r.attempt_finished(attempt(Outcome::Error, false, 1));
    let mut c = Interval::default();
    r.take_interval(&mut c);
    assert_eq!(c.tally.errors, 1);
    r.take_interval(&mut c);
    assert_eq!(c.tally.attempts(), 0);
    assert_eq!(r.in_flight(), 1);
}

#[test]
fn server_counts_keep_the_intervals_highest_concurrency_and_wasted_time() {
    let ms = Duration::from_millis;
    let mut c = ServerCounts::starting_at(7, 2);
    assert_eq!(c.max_concurrency, 7, "what was in flight at the start");
    assert_eq!(c.max_queue, 2, "what waited at the start");
    for (concurrency, queue) in [(8, 0), (470, 9), (12, 3)] {
        c.admitted(concurrency, queue);
    }
    assert_eq!(c.max_queue, 9);
    for why in [
        Refusal::Full,
        Refusal::Expired,
        Refusal::Expired,
        Refusal::Shed,
        Refusal::Failed,
    ] {
        c.refused(why);
    }
    assert_eq!((c.refused, c.dropped, c.shed, c.limited), (1, 2, 1, 0));
    assert_eq!(c.failed, 1);
    c.departed(Exit::Served, false, ms(2_500));
    c.departed(Exit::Cancelled, false, ms(500));
    c.departed(Exit::Served, true, ms(100));
    c.departed(Exit::Dropped, true, ms(100));
    assert_eq!((c.completed, c.dropped), (1, 3));
    assert_eq!(c.max_concurrency, 470);
    assert_eq!((c.abandoned, c.abandoned_time), (2, ms(3_000)));
}
