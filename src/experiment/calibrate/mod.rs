//! A virtual twin of a service of the user's (docs/twin.md): probe
//! it, fit the project's server shapes to what the probe measured, write
//! the best as a scenario (`twin.toml`), predict each policy's edge with
//! the sweep in virtual time, and, if asked, check the prediction with
//! storms against the service at pauses around it.
//!
//! Each step writes its files as it ends ([`record`]); an interrupted
//! calibration keeps what it measured, and fits it if it can.

pub mod order;
pub mod queue;
pub mod record;
pub mod twin;
pub mod verify;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::error::StormError;
use super::folder::{self, Existing};
use super::scenario::Scenario;
use super::sweep::{self, SweepConfig};
use super::{Flags, Stop};
use crate::model::fit::gone::Gone;
use crate::model::fit::{FitOptions, Fits, Level, fit};
use crate::net::probe::{
    self, BatchConfig, BurstConfig, GoneConfig, ProbeConfig, ProbeEnd, ProbeEvent,
};
use crate::report::output::say;

pub use order::OrderRecord;
pub use record::{Calibration, GoneRecord, LevelRow};
pub use verify::{Check, Verify};

/// A whole calibration.
#[derive(Debug, Clone)]
pub struct CalibrateConfig {
    /// The closed-loop probe, with the service's URL.
    pub probe: ProbeConfig,
    /// Probe whether the service finishes work for clients that have gone.
    pub gone: bool,
    /// Batches of the order probe, which tells a pool from a curve by
    /// how requests sent at once are answered (0: not probed).
    pub batches: u32,
    /// Connections of the burst probe, which tells where the service keeps
    /// requests it cannot start yet (0: not probed).
    pub burst: u32,
    /// Which levels the fit takes.
    pub fit: FitOptions,
    /// The policies to predict: one case each, with their client flags
    /// (clients, timeout and the user's) and any server flags the user
    /// added; the protocol and seed of the prediction and the checks.
    pub cases: Scenario,
    /// The prediction's sweep: its seeds, pauses and threads (its storm's
    /// scenario is replaced by the twin's); none to write the twin only.
    pub predict: Option<SweepConfig>,
    /// Check the prediction against the service.
    pub verify: Option<Verify>,
    /// The results folder.
    pub out: PathBuf,
    /// What to do if it holds files.
    pub existing: Existing,
    /// Plots as PNG instead of SVG.
    pub png: bool,
    /// How many times faster the target runs than the service it stands
    /// for (`--quick`: 10, a server started with `--time-scale 10`; else
    /// 1): the fit takes its times multiplied by this, and the checks'
    /// storms run compressed by it.
    pub time_scale: f64,
    /// The command, for the record.
    pub command: String,
}

/// How much slower than one client alone the gone-client probe's
/// abandoned requests should make a lone request if the service went on
/// with them: well past the eight times below which the probe cannot say
/// it does ([`crate::model::fit::gone::CLEAR_FROM`]), as the hold before
/// the clients go takes one lone latency off, and the twin may be off.
pub const GONE_SLOWDOWN: f64 = 12.0;

/// The most requests the gone-client probe abandons, as a multiple of
/// the largest concurrency probed.
const GONE_BEYOND: u32 = 4;

/// The gone-client probe's load: the fewest requests that, by the twin
/// `fits` chose (its times divided by `time_scale`, to the target's), keep
/// a lone request [`GONE_SLOWDOWN`] times as long as the first level fitted
/// measured, up to [`GONE_BEYOND`] times the largest concurrency probed;
/// and how long each stays open: that first level's mean latency, long
/// enough for the service to have read it, short beside the backlog they
/// make. An error says why none can be chosen.
pub fn gone_setup(
    levels: &[LevelRow],
    fits: &Fits,
    time_scale: f64,
    max_error_share: f64,
) -> Result<(u32, Duration), String> {
    let first = levels
        .iter()
        .find(|l| l.error_share <= max_error_share && l.ok > 0)
        .ok_or("no level answered without errors")?;
    let alone = first.latency_mean_s;
    let largest = levels.iter().map(|l| l.concurrency).max().unwrap_or(1);
    let twin = &fits.best().twin;
    (1..=largest.saturating_mul(GONE_BEYOND))
        .find(|&n| twin.latency(n) / time_scale >= GONE_SLOWDOWN * alone)
        .map(|n| (n, Duration::from_secs_f64(alone)))
        .ok_or_else(|| {
            format!(
                "the twin does not slow down {GONE_SLOWDOWN} times from {} client(s) alone \
                 ({:.2} ms) within {} clients: abandoned requests would not show",
                first.concurrency,
                alone * 1e3,
                largest.saturating_mul(GONE_BEYOND)
            )
        })
}

