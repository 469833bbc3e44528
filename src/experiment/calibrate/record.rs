//! What a calibration found, as the files it writes: `levels.csv` (the
//! probe, a row a level), `calibration.json` (everything, for programs)
//! and `calibration.md` (for people). Each is written again as each step
//! ends, so that an interrupted calibration keeps what it measured.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::order::OrderRecord;
use super::queue::QueueRecord;
use super::verify::Check;
use crate::experiment::error::StormError;
use crate::experiment::sweep::Critical;
use crate::model::fit::gone::Gone;
use crate::model::fit::{Fits, Level};
use crate::net::probe::{GoneProbe, LevelReport, ProbeEnd};

/// One level of the probe: a row of `levels.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelRow {
    /// Clients in the closed loop.
    pub concurrency: u32,
    /// Successful answers a second.
    pub throughput: f64,
    /// Mean latency of the successful answers, seconds.
    pub latency_mean_s: f64,
    /// Their median, seconds.
    pub latency_p50_s: f64,
    /// Their 99th percentile, seconds.
    pub latency_p99_s: f64,
    /// The share of attempts that failed.
    pub error_share: f64,
    /// Attempts finished in the hold.
    pub attempts: u64,
    /// Of those, successful.
    pub ok: u64,
    /// Of those, failed (timeouts included).
    pub errors: u64,
    /// Of the failures, timed out.
    pub timeouts: u64,
    /// `X R / N`: 1 where the service set the pace.
    pub little_ratio: f64,
    /// The share of the hold the prober's thread ran or waited to run.
    pub prober_busy: f64,
    /// Little's law failed, or the prober's thread was busy 90 % of the
    /// hold or more: the prober, not the service, set the pace.
    pub prober_bound: bool,
}

impl LevelRow {
    /// The row of a level the probe reported.
    pub fn of(report: &LevelReport) -> LevelRow {
        let l = &report.level;
        LevelRow {
            concurrency: l.concurrency,
            throughput: l.throughput,
            latency_mean_s: l.latency_mean_s,
            latency_p50_s: l.latency_p50_s,
            latency_p99_s: l.latency_p99_s,
            error_share: l.error_share,
            attempts: report.attempts,
            ok: report.ok,
            errors: report.errors,
            timeouts: report.timeouts,
            little_ratio: report.little_ratio,
            prober_busy: report.prober_busy,
            prober_bound: report.prober_bound,
        }
    }

    /// No attempt ended within the hold: the level has no latency or
    /// error share to show (its row holds the hold as its latency and an
    /// error share of 1, which leave it out of every fit).
    pub fn nothing_ended(&self) -> bool {
        self.attempts == 0
    }

    /// A level of `n` clients whose 100 attempts each took `mean_ms`, for
    /// tests.
    #[cfg(test)]
    pub(super) fn steady(n: u32, mean_ms: f64, error_share: f64) -> LevelRow {
        let r = mean_ms / 1e3;
        LevelRow {
            concurrency: n,
            throughput: f64::from(n) / r,
            latency_mean_s: r,
            latency_p50_s: r,
            latency_p99_s: r,
            error_share,
            attempts: 100,
            ok: 100,
            errors: 0,
            timeouts: 0,
            little_ratio: 1.0,
            prober_busy: 0.1,
            prober_bound: false,
        }
    }

    /// The level the fit takes.
    pub fn level(&self) -> Level {
        Level {
            concurrency: self.concurrency,
            throughput: self.throughput,
            latency_mean_s: self.latency_mean_s,
            latency_p50_s: self.latency_p50_s,
            latency_p99_s: self.latency_p99_s,
            error_share: self.error_share,
        }
    }
}

/// Why the probe ended, in words.
pub fn end_words(end: &ProbeEnd) -> &'static str {
    match end {
        ProbeEnd::Done => "every level probed",
        ProbeEnd::LatencyBound => "latency passed the bound (--max-latency)",
        ProbeEnd::Errors => "errors passed the bound (--max-errors)",
        ProbeEnd::Interrupted => "interrupted",
    }
}

