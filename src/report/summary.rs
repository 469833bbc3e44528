//! A run's report as a whole: the client's reporter, which turns the
//! recorded counts of each interval into a row (terminal line, CSV row,
//! status line) and keeps the run's totals; and the totals each program
//! prints when it stops. Shared by both engines.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::counts::{ATTEMPT_BUCKETS, ClientCounts, ClientRecorder, Interval};
use super::histogram::{Percentiles, latency_histogram, record_all};
use super::hlog::{HlogWriter, LogRun};
use super::output::{CsvError, CsvSink, client_csv, say, write_row};
use super::rows::ClientRow;
use super::status::{ClientTotals, Status, StatusSink};
use crate::model::client::ClientConfig;
use crate::model::wire::Transport;

/// What a whole client run saw.
#[derive(Debug, Clone)]
pub struct ClientSummary {
    /// How long the load ran.
    pub elapsed: Duration,
    /// Counts and latencies over the whole run.
    pub totals: ClientCounts,
    /// Every report row, in order.
    pub rows: Vec<ClientRow>,
    /// The seed, to reproduce the run.
    pub seed: u64,
    /// Strategy name.
    pub strategy: &'static str,
    /// Number of simulated users.
    pub clients: u32,
    /// How many times a user moved from a busy lane of the real client to
    /// a less busy one (none in virtual time): more than a few means the
    /// client needed more threads than its users' demand asked for.
    pub moves: u64,
    /// Under open traffic, the sessions still held at the end (their
    /// requests neither succeeded nor were given up); `None` for a closed
    /// population.
    pub outstanding: Option<u64>,
}

impl fmt::Display for ClientSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals.tally;
        let secs = self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        let rate = |n: u64| n as f64 / secs;
        let population = match self.outstanding {
            Some(_) => "open traffic".to_string(),
            None => format!("{} clients", self.clients),
        };
        writeln!(
            f,
            "summary: {:.1} s, {population}, strategy {}, seed {}",
            self.elapsed.as_secs_f64(),
            self.strategy,
            self.seed
        )?;
        writeln!(
            f,
            "  attempts: {} (OK {}, errors {}, timed out {}{}; retries {}, throttled {}, \
             rejected locally {})",
            t.attempts(),
            t.ok,
            t.errors,
            t.timeouts,
            // Only hedges are ever cancelled.
            if t.cancelled > 0 {
                format!(", cancelled {}", t.cancelled)
            } else {
                String::new()
            },
            t.retries,
            t.throttled,
            t.rejected
        )?;
        writeln!(
            f,
            "  requests: {} started, {} given up, {} attempts sent per request",
            t.started,
            t.gave_up,
            t.amplification()
                .map_or("-".to_string(), |a| format!("{a:.2}"))
        )?;
        write!(f, "  attempts per finished request:")?;
        for ((_, label), count) in ATTEMPT_BUCKETS.iter().zip(t.attempts_per_request) {
            write!(f, " {label}: {count},")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  OK: {:.2} req/sec, errors: {:.2} req/sec, timedout: {:.2} req/sec",
            rate(t.ok),
            rate(t.errors),
            rate(t.timeouts)
        )?;
        writeln!(
            f,
            "  attempt latency (OK): {}",
            Percentiles::of(&self.totals.attempt_latency)
        )?;
        let late = Percentiles::of(&self.totals.lateness);
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |ms| format!("{ms:.3}ms"));
        writeln!(
            f,
            "  start lateness (attempts against their intended instant): p50: {}, p99: {}, max: {}",
            ms(late.p50_ms),
            ms(late.p99_ms),
            ms(late.max_ms)
        )?;
        if let Some(outstanding) = self.outstanding {
            writeln!(
                f,
                "  open traffic: {} sessions arrived, {} refused at the source, {outstanding} \
                 outstanding at the end",
                t.arrived, t.refused
            )?;
        }
        if self.moves > 0 {
            writeln!(
                f,
                "  lanes: users moved from a busy lane to another {} times",
                self.moves
            )?;
        }
        write!(
            f,
            "  request latency (first attempt to OK): {}",
            Percentiles::of(&self.totals.request_latency)
        )
    }
}

