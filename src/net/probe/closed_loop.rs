//! One level of the closed-loop probe: N clients, each on its own
//! keep-alive connection, each sending its next GET the instant its
//! answer arrives, held past a warm-up; then each finishes the GET it
//! has in flight and sends no other, and the connections close.
//!
//! Why finish them: a service that goes on with the work of clients that
//! have gone (most do) would still hold a level's requests when the next
//! level begins, and measure that level with the last one's load on top:
//! the project's exponential curve at 256 clients, 128 of the level
//! before still in it, answered nothing for minutes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::config::ProbeConfig;
use super::connection::Client;
use super::report::LevelReport;
use super::stop::{unless_stopped, wait_until};
use super::tally::Tally;
use crate::net::target::Target;

/// How a level ended.
pub(super) enum Held {
    /// Held its whole time.
    Measured(LevelReport),
    /// Stopped before its end: nothing to report.
    Stopped,
}

/// Runs `concurrency` clients against `target` for the warm-up and the
/// hold, and reports the hold. Every client's connection is closed when
/// this returns.
pub(super) async fn level(
    target: &Arc<Target>,
    config: &ProbeConfig,
    concurrency: u32,
    stop: &AtomicBool,
) -> Held {
    let start = Instant::now();
    let hold_start = start + config.warmup;
    let hold_end = hold_start + config.hold;
    let tally = Arc::new(Mutex::new(Tally::new(
        concurrency as usize,
        hold_start,
        hold_end,
    )));
    let finishing = Arc::new(AtomicBool::new(false));
    let mut clients = JoinSet::new();
    for index in 0..concurrency as usize {
        clients.spawn(client(
            index,
            target.clone(),
            config.timeout,
            tally.clone(),
            finishing.clone(),
        ));
    }
    let held = async {
        if !wait_until(hold_start, stop).await {
            return None;
        }
        let demand_start = thread_demand();
        if !wait_until(hold_end, stop).await {
            return None;
        }
        Some(thread_demand().saturating_sub(demand_start))
    }
    .await;
    // A client that ran past the hold's end counted nothing beyond it, and
    // on one thread none runs between here and the shutdown: the tally is
    // read, then every client and its connection goes.
    let report = held.map(|demand| {
        tally
            .lock()
            .expect("tally lock poisoned")
            .report(concurrency, demand)
    });
    // Each client ends with its answer in flight (its timeout bounds it),
    // unless the probe is stopped.
    finishing.store(true, Ordering::SeqCst);
    if report.is_some() {
        unless_stopped(stop, async { while clients.join_next().await.is_some() {} }).await;
    }
    clients.shutdown().await;
    report.map_or(Held::Stopped, Held::Measured)
}

/// One client: GET after GET, each counted in `tally`, until aborted or,
/// once `finishing` is set, its GET in flight has ended.
async fn client(
    index: usize,
    target: Arc<Target>,
    timeout: Duration,
    tally: Arc<Mutex<Tally>>,
    finishing: Arc<AtomicBool>,
) {
    let mut client = Client::new(&target, timeout);
    while !finishing.load(Ordering::SeqCst) {
        tally
            .lock()
            .expect("tally lock poisoned")
            .sent(index, Instant::now());
        let answer = client.get().await;
        tally
            .lock()
            .expect("tally lock poisoned")
            .ended(index, Instant::now(), &answer);
    }
}

/// The time the calling thread has run on a CPU or waited in a run queue
/// for one (Linux's `/proc/thread-self/schedstat`), or where that cannot
/// be read its CPU time alone: the prober's whole demand, on its one
/// thread. The wait counts: a prober that other processes keep off the
/// CPU is as much the bottleneck as one that keeps it busy.
fn thread_demand() -> Duration {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok();
    let mut fields = schedstat
        .iter()
        .flat_map(|text| text.split_whitespace())
        .map(str::parse::<u64>);
    match (fields.next(), fields.next()) {
        (Some(Ok(run)), Some(Ok(wait))) => Duration::from_nanos(run.saturating_add(wait)),
        _ => clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(Duration::ZERO, Duration::from),
    }
}
