//! Judging a storm's runs: every run's figures from its rows, every
//! case's over its runs, then `summary.md`, `summary.json` and the plots.

use std::io;

use super::error::{StormError, io_err};
use super::storm::{Flags, Storm};
use super::summary::{CaseRun, ProtocolReport, RunReport, SERVER_ONLY, StormReport, TargetReport};
use super::tables;
use crate::plot::{self, RecoveryCurve, RunChart};
use crate::report::aggregate::CaseFigures;
use crate::report::chain::{ChainFigures, ChainSpread, chain_figures};
use crate::report::proxy_figures::ProxyFigures;
use crate::report::verdict::{Figures, STREAK, figures};

/// Judges every run, aggregates every case, writes `summary.md`,
/// `summary.json` and the plots, and returns the report.
pub(super) fn write(
    storm: &Storm,
    flags: &dyn Flags,
    mut runs: Vec<CaseRun>,
) -> Result<StormReport, StormError> {
    let p = &storm.scenario.protocol;
    // Case by case, each case's runs in order, whatever order the engine
    // ran them in (the real one goes repetition by repetition).
    let cases = &storm.scenario.cases;
    let place = |run: &CaseRun| cases.iter().position(|c| c.name == run.case.name);
    runs.sort_by_key(|run| (place(run), run.rep));
    let mut reports = Vec::new();
    for run in &runs {
        let client = storm.client_config(&run.case, run.rep, flags)?;
        let name = storm.run_name(&run.case, run.rep);
        reports.push(RunReport {
            case: run.case.name.clone(),
            run: run.rep + 1,
            seed: storm.seed(run.rep),
            strategy: client.policy_name(),
            figures: figures(&run.client, &run.server, &run.timeline),
            chain: (!run.tiers.is_empty())
                .then(|| chain_figures(&run.tiers, &run.server, &run.client)),
            timeline: run.timeline,
            client_behind: run.client_behind,
            client_csv: format!("{name}.client.csv"),
            server_csv: storm
                .scenario
                .target
                .is_none()
                .then(|| format!("{name}.server.csv")),
            proxy: ProxyFigures::of(&run.proxy, &run.timeline),
        });
    }
    // A shard may make no run of a case.
    let cases = storm
        .scenario
        .cases
        .iter()
        .filter(|case| reports.iter().any(|r| r.case == case.name))
        .map(|case| {
            let figures: Vec<&Figures> = reports
                .iter()
                .filter(|r| r.case == case.name)
                .map(|r| &r.figures)
                .collect();
            let chains: Vec<&ChainFigures> = reports
                .iter()
                .filter(|r| r.case == case.name)
                .filter_map(|r| r.chain.as_ref())
                .collect();
            CaseFigures::of(&case.name, &figures).with_chain(ChainSpread::of(&chains))
        })
        .collect();
    let target = storm.scenario.target.as_ref().map(|url| TargetReport {
        url: url.clone(),
        outage: storm
            .scenario
            .outage
            .as_ref()
            .map_or_else(String::new, ToString::to_string),
        not_measured: SERVER_ONLY.to_vec(),
    });
    let report = StormReport {
        target,
        protocol: ProtocolReport {
            warmup_s: p.warmup.as_secs_f64(),
            pause_s: p.pause.as_secs_f64(),
            observe_s: p.observe.as_secs_f64(),
            time_scale: storm.time_scale,
            report_interval_s: p.report_interval.as_secs_f64(),
            tail_s: p.tail.as_secs_f64(),
            seed: storm.scenario.seed,
            runs: storm.runs(),
        },
        runs: reports,
        cases,
    };
    write_summaries(storm, &report)?;
    draw(storm, &report, &runs).map_err(|e| StormError::Child(format!("plots: {e}")))?;
    Ok(report)
}

/// Every case's chart (its first run), the goodput of every case's first
/// run on one chart, and the recovery-time distribution of every case.
fn draw(storm: &Storm, report: &StormReport, runs: &[CaseRun]) -> plot::DrawResult {
    let charts: Vec<RunChart> = report
        .runs
        .iter()
        .zip(runs)
        .filter(|(r, _)| r.run == 1)
        .map(|(r, run)| RunChart {
            name: &r.case,
            recovery_s: r.figures.recovery_s,
            timeline: r.timeline,
            client: &run.client,
            server: &run.server,
            proxy: &run.proxy,
        })
        .collect();
    plot::storm_charts(&storm.out, &charts, storm.png)?;
    let curves: Vec<RecoveryCurve> = report
        .cases
        .iter()
        .map(|c| RecoveryCurve {
            name: &c.name,
            back_s: report
                .runs
                .iter()
                .filter(|r| r.case == c.name)
                .map(|r| r.figures.back_s)
                .collect(),
        })
        .collect();
    // The window, and the last time after the resume at which a run could
    // still show a recovery (a streak needs its intervals), as measured.
    let seconds = |ms: u64| ms as f64 / 1000.0;
    let window_s = report
        .runs
        .iter()
        .map(|r| seconds(r.timeline.end_ms - r.timeline.resume_ms));
    let p = &report.protocol;
    let streak_s = (STREAK - 1) as f64 * p.report_interval_s / p.time_scale;
    let span_s = runs.iter().filter_map(|run| {
        let last = run.client.last()?;
        Some(seconds(last.unix_ms.saturating_sub(run.timeline.resume_ms)) - streak_s)
    });
    let ext = plot::extension(storm.png);
    plot::recovery_cdf(
        &storm.out.join(format!("recovery.{ext}")),
        &curves,
        window_s.fold(0.0, f64::max),
        span_s.fold(1.0, f64::max),
        storm.png,
    )
}

fn write_summaries(storm: &Storm, report: &StormReport) -> Result<(), StormError> {
    let markdown = tables::markdown(storm.engine.name(), report);
    std::fs::write(storm.out.join("summary.md"), markdown).map_err(io_err("write summary.md"))?;
    let json = serde_json::to_string_pretty(report)
        .map_err(io::Error::other)
        .map_err(io_err("summary.json"))?;
    std::fs::write(storm.out.join("summary.json"), json + "\n")
        .map_err(io_err("write summary.json"))
}
