//! The fourth probe: does the service answer requests that arrive
//! together one after the other, or all at once?
//!
//! A lone request first measures the idle service. Then, `batches`
//! times, `requests` requests are sent at once, each by a client of its
//! own on a new connection (the wire's request; HTTP/1.1 or HTTP/2, TLS
//! or not, as the closed loop sends it), and each success's time from
//! the batch's start is noted; a request unanswered within the timeout,
//! or answered other than with success, is left out. After each batch,
//! every answer in, the service is given time to drain as after the
//! gone-client probe. `model::fit::order` reads the times: a pool answers
//! in waves, a service shared among its requests answers them together.
//!
//! Every client's connect and write are started before any answer is
//! read, on the probe's one thread, so the requests leave within about a
//! millisecond of each other; answers that come together are read one
//! after another, microseconds apart. Each request pays its connect (and
//! over HTTP/2 the connection's handshake) as the lone request before
//! them did, which the reading takes off.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::abandon::{drain, idle};
use super::config::{enough_descriptors, invalid};
use super::connection::Client;
use super::stop::{interrupted, unless_stopped};
use crate::net::target::Target;

/// What the order probe does.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchConfig {
    /// The service: an `http://` or `https://` URL, as the closed-loop
    /// probe's.
    pub target: String,
    /// How the requests go on the wire.
    pub wire: crate::model::wire::Wire,
    /// Requests sent at once in each batch (at least 1).
    pub requests: u32,
    /// Batches, one after the other (at least 1).
    pub batches: u32,
    /// A request unanswered this long is left out (more than zero).
    pub timeout: Duration,
}

/// What the order probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchProbe {
    /// Requests sent at once in each batch.
    pub requests: u32,
    /// Each batch's successes: seconds from the batch's start to the
    /// answer's end, in the order they came.
    pub latencies_s: Vec<Vec<f64>>,
    /// A lone request on the idle service before the batches, seconds.
    pub baseline_s: f64,
}

/// The probe (module doc).
pub(super) async fn probe(config: &BatchConfig, stop: &AtomicBool) -> io::Result<BatchProbe> {
    enough_descriptors(config.requests, "a batch")?;
    let target = Arc::new(
        Target::resolve(&config.target, &config.wire)
            .await
            .map_err(invalid)?,
    );
    let baseline_s = idle(&target, config.timeout, stop).await?;
    let mut latencies_s = Vec::with_capacity(config.batches as usize);
    for _ in 0..config.batches {
        let batch = unless_stopped(stop, batch(&target, config.requests, config.timeout))
            .await
            .ok_or_else(interrupted)?;
        latencies_s.push(batch?);
        drain(&target, config.timeout, baseline_s, stop).await?;
    }
    Ok(BatchProbe {
        requests: config.requests,
        latencies_s,
        baseline_s,
    })
}

/// One batch: `requests` sent at once; the successes' times from its
/// start, in the order they came.
async fn batch(target: &Arc<Target>, requests: u32, timeout: Duration) -> io::Result<Vec<f64>> {
    let started = Instant::now();
    let mut clients = JoinSet::new();
    for _ in 0..requests {
        let target = target.clone();
        clients.spawn(async move {
            let mut client = Client::new(&target, timeout);
            let ok = client.get().await.is_ok();
            ok.then(|| started.elapsed().as_secs_f64())
        });
    }
    let mut latencies = Vec::with_capacity(requests as usize);
    while let Some(answer) = clients.join_next().await {
        if let Some(s) = answer.map_err(io::Error::other)? {
            latencies.push(s);
        }
    }
    Ok(latencies)
}
