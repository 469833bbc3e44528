//! What a throttle does to a burst of failures, computed without any
//! network: how many retries a budget lets through against a given
//! request rate, second by second.
//!
//! The burst: first attempts arrive evenly at `rate` a second for
//! `length`; every attempt fails `latency` after it starts; at each failure
//! the request asks the throttle for a retry, sent at once (no backoff, the
//! worst case), until the throttle refuses or the strategy's attempt limit
//! is reached and the request is given up.
//! Nothing ever succeeds, so nothing is refunded: what goes through is
//! what the budget holds and what the requests deposit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::policy::{Answer, AttemptKind, Decision, Throttle, ThrottleConfig};

/// The burst to put a throttle through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstRequest {
    /// The throttle.
    pub throttle: ThrottleConfig,
    /// First attempts a second.
    pub rate: f64,
    /// How long requests keep arriving.
    pub length: Duration,
    /// How long an attempt takes to fail.
    pub latency: Duration,
    /// Whether an attempt fails by timing out (the AWS quota charges
    /// more for a retry after a timeout).
    pub timeouts: bool,
    /// The strategy's attempt limit, if it has one.
    pub max_attempts: Option<u32>,
    /// Seed of the throttle's draws.
    pub seed: u64,
}

/// One second of the burst.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BurstRow {
    /// The second, from 1.
    pub second: u32,
    /// First attempts sent in it.
    pub requests: u64,
    /// Retries the throttle let out in it.
    pub retries: u64,
    /// Retries it refused (each a request given up).
    pub refused: u64,
}

/// Attempts in flight, ending in time order (then in the order sent):
/// when, their number, and how many attempts their request has made.
type Ends = BinaryHeap<Reverse<(Duration, u64, u32)>>;

/// The burst under way.
struct Run {
    throttle: Throttle,
    rng: Xoshiro256PlusPlus,
    ends: Ends,
    sent: u64,
    rows: Vec<BurstRow>,
    /// What a retry is, for the throttle.
    retry: AttemptKind,
    latency: Duration,
    max_attempts: Option<u32>,
}

impl Run {
    fn row(&mut self, at: Duration) -> &mut BurstRow {
        let second = usize::try_from(at.as_secs()).unwrap_or(usize::MAX - 1) + 1;
        if self.rows.len() < second {
            self.rows.resize(second, BurstRow::default());
        }
        &mut self.rows[second - 1]
    }

    fn send(&mut self, at: Duration, attempts: u32) {
        self.ends.push(Reverse((
            at.saturating_add(self.latency),
            self.sent,
            attempts,
        )));
        self.sent += 1;
    }

    /// The next attempt to end fails; its request asks for a retry.
    fn fail_next(&mut self) {
        let Some(Reverse((at, _, attempts))) = self.ends.pop() else {
            return;
        };
        let kind = AttemptKind {
            retry: attempts > 1,
            ..self.retry
        };
        self.throttle.after(Answer::Failed, kind, at);
        if self.max_attempts.is_some_and(|max| attempts >= max) {
            return;
        }
        if !self.throttle.allows_retry(self.retry, at) {
            self.row(at).refused += 1;
            return;
        }
        if let Some(start) = self.go(self.retry, at) {
            self.row(at).retries += 1;
            self.send(start, attempts + 1);
        } else {
            self.row(at).refused += 1;
        }
    }

    /// When an attempt of `kind` due at `at` goes out, if the throttle
    /// does not reject it: then, or once a rate limiter has a token for
    /// it. (The AWS adaptive mode's limiter waits for a 429, which a
    /// burst of failures never is: the looking again is for completeness,
    /// and bounded.)
    fn go(&mut self, kind: AttemptKind, at: Duration) -> Option<Duration> {
        let mut at = at;
        for _ in 0..1000 {
            match self.throttle.before(kind, at, &mut self.rng) {
                Decision::Allow => return Some(at),
                Decision::Wait(wait) => at = at.saturating_add(wait),
                Decision::Reject => return None,
            }
        }
        None
    }

