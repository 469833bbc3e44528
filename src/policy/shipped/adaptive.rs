//! The AWS SDKs' adaptive retry mode's client-side rate limiter, as
//! botocore's `adaptive.py`, `throttling.py` and `bucket.py` do it: off
//! until the first throttling response, then every attempt takes a token
//! from a bucket whose rate CUBIC sets (C 0.4, beta 0.7).
//!
//! - **CUBIC**: on a throttle, `w_max` = the rate in use, `K = cbrt(w_max *
//!   (1 - beta) / C)`, and the new rate is `w_max * beta`; on any other
//!   response, `C * (t - t_fail - K)^3 + w_max`.
//! - **The rate in use** is the measured rate, or once enabled the lower of
//!   it and the bucket's rate. The measured rate is an exponential average
//!   (0.8 to the newest) of the count per half-second bucket of
//!   *responses*: botocore clocks it in the response hook, not when
//!   sending, though it calls it the send rate.
//! - **The bucket's rate** becomes `min(new rate, 2 * measured)` after every
//!   response, at least 0.5 a second; its capacity is that rate (at least
//!   1), it starts empty, and it refills continuously.
//! - **A waiter** takes a token if a whole one is there; otherwise it
//!   sleeps until one would be, at the rate of that moment, then looks
//!   again (botocore's `_acquire` loop on a condition variable). It takes
//!   no token in advance: when the rate changes, every waiter sees the new
//!   rate at its next look, so a rate that regrows serves the waiters at
//!   once; and every change of the rate (every response) wakes the waiter
//!   that has waited longest, as botocore's condition variable does (the
//!   engines do the waking, told by `Throttle::after`).

use std::time::Duration;

const C: f64 = 0.4;
const BETA: f64 = 0.7;
const MIN_RATE: f64 = 0.5;
const SMOOTHING: f64 = 0.8;
const BUCKET_S: f64 = 0.5;

/// botocore's `CubicCalculator`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cubic {
    w_max: f64,
    k: f64,
    last_fail: f64,
}

impl Cubic {
    /// Starting from a maximum rate of 0 at `start` seconds, as botocore.
    pub fn new(start: f64) -> Self {
        Cubic {
            w_max: 0.0,
            k: 0.0,
            last_fail: start,
        }
    }

    /// The rate after a response that was not a throttle, at `t` seconds.
    pub fn success(&self, t: f64) -> f64 {
        C * (t - self.last_fail - self.k).powi(3) + self.w_max
    }

    /// The rate after a throttle at `t`, `rate` being the rate in use.
    pub fn throttle(&mut self, rate: f64, t: f64) -> f64 {
        self.w_max = rate;
        self.k = (rate * (1.0 - BETA) / C).cbrt();
        self.last_fail = t;
        rate * BETA
    }
}

/// botocore's `RateClocker`: responses counted per half second, averaged.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RateClocker {
    rate: f64,
    last_bucket: f64,
    count: u64,
}

impl RateClocker {
    fn new(start: f64) -> Self {
        RateClocker {
            rate: 0.0,
            // botocore floors the start to the second, not to the bucket.
            last_bucket: start.floor(),
            count: 0,
        }
    }

    fn record(&mut self, t: f64) -> f64 {
        let bucket = (t / BUCKET_S).floor() * BUCKET_S;
        self.count += 1;
        if bucket > self.last_bucket {
            let current = self.count as f64 / (bucket - self.last_bucket);
            self.rate = current * SMOOTHING + self.rate * (1.0 - SMOOTHING);
            self.count = 0;
            self.last_bucket = bucket;
        }
        self.rate
    }
}

/// botocore's `TokenBucket`: a token is taken when a whole one is there;
/// a waiter sleeps until one would be, then looks again.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TokenBucket {
    fill_rate: f64,
    capacity: f64,
    max_capacity: f64,
    last: Option<f64>,
}

impl TokenBucket {
    /// Created at `t` (botocore's rate setter starts the refill clock).
    fn new(max_rate: f64, t: f64) -> Self {
        let mut b = TokenBucket {
            fill_rate: MIN_RATE,
            capacity: 0.0,
            max_capacity: 1.0,
            last: None,
        };
        b.set_rate(max_rate, Some(t));
        b
    }

