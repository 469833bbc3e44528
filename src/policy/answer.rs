//! What a client reads from an answer besides its status: the hints a
//! backoff, the retry limits or a throttle may act on. One function for
//! the networked client and for the check against the libraries
//! (`examples/policy_trace.rs`), so both read a header the same way.

use std::time::SystemTime;

use crate::model::outcome::{Hints, PUSHBACK_HEADER};
use crate::policy::retry_limits::parse_retry_after;

/// The hints of an answer with HTTP status `status`, its headers looked up
/// by (lower-case) name with `header`, read at `now` (for an HTTP date in
/// `Retry-After`).
pub fn read_hints<'a>(
    status: u16,
    header: impl Fn(&str) -> Option<&'a str>,
    now: SystemTime,
) -> Hints {
    Hints {
        throttled: status == 429,
        retry_after: header("retry-after").and_then(|v| parse_retry_after(v, now)),
        pushback_ms: header(PUSHBACK_HEADER).and_then(|v| v.trim().parse().ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_429_is_throttled_and_its_retry_after_read() {
        let headers = |name: &str| (name == "retry-after").then_some("2");
        let hints = read_hints(429, headers, SystemTime::UNIX_EPOCH);
        assert!(hints.throttled);
        assert_eq!(hints.retry_after, Some(Duration::from_secs(2)));
        assert!(!read_hints(503, |_| None, SystemTime::UNIX_EPOCH).throttled);
    }
}