    /// When the next attempt in flight ends.
    fn next_end(&self) -> Option<Duration> {
        self.ends.peek().map(|Reverse((at, _, _))| *at)
    }
}

/// The burst, second by second, until the last attempt has failed.
pub fn burst(req: &BurstRequest) -> Vec<BurstRow> {
    let mut run = Run {
        throttle: Throttle::new(req.throttle),
        rng: Xoshiro256PlusPlus::seed_from_u64(req.seed),
        ends: Ends::new(),
        sent: 0,
        rows: Vec::new(),
        retry: AttemptKind {
            retry: true,
            after_timeout: req.timeouts,
            after_throttle: false,
        },
        latency: req.latency,
        max_attempts: req.max_attempts,
    };
    let arrivals = (req.rate * req.length.as_secs_f64()).floor() as u64;
    for i in 0..arrivals {
        let at = Duration::from_secs_f64(i as f64 / req.rate);
        // Failures due by this arrival come first.
        while run.next_end().is_some_and(|end| end <= at) {
            run.fail_next();
        }
        // A first attempt counts as a request even if a throttle that
        // rejects locally keeps it in.
        run.row(at).requests += 1;
        if let Some(start) = run.go(AttemptKind::default(), at) {
            run.send(start, 1);
        }
    }
    while run.next_end().is_some() {
        run.fail_next();
    }
    for (i, r) in run.rows.iter_mut().enumerate() {
        r.second = u32::try_from(i + 1).unwrap_or(u32::MAX);
    }
    run.rows
}

/// One line saying what the burst is.
pub fn describe(req: &BurstRequest) -> String {
    format!(
        "Against a burst of failures: {} requests a second for {}, every attempt {} after {}, \
         each failure retried at once while throttle {} allows{}:",
        req.rate,
        humantime::format_duration(req.length),
        if req.timeouts {
            "timing out"
        } else {
            "failing"
        },
        humantime::format_duration(req.latency),
        req.throttle.name(),
        req.max_attempts.map_or(String::new(), |n| format!(
            ", at most {n} attempts a request"
        ))
    )
}

/// The rows as an aligned table, with the totals.
pub fn table(rows: &[BurstRow]) -> String {
    let mut out = String::from("second  requests  retries  refused  retries/request\n");
    let ratio = |retries: u64, requests: u64| {
        if requests == 0 {
            "-".to_string()
        } else {
            format!("{:.2}", retries as f64 / requests as f64)
        }
    };
    for r in rows {
        let _ = writeln!(
            out,
            "{:>6}  {:>8}  {:>7}  {:>7}  {:>15}",
            r.second,
            r.requests,
            r.retries,
            r.refused,
            ratio(r.retries, r.requests)
        );
    }
    let (requests, retries, refused) = totals(rows);
    let _ = writeln!(
        out,
        "{:>6}  {requests:>8}  {retries:>7}  {refused:>7}  {:>15}",
        "total",
        ratio(retries, requests)
    );
    out
}

/// The rows as CSV.
pub fn csv(rows: &[BurstRow]) -> String {
    let mut out = String::from("second,requests,retries,refused\n");
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{}",
            r.second, r.requests, r.retries, r.refused
        );
    }
    out
}