    fn refill(&mut self, t: f64) {
        match self.last {
            None => self.last = Some(t),
            Some(last) => {
                let filled = self.capacity + (t - last).max(0.0) * self.fill_rate;
                self.capacity = filled.min(self.max_capacity);
                self.last = Some(t);
            }
        }
    }

    fn set_rate(&mut self, rate: f64, t: Option<f64>) {
        if let Some(t) = t {
            self.refill(t);
        }
        self.fill_rate = rate.max(MIN_RATE);
        self.max_capacity = if rate >= 1.0 { rate } else { 1.0 };
        self.capacity = self.capacity.min(self.max_capacity);
    }

    /// Takes a token at `t` if a whole one is there (`None`); otherwise
    /// takes nothing and returns how long until one would be, in seconds.
    fn acquire(&mut self, t: f64) -> Option<f64> {
        self.refill(t);
        if self.capacity >= 1.0 {
            self.capacity -= 1.0;
            None
        } else {
            Some((1.0 - self.capacity) / self.fill_rate)
        }
    }
}

/// The adaptive mode's limiter, shared by a process's requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveLimiter {
    cubic: Cubic,
    clocker: RateClocker,
    bucket: TokenBucket,
    enabled: bool,
    /// Source seconds per engine second: `k` when the experiment is
    /// compressed `k` times, so that botocore's constants (half-second
    /// buckets, 0.5 a second at least, CUBIC's C) keep their meaning.
    scale: f64,
}

impl AdaptiveLimiter {
    /// A limiter created at `now`, off, with a bucket of rate 1.
    pub fn new(now: Duration) -> Self {
        AdaptiveLimiter::compressed(now, 1.0)
    }

    /// The limiter of an experiment compressed `k` times in time: it
    /// counts time and rates as botocore would in the uncompressed one.
    pub fn compressed(now: Duration, k: f64) -> Self {
        let t = now.as_secs_f64() * k;
        AdaptiveLimiter {
            cubic: Cubic::new(t),
            clocker: RateClocker::new(t),
            bucket: TokenBucket::new(1.0, t),
            enabled: false,
            scale: k,
        }
    }

    fn secs(&self, t: Duration) -> f64 {
        t.as_secs_f64() * self.scale
    }

    /// Whether a throttle has switched it on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The bucket's rate, requests a second (of the uncompressed
    /// experiment).
    pub fn rate(&self) -> f64 {
        self.bucket.fill_rate
    }

    /// An attempt is about to be sent at `now`: `None` if it may go (it
    /// has taken its token, or the limiter is off), otherwise how long to
    /// sleep before asking again, rounded up to the next nanosecond so
    /// that the token is whole when the sleep ends.
    pub fn before_send(&mut self, now: Duration) -> Option<Duration> {
        if !self.enabled {
            return None;
        }
        let t = self.secs(now);
        let wait = self.bucket.acquire(t)? / self.scale;
        let nanos = (wait * 1e9).ceil().clamp(1.0, u64::MAX as f64) as u64;
        Some(Duration::from_nanos(nanos))
    }

