//! The model's actor: one task that owns the service (the server's shape
//! and its defences), admits requests, answers them when they leave it,
//! counts what happened (held work for departed clients included) and
//! writes the server's reports. Request handlers talk to it by message, so
//! a request's modelled work lives outside hyper's handler future.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::backlog::{AcceptQueue, Worker};
use super::timer::Alarm;
use crate::model::server::{OnDisconnect, ServerConfig};
use crate::model::service::{self, Exit, Refusal, Service, Ticket};
use crate::report::counts::{Held, ServerCounts};
use crate::report::metrics::ServerMetrics;
use crate::report::output::{CsvSink, say, write_row};
use crate::report::rows::{ServerRow, ServerState, unix_ms};
use crate::report::status::{Status, StatusSink};
use crate::report::summary::ServerSummary;

/// Live figures of a running server, for tests and embedding programs.
#[derive(Debug, Default)]
pub struct Gauges {
    /// Requests in flight in the latency model.
    pub concurrency: AtomicU64,
    /// Highest concurrency seen.
    pub peak_concurrency: AtomicU64,
    /// Requests answered to a waiting client, since start.
    pub completed: AtomicU64,
    /// Requests whose client had gone, since start.
    pub abandoned: AtomicU64,
    /// Failed `accept` calls since start (for example, out of descriptors).
    pub accept_errors: AtomicU64,
    /// Requests shed since start.
    pub shed: AtomicU64,
}

/// Messages from request handlers to the model actor.
pub(super) enum ToModel {
    /// A request head was read at `stamp`; answer on `reply` when done.
    Admit {
        id: u64,
        stamp: Instant,
        reply: oneshot::Sender<Reply>,
        /// The worker of a pool waiting in the backlog that accepted the
        /// request's connection, given back when the request leaves.
        worker: Option<Worker>,
    },
    /// The client of request `id` went away (sent in `cancel` mode only).
    Cancel { id: u64 },
}

/// The model's answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// Served: answer OK.
    Done,
    /// Refused at the door or dropped from the queue: 503 (or, shed, the
    /// shedding status with `Retry-After`; failed, the failing backend's
    /// status).
    Refused(Refusal),
}

/// A request waiting in the model.
struct Pending {
    id: u64,
    reply: oneshot::Sender<Reply>,
    /// Its worker, if the pool waits in the backlog: dropped (given back
    /// to the accept loop) with the request when it leaves the model.
    _worker: Option<Worker>,
}

/// Owns the service, the counters and the report.
pub(super) struct ModelActor {
    service: Service<Pending>,
    epoch: Instant,
    rx: mpsc::UnboundedReceiver<ToModel>,
    /// Tickets by request id, kept only in `cancel` mode.
    tickets: Option<HashMap<u64, Ticket>>,
    /// Whether report rows carry a pool's and the defences' figures.
    defences: bool,
    interval: ServerCounts,
    totals: ServerCounts,
    peak: u64,
    gauges: Arc<Gauges>,
    /// Prometheus metrics, fed as requests come and go, if served.
    metrics: Option<Arc<ServerMetrics>>,
    csv: Option<CsvSink<ServerRow>>,
    status: Option<StatusSink>,
    report_interval: Duration,
    quiet: bool,
    /// The kernel's accept queue, where a pool waiting in the backlog
    /// keeps its waiting requests.
    accept_queue: Option<AcceptQueue>,
}

impl ModelActor {
    /// An actor for `config`, reading requests from `rx`.
    pub(super) fn new(
        config: &ServerConfig,
        csv: Option<CsvSink<ServerRow>>,
        status: Option<StatusSink>,
        gauges: Arc<Gauges>,
        rx: mpsc::UnboundedReceiver<ToModel>,
    ) -> Self {
        ModelActor {
            service: Service::new(config),
            epoch: Instant::now(),
            rx,
            tickets: (config.on_disconnect == OnDisconnect::Cancel).then(HashMap::new),
            defences: config.reports_defences(),
            interval: ServerCounts::default(),
            totals: ServerCounts::default(),
            peak: 0,
            gauges,
            metrics: None,
            csv,
            status,
            report_interval: config.report_interval,
            quiet: config.quiet,
            accept_queue: None,
        }
    }

