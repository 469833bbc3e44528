//! A storm run's verdict as it forms: the experiment's own figures
//! ([`crate::report::verdict::figures`]) on the rows so far, against the
//! protocol's instants as they happened or as planned, read as a sentence
//! for the phase the run is in.

use super::feed::Phase;
use super::state::{Batch, Board, RunState};
use crate::report::verdict::{Figures, RECOVERED_SHARE, figures};

/// How a verdict so far reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Nothing decided yet.
    Open,
    /// Recovered.
    Good,
    /// Did not recover.
    Bad,
}

/// A run's verdict so far: a sentence and the figures behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Forming {
    /// The sentence.
    pub headline: String,
    /// How it reads.
    pub tone: Tone,
    /// The figures so far.
    pub figures: Figures,
}

fn seconds(ms: u64) -> String {
    format!("{:.0} s", ms as f64 / 1e3)
}

/// The verdict so far of `run` in `batch` at `now_ms`.
pub fn forming(run: &RunState, batch: &Batch, now_ms: u64) -> Forming {
    let t = batch.timeline();
    let f = figures(&run.client, &run.server, &t);
    let baseline = f.baseline_ok_per_s;
    let share = |ok: f64| {
        if baseline > 0.0 {
            format!("{:.0} % of baseline", 100.0 * ok / baseline)
        } else {
            "no baseline".to_string()
        }
    };
    let (headline, tone) = match batch.phase.map(|(p, _)| p) {
        None | Some(Phase::Warmup) if baseline == 0.0 => {
            ("warming up: no baseline yet".to_string(), Tone::Open)
        }
        None | Some(Phase::Warmup) => (
            format!("warming up: baseline {baseline:.1} OK/s"),
            Tone::Open,
        ),
        Some(Phase::Pause) => (
            format!(
                "paused: baseline {baseline:.1} OK/s, resume in {}",
                seconds(t.resume_ms.saturating_sub(now_ms))
            ),
            Tone::Open,
        ),
        Some(Phase::Observe) => match f.recovery_s {
            Some(s) if now_ms >= t.confirm_ms => (
                format!(
                    "RECOVERED: {:.0} % of baseline from {s:.1} s after the resume",
                    RECOVERED_SHARE * 100.0
                ),
                Tone::Good,
            ),
            Some(s) => (
                format!(
                    "recovering: {:.0} % of baseline from {s:.1} s after the resume, \
                     confirming",
                    RECOVERED_SHARE * 100.0
                ),
                Tone::Open,
            ),
            None if now_ms >= t.confirm_ms => (
                format!(
                    "NOT RECOVERED: best {}",
                    f.best_ok_per_s.map_or("nothing".to_string(), |b| format!(
                        "{b:.1} OK/s ({})",
                        share(b)
                    ))
                ),
                Tone::Bad,
            ),
            None if now_ms >= t.end_ms => (
                "window closed, not recovered so far: confirming".to_string(),
                Tone::Open,
            ),
            None => (
                format!(
                    "not yet: {}, window ends in {}",
                    run.client
                        .last()
                        .filter(|r| r.unix_ms > t.resume_ms)
                        .map_or("-".to_string(), |r| format!(
                            "{:.1} OK/s ({})",
                            r.ok_per_s,
                            share(r.ok_per_s)
                        )),
                    seconds(t.end_ms.saturating_sub(now_ms))
                ),
                Tone::Open,
            ),
        },
    };
    Forming {
        headline,
        tone,
        figures: f,
    }
}

/// A run's verdict so far, for a storm; none for a program.
pub fn verdict(board: &Board, run: usize, now_ms: u64) -> Option<Forming> {
    let batch = board.batch.as_ref()?;
    Some(forming(board.runs.get(run)?, batch, now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::rows::ClientRow;
    use crate::view::feed::Plan;
    use std::time::Duration;

    /// Warm-up 0-4 s, pause to 6 s, window to 12 s, confirmed at 14 s.
    fn batch(phase: Option<Phase>) -> Batch {
        let at = |p| match p {
            Phase::Warmup => 0,
            Phase::Pause => 4_000,
            Phase::Observe => 6_000,
        };
        Batch {
            index: 0,
            start_ms: 0,
            plan: Plan {
                warmup: Duration::from_secs(4),
                pause: Duration::from_secs(2),
                observe: Duration::from_secs(6),
                confirm: Duration::from_secs(2),
                rest: Duration::from_secs(10),
            },
            phase: phase.map(|p| (p, at(p))),
            stop_ms: None,
            resume_ms: None,
        }
    }

    fn run(ok: &[f64]) -> RunState {
        RunState {
            name: "fixed".into(),
            client: ClientRow::each_second(ok),
            ..RunState::default()
        }
    }

    #[test]
    fn the_verdict_follows_the_phases() {
        let warm = forming(&run(&[50.0]), &batch(Some(Phase::Warmup)), 1_500);
        assert_eq!(warm.headline, "warming up: no baseline yet");
        let warm = forming(&run(&[50.0, 100.0]), &batch(Some(Phase::Warmup)), 2_500);
        assert_eq!(warm.headline, "warming up: baseline 100.0 OK/s");
        let paused = forming(
            &run(&[50.0, 100.0, 100.0, 100.0, 0.0]),
            &batch(Some(Phase::Pause)),
            5_000,
        );
        assert!(
            paused
                .headline
                .starts_with("paused: baseline 100.0 OK/s, resume in 1 s")
        );
        let down = [50.0, 100.0, 100.0, 100.0, 0.0, 0.0, 0.0, 40.0];
        let waiting = forming(&run(&down), &batch(Some(Phase::Observe)), 8_500);
        assert_eq!(
            waiting.headline,
            "not yet: 40.0 OK/s (40 % of baseline), window ends in 4 s"
        );
        assert_eq!(waiting.tone, Tone::Open);
    }

    #[test]
    fn a_recovery_is_confirmed_and_a_collapse_declared_at_the_confirmation() {
        let back = [
            50.0, 100.0, 100.0, 100.0, 0.0, 0.0, 95.0, 95.0, 95.0, 95.0, 95.0, 95.0, 95.0,
        ];
        let observing = batch(Some(Phase::Observe));
        let confirming = forming(&run(&back[..9]), &observing, 9_500);
        assert_eq!(confirming.tone, Tone::Open);
        assert!(
            confirming
                .headline
                .starts_with("recovering: 90 % of baseline from 0.0 s")
        );
        let done = forming(&run(&back), &observing, 14_000);
        assert_eq!(done.tone, Tone::Good);
        assert_eq!(done.figures.recovery_s, Some(0.0));
        let down = [
            50.0, 100.0, 100.0, 100.0, 0.0, 0.0, 0.0, 10.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        let lost = forming(&run(&down), &observing, 14_000);
        assert_eq!(lost.tone, Tone::Bad);
        assert_eq!(
            lost.headline,
            "NOT RECOVERED: best 10.0 OK/s (10 % of baseline)"
        );
    }
}
