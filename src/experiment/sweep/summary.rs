//! A sweep's `summary.md`: the command, the protocol and what the sweep
//! took, then every setting's edge (T50 with its interval, T90, T10, the
//! critical pause) and how to read it.

use super::axis::Axis;
use super::config::{Search, SweepConfig, secs};
use super::findings::{Critical, Key, NO_LIMIT, Outside, SweepReport};
use super::measured::RUNS_CSV;

/// What a run must do to count as recovered, as every summary says it.
pub(super) const RECOVERS: &str = "A run recovers when its goodput is back to 90 % of the \
     baseline for three report intervals, the first starting within the observation window.";

/// The head of a setting's first cells in a summary's table.
pub(super) const SETTING_HEAD: &str =
    "| case | clients | arrival rate (/s) | think (s) | timeout (s) | server limit |";

/// A setting's first cells in a summary's table: its case, clients, arrival
/// rate, think time, timeout and server limit (a dash where one does not
/// apply, or is the case's own).
pub(super) fn setting_cells(k: &Key) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} |",
        k.case,
        Axis::Clients.value(k),
        Axis::Rate.value(k),
        Axis::Think.value(k),
        k.timeout_s,
        if k.limit == NO_LIMIT {
            "-".to_string()
        } else {
            k.limit.to_string()
        }
    )
}

/// A value to one decimal, or a dash.
fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// A setting's T50 and its interval, said in words where the pauses tried
/// do not hold it.
fn t50(c: &Critical, max_pause_s: f64) -> (String, String) {
    let interval = match (c.t50_ci_low_s, c.t50_ci_high_s) {
        (Some(low), None) if low >= max_pause_s => format!("> {max_pause_s}"),
        (low, high) => format!(
            "{}-{}",
            low.map_or("0".into(), |t| format!("{t:.1}")),
            high.map_or(format!(">{max_pause_s}"), |t| format!("{t:.1}"))
        ),
    };
    let value = match (c.t50_s, c.t50_outside) {
        (Some(t), _) => format!("{t:.1}"),
        (None, Some(Outside::Shorter)) => "fails at 0".into(),
        (None, _) => format!("> {max_pause_s}"),
    };
    (value, interval)
}

/// The start of a sweep's summary: its title and command, the protocol,
/// `pauses` (what was tried), `runs` (how many, with which seeds) and what
/// the sweep took.
pub(super) fn head(
    config: &SweepConfig,
    report: &SweepReport,
    title: &str,
    command: &str,
    (pauses, runs): (&str, &str),
) -> String {
    let scenario = &config.storm.scenario;
    let s = &scenario.protocol;
    let (engine, work) = match (&scenario.target, &scenario.outage) {
        (Some(url), Some(outage)) if config.measures() => (
            format!(
                "Real storms of the service at {url}, its outage {outage}, a storm a run \
                 (every run in {RUNS_CSV}, its storm's files under runs/), durations divided by \
                 {}.",
                config.storm.time_scale
            ),
            format!("{} storms", report.runs),
        ),
        _ => (
            "Virtual time.".to_string(),
            format!("{} runs, {} events", report.runs, report.events),
        ),
    };
    let stopped = if report.stopped {
        "**Stopped part way** (a stop was asked for): the settings below are those \
         searched before it, the last one's edge what its runs made say.\n\n"
    } else {
        ""
    };
    format!(
        "# {title}\n\n`{command}`\n\n\
         {engine} Warm-up {} s, observation {} s, report interval {} s; {pauses}; \
         {runs}. {work}, {:.1} s.\n\n{stopped}",
        secs(s.warmup),
        secs(s.observe),
        secs(s.report_interval),
        report.wall.as_secs_f64(),
    )
}

/// The sweep's Markdown summary.
pub(super) fn summary(config: &SweepConfig, report: &SweepReport, command: &str) -> String {
    let max = secs(config.max_pause);
    let seed = config.storm.scenario.seed;
    let adaptive = config.search == Search::Adaptive;
    let (pauses, runs) = if adaptive {
        (
            format!(
                "an adaptive search of each setting's edge, pauses from 0 to {max} s on a \
                 lattice of {} s, until T50's 95 % interval was at most {} s wide or {} runs \
                 were made",
                secs(config.lattice()),
                secs(config.precision),
                config.max_runs
            ),
            format!("each run a seed of its own, {seed} on"),
        )
    } else {
        (
            format!(
                "pauses from 0 to {max} s every {} s, and wherever the bisection looked (to {} s)",
                secs(config.step),
                secs(config.resolution),
            ),
            format!("{} runs a pause, seeds {seed} on", config.seeds),
        )
    };
    let mut md = head(
        config,
        report,
        "Where recovery stops",
        command,
        (&pauses, &runs),
    );
    md.push_str(&format!(
        "{SETTING_HEAD} T50 (s) | T50 95 % interval (s) | T90 (s) | T10 (s) | critical pause (s) |\n\
         |{}\n",
        " --- |".repeat(11)
    ));
    for c in &report.critical {
        let critical = if c.overloaded {
            "overloaded".to_string()
        } else if c.at_least {
            format!(">= {}", c.critical_pause_s)
        } else {
            c.critical_pause_s.to_string()
        };
        let (t50, interval) = t50(c, max);
        md.push_str(&format!(
            "{} {t50} | {interval} | {} | {} | {critical} |\n",
            setting_cells(&c.into()),
            opt(c.t90_s),
            opt(c.t10_s),
        ));
    }
    md.push_str(&format!("\n{RECOVERS} "));
    md.push_str(if adaptive { ADAPTIVE } else { GRID });
    md
}

/// How to read an adaptive search's table.
const ADAPTIVE: &str = "T50: the pause at which half the runs recover, the median of \
     the adaptive search's posterior over logistic curves (T50 and slope, a 1 % lapse at \
     either end, priors uniform in T50 and in the slope's log) after every run it made, each \
     run placed where its outcome told most about T50 and the slope; its interval the \
     posterior's equal-tailed 95 %. T90 and T10: the posterior medians of T50 - s ln 9 and \
     T50 + s ln 9, where 90 % and 10 % recover on the curve without its lapse, how sharp the \
     edge is. \
     Critical pause: T50 rounded down to the resolution. seeds in critical.csv: the \
     setting's runs. A dash: outside the pauses a run may have. phase.csv holds every pause \
     tried with its runs; the maps colour each step by the curve through T90, T50 and T10 \
     where all three lie within the pauses, else by the runs nearest it.\n";

/// How to read a grid's table.
const GRID: &str = "T50: the pause at \
         which half the runs recover, from an isotonic fit of the share that recovered \
         against the pause (it never rises with the pause), linear between the pauses \
         tried; its interval runs from the longest pause whose share is above one half at \
         95 % confidence (Wilson) to the shortest pause whose share is below it. T90 and \
         T10: where 90 % and 10 % still recover, how sharp the edge is. Critical pause: the \
         longest after which most runs recover, by bisection. A dash: outside the pauses \
         tried. phase.csv holds every pause tried; the maps colour each pause of the grid \
         by the share that recovered.\n";