/// `level` as the service a target `k` times faster stands for would give
/// it: every time `k` times longer, throughput `k` times lower.
pub fn full_scale(level: Level, k: f64) -> Level {
    Level {
        throughput: level.throughput / k,
        latency_mean_s: level.latency_mean_s * k,
        latency_p50_s: level.latency_p50_s * k,
        latency_p99_s: level.latency_p99_s * k,
        ..level
    }
}

/// Runs the calibration: probe, fit, twin, prediction and checks, each
/// step's files written as it ends. Once `stop` is set the step in
/// progress ends, what was measured is fitted and written, and the result
/// is [`StormError::Interrupted`].
pub fn run(
    config: &CalibrateConfig,
    flags: &dyn Flags,
    stop: &Stop,
) -> Result<Calibration, StormError> {
    folder::claim(&config.out, &[], config.existing, "--out")?;
    std::fs::create_dir_all(&config.out)
        .map_err(|e| StormError::Io(format!("create {}", config.out.display()), e))?;
    let mut record = Calibration {
        target: config.probe.target.clone(),
        command: config.command.clone(),
        time_scale: config.time_scale,
        levels: Vec::new(),
        probe_end: String::new(),
        gone: None,
        order: None,
        queue: None,
        fits: None,
        twin_flags: None,
        predictions: Vec::new(),
        checks: Vec::new(),
    };
    let flag = stop.flag();
    let end = closed_loop(config, &flag, &mut record)?;
    let interrupted = matches!(end, ProbeEnd::Interrupted);
    let levels: Vec<_> = record
        .levels
        .iter()
        .map(|row| full_scale(row.level(), config.time_scale))
        .collect();
    let mut fits = match fit(&levels, &config.fit) {
        Ok(fits) => fits,
        Err(e) if interrupted => {
            say(format!("calibrate: nothing to fit ({e})"));
            return Err(StormError::Interrupted);
        }
        Err(e) => {
            return Err(StormError::Target(format!(
                "the levels probed cannot be fitted: {e} (levels.csv)"
            )));
        }
    };
    if config.batches > 0 && !interrupted && !stop.requested() {
        record.order = Some(match order::requests(&levels, config.fit.max_error_share) {
            Some(requests) => order::probe(
                &BatchConfig {
                    target: config.probe.target.clone(),
                    wire: config.probe.wire.clone(),
                    requests,
                    batches: config.batches,
                    timeout: config.probe.timeout,
                },
                &flag,
                &mut fits,
            ),
            None => OrderRecord::skipped("No level without errors to size a batch by.".into()),
        });
        record.save(&config.out)?;
    }
    if config.gone && !interrupted {
        record.gone = Some(gone(config, &flag, &record.levels, &fits)?);
        record.save(&config.out)?;
    }
    if config.burst > 0 && !interrupted && !stop.requested() {
        let burst = BurstConfig {
            target: config.probe.target.clone(),
            wire: config.probe.wire.clone(),
            connections: config.burst,
            hold: queue::BURST_HOLD,
            timeout: config.probe.timeout,
        };
        record.queue = Some(queue::burst(&burst, &flag, &fits.best().twin));
        record.save(&config.out)?;
    }
    let best = fits.best();
    let verdict = record.gone.as_ref().map(|g| g.verdict);
    let found = record.queue.as_ref().and_then(|q| q.queue);
    let listen = record.queue.as_ref().and_then(|q| q.listen);
    let server = twin::server_flags(
        &best.twin,
        verdict,
        found,
        listen,
        config.probe.wire.transport,
    );
    say(format!(
        "fit: the twin is the {} shape (error {:.3}): {}",
        best.twin.name(),
        best.score.error,
        server.join(" ")
    ));
    let scenario = twin::scenario(&config.cases, &server);
    let folder = config.out.display().to_string();
    std::fs::write(
        config.out.join("twin.toml"),
        twin::file(&scenario, &fits, &config.probe.target, &folder),
    )
    .map_err(|e| StormError::Io("write twin.toml".into(), e))?;
    let chart = config
        .out
        .join(format!("fit.{}", crate::plot::extension(config.png)));
    crate::plot::fit_chart(
        &levels,
        &fits,
        &format!("The probe of {}", config.probe.target),
        &chart,
        config.png,
    )
    .map_err(|e| StormError::Child(format!("fit chart: {e}")))?;
    record.twin_flags = Some(server.join(" "));
    record.fits = Some(fits);
    record.save(&config.out)?;
    if interrupted || stop.requested() {
        return Err(StormError::Interrupted);
    }
    let Some(predict) = &config.predict else {
        return Ok(record);
    };
    let predict = SweepConfig {
        storm: super::Storm {
            scenario: scenario.clone(),
            out: config.out.join("predict"),
            stop: stop.clone(),
            ..predict.storm.clone()
        },
        ..predict.clone()
    };
    say(format!(
        "predict: the twin swept in virtual time, {} seeds a pause, into {}",
        predict.seeds,
        predict.storm.out.display()
    ));
    let report = sweep::run(&predict, flags, |line| say(format!("predict: {line}")))?;
    sweep::write(&predict, &report, &config.command)?;
    record.predictions = report.critical.clone();
    record.save(&config.out)?;
    let Some(verify) = &config.verify else {
        return Ok(record);
    };
    let bench = verify::Bench {
        target: &config.probe.target,
        twin: &scenario,
        sweep: &predict,
        verify,
        out: config.out.join("verify"),
        time_scale: config.time_scale,
        flags,
        stop,
    };
    for (case, edge) in report.critical.iter().enumerate() {
        let Some(pauses) = verify::pauses(edge) else {
            say(format!(
                "verify: {}: the twin puts T50 outside the pauses tried; nothing to check near it",
                edge.case
            ));
            continue;
        };
        for pause in pauses {
            let check = bench.check(case, pause);
            match check {
                Ok(check) => {
                    record.checks.push(check);
                    record.save(&config.out)?;
                }
                Err(e) => {
                    record.save(&config.out)?;
                    return Err(e);
                }
            }
        }
    }
    Ok(record)
}

