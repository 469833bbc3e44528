//! What a client reads from an answer besides its status: the hints a
//! backoff, the retry limits or a throttle may act on. One function for
//! the networked client and for the check against the libraries
//! (`examples/policy_trace.rs`), so both read a header the same way.

use std::time::SystemTime;

use crate::model::outcome::{AMZ_RETRY_AFTER_HEADER, Hints, PUSHBACK_HEADER};
use crate::policy::retry_limits::parse_retry_after;

/// The error codes botocore takes for throttling whatever the status
/// (`standard.ThrottledRetryableChecker`, the same in 1.43 and 1.44). The
/// project's server sends none; an answer that names one sets
/// `Hints::throttle_code`.
pub const AWS_THROTTLING_CODES: [&str; 14] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

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
        throttle_code: false,
        amz_retry_after: header(AMZ_RETRY_AFTER_HEADER).and_then(parse_amz_retry_after),
        status: Some(status),
        grpc: None,
    }
}

/// `x-amz-retry-after` as botocore 1.44 reads it: an integer number of
/// milliseconds (`int(value) / 1000`); a negative or unreadable value is
/// ignored.
pub fn parse_amz_retry_after(value: &str) -> Option<std::time::Duration> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .map(std::time::Duration::from_millis)
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

    #[test]
    fn x_amz_retry_after_is_whole_milliseconds() {
        let headers = |name: &str| (name == "x-amz-retry-after").then_some(" 2500 ");
        let hints = read_hints(429, headers, SystemTime::UNIX_EPOCH);
        assert_eq!(hints.amz_retry_after, Some(Duration::from_millis(2500)));
        assert_eq!(hints.retry_after, None);
        assert_eq!(parse_amz_retry_after("-5"), None);
        assert_eq!(parse_amz_retry_after("1.5"), None);
        assert_eq!(parse_amz_retry_after("0"), Some(Duration::ZERO));
    }
}
