//! What a user's attempts and logical requests produce: the records both
//! engines hand to the report layer.

use std::time::Duration;

use super::grpc::Code;

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx response arrived in time.
    Ok,
    /// Connect failure, reset, or a non-2xx status.
    Error,
    /// No full response within the timeout.
    Timeout,
    /// Cancelled in flight because another attempt of the same request
    /// succeeded first (a hedge lost): its connection is closed.
    Cancelled,
}

/// What an answer told the client besides its outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// The `Retry-After` header, read.
    pub retry_after: Option<Duration>,
    /// gRPC's `grpc-retry-pushback-ms` header: retry after exactly this
    /// many milliseconds, or, negative, do not retry.
    pub pushback_ms: Option<i64>,
    /// A throttling answer (429).
    pub throttled: bool,
    /// The answer named an AWS throttling error code (the project's server
    /// never sends one; the check against botocore does).
    pub throttle_code: bool,
    /// The `x-amz-retry-after` header (integer milliseconds), read.
    pub amz_retry_after: Option<Duration>,
    /// The answer's HTTP status; none for a refused connection or a
    /// timeout.
    pub status: Option<u16>,
    /// A gRPC call's status, read from `grpc-status` (trailers, or the
    /// headers of a Trailers-Only answer); none for a plain HTTP request
    /// or no answer.
    pub grpc: Option<Code>,
}

/// The AWS SDKs' retry-after header, in integer milliseconds.
pub const AMZ_RETRY_AFTER_HEADER: &str = "x-amz-retry-after";

/// The header a server pushes back with, as gRPC clients read it.
pub const PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// How one attempt went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttemptRecord {
    /// How it ended.
    pub outcome: Outcome,
    /// A retry (not the first attempt of its logical request).
    pub is_retry: bool,
    /// Refused locally by a throttle (never sent).
    pub rejected_locally: bool,
    /// Time from its intended start to its end.
    pub latency: Duration,
    /// How late it started against its intended instant (the load
    /// generator's own lag).
    pub lateness: Duration,
}

/// How a logical request ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRecord {
    /// Attempts it made, local rejections included.
    pub attempts: u32,
    /// Time from its first attempt's intended start to its success, or
    /// `None` if it was given up.
    pub latency: Option<Duration>,
    /// Given up because a throttle refused a retry.
    pub throttled: bool,
}
