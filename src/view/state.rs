//! What the view knows: every row of the runs it watches, a storm's batch
//! and phases, and what it derives from them: each chart's time origin,
//! the spans it shades, the phase and the time left. Pure: the time is
//! passed in.

use std::time::Duration;

use super::feed::{Feed, Phase, Plan, Setup};
use crate::report::proxy::ProxyRow;
use crate::report::rows::{ClientRow, ServerRow};
use crate::report::status::Status;
use crate::report::verdict::Timeline;

/// One run the view watches: a program's own, or one of a storm's batch.
#[derive(Debug, Clone, Default)]
pub struct RunState {
    /// Its name: the program's, or the storm's run name.
    pub name: String,
    /// Its client's rows so far.
    pub client: Vec<ClientRow>,
    /// Its server's rows so far (a storm's: the backend's).
    pub server: Vec<ServerRow>,
    /// A server's rows of its calls inward so far, as a tier of a chain.
    pub calls: Vec<ClientRow>,
    /// A storm run's tiers, from the client's side inward: those that
    /// have reported so far.
    pub tiers: Vec<TierState>,
    /// A fault proxy's rows so far.
    pub proxy: Vec<ProxyRow>,
}

/// A tier of a storm's run: what its process reported.
#[derive(Debug, Clone, Default)]
pub struct TierState {
    /// Its server's rows so far.
    pub server: Vec<ServerRow>,
    /// Its rows of its calls inward so far.
    pub calls: Vec<ClientRow>,
}

/// A storm's batch: runs side by side through one protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Which, from 0.
    pub index: usize,
    /// When its clients started, Unix milliseconds.
    pub start_ms: u64,
    /// Its phases' lengths.
    pub plan: Plan,
    /// The phase it is in, since when.
    pub phase: Option<(Phase, u64)>,
    /// When its servers were stopped, once they were.
    pub stop_ms: Option<u64>,
    /// When they were resumed, once they were.
    pub resume_ms: Option<u64>,
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

impl Batch {
    /// The protocol's instants: those that happened, the others as
    /// planned from them.
    pub fn timeline(&self) -> Timeline {
        let p = &self.plan;
        let stop_ms = self.stop_ms.unwrap_or(self.start_ms + ms(p.warmup));
        let resume_ms = self.resume_ms.unwrap_or(stop_ms + ms(p.pause));
        let end_ms = resume_ms + ms(p.observe);
        Timeline {
            start_ms: self.start_ms,
            stop_ms,
            resume_ms,
            end_ms,
            confirm_ms: end_ms + ms(p.confirm),
        }
    }

    /// When the batch's clients end.
    pub fn end_ms(&self) -> u64 {
        self.timeline().resume_ms + ms(self.plan.rest)
    }

    /// When the current phase ends.
    pub fn phase_end_ms(&self) -> u64 {
        let t = self.timeline();
        match self.phase.map(|(p, _)| p) {
            None | Some(Phase::Warmup) => t.stop_ms,
            Some(Phase::Pause) => t.resume_ms,
            Some(Phase::Observe) => self.end_ms(),
        }
    }
}

/// A span of a chart's time axis to shade, Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Where it starts.
    pub from_ms: u64,
    /// Where it ends.
    pub to_ms: u64,
}

/// What the shaded spans mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shade {
    /// A storm's pause.
    Paused,
    /// A hand-run server that reported nothing for longer than its
    /// interval: stopped (Ctrl-Z, SIGSTOP) or starved.
    Stopped,
    /// A hand-run client's intervals without a single answer.
    Unanswered,
    /// A fault proxy's intervals with its fault on.
    Faulted,
}

impl Shade {
    /// The legend's word.
    pub fn name(self) -> &'static str {
        match self {
            Shade::Paused => "paused",
            Shade::Stopped => "stopped",
            Shade::Unanswered => "no answer",
            Shade::Faulted => "fault on",
        }
    }
}

/// Everything the view shows.
#[derive(Debug, Clone)]
pub struct Board {
    /// What it watches.
    pub setup: Setup,
    /// The runs: a program's one, or a storm's current batch.
    pub runs: Vec<RunState>,
    /// A storm's current batch.
    pub batch: Option<Batch>,
    /// Runs of earlier batches, with their last verdict.
    pub finished: Vec<(String, String)>,
    /// The run the charts show.
    pub selected: usize,
    /// When the view opened, Unix milliseconds.
    pub opened_ms: u64,
    /// Asked to stop (`q`): the run is ending.
    pub stopping: bool,
    /// The last line the program wrote on stderr while the view was up.
    pub message: Option<String>,
    /// What the program's own key does, for the footer (`f: fault
    /// on/off`).
    pub own_key: Option<String>,
}

