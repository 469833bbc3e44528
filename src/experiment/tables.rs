//! A storm's tables, in Markdown: every run's figures, every case's over
//! its runs, and `summary.md` around them with their definitions.

use super::summary::StormReport;
use crate::report::estimate::{Percentiles3, Spread};
use crate::report::verdict::STREAK;

impl StormReport {
    /// The table for the terminal: every run's verdict, or with several
    /// runs every case's; then the runs whose client fell behind, if any.
    pub fn table(&self) -> String {
        let table = if self.protocol.runs > 1 {
            cases(self)
        } else {
            runs(self)
        };
        let notes: Vec<String> = [behind(self), refused(self)]
            .into_iter()
            .flatten()
            .collect();
        match notes.is_empty() {
            true => table,
            false => format!("{table}\n{}", notes.join("\n")),
        }
    }
}

/// A note naming every run whose client refused arrivals at the source
/// (open traffic beyond its --max-outstanding), with how many; none if
/// none did.
pub fn refused(report: &StormReport) -> Option<String> {
    let refused: Vec<String> = report
        .runs
        .iter()
        .filter_map(|r| {
            let n = r.figures.refused_at_source.filter(|&n| n > 0)?;
            Some(format!("{} ({n})", run_name(report, &r.case, r.run)))
        })
        .collect();
    (!refused.is_empty()).then(|| {
        format!(
            "Note: the client refused arrivals at the source in {}: it held its bound of \
             sessions (--max-outstanding), so the server saw less than the traffic asked for, \
             and those requests count as neither succeeded nor given up.\n",
            refused.join(", ")
        )
    })
}

/// A warning naming every run whose client fell behind its users'
/// schedule, with how late it started its attempts; none if none did.
pub fn behind(report: &StormReport) -> Option<String> {
    let late: Vec<String> = report
        .runs
        .iter()
        .filter_map(|r| {
            let p = r.client_behind?;
            Some(format!(
                "{} (start lateness p99 {} ms, max {} ms)",
                run_name(report, &r.case, r.run),
                opt(p.p99_ms, 1),
                opt(p.max_ms, 1)
            ))
        })
        .collect();
    (!late.is_empty()).then(|| {
        format!(
            "Warning: the client fell behind its users' schedule in {}: it started its attempts \
             later than they were due, so the server saw a lighter, later load than the model's, \
             and these runs' figures are the machine's as much as the policy's. Give the \
             clients more CPU: fewer runs side by side (--parallel, --in-turn), or full time \
             (no --quick).\n",
            late.join(", ")
        )
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// A figure only the project's server measures, as a table cell: "not
/// measured" against a target, "-" where a measured figure has no value.
fn server_only(report: &StormReport, v: Option<String>) -> String {
    match v {
        Some(v) => v,
        None if report.target.is_some() => "not measured".to_string(),
        None => "-".to_string(),
    }
}

/// A time over runs: `p10 / p50 / p90`, "never" where a quantile reaches
/// runs that never got there.
fn times(q: &Percentiles3) -> String {
    let t = |v: Option<f64>| v.map_or("never".to_string(), |v| format!("{v:.1}"));
    format!("{} / {} / {}", t(q.p10), t(q.p50), t(q.p90))
}

/// A figure over runs: its median, and its range when the runs differ.
fn spread(s: &Option<Spread>, digits: usize) -> String {
    match s {
        None => "-".to_string(),
        Some(s) if s.min == s.max => format!("{:.digits$}", s.median),
        Some(s) => format!(
            "{:.digits$} ({:.digits$}-{:.digits$})",
            s.median, s.min, s.max
        ),
    }
}

/// The name of a run in a table: its case, and with several runs its
/// repetition.
fn run_name(report: &StormReport, case: &str, run: u32) -> String {
    if report.protocol.runs > 1 {
        format!("{case} #{run}")
    } else {
        case.to_string()
    }
}

/// Every run's verdict and figures.
pub fn runs(report: &StormReport) -> String {
    let mut out = String::from(
        "| case | baseline OK/s | recovered | recovery (s) | peak concurrency | wasted | amplification | p99 before (ms) | p99 after (ms) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &report.runs {
        let f = &r.figures;
        out.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |\n",
            run_name(report, &r.case, r.run),
            f.baseline_ok_per_s,
            if f.recovered { "yes" } else { "no" },
            opt(f.recovery_s, 1),
            server_only(report, f.peak_concurrency.map(|c| c.to_string())),
            server_only(report, f.wasted.map(|w| w.to_string())),
            opt(f.amplification, 2),
            opt(f.p99_before_ms, 1),
            opt(f.p99_after_ms, 1),
        ));
    }
    out
}

/// How every run came back after the resume.
pub fn after_resume(report: &StormReport) -> String {
    let mut out = String::from(
        "| case | calm (s) | 50 % of baseline (s) | 80 % of baseline (s) | best OK/s | concurrency at end | wasted (server s) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &report.runs {
        let f = &r.figures;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            run_name(report, &r.case, r.run),
            match report.target {
                Some(_) => server_only(report, None),
                None => opt(f.calm_s, 1),
            },
            opt(f.to_50pct_s, 1),
            opt(f.to_80pct_s, 1),
            opt(f.best_ok_per_s, 1),
            server_only(report, f.end_concurrency.map(|c| c.to_string())),
            server_only(report, f.wasted_s.map(|w| format!("{w:.1}"))),
        ));
    }
    out
}

