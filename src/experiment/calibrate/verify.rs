//! The twin checked against the service: storms against the real target
//! at pauses around each policy's predicted T50, and P(recovered) measured
//! there beside what the twin predicts at the same pause (docs/twin.md:
//! the twin holds where the measured share lies within the prediction's
//! interval).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::experiment::error::StormError;
use crate::experiment::outage::Outage;
use crate::experiment::scenario::{Case, Engine, Scenario};
use crate::experiment::sweep::{self, Critical, SweepConfig};
use crate::experiment::{Flags, Stop, Storm};
use crate::report::output::say;

/// The nearest pauses, in whole seconds, that stand for "before the edge"
/// and "after it" when the predicted edge is narrower than that.
const SPREAD_S: f64 = 2.0;

/// Three pauses around a policy's predicted edge, in whole seconds: T90
/// (where the twin has 90 % of runs recover), T50 and T10 (10 %), or T50
/// and 2 s either side of it where the edge is narrower than that; none
/// below zero, none twice. None where the twin puts T50 outside the
/// pauses it tried: there is no edge near which to check it.
pub fn pauses(edge: &Critical) -> Option<Vec<Duration>> {
    let mid = edge.t50_s?.round();
    let low = edge
        .t90_s
        .map(f64::round)
        .filter(|&t| t <= mid - SPREAD_S)
        .unwrap_or(mid - SPREAD_S)
        .max(0.0);
    let high = edge
        .t10_s
        .map(f64::round)
        .filter(|&t| t >= mid + SPREAD_S)
        .unwrap_or(mid + SPREAD_S);
    let mut out: Vec<Duration> = [low, mid.max(0.0), high]
        .iter()
        .map(|&s| Duration::from_secs(s as u64))
        .collect();
    out.dedup();
    Some(out)
}

/// One pause of one policy: the twin's prediction and the service's
/// measurement. A row of `verify.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The case: a policy of the twin.
    pub case: String,
    /// The pause, seconds.
    pub pause_s: f64,
    /// Runs of the twin in virtual time, one per seed.
    pub predicted_runs: u32,
    /// Of those, runs that recovered.
    pub predicted_recovered: u32,
    /// Their share.
    pub predicted_p: f64,
    /// Its 95 % Wilson interval, low end.
    pub predicted_low: f64,
    /// Its 95 % Wilson interval, high end.
    pub predicted_high: f64,
    /// Storms against the service at this pause.
    pub measured_runs: u32,
    /// Of those, runs that recovered.
    pub measured_recovered: u32,
    /// Their share.
    pub measured_p: f64,
    /// Its 95 % Wilson interval, low end.
    pub measured_low: f64,
    /// Its 95 % Wilson interval, high end.
    pub measured_high: f64,
    /// Whether the measured share lies within the prediction's interval.
    pub holds: bool,
    /// Whether the measured share's interval and the prediction's
    /// overlap: the weaker test, which a few storms a pause can pass where
    /// `holds` cannot (3 of 3 never lies within an interval below 1).
    #[serde(default)]
    pub overlap: bool,
}

impl Check {
    /// The row from the twin's point and the storms' figures.
    fn new(point: &sweep::Point, measured: (u32, u32, [f64; 2])) -> Check {
        let (recovered, runs, [low, high]) = measured;
        let p = if runs == 0 {
            0.0
        } else {
            f64::from(recovered) / f64::from(runs)
        };
        Check {
            case: point.case.clone(),
            pause_s: point.pause_s,
            predicted_runs: point.runs,
            predicted_recovered: point.recovered_runs,
            predicted_p: point.p_recovered,
            predicted_low: point.p_low,
            predicted_high: point.p_high,
            measured_runs: runs,
            measured_recovered: recovered,
            measured_p: p,
            measured_low: low,
            measured_high: high,
            holds: runs > 0 && point.p_low <= p && p <= point.p_high,
            overlap: runs > 0 && low <= point.p_high && point.p_low <= high,
        }
    }
}