impl Board {
    /// A board for `setup`, opened at `now_ms`.
    pub fn new(setup: Setup, now_ms: u64) -> Board {
        let runs = match &setup {
            Setup::Server { .. } => vec![RunState {
                name: "server".into(),
                ..RunState::default()
            }],
            Setup::Client { .. } => vec![RunState {
                name: "client".into(),
                ..RunState::default()
            }],
            Setup::Proxy { .. } => vec![RunState {
                name: "proxy".into(),
                ..RunState::default()
            }],
            Setup::Storm { .. } => Vec::new(),
        };
        Board {
            setup,
            runs,
            batch: None,
            finished: Vec::new(),
            selected: 0,
            opened_ms: now_ms,
            stopping: false,
            message: None,
            own_key: None,
        }
    }

    /// Takes one message. `verdict` names a run's verdict so far, kept
    /// when its batch gives way to the next.
    pub fn apply(&mut self, feed: Feed, verdict: impl Fn(&Board, usize) -> String) {
        match feed {
            Feed::Status { run, status } => {
                let Some(state) = self.runs.get_mut(run) else {
                    return;
                };
                match status {
                    Status::ClientRow(row) => state.client.push(row),
                    Status::ServerRow(row) => state.server.push(row),
                    Status::CallRow(row) => state.calls.push(row),
                    Status::ProxyRow(row) => state.proxy.push(row),
                    Status::Listening { .. } | Status::ClientTotals(_) => {}
                }
            }
            Feed::Tier { run, tier, status } => {
                let Some(state) = self.runs.get_mut(run).filter(|_| tier > 0) else {
                    return;
                };
                if state.tiers.len() < tier {
                    state.tiers.resize_with(tier, TierState::default);
                }
                let tier = &mut state.tiers[tier - 1];
                match status {
                    Status::ServerRow(row) => tier.server.push(row),
                    Status::CallRow(row) => tier.calls.push(row),
                    _ => {}
                }
            }
            Feed::Batch {
                index,
                names,
                start_ms,
                plan,
            } => {
                let done: Vec<(String, String)> = (0..self.runs.len())
                    .map(|i| (self.runs[i].name.clone(), verdict(self, i)))
                    .collect();
                self.finished.splice(0..0, done);
                self.runs = names
                    .into_iter()
                    .map(|name| RunState {
                        name,
                        ..RunState::default()
                    })
                    .collect();
                self.selected = self.selected.min(self.runs.len().saturating_sub(1));
                self.batch = Some(Batch {
                    index,
                    start_ms,
                    plan,
                    phase: None,
                    stop_ms: None,
                    resume_ms: None,
                });
            }
            Feed::Phase { phase, at_ms } => {
                if let Some(batch) = &mut self.batch {
                    batch.phase = Some((phase, at_ms));
                    match phase {
                        Phase::Pause => batch.stop_ms = Some(at_ms),
                        Phase::Observe => batch.resume_ms = Some(at_ms),
                        Phase::Warmup => {}
                    }
                }
            }
        }
    }

    /// Shows the next run (`step` 1) or the one before (`step` -1).
    pub fn select(&mut self, step: isize) {
        let n = self.runs.len() as isize;
        if n > 0 {
            self.selected = (self.selected as isize + step).rem_euclid(n) as usize;
        }
    }

    /// The program's report interval (a storm's rows carry their own).
    pub fn interval(&self) -> Option<Duration> {
        match self.setup {
            Setup::Server { interval, .. }
            | Setup::Client { interval, .. }
            | Setup::Proxy { interval, .. } => Some(interval),
            Setup::Storm { .. } => None,
        }
    }

    /// Time zero of run `run`'s charts, Unix milliseconds: a storm's batch
    /// start; a program's own start, from its first row, or the view's.
    pub fn origin_ms(&self, run: usize) -> u64 {
        if let Some(batch) = &self.batch {
            return batch.start_ms;
        }
        let Some(state) = self.runs.get(run) else {
            return self.opened_ms;
        };
        let start = |unix_ms: u64, elapsed_s: f64| unix_ms.saturating_sub((elapsed_s * 1e3) as u64);
        state
            .client
            .first()
            .map(|r| start(r.unix_ms, r.elapsed_s))
            .or_else(|| state.server.first().map(|r| start(r.unix_ms, r.elapsed_s)))
            .or_else(|| state.proxy.first().map(|r| start(r.unix_ms, r.elapsed_s)))
            .unwrap_or(self.opened_ms)
    }