/// Every case over its runs: how often it recovered, with the 95 %
/// interval, its recovery time's quantiles, and the median (and range) of
/// the other figures.
pub fn cases(report: &StormReport) -> String {
    let mut out = String::from(
        "| case | runs | recovered | P(recovered) | 95 % interval | recovery p10 / p50 / p90 (s) | peak concurrency | wasted | amplification |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for c in &report.cases {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.2}-{:.2} | {} | {} | {} | {} |\n",
            c.name,
            c.runs,
            c.recovered_runs,
            c.p_recovered,
            c.p_recovered_ci[0],
            c.p_recovered_ci[1],
            times(&c.recovery_s),
            server_only(
                report,
                c.peak_concurrency.map(|_| spread(&c.peak_concurrency, 0))
            ),
            server_only(report, c.wasted.map(|_| spread(&c.wasted, 0))),
            spread(&c.amplification, 2),
        ));
    }
    out
}

/// Every chain's layers, case by case over its runs (medians, and ranges
/// where the runs differ), with its definitions; none without chains.
pub fn chains(report: &StormReport) -> Option<String> {
    let chained: Vec<_> = report
        .cases
        .iter()
        .filter_map(|c| Some((c, c.chain.as_ref()?)))
        .collect();
    if chained.is_empty() {
        return None;
    }
    let mut out = String::from(
        "## Every layer of the chains\n\n\
         | case | layer | attempts received | attempts sent | OK | failed | for gone callers | peak concurrency | peak calls in flight |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut ends = Vec::new();
    for (case, chain) in chained {
        let last = chain.tiers.len();
        for (i, t) in chain.tiers.iter().enumerate() {
            let layer = if i + 1 == last {
                "backend".to_string()
            } else {
                format!("tier {}", i + 1)
            };
            out.push_str(&format!(
                "| {} | {layer} | {} | {} | {} | {} | {} | {} | {} |\n",
                case.name,
                spread(&t.attempts_received, 0),
                spread(&t.attempts_sent, 0),
                spread(&t.ok, 0),
                spread(&t.failed, 0),
                spread(&t.work_for_gone_callers, 0),
                spread(&t.peak_concurrency, 0),
                spread(&t.peak_calls_in_flight, 0),
            ));
        }
        ends.push(format!(
            "{} {}",
            case.name,
            spread(&chain.backend_attempts_per_request, 2)
        ));
    }
    out.push_str(&format!(
        "\nBackend attempts per request the client started: {}.\n\n\
         Layers from the client inward. Attempts received: requests that reached the layer, \
         refused ones and those still held at its last report included. Attempts sent: its \
         calls' attempts inward. OK and failed: its answers (a tier fails when its call \
         fails or times out, or when it refuses at its own door). For gone callers: work \
         finished or held for callers that had gone, and a tier's calls whose caller went \
         before their answer. Peak concurrency: of its own work; a tier's calls waiting \
         inward are in the last column, at its reports.\n",
        ends.join(", ")
    ));
    Some(out)
}

/// What `summary.md` says of a target, if the storm went to one.
fn target(report: &StormReport) -> String {
    let Some(t) = &report.target else {
        return String::new();
    };
    format!(
        "Against the target {}, a service the storm did not start, every case in turn; the \
         outage: {}. Peak concurrency, wasted work, calm and the concurrency at the end are \
         what the project's server measures: not measured here (null in summary.json), and \
         there are no server rows. The verdict and every other figure are the client's{}.\n\n",
        t.url,
        t.outage,
        if report.runs.iter().any(|r| r.proxy.is_some()) {
            ", besides the fault proxy's own (its table below)"
        } else {
            ""
        }
    )
}

/// What every run's fault proxy saw, with its definitions; none without a
/// fault proxy.
pub fn proxies(report: &StormReport) -> Option<String> {
    let mut out = String::from(
        "## Through the fault proxy

         | run | requests | 2xx | 4xx | 5xx | other | injected | resets | target errors | gone | \
         peak in flight | peak held | peak queued | peak connections | p50 before (ms) | \
         peak p99 (ms) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | \
         --- | --- |\n",
    );
    let mut any = false;
    for r in &report.runs {
        let Some(f) = &r.proxy else { continue };
        any = true;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            run_name(report, &r.case, r.run),
            f.requests,
            f.answers_2xx,
            f.answers_4xx,
            f.answers_5xx,
            f.answers_other,
            f.injected,
            f.resets,
            f.upstream_errors,
            f.gone,
            f.peak_in_flight,
            f.peak_held,
            f.peak_queued,
            f.peak_connections,
            opt(f.warmup_p50_ms, 1),
            opt(f.peak_p99_ms, 1),
        ));
    }
    out.push_str(
        "\nCounted by the proxy over the whole run, the tail included. 2xx to other: the \
         target's answers passed back, by status. Injected: answered by the proxy itself \
         (status=CODE). Resets: connections reset by the fault. Target errors: requests the \
         target did not answer (refused, reset or closed; the proxy answered 502). Gone: \
         requests whose client had closed before their answer. Peaks: the most at any of its \
         reports, of requests forwarded to the target and not yet answered (in flight), \
         requests held by the fault (stalled, delayed or swallowed), connections the kernel \
         held in its listen queue, and client connections open. Latency through the proxy \
         (request read to answer written): the median of the warm-up's interval medians, and \
         the worst interval p99.\n",
    );
    any.then_some(out)
}

