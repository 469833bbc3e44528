//! Limits that apply on top of any delay schedule: a maximum number of
//! attempts, a deadline across all attempts, and the server's `Retry-After`.

use std::time::{Duration, SystemTime};

/// Limits on the retries of one logical request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RetryLimits {
    /// Attempts per logical request, the first included; `None` for no limit.
    pub max_attempts: Option<u32>,
    /// Time from the first attempt's intended start after which no retry
    /// starts (and no attempt runs past it).
    pub deadline: Option<Duration>,
    /// Wait at least what the server's `Retry-After` asked for.
    pub respect_retry_after: bool,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Retry after this delay.
    Retry(Duration),
    /// Give up the logical request.
    GiveUp,
}

impl RetryLimits {
    /// Decides after failed attempt number `attempts` (1 for the first),
    /// `elapsed` after the first attempt's intended start, given the delay
    /// the schedule proposes and the server's `Retry-After`, if any.
    pub fn next(
        &self,
        attempts: u32,
        elapsed: Duration,
        proposed: Duration,
        retry_after: Option<Duration>,
    ) -> Next {
        if self.max_attempts.is_some_and(|max| attempts >= max) {
            return Next::GiveUp;
        }
        let delay = match retry_after {
            Some(hint) if self.respect_retry_after => proposed.max(hint),
            _ => proposed,
        };
        if self
            .deadline
            .is_some_and(|deadline| elapsed.saturating_add(delay) >= deadline)
        {
            return Next::GiveUp;
        }
        Next::Retry(delay)
    }

    /// The latest instant (from the first attempt's intended start) an
    /// attempt that starts at `started` may run to, given its timeout.
    pub fn attempt_end(&self, started: Duration, timeout: Duration) -> Duration {
        let end = started.saturating_add(timeout);
        self.deadline.map_or(end, |deadline| end.min(deadline))
    }
}

/// The longest wait a `Retry-After` can ask for; longer ones are cut to it
/// (a server asking for years must not make a client's clock overflow).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// Parses a `Retry-After` value: delay-seconds (decimals accepted, for
/// time-compressed experiments) or an HTTP date, relative to `now`.
/// A date in the past means no wait; no wait exceeds [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = if let Ok(secs) = value.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return None;
        }
        Duration::try_from_secs_f64(secs.min(MAX_RETRY_AFTER.as_secs_f64())).ok()?
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Formats a delay as a `Retry-After` value: whole seconds when it is one,
/// decimal seconds otherwise.
pub fn format_retry_after(delay: Duration) -> String {
    if delay.subsec_nanos() == 0 {
        delay.as_secs().to_string()
    } else {
        format!("{}", delay.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn no_limits_always_retry_with_the_proposed_delay() {
        let l = RetryLimits::default();
        assert_eq!(
            l.next(1_000, s(1_000_000), s(1), Some(s(60))),
            Next::Retry(s(1))
        );
    }

    #[test]
    fn max_attempts_counts_the_first_attempt() {
        let l = RetryLimits {
            max_attempts: Some(3),
            ..RetryLimits::default()
        };
        assert_eq!(l.next(1, s(0), s(1), None), Next::Retry(s(1)));
        assert_eq!(l.next(2, s(0), s(1), None), Next::Retry(s(1)));
        assert_eq!(l.next(3, s(0), s(1), None), Next::GiveUp);
        let once = RetryLimits {
            max_attempts: Some(1),
            ..RetryLimits::default()
        };
        assert_eq!(once.next(1, s(0), s(1), None), Next::GiveUp);
    }

    #[test]
    fn deadline_stops_retries_that_would_start_too_late() {
        let l = RetryLimits {
            deadline: Some(s(10)),
            ..RetryLimits::default()
        };
        assert_eq!(l.next(1, s(8), s(1), None), Next::Retry(s(1)));
        assert_eq!(l.next(1, s(9), s(1), None), Next::GiveUp);
        assert_eq!(l.attempt_end(s(9), s(2)), s(10));
        assert_eq!(l.attempt_end(s(1), s(2)), s(3));
    }

    #[test]
    fn retry_after_is_a_floor_only_when_respected() {
        let ignore = RetryLimits::default();
        assert_eq!(ignore.next(1, s(0), s(1), Some(s(5))), Next::Retry(s(1)));
        let respect = RetryLimits {
            respect_retry_after: true,
            ..RetryLimits::default()
        };
        assert_eq!(respect.next(1, s(0), s(1), Some(s(5))), Next::Retry(s(5)));
        assert_eq!(respect.next(1, s(0), s(9), Some(s(5))), Next::Retry(s(9)));
        let both = RetryLimits {
            respect_retry_after: true,
            deadline: Some(s(4)),
            ..RetryLimits::default()
        };
        assert_eq!(both.next(1, s(0), s(1), Some(s(5))), Next::GiveUp);
    }

    #[test]
    fn retry_after_parses_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + s(1_445_412_480);
        assert_eq!(parse_retry_after("120", now), Some(s(120)));
        assert_eq!(
            parse_retry_after(" 0.25 ", now),
            Some(Duration::from_millis(250))
        );
        // 2015-10-21 07:28:00 GMT is 1445412480; two minutes later:
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
            Some(s(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn retry_after_round_trips() {
        let now = SystemTime::UNIX_EPOCH;
        for d in [
            s(1),
            s(30),
            Duration::from_millis(100),
            Duration::from_millis(2500),
        ] {
            assert_eq!(parse_retry_after(&format_retry_after(d), now), Some(d));
        }
        assert_eq!(format_retry_after(s(2)), "2");
    }
}
