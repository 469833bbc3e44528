//! What the closed-loop probe reports: each level, and why it ended.

use serde::{Deserialize, Serialize};

use super::config::ProbeConfig;
use crate::model::fit::Level;

/// Below this share of the hold spent in attempts, Little's law failed:
/// the prober, not the service, set the pace.
pub const LITTLE_BELOW: f64 = 0.9;

/// From this share of the hold running or waiting to run, the prober's
/// one thread was the bottleneck: its answers waited for it, and their
/// latencies include that wait.
pub const BUSY_FROM: f64 = 0.9;

/// What one level measured over its hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReport {
    /// What the fit takes: concurrency, throughput, latencies of the
    /// successes, error share. With no success, the latencies are those
    /// of the failures (or the hold, when no attempt ended in it) and the
    /// error share is 1.
    pub level: Level,
    /// Attempts that ended within the hold: `ok + errors`.
    pub attempts: u64,
    /// Attempts answered 2xx.
    pub ok: u64,
    /// Attempts that failed: another status, a broken connection, or a
    /// timeout.
    pub errors: u64,
    /// Of the errors, those that timed out.
    pub timeouts: u64,
    /// `X R / N` over the hold: the share of it the clients spent waiting
    /// on an attempt (1 when the service set the pace; module `tally`).
    pub little_ratio: f64,
    /// The share of the hold the prober's thread ran on a CPU or waited
    /// in a run queue for one (its CPU time alone where the system does
    /// not say).
    pub prober_busy: f64,
    /// The prober, not the service, set the pace: Little's law failed
    /// (`little_ratio` below [`LITTLE_BELOW`]) or the prober's thread
    /// was busy ([`BUSY_FROM`] of the hold or more).
    pub prober_bound: bool,
}

/// Why the probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeEnd {
    /// Every level was probed.
    Done,
    /// The last level's p99 passed [`ProbeConfig::max_latency`].
    LatencyBound,
    /// The last level's error share passed
    /// [`ProbeConfig::max_error_share`].
    Errors,
    /// Stopped by the caller; the level in progress was dropped.
    Interrupted,
}

/// The closed-loop probe's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Every level held its whole time, in the order probed.
    pub levels: Vec<LevelReport>,
    /// Why it ended.
    pub end: ProbeEnd,
}

/// What the probe tells its caller as it goes.
#[derive(Debug, Clone, Copy)]
pub enum ProbeEvent<'a> {
    /// A level's clients are starting.
    LevelStarted {
        /// Its clients.
        concurrency: u32,
    },
    /// A level has been held and measured.
    LevelDone(&'a LevelReport),
}

impl LevelReport {
    /// Why the probe ends after this level, if it does: its error share
    /// first, then its p99.
    pub(super) fn end(&self, config: &ProbeConfig) -> Option<ProbeEnd> {
        if self.attempts == 0 {
            // Nothing ended within the hold: every attempt took longer.
            Some(ProbeEnd::LatencyBound)
        } else if self.level.error_share > config.max_error_share {
            Some(ProbeEnd::Errors)
        } else if self.level.latency_p99_s > config.max_latency.as_secs_f64() {
            Some(ProbeEnd::LatencyBound)
        } else {
            None
        }
    }
}