/// `summary.md`: the protocol, the tables and what their columns mean.
pub fn markdown(engine: &str, report: &StormReport) -> String {
    let p = &report.protocol;
    let over_runs = if p.runs > 1 {
        format!(
            "## Every case over its {} runs\n\n{}\n\
             P(recovered): the share of runs that recovered, with its 95 % Wilson interval. \
             Recovery p10 / p50 / p90: over the runs, a run that never recovered counting as \
             the slowest (\"never\" where a percentile reaches such runs). Other figures: \
             median (and range) over the runs. The recovery chart (recovery.svg, or .png) \
             shows, for every case, the share of runs back at 90 % of the baseline by each \
             time after the resume, the tail after the observation included.\n\n\
             ## Every run\n\n",
            p.runs,
            cases(report)
        )
    } else {
        String::new()
    };
    format!(
        "# Storm summary\n\n\
         Warm-up {} s, pause {} s, observation {} s, then a tail of {} s that only the \
         recovery chart reads (time compressed {}x; times and rates below are as \
         measured), client report interval {} s, seed {}{}; the {engine} engine. The scenario is in scenario.toml.\n\n{}{over_runs}{}\n\
         Recovered: OK/s back to 90 % of the baseline for {STREAK} consecutive report \
         intervals, the first starting within the observation, with no relapse of as many \
         intervals afterwards. Recovery: seconds from resume to the start of that streak. \
         Peak concurrency: the highest at any admission. Wasted: requests the server worked \
         on for clients that had gone (finished for nobody, dropped with \
         --on-disconnect cancel, or still held at its last report before the tail). \
         Amplification: attempts sent per logical request started, from the stop on. p99: OK-weighted \
         mean of the intervals' p99, before the stop and after recovery (or resume).\n\n\
         ## After the resume\n\n{}\n\
         Calm: seconds from resume until the server's concurrency, past its peak, is back \
         to at most twice its warm-up mean. 50 % and 80 %: seconds from resume to the start \
         of the first interval whose OK/s reached that share of the baseline. Best OK/s: \
         the best interval after the resume. Concurrency at end: at the server's last \
         report. Wasted (server s): the server's time on the wasted requests, each counted \
         from its admission. \"-\": never.\n{}{}",
        p.warmup_s,
        p.pause_s,
        p.observe_s,
        p.tail_s,
        p.time_scale,
        p.report_interval_s,
        p.seed,
        if p.runs > 1 {
            " (repetition i of a case: seed + i - 1)".to_string()
        } else {
            String::new()
        },
        target(report),
        runs(report),
        after_resume(report),
        [chains(report), proxies(report)]
            .into_iter()
            .flatten()
            .map(|c| format!("\n{c}"))
            .collect::<String>(),
        [behind(report), refused(report)]
            .into_iter()
            .flatten()
            .map(|note| format!("\n{note}"))
            .collect::<String>(),
    )
}
