//! The report rows: one line on the terminal and one CSV row per
//! interval, for the client and for the server. Rates are counts divided by
//! the *measured* length of an interval, so a late or stretched interval (a
//! stopped process, a loaded machine) still reports true rates.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::counts::{ClientCounts, Held, Interval, ServerCounts, Tally};
use super::histogram::Percentiles;
use crate::model::service::Gauges;
use hdrhistogram::Histogram;

/// `count` per second over `secs` (none over an empty interval).
pub(crate) fn per_sec(count: u64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// One row of the client's report: a line on the terminal, a row of its CSV.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientRow {
    /// Wall-clock time of the report, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the client started.
    pub elapsed_s: f64,
    /// Successful attempts per second.
    pub ok_per_s: f64,
    /// Failed attempts per second.
    pub errors_per_s: f64,
    /// Timed-out attempts per second.
    pub timeouts_per_s: f64,
    /// Retries per second.
    pub retries_per_s: f64,
    /// Attempts in flight at the report.
    pub in_flight: u64,
    /// Median latency of the interval's successful attempts, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile of the same.
    pub p99_ms: Option<f64>,
    /// Largest of the same.
    pub max_ms: Option<f64>,
    /// Logical requests given up per second.
    pub gave_up_per_s: f64,
    /// Attempts refused by a throttle per second.
    pub throttled_per_s: f64,
    /// Attempts sent per logical request started in the interval
    /// (amplification; local rejections are not sent).
    pub attempts_per_request: Option<f64>,
    /// Logical requests started per second (the demand).
    pub requests_per_s: f64,
    /// Attempts sent over the network per second (local rejections are
    /// not sent): the load the server sees.
    pub sent_per_s: f64,
    /// Hedges cancelled per second because another copy won; there only
    /// for a hedging client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_per_s: Option<f64>,
    /// Sessions of open traffic held at the report, thinking ones
    /// included (for open traffic, one request a session, the requests in
    /// progress); there only for open or partly-open traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outstanding: Option<u64>,
    /// Arrivals refused at the source per second (the process held its
    /// bound of sessions); there only for open or partly-open traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_per_s: Option<f64>,
    /// A tier's calls whose caller had gone before their answer, per
    /// second; there only in a tier's calls file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_per_s: Option<f64>,
    /// Connections the client held open at the report, for HTTP/2, where
    /// one connection carries many of the attempts in flight as streams
    /// (over HTTP/1.1 each attempt in flight has a connection of its own,
    /// and the column is left out). Last, so that
    /// the other columns keep their places.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
}

impl ClientRow {
    /// Builds a row from an interval's counts and its measured length.
    pub fn new(
        counts: &ClientCounts,
        interval: Duration,
        in_flight: u64,
        unix_ms: u64,
        elapsed: Duration,
    ) -> Self {
        let latency = Percentiles::of(&counts.attempt_latency);
        Self::of_tally(
            &counts.tally,
            latency,
            interval,
            in_flight,
            unix_ms,
            elapsed,
        )
    }

    /// The row of an interval as recorded, the same as [`ClientRow::new`]
    /// gives for its counts in histograms like `like` (sorts the
    /// interval's attempt latencies).
    pub fn of_interval(
        counts: &mut Interval,
        like: &Histogram<u64>,
        interval: Duration,
        in_flight: u64,
        unix_ms: u64,
        elapsed: Duration,
    ) -> Self {
        let latency = Percentiles::of_values(&mut counts.attempt_latency, like);
        Self::of_tally(
            &counts.tally,
            latency,
            interval,
            in_flight,
            unix_ms,
            elapsed,
        )
    }