impl ClientSummary {
    /// The run's totals as the status protocol carries them, its attempts
    /// started by a timer of `timer_step`.
    pub fn to_totals(&self, timer_step: Duration) -> ClientTotals {
        ClientTotals {
            elapsed_s: self.elapsed.as_secs_f64(),
            tally: self.totals.tally,
            attempt_latency: Percentiles::of(&self.totals.attempt_latency),
            request_latency: Percentiles::of(&self.totals.request_latency),
            start_lateness: Percentiles::of(&self.totals.lateness),
            timer_step_ms: timer_step.as_secs_f64() * 1000.0,
        }
    }
}

/// Totals of a whole server run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSummary {
    /// Requests answered to a waiting client.
    pub completed: u64,
    /// Requests whose client had gone (wasted work).
    pub abandoned: u64,
    /// Highest concurrency seen.
    pub peak_concurrency: u64,
    /// Requests still in flight at the stop.
    pub in_flight: u64,
    /// Of those, the ones whose client had gone: work held for nobody.
    pub abandoned_held: u64,
    /// Requests shed (refused at once).
    pub shed: u64,
    /// Requests refused at once by a full queue, the limiter or admission
    /// control.
    pub refused: u64,
    /// Requests dropped from the queue by the queue timeout.
    pub dropped: u64,
    /// Requests a failing backend answered at once with its error.
    pub failed: u64,
}

impl fmt::Display for ServerSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "server stopped: completed {}, abandoned {}, shed {}, peak concurrency {}, \
             in flight at stop {} ({} of them for clients that had gone)",
            self.completed,
            self.abandoned,
            self.shed,
            self.peak_concurrency,
            self.in_flight,
            self.abandoned_held
        )?;
        if self.refused + self.dropped > 0 {
            write!(
                f,
                ", refused {}, dropped from the queue {}",
                self.refused, self.dropped
            )?;
        }
        if self.failed > 0 {
            write!(f, ", failed {}", self.failed)?;
        }
        Ok(())
    }
}

/// Turns a run's recorded counts into report rows: the terminal line, the
/// CSV row, the status line and the run's totals. Shared by both engines.
pub(crate) struct Reporter {
    csv: Option<CsvSink<ClientRow>>,
    /// Every interval's histograms, slivers too.
    hlog: Option<HlogWriter>,
    /// Rows carry the cancelled hedges.
    hedging: bool,
    /// Rows carry the connections held open (HTTP/2: many streams on
    /// one, so connections and attempts in flight differ).
    multiplexed: bool,
    /// Rows carry open traffic's columns.
    open: bool,
    /// Rows are a tier's calls: open traffic's columns, and callers gone.
    calls: bool,
    status: Option<StatusSink>,
    quiet: bool,
    /// Intervals shorter than this only add to the totals.
    sliver: Duration,
    interval: Interval,
    /// The interval's histograms for the log, kept to reuse their memory.
    hlog_histograms: Option<[Histogram<u64>; 2]>,
    /// Counts over the whole run.
    pub totals: ClientCounts,
    /// Every row reported, in order.
    pub rows: Vec<ClientRow>,
    /// The run's seed, strategy and timer step, for its summary.
    seed: u64,
    strategy: &'static str,
    timer_step: Duration,
}

impl Reporter {
    /// A reporter for a run of `config`, creating its CSV file; status
    /// lines go to `status`, if given.
    pub fn new(config: &ClientConfig, status: Option<StatusSink>) -> Result<Self, CsvError> {
        let run = LogRun {
            shard: config.shard,
            seed: config.seed,
            clients: config.clients,
            policy: config.policy_name().to_string(),
            report_interval_ms: config.report_interval.as_millis() as u64,
            start_at_ms: config.start_at.map(|t| {
                t.duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis() as u64
            }),
            open: config.open.map(|o| {
                format!(
                    "{} arrivals/s, sessions of {} requests",
                    o.rate,
                    o.session.mean()
                )
            }),
        };
        let hlog = config
            .hlog
            .as_deref()
            .map(|path| HlogWriter::create(path).map(|log| log.with_run(run)))
            .transpose()
            .map_err(|source| CsvError {
                flag: "--hlog",
                path: config.hlog.clone().unwrap_or_default(),
                source,
            })?;
        Ok(Reporter {
            csv: client_csv(config, false)?,
            hlog,
            hedging: config.hedging.is_some(),
            multiplexed: config.wire.transport == Transport::Http2,
            open: config.open.is_some(),
            calls: false,
            status,
            quiet: config.quiet,
            sliver: config.report_interval / 20,
            interval: Interval::default(),
            hlog_histograms: None,
            totals: ClientCounts::default(),
            rows: Vec::new(),
            seed: config.seed,
            strategy: config.policy_name(),
            timer_step: config.timer_resolution,
        })
    }