/// The second probe, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoneRecord {
    /// Requests sent and abandoned at once (none: not probed).
    pub abandon: Option<u32>,
    /// How long each stayed open before its client went, seconds.
    pub hold_open_s: Option<f64>,
    /// Latencies of lone requests on the idle service, seconds.
    pub baseline_s: Vec<f64>,
    /// Latencies of lone requests sent as the abandoned ones' clients
    /// went, seconds.
    pub after_s: Vec<f64>,
    /// The latency of a lone request sent beside as many requests whose
    /// clients stayed, seconds (absent from records made before it).
    #[serde(default)]
    pub loaded_s: Option<f64>,
    /// What a lone request would wait after the abandon if the service
    /// went on with the work, seconds (absent from records made before
    /// it).
    #[serde(default)]
    pub expected_busy_s: Option<f64>,
    /// What the service does with the work of clients that have gone.
    pub verdict: Gone,
    /// Why, in words.
    pub reason: String,
}

impl GoneRecord {
    /// The record of a probe that ran.
    pub fn of(probe: &GoneProbe, hold_open_s: f64, reason: String) -> GoneRecord {
        GoneRecord {
            abandon: Some(probe.abandon),
            hold_open_s: Some(hold_open_s),
            baseline_s: probe.baseline_s.clone(),
            after_s: probe.after_s.clone(),
            loaded_s: Some(probe.loaded_s),
            expected_busy_s: Some(probe.expected_busy_s),
            verdict: probe.verdict,
            reason,
        }
    }

    /// The record of a probe not made, and why.
    pub fn skipped(reason: String) -> GoneRecord {
        GoneRecord {
            abandon: None,
            hold_open_s: None,
            baseline_s: Vec::new(),
            after_s: Vec::new(),
            loaded_s: None,
            expected_busy_s: None,
            verdict: Gone::Unclear,
            reason,
        }
    }
}

/// Everything a calibration found: `calibration.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    /// The service probed.
    pub target: String,
    /// The command that made it.
    pub command: String,
    /// How many times faster the target ran than the service it stands
    /// for (`--quick`): the fits are of its times multiplied by this.
    pub time_scale: f64,
    /// Every level probed, in order, as measured.
    pub levels: Vec<LevelRow>,
    /// Why the probe ended.
    pub probe_end: String,
    /// Whether the service finishes work for clients that have gone.
    pub gone: Option<GoneRecord>,
    /// How the service answered requests sent at once (the order probe;
    /// absent from records made before it).
    #[serde(default)]
    pub order: Option<OrderRecord>,
    /// Where the service keeps requests it cannot start yet (the burst
    /// probe; absent from records made before it).
    #[serde(default)]
    pub queue: Option<QueueRecord>,
    /// Every shape fitted, the twin chosen, and the Universal Scalability
    /// Law.
    pub fits: Option<Fits>,
    /// The twin's server flags.
    pub twin_flags: Option<String>,
    /// Each policy's predicted edge, from the twin's sweep.
    pub predictions: Vec<Critical>,
    /// Each policy checked against the service at pauses around its edge.
    pub checks: Vec<Check>,
}

impl Calibration {
    /// Writes `levels.csv`, `calibration.json` and `calibration.md` into
    /// `out`, and `verify.csv` once there are checks.
    pub fn save(&self, out: &Path) -> Result<(), StormError> {
        let io = |what: &str| {
            let path = out.join(what);
            move |e: std::io::Error| StormError::Io(format!("write {}", path.display()), e)
        };
        write_csv(&out.join("levels.csv"), &self.levels).map_err(io("levels.csv"))?;
        if !self.checks.is_empty() {
            write_csv(&out.join("verify.csv"), &self.checks).map_err(io("verify.csv"))?;
        }
        let json = serde_json::to_string_pretty(self).expect("a calibration serializes");
        std::fs::write(out.join("calibration.json"), json + "\n")
            .map_err(io("calibration.json"))?;
        std::fs::write(out.join("calibration.md"), self.markdown()).map_err(io("calibration.md"))
    }

