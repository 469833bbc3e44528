//! What a limit algorithm learns from each request that leaves.

/// One sample: what the algorithm learns from a request that left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Sample {
    /// From admission to leaving, in nanoseconds.
    pub(super) rtt_ns: u64,
    /// Requests in flight at its admission, itself included.
    pub(super) inflight: u64,
    /// Whether it was dropped rather than served.
    pub(super) dropped: bool,
}

/// A sample of `rtt_ms` milliseconds, for tests.
#[cfg(test)]
pub(super) fn sample(rtt_ms: u64, inflight: u64, dropped: bool) -> Sample {
    Sample {
        rtt_ns: rtt_ms * 1_000_000,
        inflight,
        dropped,
    }
}