    fn of_tally(
        t: &Tally,
        latency: Percentiles,
        interval: Duration,
        in_flight: u64,
        unix_ms: u64,
        elapsed: Duration,
    ) -> Self {
        let secs = interval.as_secs_f64();
        ClientRow {
            unix_ms,
            elapsed_s: round3(elapsed.as_secs_f64()),
            ok_per_s: round2(per_sec(t.ok, secs)),
            errors_per_s: round2(per_sec(t.errors, secs)),
            timeouts_per_s: round2(per_sec(t.timeouts, secs)),
            retries_per_s: round2(per_sec(t.retries, secs)),
            in_flight,
            p50_ms: latency.p50_ms,
            p99_ms: latency.p99_ms,
            max_ms: latency.max_ms,
            gave_up_per_s: round2(per_sec(t.gave_up, secs)),
            throttled_per_s: round2(per_sec(t.throttled, secs)),
            attempts_per_request: t.amplification().map(round2),
            requests_per_s: round2(per_sec(t.started, secs)),
            sent_per_s: round2(per_sec(t.sent(), secs)),
            cancelled_per_s: None,
            outstanding: None,
            refused_per_s: None,
            gone_per_s: None,
            connections: None,
        }
    }

    /// The row with its open traffic's columns: the sessions held now and
    /// the interval's arrivals refused at the source.
    pub fn with_open(self, tally: &Tally, interval: Duration, outstanding: u64) -> Self {
        ClientRow {
            outstanding: Some(outstanding),
            refused_per_s: Some(round2(per_sec(tally.refused, interval.as_secs_f64()))),
            ..self
        }
    }

    /// The row with a tier's calls' column: the interval's calls whose
    /// caller had gone.
    pub fn with_gone(self, tally: &Tally, interval: Duration) -> Self {
        ClientRow {
            gone_per_s: Some(round2(per_sec(tally.gone, interval.as_secs_f64()))),
            ..self
        }
    }

    /// The row with its connections column: those held open now.
    pub fn with_connections(self, connections: u64) -> Self {
        ClientRow {
            connections: Some(connections),
            ..self
        }
    }

    /// The row with its hedging column: the interval's cancelled hedges.
    pub fn with_cancelled(self, tally: &Tally, interval: Duration) -> Self {
        ClientRow {
            cancelled_per_s: Some(round2(per_sec(tally.cancelled, interval.as_secs_f64()))),
            ..self
        }
    }
}

impl ClientRow {
    /// The row one process running every shard's users would have
    /// written for an interval the `shards` rows report: rates and
    /// requests in flight summed, amplification from the summed rates, and
    /// the percentiles of `latency`, the shards' histograms of the
    /// interval merged. Its time is the latest of theirs. HTTP/2's
    /// connections are summed too: each shard's process holds its own,
    /// and the server sees them all (one process would share fewer).
    pub fn merged(shards: &[&ClientRow], latency: &Histogram<u64>) -> ClientRow {
        let sum = |f: fn(&ClientRow) -> f64| round2(shards.iter().map(|r| f(r)).sum());
        let percentiles = Percentiles::of(latency);
        let requests = sum(|r| r.requests_per_s);
        let sent = sum(|r| r.sent_per_s);
        let hedging = shards.iter().any(|r| r.cancelled_per_s.is_some());
        let open = shards.iter().any(|r| r.outstanding.is_some());
        let calls = shards.iter().any(|r| r.gone_per_s.is_some());
        let multiplexed = shards.iter().any(|r| r.connections.is_some());
        ClientRow {
            unix_ms: shards.iter().map(|r| r.unix_ms).max().unwrap_or(0),
            elapsed_s: shards.iter().map(|r| r.elapsed_s).fold(0.0, f64::max),
            ok_per_s: sum(|r| r.ok_per_s),
            errors_per_s: sum(|r| r.errors_per_s),
            timeouts_per_s: sum(|r| r.timeouts_per_s),
            retries_per_s: sum(|r| r.retries_per_s),
            in_flight: shards.iter().map(|r| r.in_flight).sum(),
            p50_ms: percentiles.p50_ms,
            p99_ms: percentiles.p99_ms,
            max_ms: percentiles.max_ms,
            gave_up_per_s: sum(|r| r.gave_up_per_s),
            throttled_per_s: sum(|r| r.throttled_per_s),
            attempts_per_request: (requests > 0.0).then(|| round2(sent / requests)),
            requests_per_s: requests,
            sent_per_s: sent,
            cancelled_per_s: hedging.then(|| sum(|r| r.cancelled_per_s.unwrap_or(0.0))),
            outstanding: open.then(|| shards.iter().filter_map(|r| r.outstanding).sum()),
            refused_per_s: open.then(|| sum(|r| r.refused_per_s.unwrap_or(0.0))),
            gone_per_s: calls.then(|| sum(|r| r.gone_per_s.unwrap_or(0.0))),
            connections: multiplexed.then(|| shards.iter().filter_map(|r| r.connections).sum()),
        }
    }

