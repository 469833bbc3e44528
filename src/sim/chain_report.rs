//! A tier's report: its server's rows and its calls' client rows as a run
//! goes, written where its configurations say, and its figures at the
//! end (docs/chains.md, "Figures per layer": attempts received and sent,
//! OK and failed, work for callers that had gone, peak concurrency).

use std::time::Duration;

use super::engine::Engine;
use super::event::Event;
use super::host::virtual_unix_ms;
use super::tier::TierAnswers;
use crate::model::server::ServerConfig;
use crate::report::output::{CsvError, CsvSink, server_csv, write_row};
use crate::report::rows::ServerRow;
use crate::report::summary::{ClientSummary, Reporter, ServerSummary};

/// What one tier of a chain did over a virtual run.
#[derive(Debug, Clone)]
pub struct TierOutcome {
    /// Its server's totals: its own work (`completed` counts requests
    /// whose own work ended while their caller still waited, whatever
    /// the call then answered).
    pub server: ServerSummary,
    /// Its server's report rows.
    pub server_rows: Vec<ServerRow>,
    /// Its calls inward, summed as a client's (a logical request is a
    /// call; `clients` is the most calls it held at once): attempts sent,
    /// OK, failed, timed out, cancelled.
    pub calls: ClientSummary,
    /// Requests that reached it (read by its server): admitted, refused
    /// at its door, or answered 504 at once for a deadline passed.
    pub received: u64,
    /// Its answers once its own work was done, as its calls decided them.
    pub answers: TierAnswers,
    /// Requests read after the deadline they came with, answered 504 at
    /// once without work (a tier that propagates deadlines).
    pub expired: u64,
    /// Calls cancelled because their caller had gone (a tier that
    /// propagates cancellation).
    pub cancelled_calls: u64,
    /// The most requests it held at once, in its own work or calling
    /// inward (it holds a request until it answers).
    pub peak_concurrency: u64,
    /// Requests it worked on for a caller that had gone: its own work
    /// finished or dropped after the caller went (its server's
    /// `abandoned`), still held for one at the end (`abandoned_held`), or
    /// whose caller went while it was calling inward for them.
    pub work_for_gone_callers: u64,
}

/// A tier's report as the run goes.
pub(super) struct TierReport {
    /// Its calls' rows, as a client's.
    reporter: Reporter,
    csv: Option<CsvSink<ServerRow>>,
    rows: Vec<ServerRow>,
    /// When its last rows ended.
    last: Duration,
    /// A tick fell while the tier was stopped.
    missed: bool,
    interval: Duration,
}

impl TierReport {
    /// The report of a tier of `server`, creating the files its server's
    /// and its call's configurations name. Its calls report quietly, on
    /// its server's interval: a tier is one process.
    pub(super) fn new(server: &ServerConfig) -> Result<Self, CsvError> {
        let call = server.call.as_deref().expect("a validated chain");
        let mut client = call.client.clone();
        client.quiet = true;
        client.report_interval = server.report_interval;
        Ok(TierReport {
            reporter: Reporter::for_calls(&client)?,
            csv: server_csv(server)?,
            rows: Vec::new(),
            last: Duration::ZERO,
            missed: false,
            interval: server.report_interval,
        })
    }

    /// A copy to go on from, if the report writes nothing.
    pub(super) fn fork(&self) -> Option<TierReport> {
        if self.csv.is_some() {
            return None;
        }
        Some(TierReport {
            reporter: self.reporter.fork()?,
            csv: None,
            rows: self.rows.clone(),
            last: self.last,
            missed: self.missed,
            interval: self.interval,
        })
    }

    /// Tier `t`'s report tick at `now`: missed while it is stopped.
    pub(super) fn tick(&mut self, engine: &mut Engine, t: usize, now: Duration) {
        if engine.tiers[t].host.is_stopped() {
            self.missed = true;
            return;
        }
        self.rows_at(engine, t, now);
        engine.push(now + self.interval, Event::TierTick(t as u32));
    }

    /// Tier `t` resumed at `now`: the tick it missed fires.
    pub(super) fn resumed(&mut self, engine: &mut Engine, t: usize, now: Duration) {
        if std::mem::take(&mut self.missed) {
            self.rows_at(engine, t, now);
            engine.push(now + self.interval, Event::TierTick(t as u32));
        }
    }

    /// The rows of the interval ending at `now`.
    fn rows_at(&mut self, engine: &mut Engine, t: usize, now: Duration) {
        let measured = now - self.last;
        let row = engine.tiers[t].host.report(now, measured);
        write_row(&mut self.csv, &row);
        self.rows.push(row);
        let recorder = &engine.calls[t].recorder;
        self.reporter
            .report(recorder, measured, virtual_unix_ms(now), now);
        self.last = now;
    }

    /// The last rows (its server's unless it is stopped) and what tier
    /// `t` did, at the run's `end`.
    pub(super) fn finish(mut self, engine: &mut Engine, t: usize, end: Duration) -> TierOutcome {
        let measured = end.saturating_sub(self.last);
        if end > self.last && !engine.tiers[t].host.is_stopped() {
            let row = engine.tiers[t].host.report(end, measured);
            write_row(&mut self.csv, &row);
            self.rows.push(row);
        }
        let calls = &engine.calls[t];
        // The calls' totals take every interval, stopped or not.
        self.reporter
            .report(&calls.recorder, measured, virtual_unix_ms(end), end);
        let held = calls.slots.len() as u32;
        let calls = self.reporter.close(end, held, 0, &calls.recorder);
        let tier = &engine.tiers[t];
        let server = tier.host.summary();
        let figures = tier.figures();
        TierOutcome {
            received: server.completed
                + server.abandoned
                + server.shed
                + server.refused
                + server.dropped
                + server.in_flight
                + figures.expired,
            work_for_gone_callers: server.abandoned + server.abandoned_held + figures.gone_in_call,
            server,
            server_rows: self.rows,
            calls,
            answers: figures.answers,
            expired: figures.expired,
            cancelled_calls: figures.cancelled,
            peak_concurrency: figures.peak_held,
        }
    }
}
