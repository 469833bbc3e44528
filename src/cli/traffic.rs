//! Open and partly-open traffic's flags (docs/traffic.md): sessions
//! that arrive whatever the service does, instead of a closed population.

use clap::Args;

use super::values::{positive, session_requests};
use crate::model::open::{OpenTraffic, SessionLength};

/// The default bound on the sessions one process holds at once. A session
/// took about 0.54 KB in virtual time, in a storm holding 3 million (its
/// user's slot and its events); in the real client, holding 9,000, about
/// 4 KB while the server was stopped (its task, and an attempt in flight
/// on a socket) and 12 KB through the resume, when every session's
/// connection is answered at once (`scripts/bench.sh open`, results/
/// bench.md). A million take about 0.5 GB in virtual time and, at that
/// rate, 4 to 12 GB in the real client, which this machine's 24 GB holds;
/// the real client also needs a descriptor for each attempt in flight.
pub const DEFAULT_MAX_OUTSTANDING: u64 = 1_000_000;

/// Flags of open and partly-open traffic.
#[derive(Debug, Clone, Args)]
pub struct TrafficArgs {
    /// Open traffic: logical requests arrive as a Poisson process of R a
    /// second, whatever the service does (a user stuck in a retry does not
    /// hold the next one back), each retried under the policy until it
    /// succeeds or is given up, then gone. Instead of --clients.
    #[arg(long, value_parser = positive, value_name = "R", conflicts_with_all = ["clients", "ramp_up"], help_heading = "Open traffic")]
    pub arrival_rate: Option<f64>,
    /// Partly-open traffic: each arrival is a session making a geometric
    /// number of requests with mean K, a think time (--lambda) between
    /// them; demand is about R * K req/s. 1 is open traffic.
    #[arg(long, default_value = "1", value_parser = session_requests, value_name = "K", requires = "arrival_rate", help_heading = "Open traffic")]
    pub session_requests: f64,
    /// The most sessions this process holds at once (its memory), counted
    /// as "outstanding" in the report line and the CSV: a session is held
    /// from its arrival until its last request ends, thinking between two
    /// requests included, so with --session-requests above 1 it counts
    /// sessions, not requests in progress; with 1 (open traffic) each is
    /// one request. An arrival beyond it is refused at the source, never
    /// sent, and counted ("refused" in the report line, refused_per_s in
    /// the CSV).
    #[arg(long, default_value_t = DEFAULT_MAX_OUTSTANDING, value_parser = clap::value_parser!(u64).range(1..), value_name = "N", requires = "arrival_rate", help_heading = "Open traffic")]
    pub max_outstanding: u64,
}

impl TrafficArgs {
    /// The open traffic asked for, if any.
    pub fn open(&self) -> Result<Option<OpenTraffic>, String> {
        let Some(rate) = self.arrival_rate else {
            return Ok(None);
        };
        Ok(Some(OpenTraffic {
            rate,
            session: SessionLength::new(self.session_requests)?,
            max_outstanding: self.max_outstanding,
        }))
    }
}