    /// Reads the kernel's accept queue into the report, if given (a pool
    /// waiting in the backlog, whose waiting requests are there).
    pub(super) fn with_accept_queue(mut self, queue: Option<AcceptQueue>) -> Self {
        self.accept_queue = queue;
        self
    }

    /// Feeds `metrics` too, if given.
    pub(super) fn with_metrics(mut self, metrics: Option<Arc<ServerMetrics>>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs until `stop` (or every handler has gone), completing requests
    /// when `alarm` rings, and returns the totals.
    pub(super) async fn run(
        mut self,
        alarm: Alarm,
        mut stop: oneshot::Receiver<()>,
    ) -> ServerSummary {
        let mut report =
            tokio::time::interval_at(self.epoch + self.report_interval, self.report_interval);
        report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_report = self.epoch;
        // The instant the alarm is set for, if a completion is pending.
        let mut armed = None;
        let mut batch = Vec::with_capacity(256);
        loop {
            let next = self
                .service
                .next_event()
                .map(|at| alarm.slot(self.epoch + at));
            if next != armed {
                match next {
                    Some(at) => {
                        alarm.set(at);
                    }
                    None => alarm.clear(),
                }
                armed = next;
            }
            tokio::select! {
                n = self.rx.recv_many(&mut batch, 1024) => {
                    if n == 0 {
                        break;
                    }
                    for msg in batch.drain(..) {
                        self.on_message(msg);
                    }
                }
                rung = alarm.rung(), if armed.is_some() => {
                    if rung.is_err() {
                        break;
                    }
                    // Set again below for whatever is next, even if it is
                    // the same instant.
                    armed = None;
                    self.service.advance(self.now());
                }
                _ = report.tick() => {
                    let now = Instant::now();
                    self.report(now - last_report);
                    last_report = now;
                }
                _ = &mut stop => break,
            }
            self.deliver();
        }
        self.service.advance(self.now());
        self.deliver();
        self.report(Instant::now() - last_report);
        let t = &self.totals;
        let summary = ServerSummary {
            completed: t.completed,
            abandoned: t.abandoned,
            peak_concurrency: self.peak,
            in_flight: self.service.concurrency(),
            abandoned_held: self.held_for_gone().count,
            shed: t.shed,
            refused: t.refused + t.limited + t.rejected,
            dropped: t.dropped,
            failed: t.failed,
        };
        if !self.quiet {
            say(summary);
        }
        summary
    }

    fn now(&self) -> Duration {
        Instant::now() - self.epoch
    }

    fn on_message(&mut self, msg: ToModel) {
        match msg {
            ToModel::Admit {
                id,
                stamp,
                reply,
                worker,
            } => {
                let at = stamp.saturating_duration_since(self.epoch);
                let pending = Pending {
                    id,
                    reply,
                    _worker: worker,
                };
                // What is due by then leaves first, freeing its place.
                match self.service.admit(at, pending) {
                    Ok(ticket) => {
                        if let Some(tickets) = &mut self.tickets {
                            tickets.insert(id, ticket);
                        }
                        let concurrency = self.service.concurrency();
                        let queue = self.service.gauges().queue;
                        self.count(|c| c.admitted(concurrency, queue));
                        self.peak = self.peak.max(concurrency);
                        if let Some(m) = &self.metrics {
                            m.admitted();
                        }
                    }
                    Err((pending, why)) => {
                        let _ = pending.reply.send(Reply::Refused(why));
                        self.count(|c| c.refused(why));
                        if let Some(m) = &self.metrics {
                            m.refused(why);
                        }
                    }
                }
            }
            ToModel::Cancel { id } => {
                let now = self.now();
                let ticket = self.tickets.as_mut().and_then(|t| t.remove(&id));
                let Some(ticket) = ticket else {
                    return;
                };
                self.service.cancel(now, ticket);
            }
        }
    }

    /// Counts something in the interval and in the run's totals.
    fn count(&mut self, f: impl Fn(&mut ServerCounts)) {
        f(&mut self.interval);
        f(&mut self.totals);
    }

    /// Answers every request that left the service.
    fn deliver(&mut self) {
        let (tickets, interval, totals) = (&mut self.tickets, &mut self.interval, &mut self.totals);
        let metrics = self.metrics.as_deref();
        self.service.drain(|d| {
            if let Some(tickets) = tickets {
                tickets.remove(&d.payload.id);
            }
            // A closed channel means hyper dropped the handler: the client
            // went away, and a completion is wasted work.
            let received = match d.exit {
                Exit::Served => d.payload.reply.send(Reply::Done).is_ok(),
                Exit::Dropped => d
                    .payload
                    .reply
                    .send(Reply::Refused(Refusal::Expired))
                    .is_ok(),
                Exit::Cancelled => false,
            };
            let held = d.at.saturating_sub(d.start);
            for counts in [&mut *interval, &mut *totals] {
                counts.departed(d.exit, received, held);
            }
            if let Some(m) = metrics {
                m.departed(d.exit, received, held);
            }
            received
        });
        if let Some(m) = metrics {
            let (concurrency, gauges) = self.state();
            m.state(
                self.now(),
                concurrency,
                self.service.current_delay(),
                gauges,
            );
        }
        let g = &self.gauges;
        g.concurrency
            .store(self.service.concurrency(), Ordering::Relaxed);
        g.peak_concurrency.store(self.peak, Ordering::Relaxed);
        g.completed.store(self.totals.completed, Ordering::Relaxed);
        g.abandoned.store(self.totals.abandoned, Ordering::Relaxed);
        g.shed.store(self.totals.shed, Ordering::Relaxed);
    }

    /// The requests in the model whose client has gone: hyper dropped
    /// their handler, so nobody waits on their answer.
    fn held_for_gone(&self) -> Held {
        let now = self.now();
        let mut held = Held::default();
        for (pending, start) in self.service.in_flight() {
            if pending.reply.is_closed() {
                held.count += 1;
                held.time += now.saturating_sub(start);
            }
        }
        held
    }

    /// The requests in the server and the pool's gauges now. For a pool
    /// waiting in the backlog, the connections waiting in the kernel are
    /// its queue, and in the server, as the virtual engine holds them.
    fn state(&self) -> (u64, service::Gauges) {
        let mut concurrency = self.service.concurrency();
        let mut gauges = self.service.gauges();
        if let Some(waiting) = self.accept_queue.as_ref().and_then(AcceptQueue::waiting) {
            gauges.queue = waiting;
            concurrency += waiting;
        }
        (concurrency, gauges)
    }

    fn report(&mut self, measured: Duration) {
        let (concurrency, gauges) = self.state();
        self.peak = self.peak.max(concurrency);
        let counts = std::mem::replace(
            &mut self.interval,
            ServerCounts::starting_at(concurrency, gauges.queue),
        );
        let state = ServerState {
            concurrency,
            delay: self.service.current_delay(),
            held: self.held_for_gone(),
            defences: self.defences.then_some(gauges),
            failing: self.service.fails(),
        };
        let row = ServerRow::new(counts, measured, state, unix_ms(), self.epoch.elapsed());
        let accept_errors = self.gauges.accept_errors.swap(0, Ordering::Relaxed);
        if !self.quiet {
            if accept_errors > 0 {
                say(format_args!("{row}, accept errors: {accept_errors}"));
            } else {
                say(&row);
            }
        }
        write_row(&mut self.csv, &row);
        StatusSink::send_to(&mut self.status, &Status::ServerRow(row));
    }
}