/// How the twin is checked against the service.
#[derive(Debug, Clone)]
pub struct Verify {
    /// Storms against the service at each pause.
    pub runs: u32,
    /// How the service's outage is caused.
    pub outage: Outage,
}

/// What a check needs from the calibration.
pub(super) struct Bench<'a> {
    /// The service's URL.
    pub target: &'a str,
    /// The twin's scenario.
    pub twin: &'a Scenario,
    /// The prediction's sweep (its seeds, threads and storm).
    pub sweep: &'a SweepConfig,
    /// How to check.
    pub verify: &'a Verify,
    /// Where each pause's storms go.
    pub out: PathBuf,
    /// The storms' time compression (the target's own, `--quick`).
    pub time_scale: f64,
    /// The programs' flag parsers.
    pub flags: &'a dyn Flags,
    /// Set at SIGINT or SIGTERM.
    pub stop: &'a Stop,
}

impl Bench<'_> {
    /// The check of the twin's case `case` at `pause`: the twin's share at
    /// that one pause over the sweep's seeds, then the service's over
    /// `runs` storms through the outage.
    pub fn check(&self, case: usize, pause: Duration) -> Result<Check, StormError> {
        let name = &self.twin.cases[case].name;
        let folder = format!("{name}.pause-{}s", pause.as_secs());
        let point = self.predict(case, pause, &self.out.join(format!("{folder}.twin")))?;
        say(format!(
            "verify: {name} at a {} s pause: the twin predicts {} of {} runs recover; \
             storming the service {} times",
            pause.as_secs(),
            point.recovered_runs,
            point.runs,
            self.verify.runs
        ));
        let measured = self.measure(case, pause, &self.out.join(folder))?;
        let check = Check::new(&point, measured);
        say(format!(
            "verify: {name} at {} s: {} of {} recovered (twin {:.2}, interval {:.2} to {:.2}): {}",
            pause.as_secs(),
            check.measured_recovered,
            check.measured_runs,
            check.predicted_p,
            check.predicted_low,
            check.predicted_high,
            if check.holds {
                "holds"
            } else {
                "does not hold"
            }
        ));
        Ok(check)
    }

    /// The twin's point at one pause, in virtual time.
    fn predict(
        &self,
        case: usize,
        pause: Duration,
        out: &Path,
    ) -> Result<sweep::Point, StormError> {
        let mut twin = self.twin.clone();
        twin.cases = vec![twin.cases[case].clone()];
        let config = SweepConfig {
            storm: Storm {
                scenario: twin,
                out: out.to_path_buf(),
                progress: false,
                ..self.sweep.storm.clone()
            },
            pause: Some(pause),
            ..self.sweep.clone()
        };
        let report = sweep::run(&config, self.flags, |_| {})?;
        sweep::write(&config, &report, "storm calibrate --verify")?;
        report
            .points
            .into_iter()
            .next()
            .ok_or_else(|| StormError::Child("the twin's sweep gave no point".into()))
    }

    /// The service's recovered runs, runs and Wilson interval at `pause`.
    fn measure(
        &self,
        case: usize,
        pause: Duration,
        out: &Path,
    ) -> Result<(u32, u32, [f64; 2]), StormError> {
        let twin = &self.twin.cases[case];
        let scenario = Scenario {
            seed: self.twin.seed,
            engine: Some(Engine::Real),
            runs: Some(self.verify.runs),
            target: Some(self.target.to_string()),
            outage: Some(self.verify.outage.clone()),
            // The verdict does not read the tail, as in the sweep.
            protocol: crate::experiment::scenario::Protocol {
                pause,
                tail: Duration::ZERO,
                ..self.twin.protocol
            },
            // The service is the server: the case keeps its client only.
            cases: vec![Case::direct(
                twin.name.clone(),
                twin.client.clone(),
                Vec::new(),
            )],
        };
        let storm = Storm {
            scenario,
            engine: Engine::Real,
            time_scale: self.time_scale,
            out: out.to_path_buf(),
            ..self.sweep.storm.clone()
        };
        let report = super::super::run_until_stopped(&storm, self.flags, self.stop)?;
        let figures = report
            .cases
            .first()
            .ok_or_else(|| StormError::Child("the storm gave no case".into()))?;
        Ok((figures.recovered_runs, figures.runs, figures.p_recovered_ci))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(t90: Option<f64>, t50: Option<f64>, t10: Option<f64>) -> Critical {
        Critical {
            case: "fixed".into(),
            clients: Some(1000),
            arrival_rate: None,
            lambda_s: None,
            timeout_s: 2.0,
            server_limit: 30,
            seeds: 10,
            critical_pause_s: 0.0,
            at_least: false,
            overloaded: false,
            recovery_s: None,
            t50_s: t50,
            t50_ci_low_s: None,
            t50_ci_high_s: None,
            t10_s: t10,
            t90_s: t90,
            t50_outside: None,
        }
    }

    fn secs(pauses: Option<Vec<Duration>>) -> Option<Vec<u64>> {
        pauses.map(|p| p.iter().map(Duration::as_secs).collect())
    }

    #[test]
    fn a_wide_edge_is_checked_at_t90_t50_and_t10() {
        assert_eq!(
            secs(pauses(&edge(Some(5.2), Some(30.4), Some(59.6)))),
            Some(vec![5, 30, 60])
        );
    }

    #[test]
    fn a_sharp_edge_is_checked_two_seconds_either_side() {
        // T90 and T10 within a second of T50: 2 s either side instead.
        assert_eq!(
            secs(pauses(&edge(Some(7.1), Some(7.5), Some(7.9)))),
            Some(vec![6, 8, 10])
        );
        // Where the twin gives no T90 or T10 the same.
        assert_eq!(
            secs(pauses(&edge(None, Some(12.0), None))),
            Some(vec![10, 12, 14])
        );
    }

    #[test]
    fn no_pause_is_below_zero_or_twice() {
        assert_eq!(secs(pauses(&edge(None, Some(0.4), None))), Some(vec![0, 2]));
        assert_eq!(
            secs(pauses(&edge(None, Some(1.0), Some(9.0)))),
            Some(vec![0, 1, 9])
        );
    }

    #[test]
    fn an_edge_outside_the_pauses_tried_is_not_checked() {
        assert_eq!(pauses(&edge(None, None, None)), None);
    }

    #[test]
    fn a_check_holds_where_the_measured_share_is_within_the_prediction_and_overlaps_where_the_intervals_meet()
     {
        let point = sweep::Point {
            case: "fixed".into(),
            clients: Some(1000),
            arrival_rate: None,
            lambda_s: None,
            timeout_s: 2.0,
            server_limit: 30,
            pause_s: 8.0,
            runs: 20,
            recovered_runs: 10,
            p_recovered: 0.5,
            p_low: 0.299,
            p_high: 0.701,
            recovery_s: None,
        };
        let within = Check::new(&point, (3, 5, [0.23, 0.88]));
        assert!(within.holds, "{within:?}");
        assert_eq!(within.measured_p, 0.6);
        assert!(within.overlap);
        // 5 of 5 lies above the twin's interval, but its own interval
        // reaches into it.
        let outside = Check::new(&point, (5, 5, [0.57, 1.0]));
        assert!(!outside.holds && outside.overlap, "{outside:?}");
        let apart = Check::new(&point, (20, 20, [0.84, 1.0]));
        assert!(!apart.holds && !apart.overlap, "{apart:?}");
        let below = Check::new(&point, (0, 20, [0.0, 0.16]));
        assert!(!below.overlap, "{below:?}");
        let none = Check::new(&point, (0, 0, [0.0, 1.0]));
        assert!(!none.holds && !none.overlap, "no storm measured nothing");
    }
}
