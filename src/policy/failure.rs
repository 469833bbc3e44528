//! What a failed attempt told that a backoff may read (its own file, so
//! that the shipped backoffs need not import the strategies that hold
//! them).

use std::time::Duration;

use crate::model::grpc::Code;

/// What a failed attempt told that a backoff may read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failure {
    /// A throttling answer (429).
    pub throttled: bool,
    /// The answer named an AWS throttling error code (`ThrottlingException`,
    /// `SlowDown`, ...), whatever its status: botocore's throttling in
    /// every release. The project's server never sends one.
    pub throttle_code: bool,
    /// The server's retry-after hint (HTTP `Retry-After`), read.
    pub retry_after: Option<Duration>,
    /// The AWS SDKs' hint, `x-amz-retry-after` in integer milliseconds,
    /// read (what botocore 1.44 reads; it ignores `Retry-After`).
    pub amz_retry_after: Option<Duration>,
    /// The answer's HTTP status; none for a refused connection or a
    /// timeout (which gRPC's policy reads).
    pub status: Option<u16>,
    /// A gRPC call's status, if the answer carried one.
    pub grpc: Option<Code>,
}

impl Failure {
    /// What a failed attempt's answer told, as a backoff reads it.
    pub fn of(hints: &crate::model::outcome::Hints) -> Self {
        Failure {
            throttled: hints.throttled,
            throttle_code: hints.throttle_code,
            retry_after: hints.retry_after,
            amz_retry_after: hints.amz_retry_after,
            status: hints.status,
            grpc: hints.grpc,
        }
    }
}
