//! What one level's clients measured within its hold, and the level's
//! report from it.
//!
//! **Which attempts count.** Those that end within the hold: an attempt
//! sent in the warm-up and answered in the hold counts, with its whole
//! latency; one still in flight when the hold ends does not. In a steady
//! closed loop the two edges balance, and throughput is answers a second
//! of the hold.
//!
//! **Little's check.** Each client's time in an attempt (from just before
//! its GET, connecting included, to the end of its answer) is summed over
//! the hold, cut at both ends, the attempts in flight at its end
//! included. That sum over `N` times the hold is `X R / N` measured
//! without the edges' noise (counted from the answers alone, an attempt
//! straddling an end of the hold moves it by up to `R / hold`): 1 when
//! every client was always waiting on the service; less when clients
//! spent time between an answer and their next GET.

use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

use super::connection::Answer;
use super::report::{BUSY_FROM, LITTLE_BELOW, LevelReport};
use crate::model::fit::Level;
use crate::report::histogram::{latency_histogram, record_latency};

/// One level's counts within its hold.
#[derive(Debug)]
pub(super) struct Tally {
    hold_start: Instant,
    hold_end: Instant,
    /// When each client's attempt in progress was sent.
    in_flight: Vec<Option<Instant>>,
    ok: u64,
    errors: u64,
    timeouts: u64,
    /// Sum of the successful answers' latencies, seconds.
    ok_s: f64,
    /// Sum of the failed attempts' latencies, seconds.
    error_s: f64,
    /// Sum of the clients' time in attempts within the hold, seconds.
    busy_s: f64,
    /// Latencies of the successful answers, microseconds.
    histogram: Histogram<u64>,
}

impl Tally {
    /// An empty tally for `clients` clients and the hold from `hold_start`
    /// to `hold_end`.
    pub(super) fn new(clients: usize, hold_start: Instant, hold_end: Instant) -> Tally {
        Tally {
            hold_start,
            hold_end,
            in_flight: vec![None; clients],
            ok: 0,
            errors: 0,
            timeouts: 0,
            ok_s: 0.0,
            error_s: 0.0,
            busy_s: 0.0,
            histogram: latency_histogram(),
        }
    }

    /// Client `client` sends an attempt at `at`.
    pub(super) fn sent(&mut self, client: usize, at: Instant) {
        self.in_flight[client] = Some(at);
    }

    /// Client `client`'s attempt in progress ended at `at` with `answer`.
    pub(super) fn ended(&mut self, client: usize, at: Instant, answer: &Answer) {
        let Some(sent) = self.in_flight[client].take() else {
            return;
        };
        self.busy_s += self.within_hold(sent, at);
        if at < self.hold_start || at >= self.hold_end {
            return;
        }
        let latency = at - sent;
        if answer.is_ok() {
            self.ok += 1;
            self.ok_s += latency.as_secs_f64();
            record_latency(&mut self.histogram, latency);
        } else {
            self.errors += 1;
            self.error_s += latency.as_secs_f64();
            if matches!(answer, Answer::TimedOut) {
                self.timeouts += 1;
            }
        }
    }

    /// How much of `from..to` lies within the hold, in seconds.
    fn within_hold(&self, from: Instant, to: Instant) -> f64 {
        let from = from.max(self.hold_start);
        let to = to.min(self.hold_end);
        to.saturating_duration_since(from).as_secs_f64()
    }