/// The closed-loop probe, each level said and written as it ends.
fn closed_loop(
    config: &CalibrateConfig,
    stop: &AtomicBool,
    record: &mut Calibration,
) -> Result<ProbeEnd, StormError> {
    let out = config.out.clone();
    let mut failed = None;
    let mut progress = |event: ProbeEvent<'_>| match event {
        ProbeEvent::LevelStarted { concurrency } => say(format!(
            "probe: {concurrency} client(s), {} s warm-up, {} s held",
            config.probe.warmup.as_secs_f64(),
            config.probe.hold.as_secs_f64()
        )),
        ProbeEvent::LevelDone(report) => {
            let row = LevelRow::of(report);
            if row.nothing_ended() {
                say(format!(
                    "probe: {} client(s): nothing ended within the {} s hold (every request \
                     still waiting: the service took none in, or held them all)",
                    row.concurrency,
                    config.probe.hold.as_secs_f64()
                ));
            } else {
                say(format!(
                    "probe: {} client(s): {:.1} answers/s, mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms, \
                 errors {:.1} %, X·R/N {:.2}{}",
                    row.concurrency,
                    row.throughput,
                    row.latency_mean_s * 1e3,
                    row.latency_p50_s * 1e3,
                    row.latency_p99_s * 1e3,
                    row.error_share * 100.0,
                    row.little_ratio,
                    if row.prober_bound {
                        " (the prober set the pace, not the service)"
                    } else {
                        ""
                    }
                ));
            }
            record.levels.push(row);
            if let Err(e) = record.save(&out) {
                failed.get_or_insert(e);
            }
        }
    };
    let probe = probe::run(&config.probe, stop, &mut progress).map_err(|e| {
        // What the user must fix (the target or the wire flags): exit 2.
        if e.kind() == std::io::ErrorKind::InvalidInput {
            StormError::Target(format!("--target {}: {e}", config.probe.target))
        } else {
            StormError::Io(format!("probe {}", config.probe.target), e)
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    record.probe_end = record::end_words(&probe.end).to_string();
    record.save(&config.out)?;
    say(format!(
        "probe: {} level(s), ended: {}; levels.csv",
        record.levels.len(),
        record.probe_end
    ));
    Ok(probe.end)
}

/// The gone-client probe, or why it was not made.
fn gone(
    config: &CalibrateConfig,
    stop: &AtomicBool,
    levels: &[LevelRow],
    fits: &Fits,
) -> Result<GoneRecord, StormError> {
    let setup = gone_setup(levels, fits, config.time_scale, config.fit.max_error_share);
    let (abandon, hold_open) = match setup {
        Ok(setup) => setup,
        Err(why) => {
            say(format!("gone: not probed: {why}"));
            return Ok(GoneRecord::skipped(why));
        }
    };
    say(format!(
        "gone: {abandon} requests sent and abandoned after {:.2} ms, a lone request timed \
         after them, 3 times",
        hold_open.as_secs_f64() * 1e3
    ));
    let probe = probe::gone(
        &GoneConfig {
            target: config.probe.target.clone(),
            wire: config.probe.wire.clone(),
            abandon,
            hold_open,
            repeats: 3,
            timeout: config.probe.timeout,
        },
        stop,
    );
    let probe = match probe {
        Ok(probe) => probe,
        // Stopped: what the closed loop measured is still fitted and
        // written, and the calibration then ends interrupted.
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            return Ok(GoneRecord::skipped("interrupted".into()));
        }
        Err(e) => return Err(StormError::Io(format!("probe {}", config.probe.target), e)),
    };
    let reason = format!(
        "A lone request took {} ms alone and {} ms as the clients of {abandon} requests went \
         (medians); as long after {abandon} whose clients stayed, {:.2} ms, what their work \
         would leave were the service to go on with it (the probe says it cancels from {} \
         times alone, that it continues from {}).",
        median_ms(&probe.baseline_s),
        median_ms(&probe.after_s),
        probe.expected_busy_s * 1e3,
        crate::model::fit::gone::CANCELS_CLEAR_FROM,
        crate::model::fit::gone::CLEAR_FROM
    );
    say(format!(
        "gone: the service {} work for clients that have gone. {reason}",
        match probe.verdict {
            Gone::Continues => "finishes",
            Gone::Cancels => "drops",
            Gone::Unclear => "may or may not finish",
        }
    ));
    Ok(GoneRecord::of(&probe, hold_open.as_secs_f64(), reason))
}

/// The median of `xs` in milliseconds, two decimals.
fn median_ms(xs: &[f64]) -> String {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => "-".into(),
        n => format!("{:.2}", v[n / 2] * 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_targets_levels_are_taken_at_full_scale() {
        let level = LevelRow::steady(8, 10.0, 0.02).level();
        let full = full_scale(level, 10.0);
        assert_eq!(full.concurrency, 8);
        assert!((full.latency_mean_s - 0.1).abs() < 1e-12, "{full:?}");
        assert!((full.throughput - 80.0).abs() < 1e-9, "{full:?}");
        assert_eq!(full.error_share, 0.02);
        assert_eq!(full_scale(level, 1.0), level);
    }

    fn pool_fits(workers: u32, service_ms: f64) -> Fits {
        let levels: Vec<Level> = [1u32, 2, 4, 8, 16, 32, 64]
            .iter()
            .map(|&n| {
                let r = service_ms / 1e3 * f64::from(n.max(workers)) / f64::from(workers);
                LevelRow::steady(n, r * 1e3, 0.0).level()
            })
            .collect();
        fit(&levels, &FitOptions::default()).unwrap()
    }

    #[test]
    fn the_gone_probe_abandons_what_the_twin_says_slows_a_lone_request_twelvefold() {
        // A pool of 4 at 10 ms: N clients wait N / 4 * 10 ms from 4 on, so
        // 12 times 10 ms at N = 48.
        let fits = pool_fits(4, 10.0);
        let levels = [
            LevelRow::steady(1, 10.0, 0.0),
            LevelRow::steady(2, 10.0, 0.0),
            LevelRow::steady(64, 160.0, 0.0),
        ];
        assert_eq!(
            gone_setup(&levels, &fits, 1.0, 0.01),
            Ok((48, Duration::from_millis(10)))
        );
        // A target ten times faster than its twin: its times are the
        // twin's divided by ten, so a tenth of the latency needs as many.
        let quick = [
            LevelRow::steady(1, 1.0, 0.0),
            LevelRow::steady(64, 16.0, 0.0),
        ];
        assert_eq!(gone_setup(&quick, &fits, 10.0, 0.01).unwrap().0, 48);
    }

    #[test]
    fn no_abandon_where_the_twin_barely_slows_or_nothing_answered() {
        let fits = pool_fits(4, 10.0);
        // Up to 4 times 4 clients: 16 clients wait 40 ms, 4 times alone.
        let e = gone_setup(
            &[
                LevelRow::steady(1, 10.0, 0.0),
                LevelRow::steady(4, 10.0, 0.0),
            ],
            &fits,
            1.0,
            0.01,
        )
        .unwrap_err();
        assert!(
            e.contains("12 times from 1 client(s) alone (10.00 ms) within 16"),
            "{e}"
        );
        assert!(gone_setup(&[LevelRow::steady(1, 10.0, 0.5)], &fits, 1.0, 0.01).is_err());
    }
}