    /// `calibration.md`: the probe, the fits, the twin, its predictions and
    /// its checks, as tables.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# A virtual twin of {}\n", self.target);
        let _ = writeln!(s, "Made by `{}`.\n", self.command);
        let _ = writeln!(s, "## The probe\n");
        let _ = writeln!(
            s,
            "A closed loop at each concurrency: N clients, each sending its next request \
             as its answer arrives. X·R/N is Little's law, 1 where the service set the \
             pace; the prober's share is how much of the hold its thread ran or waited \
             to run. The probe ended: {}.\n",
            self.probe_end
        );
        if self.time_scale != 1.0 {
            let _ = writeln!(
                s,
                "The target stood for a service {} times slower (`--quick`): the table is \
                 as measured, the fits and the twin are of its times multiplied by {0}.\n",
                self.time_scale
            );
        }
        let _ = writeln!(
            s,
            "| N | answers/s | mean ms | p50 ms | p99 ms | errors | X·R/N | prober |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for l in &self.levels {
            if l.nothing_ended() {
                let _ = writeln!(
                    s,
                    "| {} | 0 | - | - | - | none ended in the hold | - | {:.2} |",
                    l.concurrency, l.prober_busy
                );
                continue;
            }
            let _ = writeln!(
                s,
                "| {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} % | {:.2} | {:.2}{} |",
                l.concurrency,
                l.throughput,
                l.latency_mean_s * 1e3,
                l.latency_p50_s * 1e3,
                l.latency_p99_s * 1e3,
                l.error_share * 100.0,
                l.little_ratio,
                l.prober_busy,
                if l.prober_bound {
                    " (the prober set the pace)"
                } else {
                    ""
                }
            );
        }
        if let Some(gone) = &self.gone {
            let _ = writeln!(
                s,
                "\nWork for clients that have gone: **{}**. {}",
                gone_words(gone.verdict),
                gone.reason
            );
        }
        if let Some(order) = &self.order {
            let _ = writeln!(
                s,
                "\nRequests sent at once (the order probe): **{}**. {}",
                order.order.map_or("not told", |o| o.words()),
                order.reason
            );
        }
        if let Some(queue) = &self.queue {
            let kind = queue.queue.map_or_else(
                || "not told (the twin keeps the default queue)".to_string(),
                |q| super::queue::words(q, queue.serving),
            );
            let _ = writeln!(
                s,
                "\nWhere requests wait (the burst): **{kind}**. {}",
                queue.reason
            );
        }
        if let Some(fits) = &self.fits {
            fits_markdown(&mut s, fits);
        }
        if let Some(flags) = &self.twin_flags {
            let _ = writeln!(
                s,
                "\n## The twin\n\nServer flags: `{flags}`; every case of `twin.toml`."
            );
        }
        if !self.predictions.is_empty() {
            let _ = writeln!(
                s,
                "\n## Predicted edges (the twin in virtual time, `predict/`)\n\n\
                 | policy | T90 s | T50 s | T50's 95 % interval | T10 s |\n| --- | --- | --- | --- | --- |"
            );
            for c in &self.predictions {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} to {} | {} |",
                    c.case,
                    opt(c.t90_s),
                    match (c.t50_s, c.t50_outside) {
                        (Some(t), _) => format!("{t:.1}"),
                        (None, Some(side)) => format!("{side:?}").to_lowercase(),
                        (None, None) => "-".into(),
                    },
                    opt(c.t50_ci_low_s),
                    opt(c.t50_ci_high_s),
                    opt(c.t10_s)
                );
            }
        }
        if !self.checks.is_empty() {
            let _ = writeln!(
                s,
                "\n## Checked against the service (`verify/`)\n\n\
                 | policy | pause s | twin P(recover) | its 95 % interval | measured | its 95 % interval | holds | overlap |\n\
                 | --- | --- | --- | --- | --- | --- | --- | --- |"
            );
            for c in &self.checks {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.2} ({} of {}) | {:.2} to {:.2} | {:.2} ({} of {}) | {:.2} to {:.2} | {} | {} |",
                    c.case,
                    c.pause_s,
                    c.predicted_p,
                    c.predicted_recovered,
                    c.predicted_runs,
                    c.predicted_low,
                    c.predicted_high,
                    c.measured_p,
                    c.measured_recovered,
                    c.measured_runs,
                    c.measured_low,
                    c.measured_high,
                    if c.holds { "yes" } else { "**no**" },
                    if c.overlap { "yes" } else { "**no**" }
                );
            }
        }
        s
    }
}