    /// The row's latency percentiles.
    pub fn latency(&self) -> Percentiles {
        Percentiles {
            p50_ms: self.p50_ms,
            p99_ms: self.p99_ms,
            max_ms: self.max_ms,
        }
    }
}

impl fmt::Display for ClientRow {
    /// Begins exactly like the 2014 original's line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "OK: {:.2} req/sec, errors: {:.2} req/sec, timedout: {:.2} req/sec, \
             retries: {:.2} req/sec, in-flight: {}, {}",
            self.ok_per_s,
            self.errors_per_s,
            self.timeouts_per_s,
            self.retries_per_s,
            self.in_flight,
            self.latency()
        )?;
        if let Some(c) = self.connections {
            write!(f, ", connections: {c}")?;
        }
        write!(
            f,
            ", gave up: {:.2} req/sec, throttled: {:.2} req/sec",
            self.gave_up_per_s, self.throttled_per_s
        )?;
        match self.attempts_per_request {
            Some(a) => write!(f, ", attempts/request: {a:.2}")?,
            None => write!(f, ", attempts/request: -")?,
        }
        if let Some(c) = self.cancelled_per_s {
            write!(f, ", cancelled: {c:.2} req/sec")?;
        }
        if let Some(o) = self.outstanding {
            write!(
                f,
                ", outstanding: {o}, refused: {:.2} req/sec",
                self.refused_per_s.unwrap_or(0.0)
            )?;
        }
        Ok(())
    }
}

/// One row of the server's report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerRow {
    /// Wall-clock time of the report, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the server started.
    pub elapsed_s: f64,
    /// Requests in flight in the latency model.
    pub concurrency: u64,
    /// The modelled delay at that concurrency, in milliseconds.
    pub last_delay_ms: f64,
    /// Requests answered per second.
    pub completed_per_s: f64,
    /// Requests whose client had gone (wasted work) per second.
    pub abandoned_per_s: f64,
    /// Requests refused at once by `--shed-above` per second.
    pub shed_per_s: f64,
    /// The highest concurrency within the interval, at any admission (a
    /// burst that drains before the report shows here only).
    #[serde(default)]
    pub max_concurrency: u64,
    /// Requests in the model at the report whose client had gone: work held
    /// for nobody.
    #[serde(default)]
    pub abandoned_held: u64,
    /// Their time in the model so far, summed, seconds.
    #[serde(default)]
    pub abandoned_held_s: f64,
    /// The model's time spent on requests whose client had gone, counted as
    /// they left it (completed or dropped), seconds per second.
    #[serde(default)]
    pub abandoned_time_per_s: f64,
    /// Requests waiting in a pool's queue at the report. This and the
    /// columns after it are there only for a pool or a server with a
    /// limiter or admission control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u64>,
    /// The longest the queue was within the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue: Option<u64>,
    /// Busy workers at the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<u64>,
    /// Requests refused because the queue was full, per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_per_s: Option<f64>,
    /// Requests refused by the concurrency limiter, per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_per_s: Option<f64>,
    /// Requests refused by admission control, per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_per_s: Option<f64>,
    /// Requests dropped by the queue timeout, per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_per_s: Option<f64>,
    /// The limiter's limit at the report (empty without a limiter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Requests a failing backend answered with its error, per second
    /// (there only with `--fail-rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_per_s: Option<f64>,
}

/// The server's state at a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerState {
    /// Requests in flight.
    pub concurrency: u64,
    /// The modelled delay now.
    pub delay: Duration,
    /// Work held for clients that have gone.
    pub held: Held,
    /// A pool's and the defences' figures, when the server reports them.
    pub defences: Option<Gauges>,
    /// Whether the server is a failing backend (its rows count failures).
    pub failing: bool,
}

