//! What gRPC clients do that differs by implementation, and how a gRPC
//! client sees the project's HTTP answers.
//!
//! The retry backoff itself is [`super::grpc_delay`]; the hedging schedule
//! is `policy::hedging`. This module holds the rest: which answers a gRPC
//! policy retries (and so counts against its throttle), and the moments at
//! which grpc-go and C-core on one side and grpc-js on the other consult
//! the throttle and read a pushback.

use crate::model::grpc::{Code, Codes};

/// A gRPC implementation, where they differ in a way that moves a storm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GrpcImplementation {
    /// grpc-go and C-core (grpcio, grpc++): the retry throttle records a
    /// failure and decides at once, before the backoff; hedging as gRFC
    /// A6's text has it.
    #[default]
    Core,
    /// grpc-js: the failure takes its token at once, but the throttle
    /// decides when the backoff timer fires; hedges never ask it.
    Js,
}

impl GrpcImplementation {
    /// Whether the retry throttle decides on a retry when its backoff ends
    /// (grpc-js, `retrying-call.ts`: the backoff timer's callback asks
    /// `canRetryCall`), so that tokens earned or lost meanwhile count and
    /// a refused call ends a backoff after its failure; grpc-go and C-core
    /// decide at the failure.
    pub fn decides_after_backoff(self) -> bool {
        self == GrpcImplementation::Js
    }

    /// Whether a hedge asks the throttle before it goes (A6's text; grpc-js
    /// never asks).
    pub fn hedges_ask_throttle(self) -> bool {
        self == GrpcImplementation::Core
    }
}

/// Whether a gRPC client whose policy retries `codes` (by default
/// `UNAVAILABLE`, gRFC A6's example, and the status a shedding or
/// overloaded server maps to) retries an answer with gRPC status `grpc`,
/// or, without one, HTTP status `status`, or none (a refused connection,
/// a timeout). A hedging policy's non-fatal codes are read alike.
///
/// gRPC maps an HTTP status without a `grpc-status` as
/// `doc/http-grpc-status-mapping.md` says ([`Code::from_http`]): 429, 502,
/// 503 and 504 are `UNAVAILABLE`; 400 `INTERNAL`, 401 `UNAUTHENTICATED`,
/// 403 `PERMISSION_DENIED`, 404 `UNIMPLEMENTED`, any other `UNKNOWN`. A
/// refused connection is `UNAVAILABLE`. An attempt timed out by the
/// client's own `--timeout` is the project's reading (A6 has no
/// per-attempt timeout): retried, as a failure that would have been
/// `UNAVAILABLE`, whatever `codes` lists.
pub fn grpc_retryable(status: Option<u16>, grpc: Option<Code>, codes: Codes) -> bool {
    match grpc.or(status.map(Code::from_http)) {
        None => true,
        Some(code) => codes.contains(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::grpc::DEFAULT_RETRYABLE;

    #[test]
    fn only_what_grpc_maps_to_unavailable_is_retried() {
        for s in [429, 502, 503, 504] {
            assert!(grpc_retryable(Some(s), None, DEFAULT_RETRYABLE), "{s}");
        }
        for s in [400, 401, 403, 404, 500, 501, 505] {
            assert!(!grpc_retryable(Some(s), None, DEFAULT_RETRYABLE), "{s}");
        }
        assert!(grpc_retryable(None, None, DEFAULT_RETRYABLE));
        // A gRPC status wins over the HTTP status it came with.
        assert!(grpc_retryable(
            Some(200),
            Some(Code::Unavailable),
            DEFAULT_RETRYABLE
        ));
        assert!(!grpc_retryable(
            Some(200),
            Some(Code::ResourceExhausted),
            DEFAULT_RETRYABLE
        ));
        assert!(!grpc_retryable(
            Some(503),
            Some(Code::Internal),
            DEFAULT_RETRYABLE
        ));
    }

    #[test]
    fn the_codes_named_are_retried_and_no_others() {
        let codes = Codes::of(&[Code::ResourceExhausted, Code::Aborted]);
        assert!(grpc_retryable(
            Some(200),
            Some(Code::ResourceExhausted),
            codes
        ));
        assert!(grpc_retryable(Some(200), Some(Code::Aborted), codes));
        // A 503 maps to UNAVAILABLE, which this policy does not retry.
        assert!(!grpc_retryable(Some(503), None, codes));
        assert!(!grpc_retryable(Some(200), Some(Code::Unavailable), codes));
        // No status at all (a refused connection, a timeout) is retried
        // whatever the list.
        assert!(grpc_retryable(None, None, codes));
    }
}
