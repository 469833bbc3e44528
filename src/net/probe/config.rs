//! What the closed-loop probe is asked to do, checked before it starts.

use std::io;
use std::time::Duration;

use crate::model::wire::Wire;

/// What the closed-loop probe does.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeConfig {
    /// The service: an `http://` or `https://` URL, whose path is
    /// requested and whose host and port are sent as `Host` (or
    /// `:authority`).
    pub target: String,
    /// How the requests go on the wire: method, headers and body, TLS's
    /// trust, HTTP/2, a gRPC call (each client then has a connection of
    /// its own with one stream at a time).
    pub wire: Wire,
    /// The concurrencies to probe, in this order (each at least 1).
    pub levels: Vec<u32>,
    /// How long each level runs before it is measured.
    pub warmup: Duration,
    /// How long each level is measured (more than zero).
    pub hold: Duration,
    /// The probe stops after the first level whose p99 passes this.
    pub max_latency: Duration,
    /// The probe stops after the first level whose error share passes
    /// this (0 to 1).
    pub max_error_share: f64,
    /// A request unanswered this long (connecting included) is an error, timed
    /// out, and its connection is closed (more than zero).
    pub timeout: Duration,
}

impl ProbeConfig {
    /// Refuses what cannot be probed: a concurrency of 0, a zero hold or
    /// timeout. The target is checked when it is resolved.
    pub(super) fn check(&self) -> io::Result<()> {
        if self.levels.contains(&0) {
            return Err(invalid(
                "a concurrency of 0: a level holds at least one client",
            ));
        }
        longer_than_zero("the hold and the timeout", &[self.hold, self.timeout])
    }
}

/// An error saying what in the configuration cannot be probed.
pub(super) fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.into())
}

/// Refuses a probe that opens `connections` connections at once (`what`,
/// in words) where the open-file limit, raised as far as it goes, is below
/// what they need: each would fail on the prober's side, which says
/// nothing of the service.
pub(super) fn enough_descriptors(connections: u32, what: &str) -> io::Result<()> {
    let needed = u64::from(connections) + 64;
    match crate::net::rlimit::raise_nofile() {
        Some(limit) if limit < needed => Err(invalid(format!(
            "the open-file limit is {limit}, below the {needed} descriptors {what} of \
             {connections} connections needs: raise it (`ulimit -n`) or make it smaller"
        ))),
        _ => Ok(()),
    }
}

/// Refuses a zero among `durations`, which `what` names.
pub(super) fn longer_than_zero(what: &str, durations: &[Duration]) -> io::Result<()> {
    if durations.iter().any(Duration::is_zero) {
        Err(invalid(format!("{what} must be longer than zero")))
    } else {
        Ok(())
    }
}
