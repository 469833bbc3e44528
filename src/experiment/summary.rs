//! A storm's results: each case's figures and verdict, the summary table,
//! `summary.md`, `summary.json` and the plots.

use std::io;

use serde::Serialize;

use super::error::{StormError, io_err};
use super::scenario::Case;
use super::storm::{Flags, Storm};
use crate::plot::{self, RunChart};
use crate::report::rows::{ClientRow, ServerRow};
use crate::report::verdict::{Figures, STREAK, Timeline, figures};

/// A finished case: its rows and when its phases happened.
#[derive(Debug, Clone)]
pub(super) struct CaseRun {
    /// The case.
    pub case: Case,
    /// When its phases happened.
    pub timeline: Timeline,
    /// The client's report rows.
    pub client: Vec<ClientRow>,
    /// The server's report rows.
    pub server: Vec<ServerRow>,
}

/// The result of one case's run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The case's name.
    pub case: String,
    /// The client's retry strategy.
    pub strategy: &'static str,
    /// The run's figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// When its phases happened.
    pub timeline: Timeline,
    /// Client CSV file name, in the results folder.
    pub client_csv: String,
    /// Server CSV file name, in the results folder.
    pub server_csv: String,
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
    /// Client seed.
    pub seed: u64,
}

/// A whole storm: the protocol and one report per case.
#[derive(Debug, Clone, Serialize)]
pub struct StormReport {
    /// The protocol.
    pub protocol: ProtocolReport,
    /// One per case, in the scenario's order.
    pub runs: Vec<RunReport>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// The summary table, as Markdown (also printed on the terminal).
pub fn summary_table(report: &StormReport) -> String {
    let mut out = String::from(
        "| case | baseline OK/s | recovered | recovery (s) | peak concurrency | wasted | amplification | p99 before (ms) | p99 after (ms) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &report.runs {
        let f = &r.figures;
        out.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.case,
            f.baseline_ok_per_s,
            if f.recovered { "yes" } else { "no" },
            opt(f.recovery_s, 1),
            f.peak_concurrency,
            f.wasted,
            opt(f.amplification, 2),
            opt(f.p99_before_ms, 1),
            opt(f.p99_after_ms, 1),
        ));
    }
    out
}

/// The second table: how the system came back after the resume.
pub fn after_resume_table(report: &StormReport) -> String {
    let mut out = String::from(
        "| case | calm (s) | 50 % of baseline (s) | 80 % of baseline (s) | best OK/s | concurrency at end |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &report.runs {
        let f = &r.figures;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.case,
            opt(f.calm_s, 1),
            opt(f.to_50pct_s, 1),
            opt(f.to_80pct_s, 1),
            opt(f.best_ok_per_s, 1),
            f.end_concurrency.map_or("-".to_string(), |c| c.to_string()),
        ));
    }
    out
}

/// Judges every run, writes `summary.md`, `summary.json` and the plots,
/// and returns the report.
pub(super) fn write(
    storm: &Storm,
    flags: &dyn Flags,
    runs: Vec<CaseRun>,
) -> Result<StormReport, StormError> {
    let p = &storm.scenario.protocol;
    let mut reports = Vec::new();
    for run in &runs {
        let client = storm.client_config(&run.case, flags)?;
        reports.push(RunReport {
            case: run.case.name.clone(),
            strategy: client.strategy.name(),
            figures: figures(&run.client, &run.server, &run.timeline),
            timeline: run.timeline,
            client_csv: format!("{}.client.csv", run.case.name),
            server_csv: format!("{}.server.csv", run.case.name),
        });
    }
    let report = StormReport {
        protocol: ProtocolReport {
            warmup_s: p.warmup.as_secs_f64(),
            pause_s: p.pause.as_secs_f64(),
            observe_s: p.observe.as_secs_f64(),
            time_scale: storm.time_scale,
            report_interval_s: p.report_interval.as_secs_f64(),
            seed: storm.scenario.seed,
        },
        runs: reports,
    };
    write_summaries(storm, &report)?;
    let charts: Vec<RunChart> = report
        .runs
        .iter()
        .zip(&runs)
        .map(|(r, run)| RunChart {
            name: &r.case,
            recovery_s: r.figures.recovery_s,
            timeline: r.timeline,
            client: &run.client,
            server: &run.server,
        })
        .collect();
    plot::storm_charts(&storm.out, &charts, storm.png)
        .map_err(|e| StormError::Child(format!("plots: {e}")))?;
    Ok(report)
}

fn write_summaries(storm: &Storm, report: &StormReport) -> Result<(), StormError> {
    let p = &report.protocol;
    let markdown = format!(
        "# Storm summary\n\n\
         Warm-up {} s, pause {} s, observation {} s (time compressed {}x; \
         times and rates below are as measured), client report interval {} s, seed {}; \
         the {} engine. The scenario is in scenario.toml.\n\n{}\n\
         Recovered: OK/s back to 90 % of the baseline for {STREAK} consecutive report \
         intervals, the first starting within the observation, with no relapse of as many \
         intervals afterwards. Recovery: seconds from resume to the start of that streak. \
         Wasted: requests the server finished (or dropped, with --on-disconnect cancel) \
         after their client had gone. Amplification: attempts sent per logical request \
         started, from the stop on. p99: OK-weighted mean of the intervals' p99, before \
         the stop and after recovery (or resume).\n\n\
         ## After the resume\n\n{}\n\
         Calm: seconds from resume until the server's concurrency, past its peak, is back \
         to at most twice its warm-up mean. 50 % and 80 %: seconds from resume to the start \
         of the first interval whose OK/s reached that share of the baseline. Best OK/s: \
         the best interval after the resume. Concurrency at end: at the server's last \
         report. \"-\": never.\n",
        p.warmup_s,
        p.pause_s,
        p.observe_s,
        p.time_scale,
        p.report_interval_s,
        p.seed,
        storm.engine.name(),
        summary_table(report),
        after_resume_table(report),
    );
    std::fs::write(storm.out.join("summary.md"), markdown).map_err(io_err("write summary.md"))?;
    let json = serde_json::to_string_pretty(report)
        .map_err(io::Error::other)
        .map_err(io_err("summary.json"))?;
    std::fs::write(storm.out.join("summary.json"), json + "\n")
        .map_err(io_err("write summary.json"))
}
