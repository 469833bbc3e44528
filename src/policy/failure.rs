//! What a failed attempt told that a backoff may read (its own file, so
//! that the shipped backoffs need not import the strategies that hold
//! them).

use std::time::Duration;

/// What a failed attempt told that a backoff may read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failure {
    /// A throttling answer (429).
    pub throttled: bool,
    /// The server's retry-after hint, read.
    pub retry_after: Option<Duration>,
}