    /// A response arrived at `now`; `throttled` if it was a throttling
    /// error (429 here).
    pub fn on_response(&mut self, now: Duration, throttled: bool) {
        let t = self.secs(now);
        let measured = self.clocker.record(t);
        let new_rate = if throttled {
            let in_use = if self.enabled {
                measured.min(self.bucket.fill_rate)
            } else {
                measured
            };
            self.enabled = true;
            self.cubic.throttle(in_use, t)
        } else {
            self.cubic.success(t)
        };
        self.bucket.set_rate(new_rate.min(2.0 * measured), Some(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_throttle_cuts_the_rate_to_0_7_of_the_rate_in_use_then_cubic_regrows() {
        let mut c = Cubic::new(0.0);
        // Measured 10 a second at the throttle, at t = 5 s.
        let cut = c.throttle(10.0, 5.0);
        assert!(close(cut, 7.0));
        // K = cbrt(10 * 0.3 / 0.4) = cbrt(7.5).
        let k = 7.5f64.cbrt();
        assert!(close(c.k, k));
        // Right after the throttle the curve starts at w_max - C K^3 = 7.
        assert!(close(c.success(5.0), 10.0 - 0.4 * 7.5));
        // K seconds later it is back at w_max, then grows past it.
        assert!(close(c.success(5.0 + k), 10.0));
        assert!(close(c.success(5.0 + k + 1.0), 10.4));
    }

    #[test]
    fn the_rate_clocker_averages_responses_per_half_second() {
        let mut r = RateClocker::new(0.2);
        assert_eq!(r.last_bucket, 0.0, "floored to the second");
        // Three responses in the first half second: no new bucket yet.
        for t in [0.1, 0.2, 0.3] {
            assert_eq!(r.record(t), 0.0);
        }
        // The fourth, at 0.6, closes it: 4 / 0.5 = 8 a second, 0.8 of it.
        assert!(close(r.record(0.6), 6.4));
        // Two more by 1.1: 2 / 0.5 = 4; 0.8 * 4 + 0.2 * 6.4 = 4.48.
        r.record(0.9);
        assert!(close(r.record(1.1), 4.48));
    }

    #[test]
    fn the_bucket_starts_empty_and_waiters_look_again() {
        let mut b = TokenBucket::new(2.0, 0.0);
        assert!(close(b.acquire(0.0).unwrap(), 0.5), "empty: wait 1 / 2 s");
        assert!(
            close(b.acquire(0.0).unwrap(), 0.5),
            "nothing was taken in advance"
        );
        // A quarter of a second later half a token is there.
        assert!(close(b.acquire(0.25).unwrap(), 0.25));
        // At 0.5 s one is: the first to look takes it, the next waits.
        assert_eq!(b.acquire(0.5), None);
        assert!(close(b.acquire(0.5).unwrap(), 0.5));
        // The rate rises to 4: the waiter's next look needs a quarter.
        b.set_rate(4.0, Some(0.5));
        assert!(close(b.acquire(0.5).unwrap(), 0.25));
        assert_eq!(b.acquire(0.75), None);
        // A rate under 1 keeps a capacity of 1 and a fill of at least 0.5.
        let mut slow = TokenBucket::new(0.1, 0.0);
        assert!(close(slow.fill_rate, 0.5) && close(slow.max_capacity, 1.0));
        assert!(close(slow.acquire(0.0).unwrap(), 2.0));
    }

    #[test]
    fn waiters_that_wake_together_when_their_sleep_ends_take_one_token() {
        // A bucket at a rate where a nanosecond's rounding would leave the
        // token short: the waiters' common wait ends with it whole, and
        // only the first of them takes it.
        let mut l = AdaptiveLimiter::new(Duration::ZERO);
        for i in 0..40 {
            l.on_response(Duration::from_millis(25 * i), false);
        }
        l.on_response(Duration::from_millis(1000), true);
        let now = Duration::from_millis(1000);
        while l.before_send(now).is_none() {}
        let wait = l.before_send(now).expect("the bucket is empty");
        let went = (0..100)
            .filter(|_| l.before_send(now + wait).is_none())
            .count();
        assert_eq!(went, 1, "rate {}", l.rate());
    }

    #[test]
    fn the_limiter_switches_on_at_the_first_throttle() {
        let mut l = AdaptiveLimiter::new(Duration::ZERO);
        assert_eq!(l.before_send(Duration::from_secs(1)), None);
        // Twenty responses, one every 50 ms from 0: the half second from 0
        // closes at 0.5 s with 11 counted, 22 a second, averaged to 17.6;
        // the next closes at the throttle, 1.0 s, with 10: 20 a second,
        // averaged to 0.8 * 20 + 0.2 * 17.6 = 19.52.
        for i in 0..20 {
            l.on_response(Duration::from_millis(50 * i), false);
        }
        assert!(!l.enabled());
        l.on_response(Duration::from_millis(1000), true);
        assert!(l.enabled());
        // The bucket's rate: min(0.7 * 19.52, 2 * 19.52) = 13.664.
        assert!(close(l.rate(), 13.664), "{}", l.rate());
        assert!(l.before_send(Duration::from_millis(1000)).is_some());
    }
}