    /// The level's report once its hold has ended, with `demand`, the time
    /// the prober's thread ran or waited to run during the hold.
    pub(super) fn report(&mut self, concurrency: u32, demand: Duration) -> LevelReport {
        for sent in self.in_flight.iter_mut().filter_map(Option::take) {
            let end = self.hold_end;
            let from = sent.max(self.hold_start);
            self.busy_s += end.saturating_duration_since(from).as_secs_f64();
        }
        let hold_s = (self.hold_end - self.hold_start).as_secs_f64();
        let attempts = self.ok + self.errors;
        let (mean, p50, p99) = if self.ok > 0 {
            let s = |us: u64| us as f64 / 1e6;
            (
                self.ok_s / self.ok as f64,
                s(self.histogram.value_at_quantile(0.5)),
                s(self.histogram.value_at_quantile(0.99)),
            )
        } else {
            // No success: the failures' mean latency, or with none the
            // hold itself (no attempt ended within it), so that the level
            // still holds positive times; its error share of 1 leaves it
            // out of any fit.
            let mean = if self.errors > 0 {
                self.error_s / self.errors as f64
            } else {
                hold_s
            };
            (mean, mean, mean)
        };
        let error_share = if attempts > 0 {
            self.errors as f64 / attempts as f64
        } else {
            1.0
        };
        let little_ratio = self.busy_s / (f64::from(concurrency) * hold_s);
        let prober_busy = demand.as_secs_f64() / hold_s;
        LevelReport {
            level: Level {
                concurrency,
                throughput: self.ok as f64 / hold_s,
                latency_mean_s: mean,
                latency_p50_s: p50,
                latency_p99_s: p99,
                error_share,
            },
            attempts,
            ok: self.ok,
            errors: self.errors,
            timeouts: self.timeouts,
            little_ratio,
            prober_busy,
            prober_bound: little_ratio < LITTLE_BELOW || prober_busy >= BUSY_FROM,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use hyper::StatusCode;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ok() -> Answer {
        Answer::Status(StatusCode::OK)
    }

    /// Two clients, a hold from 100 ms to 1100 ms.
    fn tally(t0: Instant) -> Tally {
        Tally::new(2, t0 + ms(100), t0 + ms(1100))
    }

    #[test]
    fn answers_count_when_they_end_within_the_hold_with_their_whole_latency() {
        let t0 = Instant::now();
        let mut t = tally(t0);
        // Client 0: sent at 50 ms in the warm-up, answered at 150 ms (100
        // ms, counted), then 150 to 250 ms (counted), then 1050 to 1150 ms
        // (ends after the hold: not counted).
        for (from, to) in [(50, 150), (150, 250), (1050, 1150)] {
            t.sent(0, t0 + ms(from));
            t.ended(0, t0 + ms(to), &ok());
        }
        // Client 1: a 503 from 200 to 210 ms and a timeout from 210 to 710.
        t.sent(1, t0 + ms(200));
        t.ended(
            1,
            t0 + ms(210),
            &Answer::Status(StatusCode::SERVICE_UNAVAILABLE),
        );
        t.sent(1, t0 + ms(210));
        t.ended(1, t0 + ms(710), &Answer::TimedOut);
        // Then in flight from 710 ms past the hold's end.
        t.sent(1, t0 + ms(710));
        let r = t.report(2, ms(100));
        assert_eq!((r.attempts, r.ok, r.errors, r.timeouts), (4, 2, 2, 1));
        assert_eq!(r.level.concurrency, 2);
        assert!((r.level.throughput - 2.0).abs() < 1e-9, "2 in 1 s");
        assert!((r.level.latency_mean_s - 0.1).abs() < 1e-9);
        assert!((r.level.latency_p50_s - 0.1).abs() < 1e-3);
        assert!((r.level.latency_p99_s - 0.1).abs() < 1e-3);
        assert!((r.level.error_share - 0.5).abs() < 1e-12);
        // In attempts within the hold: client 0 from 100 to 250 and 1050 to
        // 1100 (0.2 s), client 1 from 200 to 1100 (0.9 s): 1.1 of 2 s.
        assert!((r.little_ratio - 0.55).abs() < 1e-9, "{}", r.little_ratio);
        assert!((r.prober_busy - 0.1).abs() < 1e-9);
        assert!(r.prober_bound, "Little's law failed");
    }

    #[test]
    fn clients_always_in_an_attempt_meet_littles_law_exactly() {
        let t0 = Instant::now();
        let mut t = tally(t0);
        // Each client back to back, 30 ms a request, from 0 on; the edges
        // fall mid-attempt.
        for client in 0..2 {
            let mut at = 0;
            while at + 30 < 1100 {
                t.sent(client, t0 + ms(at));
                t.ended(client, t0 + ms(at + 30), &ok());
                at += 30;
            }
            t.sent(client, t0 + ms(at));
        }
        let r = t.report(2, ms(50));
        assert!((r.little_ratio - 1.0).abs() < 1e-9, "{}", r.little_ratio);
        assert!(!r.prober_bound);
        // Answers at 120, 150, ..., 1080 ms: 33 a client.
        assert_eq!(r.ok, 66);
        assert!((r.level.throughput - 66.0).abs() < 1e-9);
        // X R / N from the answers alone: 66 * 0.03 / 2 = 0.99.
        assert!((r.level.little_concurrency() / 2.0 - 0.99).abs() < 1e-9);
    }

    #[test]
    fn a_busy_prober_thread_is_the_bottleneck_even_when_littles_law_holds() {
        let t0 = Instant::now();
        let mut t = tally(t0);
        for client in 0..2 {
            t.sent(client, t0);
        }
        let r = t.report(2, ms(950));
        assert!((r.little_ratio - 1.0).abs() < 1e-9);
        assert!(r.prober_bound);
    }

    #[test]
    fn a_level_with_no_success_still_holds_positive_times_and_fails_entirely() {
        let t0 = Instant::now();
        let mut t = tally(t0);
        t.sent(0, t0 + ms(200));
        t.ended(0, t0 + ms(204), &Answer::Broken("refused".into()));
        let r = t.report(2, ms(0));
        assert_eq!((r.ok, r.errors), (0, 1));
        assert_eq!(r.level.error_share, 1.0);
        assert_eq!(r.level.throughput, 0.0);
        assert!((r.level.latency_mean_s - 0.004).abs() < 1e-9);
        assert_eq!(r.level.latency_p99_s, r.level.latency_mean_s);

        // Nothing ended within the hold at all.
        let mut t = tally(t0);
        t.sent(0, t0);
        let r = t.report(1, ms(0));
        assert_eq!((r.attempts, r.level.error_share), (0, 1.0));
        assert!((r.level.latency_mean_s - 1.0).abs() < 1e-9, "the hold");
    }
}
