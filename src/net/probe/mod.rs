//! The probe of a real service, the first step of a virtual twin: what
//! `model::fit` fits, measured over the network.
//!
//! **The closed loop** ([`run`]). At each concurrency N of the list, N
//! clients, each on its own keep-alive HTTP/1.1 connection (over HTTP/2,
//! its own connection with one stream at a time), send requests as the
//! wire says (a GET by default) with no think time: each sends its next the instant its answer arrives. An
//! answer is a success when its status is 2xx and its body has arrived;
//! anything else (another status, a broken connection, no answer within
//! the timeout) is an error, and a client whose connection broke or timed
//! out opens a new one. Each level runs its warm-up, then is measured
//! over its hold (which attempts count: `tally`), then its connections
//! close before the next level starts. The probe stops after the first
//! level whose error share or p99 passes its bound.
//!
//! **Little's check.** With N clients always waiting on the service,
//! `N = X R`. Where the clients were less than 90 % of the hold in an
//! attempt ([`LevelReport::little_ratio`]), something between an answer
//! and the next GET set the pace, not the service. The clients' own
//! clocks cannot see a prober too slow to read its answers (an answer
//! waiting in its socket counts as latency), so the prober's thread is
//! also watched ([`LevelReport::prober_busy`]): running or waiting to run
//! 90 % of the hold, it was the bottleneck. Either sets
//! [`LevelReport::prober_bound`].
//!
//! **The runtime.** One current-thread tokio runtime on the calling
//! thread runs every client. A client's work between two answers is a few
//! microseconds (results/bench.md: about 15 µs of CPU a request for the
//! fault proxy, a ceiling near 60,000 a second on one thread), so one
//! thread holds hundreds of clients against services of milliseconds; a
//! single thread wakes no other for its own work (the cost `lanes`
//! avoids), leaves the other cores to the service when it runs on the same
//! machine, and makes one thread's time the prober's whole demand, which
//! the check above reads. Where one thread is not enough, the check says so.
//!
//! **The second probe** ([`gone`]): whether the service finishes work for
//! clients that have gone (module `abandon`).
//!
//! **The third** ([`burst`]): where the service keeps requests it cannot
//! start yet: its listen backlog, a queue that refuses past its places,
//! or one that holds them all (module `burst`).
//!
//! **The fourth** ([`batch`]): whether the service answers requests sent
//! at once in waves, first come, first served, or together (module
//! `batch`).

mod abandon;
mod batch;
mod burst;
mod closed_loop;
mod config;
mod connection;
mod report;
mod stop;
mod tally;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use abandon::{DRAIN_TRIES, DRAINED, GoneConfig, GoneProbe};
pub use batch::{BatchConfig, BatchProbe};
pub use burst::{BurstConfig, BurstProbe};
pub use config::ProbeConfig;
pub use report::{BUSY_FROM, LITTLE_BELOW, LevelReport, Probe, ProbeEnd, ProbeEvent};

use crate::net::target::Target;
use closed_loop::Held;
use config::{invalid, longer_than_zero};