    /// A reporter of a tier's calls, made under `config` (its `--call-csv`
    /// in `csv`): each call is a session of open traffic, and rows say
    /// how many had lost their caller.
    pub fn for_calls(config: &ClientConfig) -> Result<Self, CsvError> {
        let mut reporter = Reporter::new(config, None)?;
        reporter.csv = client_csv(config, true)?;
        reporter.calls = true;
        Ok(reporter)
    }

    /// Sends every row to `status` too, from now on: a client's as
    /// [`Status::ClientRow`], a tier's calls' as [`Status::CallRow`].
    pub fn with_status(mut self, status: Option<StatusSink>) -> Self {
        self.status = status;
        self
    }

    /// A reporter holding what this one holds, to go on from; none if
    /// this one writes anywhere but stdout (a file or a status line
    /// cannot be shared).
    pub fn fork(&self) -> Option<Reporter> {
        if self.csv.is_some() || self.hlog.is_some() || self.status.is_some() {
            return None;
        }
        Some(Reporter {
            csv: None,
            hlog: None,
            hedging: self.hedging,
            multiplexed: self.multiplexed,
            open: self.open,
            calls: self.calls,
            status: None,
            quiet: self.quiet,
            sliver: self.sliver,
            interval: self.interval.clone(),
            hlog_histograms: None,
            totals: self.totals.clone(),
            rows: self.rows.clone(),
            seed: self.seed,
            strategy: self.strategy,
            timer_step: self.timer_step,
        })
    }

    /// Reports the interval of length `measured` that ends now. A sliver
    /// too short for meaningful rates (the stop landing just after a tick)
    /// only adds to the totals.
    pub fn report(
        &mut self,
        recorder: &ClientRecorder,
        measured: Duration,
        unix_ms: u64,
        elapsed: Duration,
    ) {
        self.report_scheduled(recorder, measured, measured, unix_ms, elapsed);
    }

    /// [`Reporter::report`] for an interval of the run's schedule, which is
    /// `scheduled` long whenever it was measured: a sliver by the schedule
    /// only adds to the totals, and any other interval is a row however
    /// late its timer made it end, so a run's rows are as many as its
    /// schedule has intervals.
    pub fn report_scheduled(
        &mut self,
        recorder: &ClientRecorder,
        scheduled: Duration,
        measured: Duration,
        unix_ms: u64,
        elapsed: Duration,
    ) {
        recorder.take_interval(&mut self.interval);
        self.totals.add(&self.interval);
        if let Some(log) = &mut self.hlog {
            let start = Duration::from_millis(unix_ms).saturating_sub(elapsed);
            let [attempts, requests] = self
                .hlog_histograms
                .get_or_insert_with(|| [latency_histogram(), latency_histogram()]);
            refill(attempts, &self.interval.attempt_latency);
            refill(requests, &self.interval.request_latency);
            let written = log.interval(
                start,
                elapsed.saturating_sub(measured),
                measured,
                attempts,
                requests,
            );
            if let Err(e) = written {
                eprintln!("--hlog {}: {e}; the log stops here", log.path().display());
                self.hlog = None;
            }
        }
        if scheduled < self.sliver {
            return;
        }
        let mut row = ClientRow::of_interval(
            &mut self.interval,
            &self.totals.attempt_latency,
            measured,
            recorder.in_flight(),
            unix_ms,
            elapsed,
        );
        if self.multiplexed {
            row = row.with_connections(recorder.connections());
        }
        if self.hedging {
            row = row.with_cancelled(&self.interval.tally, measured);
        }
        if self.open || self.calls {
            row = row.with_open(&self.interval.tally, measured, recorder.outstanding());
        }
        if self.calls {
            row = row.with_gone(&self.interval.tally, measured);
        }
        if !self.quiet {
            say(&row);
        }
        write_row(&mut self.csv, &row);
        let line = if self.calls {
            Status::CallRow(row.clone())
        } else {
            Status::ClientRow(row.clone())
        };
        StatusSink::send_to(&mut self.status, &line);
        self.rows.push(row);
    }
}