impl ServerRow {
    /// Builds a row from an interval's counts, its measured length and the
    /// model's state at the report.
    pub fn new(
        counts: ServerCounts,
        interval: Duration,
        state: ServerState,
        unix_ms: u64,
        elapsed: Duration,
    ) -> Self {
        let ServerState {
            concurrency,
            delay,
            held,
            defences,
            failing,
        } = state;
        let secs = interval.as_secs_f64();
        let rate = |n: u64| defences.map(|_| round2(per_sec(n, secs)));
        ServerRow {
            unix_ms,
            elapsed_s: round3(elapsed.as_secs_f64()),
            concurrency,
            last_delay_ms: round3(delay.as_secs_f64() * 1e3),
            completed_per_s: round2(per_sec(counts.completed, secs)),
            abandoned_per_s: round2(per_sec(counts.abandoned, secs)),
            shed_per_s: round2(per_sec(counts.shed, secs)),
            max_concurrency: counts.max_concurrency.max(concurrency),
            abandoned_held: held.count,
            abandoned_held_s: round3(held.time.as_secs_f64()),
            abandoned_time_per_s: if secs > 0.0 {
                round3(counts.abandoned_time.as_secs_f64() / secs)
            } else {
                0.0
            },
            queue: defences.map(|g| g.queue),
            max_queue: defences.map(|g| counts.max_queue.max(g.queue)),
            busy: defences.map(|g| g.busy),
            refused_per_s: rate(counts.refused),
            limited_per_s: rate(counts.limited),
            rejected_per_s: rate(counts.rejected),
            dropped_per_s: rate(counts.dropped),
            limit: defences.and_then(|g| g.limit),
            failed_per_s: failing.then(|| round2(per_sec(counts.failed, secs))),
        }
    }
}

impl fmt::Display for ServerRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "concurrency: {}, last delay: {}, completed: {:.2} req/sec, abandoned: {:.2} req/sec",
            self.concurrency,
            format_delay(Duration::from_secs_f64(self.last_delay_ms / 1e3)),
            self.completed_per_s,
            self.abandoned_per_s
        )?;
        if let Some(failed) = self.failed_per_s.filter(|r| *r > 0.0) {
            write!(f, ", failed: {failed:.2} req/sec")?;
        }
        if self.shed_per_s > 0.0 {
            write!(f, ", shed: {:.2} req/sec", self.shed_per_s)?;
        }
        if let (Some(queue), Some(max_queue), Some(busy)) = (self.queue, self.max_queue, self.busy)
        {
            write!(f, ", queue: {queue} (max {max_queue}), busy: {busy}")?;
        }
        for (name, rate) in [
            ("refused", self.refused_per_s),
            ("limited", self.limited_per_s),
            ("rejected", self.rejected_per_s),
            ("dropped", self.dropped_per_s),
        ] {
            if let Some(rate) = rate.filter(|r| *r > 0.0) {
                write!(f, ", {name}: {rate:.2} req/sec")?;
            }
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit: {limit}")?;
        }
        Ok(())
    }
}

/// Formats a delay compactly: `100ms`, `2.35s`, `1h 3m 20s`.
pub fn format_delay(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// Milliseconds since the Unix epoch, for report rows.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `x` to two decimals, as the rows give rates.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `x` to three decimals, as the rows give times.
pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
impl ClientRow {
    /// Rows for tests: one a second from t = 1 s with the given goodput,
    /// 100 requests a second asked and sent, no failure, and latencies of
    /// 100/110/120 ms while anything succeeds.
    pub(crate) fn each_second(ok: &[f64]) -> Vec<ClientRow> {
        ok.iter()
            .enumerate()
            .map(|(i, &ok)| ClientRow {
                unix_ms: 1_000 * (i as u64 + 1),
                elapsed_s: i as f64 + 1.0,
                ok_per_s: ok,
                errors_per_s: 0.0,
                timeouts_per_s: 0.0,
                retries_per_s: 0.0,
                in_flight: 0,
                p50_ms: (ok > 0.0).then_some(100.0),
                p99_ms: (ok > 0.0).then_some(110.0),
                max_ms: (ok > 0.0).then_some(120.0),
                gave_up_per_s: 0.0,
                throttled_per_s: 0.0,
                attempts_per_request: Some(1.0),
                requests_per_s: 100.0,
                sent_per_s: 100.0,
                cancelled_per_s: None,
                outstanding: None,
                refused_per_s: None,
                gone_per_s: None,
                connections: None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