/// Probes `config.target` at each concurrency in turn (module doc).
///
/// Blocking: builds its own tokio runtime on the calling thread. `stop` is
/// polled at least every 100 ms; once true, the level in progress is
/// dropped (not reported: it was not held its full time) and the levels
/// finished before are returned with [`ProbeEnd::Interrupted`].
/// `progress` is called on each event. Fails on a configuration that
/// cannot be probed (not an `http://` or `https://` URL, a host that does
/// not resolve, a concurrency of 0, a zero hold or timeout), on a target
/// whose one request before any load says no level could succeed
/// (`net::preflight`: a TLS handshake that fails, a server that does not
/// speak HTTP/2 when asked to, a gRPC method answered UNIMPLEMENTED), each
/// of kind [`io::ErrorKind::InvalidInput`], or on a runtime that cannot
/// start; a service that refuses or fails is measured, not an error.
pub fn run(
    config: &ProbeConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(ProbeEvent<'_>),
) -> io::Result<Probe> {
    config.check()?;
    runtime()?.block_on(async {
        let target = Arc::new(
            Target::resolve(&config.target, &config.wire)
                .await
                .map_err(invalid)?,
        );
        // What no level could ever measure (a TLS handshake that fails,
        // a server that refuses HTTP/2, a gRPC method not served) is
        // refused before any load, as the client and the storm refuse it.
        let what = match &config.wire.grpc {
            Some(call) => call.method.clone(),
            None => config.target.clone(),
        };
        crate::net::preflight::check(&target, &what)
            .await
            .map_err(invalid)?;
        let mut levels = Vec::new();
        for &concurrency in &config.levels {
            if stop.load(Ordering::Relaxed) {
                return Ok(Probe {
                    levels,
                    end: ProbeEnd::Interrupted,
                });
            }
            progress(ProbeEvent::LevelStarted { concurrency });
            let report = match closed_loop::level(&target, config, concurrency, stop).await {
                Held::Measured(report) => report,
                Held::Stopped => {
                    return Ok(Probe {
                        levels,
                        end: ProbeEnd::Interrupted,
                    });
                }
            };
            progress(ProbeEvent::LevelDone(&report));
            let end = report.end(config);
            levels.push(report);
            if let Some(end) = end {
                return Ok(Probe { levels, end });
            }
        }
        Ok(Probe {
            levels,
            end: ProbeEnd::Done,
        })
    })
}

/// Tells whether `config.target` finishes work for clients that have gone
/// (module `abandon` says how).
///
/// Blocking: builds its own tokio runtime on the calling thread. `stop` is
/// polled at least every 100 ms; once true, the probe ends with an error
/// of kind [`io::ErrorKind::Interrupted`]. Fails too on a configuration
/// that cannot be probed, on a service that does not answer a lone request
/// with 2xx within the timeout on an idle service, or that refuses or
/// breaks one after the abandon (abandon fewer than its queue holds).
pub fn gone(config: &GoneConfig, stop: &AtomicBool) -> io::Result<GoneProbe> {
    if config.abandon == 0 || config.repeats == 0 {
        return Err(invalid("abandon at least one request, at least once"));
    }
    longer_than_zero("the timeout", &[config.timeout])?;
    runtime()?.block_on(abandon::probe(config, stop))
}

/// Opens `config.connections` connections to `config.target` at once,
/// a request each, and tells how each ended (module `burst` says how).
///
/// Blocking: builds its own tokio runtime on the calling thread. `stop` is
/// polled at least every 100 ms; once true, the probe ends with an error
/// of kind [`io::ErrorKind::Interrupted`]. Fails too on a configuration
/// that cannot be probed (no connection, a zero hold or timeout, HTTP/2,
/// an open-file limit below the burst, a service that does not answer the
/// burst's request as written with 2xx: of kind
/// [`io::ErrorKind::InvalidInput`]), on a service that does not answer a
/// lone request with 2xx within the timeout on an idle service, or on the
/// prober's own failure to open a connection (out of ports).
pub fn burst(config: &BurstConfig, stop: &AtomicBool) -> io::Result<BurstProbe> {
    if config.connections == 0 {
        return Err(invalid("a burst of at least one connection"));
    }
    longer_than_zero("the hold and the timeout", &[config.hold, config.timeout])?;
    runtime()?.block_on(burst::probe(config, stop))
}

/// Sends `config.requests` requests to `config.target` at once,
/// `config.batches` times, and notes when each was answered (module
/// `batch` says how).
///
/// Blocking: builds its own tokio runtime on the calling thread. `stop` is
/// polled at least every 100 ms; once true, the probe ends with an error
/// of kind [`io::ErrorKind::Interrupted`]. Fails too on a configuration
/// that cannot be probed (no request or batch, a zero timeout, an
/// open-file limit below a batch: of kind
/// [`io::ErrorKind::InvalidInput`]), on a service that does not answer a
/// lone request with 2xx within the timeout on an idle service, or that
/// refuses or breaks one while it drains.
pub fn batch(config: &BatchConfig, stop: &AtomicBool) -> io::Result<BatchProbe> {
    if config.requests == 0 || config.batches == 0 {
        return Err(invalid("at least one batch of at least one request"));
    }
    longer_than_zero("the timeout", &[config.timeout])?;
    runtime()?.block_on(batch::probe(config, stop))
}

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