    /// The end of the charts' time axis, seconds from the origin: a
    /// storm's batch end or a client's duration, else what has run so far
    /// (at least ten intervals).
    pub fn x_max(&self, run: usize, now_ms: u64) -> f64 {
        let planned = match (&self.setup, &self.batch) {
            (_, Some(batch)) => Some(batch.end_ms() - batch.start_ms),
            (Setup::Client { duration, .. }, _) => duration.map(ms),
            _ => None,
        };
        let so_far = now_ms.saturating_sub(self.origin_ms(run));
        let floor = self.interval().map_or(0, |i| ms(i) * 10);
        planned.unwrap_or(0).max(so_far).max(floor).max(1_000) as f64 / 1e3
    }

    /// The spans to shade on run `run`'s charts, and what they mean.
    pub fn shaded(&self, run: usize, now_ms: u64) -> (Shade, Vec<Span>) {
        if let Some(batch) = &self.batch {
            let spans = batch
                .stop_ms
                .map(|from_ms| Span {
                    from_ms,
                    to_ms: batch.resume_ms.unwrap_or(now_ms.max(from_ms)),
                })
                .into_iter()
                .collect();
            return (Shade::Paused, spans);
        }
        let Some(state) = self.runs.get(run) else {
            return (Shade::Stopped, Vec::new());
        };
        match self.setup {
            Setup::Client { .. } => (Shade::Unanswered, unanswered(&state.client)),
            Setup::Proxy { .. } => (Shade::Faulted, faulted(&state.proxy)),
            _ => {
                let interval = self.interval().map_or(1_000, ms);
                (Shade::Stopped, silences(&state.server, interval))
            }
        }
    }

    /// The phase, the time left in it and in the whole run, in
    /// milliseconds, where they are known: a storm's, or a client's with a
    /// duration (the run is its one phase).
    pub fn time_left(&self, now_ms: u64) -> Option<(&'static str, u64, u64)> {
        match (&self.setup, &self.batch) {
            (Setup::Storm { batches, .. }, Some(batch)) => {
                let phase = batch.phase.map_or("start", |(p, _)| p.name());
                let in_phase = batch.phase_end_ms().saturating_sub(now_ms);
                let batch_left = batch.end_ms().saturating_sub(now_ms);
                let later = batches.saturating_sub(batch.index + 1) as u64;
                Some((
                    phase,
                    in_phase,
                    batch_left + later * ms(batch.plan.length()),
                ))
            }
            (Setup::Client { duration, .. }, _) => {
                let end = self.origin_ms(0) + ms((*duration)?);
                let left = end.saturating_sub(now_ms);
                Some(("run", left, left))
            }
            _ => None,
        }
    }
}

/// A hand-run client's intervals in which nothing was answered while
/// attempts were out: the server stopped or drowning. Adjacent ones merge.
fn unanswered(rows: &[ClientRow]) -> Vec<Span> {
    marked(rows.iter().map(|row| {
        let silent = row.ok_per_s == 0.0
            && (row.timeouts_per_s > 0.0 || row.errors_per_s > 0.0 || row.in_flight > 0);
        (row.unix_ms, row.elapsed_s, silent)
    }))
}

/// A fault proxy's intervals with its fault on at their report.
/// Adjacent ones merge.
fn faulted(rows: &[ProxyRow]) -> Vec<Span> {
    marked(rows.iter().map(|r| (r.unix_ms, r.elapsed_s, r.faulted)))
}

/// The intervals of rows, each given as its report's Unix milliseconds,
/// its seconds from the start and whether it is marked, that are marked:
/// from the report before (the start, for the first) to their own.
/// Adjacent ones merge.
fn marked(rows: impl Iterator<Item = (u64, f64, bool)>) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut previous: Option<u64> = None;
    for (unix_ms, elapsed_s, marked) in rows {
        let from_ms =
            previous.unwrap_or_else(|| unix_ms.saturating_sub((elapsed_s * 1e3).max(0.0) as u64));
        previous = Some(unix_ms);
        if !marked {
            continue;
        }
        match spans.last_mut() {
            Some(last) if last.to_ms == from_ms => last.to_ms = unix_ms,
            _ => spans.push(Span {
                from_ms,
                to_ms: unix_ms,
            }),
        }
    }
    spans
}

/// A hand-run server's silences: from a report to one more than half an
/// interval later than due, the time it was not running (stopped, or its
/// reports starved), up to the interval before the late report.
fn silences(rows: &[ServerRow], interval_ms: u64) -> Vec<Span> {
    rows.windows(2)
        .filter(|w| w[1].unix_ms.saturating_sub(w[0].unix_ms) * 2 > interval_ms * 3)
        .map(|w| Span {
            from_ms: w[0].unix_ms,
            to_ms: w[1].unix_ms.saturating_sub(interval_ms).max(w[0].unix_ms),
        })
        .collect()
}

#[cfg(test)]
mod tests;
