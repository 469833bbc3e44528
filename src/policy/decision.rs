//! What a throttle says of an attempt about to go out.

use std::time::Duration;

/// Whether an attempt may go out now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send it.
    Allow,
    /// Refused locally: the attempt fails at once as an error.
    Reject,
    /// Send it once this long has passed: a rate limiter's token is owed
    /// (the AWS SDKs' adaptive mode blocks the request until then).
    Wait(Duration),
}
