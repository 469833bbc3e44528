//! A storm's results, as data: each run's rows, figures and verdict, and
//! each case's figures over its runs (what `summary.json` holds).

use serde::Serialize;

use super::scenario::Case;
use crate::report::aggregate::CaseFigures;
use crate::report::chain::{ChainFigures, TierRows};
use crate::report::histogram::Percentiles;
use crate::report::proxy::ProxyRow;
use crate::report::proxy_figures::ProxyFigures;
use crate::report::rows::{ClientRow, ServerRow};
#[cfg(doc)]
use crate::report::status::ClientTotals;
use crate::report::verdict::{Figures, Timeline};

/// A finished run: repetition `rep` of a case, its rows and when its
/// phases happened.
#[derive(Debug, Clone)]
pub(super) struct CaseRun {
    /// The case.
    pub case: Case,
    /// Which repetition, from 0.
    pub rep: u32,
    /// When its phases happened.
    pub timeline: Timeline,
    /// The client's report rows.
    pub client: Vec<ClientRow>,
    /// The server's report rows: the backend's, behind any tiers.
    pub server: Vec<ServerRow>,
    /// Each tier's server rows and calls' rows, from the client inward.
    pub tiers: Vec<TierRows>,
    /// The fault proxy's report rows, against a target through one.
    pub proxy: Vec<ProxyRow>,
    /// The client's start lateness, if it fell behind its users' schedule
    /// ([`ClientTotals::fell_behind`]).
    pub client_behind: Option<Percentiles>,
}

/// The result of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The case's name.
    pub case: String,
    /// Which repetition of the case, from 1.
    pub run: u32,
    /// Its clients' seed.
    pub seed: u64,
    /// The client's retry strategy.
    pub strategy: &'static str,
    /// The run's figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// A chain's figures per layer (`tiers`, from the client inward, the
    /// backend last) and end to end; absent for a client against a server.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainFigures>,
    /// When its phases happened.
    pub timeline: Timeline,
    /// How late the client started its attempts, there only if it fell
    /// behind its users' schedule (a real run's client short of CPU): its
    /// load on the server was then lighter and later than the model's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_behind: Option<Percentiles>,
    /// Client CSV file name, in the results folder.
    pub client_csv: String,
    /// Server CSV file name, in the results folder; none against a target.
    pub server_csv: Option<String>,
    /// What its fault proxy saw, against a target through one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyFigures>,
}

/// The figures only the project's server measures, by their keys in
/// `summary.json`: against a target they are not measured (null).
pub const SERVER_ONLY: [&str; 6] = [
    "peak_concurrency",
    "wasted",
    "wasted_s",
    "calm_s",
    "end_concurrency",
    "server_csv",
];

/// A storm of a service the project did not write.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// Where every case's client went.
    pub url: String,
    /// How its outage was caused (`sigstop=PID`).
    pub outage: String,
    /// The keys of the figures not measured, null in every run and case:
    /// [`SERVER_ONLY`].
    pub not_measured: Vec<&'static str>,
}

/// The protocol as run, for the summary.
#[derive(Debug, Clone, Serialize)]
pub struct ProtocolReport {
    /// Warm-up, seconds (full scale).
    pub warmup_s: f64,
    /// Pause, seconds (full scale).
    pub pause_s: f64,
    /// Observation, seconds (full scale).
    pub observe_s: f64,
    /// Time compression (10 with --quick).
    pub time_scale: f64,
    /// Client report interval, seconds (full scale).
    pub report_interval_s: f64,
    /// How long the clients ran on after the window, seconds (full scale).
    pub tail_s: f64,
    /// The first repetition's seed (repetition `i` uses `seed + i - 1`).
    pub seed: u64,
    /// Repetitions of every case.
    pub runs: u32,
}

/// A whole storm: the protocol, every run, and every case over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct StormReport {
    /// The protocol.
    pub protocol: ProtocolReport,
    /// The target, if the storm went to a service of the user's instead of
    /// the project's server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetReport>,
    /// Every run, case by case in the scenario's order, repetitions in
    /// order.
    pub runs: Vec<RunReport>,
    /// Every case over its runs, in the scenario's order.
    pub cases: Vec<CaseFigures>,
}