impl Reporter {
    /// The run's summary once its last interval is reported: `elapsed`
    /// since its start, its `clients`, the `moves` between lanes and the
    /// sessions `recorder` holds at the end. A client's totals go out as
    /// its last status line (a tier's calls send none: a supervisor reads
    /// totals as the client's).
    pub fn close(
        mut self,
        elapsed: Duration,
        clients: u32,
        moves: u64,
        recorder: &ClientRecorder,
    ) -> ClientSummary {
        let summary = ClientSummary {
            outstanding: self.open.then(|| recorder.outstanding()),
            elapsed,
            totals: self.totals,
            rows: self.rows,
            seed: self.seed,
            strategy: self.strategy,
            clients,
            moves,
        };
        if self.status.is_some() && !self.calls {
            let line = Status::ClientTotals(summary.to_totals(self.timer_step));
            StatusSink::send_to(&mut self.status, &line);
        }
        summary
    }
}

/// Makes `h` hold exactly `values`: cleared first, unless already empty.
fn refill(h: &mut Histogram<u64>, values: &[u64]) {
    if !h.is_empty() {
        h.reset();
    }
    record_all(h, values);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn closing_a_reporter_sends_the_summarys_totals() {
        let (tx, rx) = mpsc::channel();
        let status = StatusSink::tapped(None, move |s: &Status| tx.send(s.clone()).unwrap());
        let mut reporter = Reporter {
            csv: None,
            hlog: None,
            hedging: false,
            multiplexed: false,
            open: false,
            calls: false,
            status: Some(status),
            quiet: true,
            sliver: Duration::from_millis(50),
            interval: Interval::default(),
            hlog_histograms: None,
            totals: ClientCounts::default(),
            rows: Vec::new(),
            seed: 9,
            strategy: "fixed",
            timer_step: Duration::from_micros(500),
        };
        reporter.totals.tally.ok = 7;
        reporter.totals.tally.started = 7;
        for us in [0, 100, 300, 2_000] {
            reporter.totals.lateness.record(us).unwrap();
        }
        let summary = reporter.close(Duration::from_secs(3), 20, 0, &ClientRecorder::new());
        let lines: Vec<Status> = rx.try_iter().collect();
        let [Status::ClientTotals(totals)] = &lines[..] else {
            panic!("one totals line: {lines:?}");
        };
        assert_eq!(totals, &summary.to_totals(Duration::from_micros(500)));
        assert_eq!(totals.timer_step_ms, 0.5);
        assert_eq!(totals.elapsed_s, 3.0);
        assert_eq!(totals.tally.ok, 7);
        // Four values: the median is the second, 100 µs; p99 and max the
        // last, 2 ms (within the histogram's three digits).
        assert_eq!(totals.start_lateness.p50_ms, Some(0.1));
        let p99 = totals.start_lateness.p99_ms.unwrap();
        assert!((2.0..2.002).contains(&p99), "{p99}");
        assert_eq!(summary.seed, 9);
    }

    #[test]
    fn a_tiers_calls_send_their_rows_as_call_rows_and_no_totals() {
        let (tx, rx) = mpsc::channel();
        let status = StatusSink::tapped(None, move |s: &Status| tx.send(s.clone()).unwrap());
        let config = ClientConfig::with_policy(
            String::new(),
            Duration::from_secs(1),
            crate::policy::Strategy::Fixed {
                delay: Duration::from_millis(10),
            },
            crate::policy::RetryLimits::default(),
        );
        let mut reporter = Reporter::for_calls(&config)
            .unwrap()
            .with_status(Some(status));
        let recorder = ClientRecorder::new();
        recorder.session_arrived();
        recorder.caller_gone();
        reporter.report(
            &recorder,
            Duration::from_secs(1),
            1_000,
            Duration::from_secs(1),
        );
        reporter.close(Duration::from_secs(1), 0, 0, &recorder);
        let lines: Vec<Status> = rx.try_iter().collect();
        let [Status::CallRow(row)] = &lines[..] else {
            panic!("one row of calls: {lines:?}");
        };
        assert_eq!(row.outstanding, Some(1), "calls in flight");
        assert_eq!(row.gone_per_s, Some(1.0));
    }
}