/// Requests, retries and refusals over the whole burst.
pub fn totals(rows: &[BurstRow]) -> (u64, u64, u64) {
    rows.iter().fold((0, 0, 0), |(q, r, f), row| {
        (q + row.requests, r + row.retries, f + row.refused)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::shipped::ShippedThrottleConfig;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn request(throttle: ThrottleConfig) -> BurstRequest {
        BurstRequest {
            throttle,
            rate: 100.0,
            length: secs(10),
            latency: Duration::from_millis(100),
            timeouts: false,
            max_attempts: None,
            seed: 1,
        }
    }

    #[test]
    fn the_aws_quota_lets_100_retries_of_cost_5_through_then_none() {
        let rows = burst(&request(ThrottleConfig::Shipped(
            ShippedThrottleConfig::aws_quota(false),
        )));
        // 500 / 5 = 100 retries, whatever the rate; nothing refunds.
        assert_eq!(totals(&rows), (1000, 100, 1000));
        // They all go within the first second: every failure asks again
        // until the quota is empty.
        assert_eq!(rows[0].retries, 100);
        assert_eq!(rows[1].retries, 0);
        // After a timeout a retry costs 10: 50 retries.
        let mut timed_out = request(ThrottleConfig::Shipped(ShippedThrottleConfig::aws_quota(
            false,
        )));
        timed_out.timeouts = true;
        assert_eq!(totals(&burst(&timed_out)).1, 50);
        // botocore 1.44's quota charges 14, a timeout too: 500 / 14 = 35
        // retries (35 * 14 = 490; the 36th would need 504).
        for timeouts in [false, true] {
            let mut current = request(ThrottleConfig::Shipped(ShippedThrottleConfig::aws_quota(
                true,
            )));
            current.timeouts = timeouts;
            assert_eq!(totals(&burst(&current)).1, 35);
        }
    }

    #[test]
    fn grpcs_bucket_stops_retries_after_five_failures() {
        // 10 tokens, -1 per failure, no retry at 5 or below: the first
        // four failures get a retry (tokens 9, 8, 7, 6), the fifth leaves
        // 5 and is refused; every later one is refused too.
        let rows = burst(&request(ThrottleConfig::TokenBucket {
            max_tokens: 10.0,
            token_ratio: 0.1,
        }));
        assert_eq!(totals(&rows), (1000, 4, 1000));
    }

    #[test]
    fn towers_budget_allows_its_reserve_only_when_nothing_succeeds() {
        // tower deposits on success only: its reserve, 10/s * 10 s * 5,
        // buys 100 retries of 5.
        let rows = burst(&request(ThrottleConfig::Shipped(
            ShippedThrottleConfig::tower(),
        )));
        assert_eq!(totals(&rows).1, 100);
    }

    #[test]
    fn finagles_budget_allows_a_fifth_of_requests_plus_its_floor() {
        // Finagle deposits 1000 per request and a retry withdraws 5000:
        // within its 10 s window, 9 s of 100 requests a second buy 180
        // retries, and its reserve of 10/s over 10 s, 100 more.
        let finagle = ThrottleConfig::Shipped(ShippedThrottleConfig::finagle());
        let rows = burst(&BurstRequest {
            length: secs(9),
            ..request(finagle)
        });
        assert_eq!(totals(&rows), (900, 280, 900));
        // A burst longer than the window: at 10 s the window forgets the
        // first second, withdrawals included, and retries go again.
        let rows = burst(&BurstRequest {
            length: secs(20),
            ..request(finagle)
        });
        assert!(rows[10].retries > 50, "{:?}", rows[10]);
    }

    #[test]
    fn the_attempt_limit_ends_requests_before_the_budget_does() {
        // Three attempts a request: two retries each, 10 requests, 20
        // retries, far within the AWS quota; no refusal.
        let rows = burst(&BurstRequest {
            rate: 10.0,
            length: secs(1),
            max_attempts: Some(3),
            ..request(ThrottleConfig::Shipped(ShippedThrottleConfig::aws_quota(
                false,
            )))
        });
        assert_eq!(totals(&rows), (10, 20, 0));
    }

    #[test]
    fn the_table_and_csv_show_every_second_and_the_totals() {
        let rows = burst(&BurstRequest {
            rate: 2.0,
            length: secs(2),
            ..request(ThrottleConfig::TokenBucket {
                max_tokens: 10.0,
                token_ratio: 0.1,
            })
        });
        let t = table(&rows);
        assert!(t.lines().last().unwrap().starts_with(" total"), "{t}");
        assert_eq!(csv(&rows).lines().count(), rows.len() + 1);
    }
}