/// The fits' table.
fn fits_markdown(s: &mut String, fits: &Fits) {
    let _ = writeln!(
        s,
        "\n## The fits\n\n{} levels fitted, {} left out for their errors. Errors are log \
         ratios (0.05 is about 5 %); Little's law is missed by {:.3} in the measurements \
         themselves.\n\n| shape | latency error | throughput error | error | flags |\n\
         | --- | --- | --- | --- | --- |",
        fits.levels, fits.failing, fits.little_error
    );
    for (i, f) in fits.shapes.iter().enumerate() {
        let name = if i == fits.best {
            format!("**{}** (the twin)", f.twin.name())
        } else {
            f.twin.name().to_string()
        };
        let _ = writeln!(
            s,
            "| {name} | {:.3} | {:.3} | {:.3} | `{}` |",
            f.score.latency,
            f.score.throughput,
            f.score.error,
            f.twin.flags().join(" ")
        );
    }
    let u = &fits.usl;
    let _ = writeln!(
        s,
        "| Universal Scalability Law | {:.3} | {:.3} | {:.3} | σ = {:.4}, κ = {:.3e}, λ = {:.1}/s{} |",
        u.score.latency,
        u.score.throughput,
        u.score.error,
        u.usl.sigma,
        u.usl.kappa,
        u.usl.lambda,
        match (u.usl.peak(), u.usl.peak_throughput()) {
            (Some(n), Some(x)) => format!("; peak at N* = {n:.0}, {x:.0}/s"),
            _ => String::new(),
        }
    );
    for f in &fits.shapes {
        for note in &f.notes {
            let _ = writeln!(s, "\n- {}: {note}", f.twin.name());
        }
    }
}

/// What a gone-client verdict means, in words.
fn gone_words(gone: Gone) -> &'static str {
    match gone {
        Gone::Continues => "finished (the twin: --on-disconnect continue)",
        Gone::Cancels => "dropped (the twin: --on-disconnect cancel)",
        Gone::Unclear => "not told (the twin keeps the default, continue)",
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.1}"))
}

/// Writes `rows` as CSV with a header.
fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> std::io::Result<()> {
    let mut writer = csv::Writer::from_path(path)?;
    for row in rows {
        writer.serialize(row)?;
    }
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_in_which_nothing_ended_shows_no_latency_or_errors() {
        let record = Calibration {
            target: "http://127.0.0.1:1/".into(),
            command: "storm calibrate".into(),
            time_scale: 1.0,
            // 4 clients answered in 20 ms; at 8 nothing ended in the
            // 5 s hold, whose length the row holds as its latency.
            levels: vec![
                LevelRow::steady(4, 20.0, 0.0),
                LevelRow {
                    attempts: 0,
                    ok: 0,
                    ..LevelRow::steady(8, 5000.0, 1.0)
                },
            ],
            probe_end: "the service stopped answering".into(),
            gone: None,
            order: None,
            queue: None,
            fits: None,
            twin_flags: None,
            predictions: Vec::new(),
            checks: Vec::new(),
        };
        assert!(!record.levels[0].nothing_ended() && record.levels[1].nothing_ended());
        let md = record.markdown();
        assert!(
            md.contains("| 4 | 200.0 | 20.00 | 20.00 | 20.00 | 0.0 % |"),
            "{md}"
        );
        assert!(
            md.contains("| 8 | 0 | - | - | - | none ended in the hold | - | 0.10 |"),
            "{md}"
        );
        assert!(!md.contains("5000.00") && !md.contains("100.0 %"), "{md}");
    }
}
