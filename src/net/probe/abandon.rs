//! The second probe: does the service finish work for clients that have
//! gone?
//!
//! 1. **Baseline**: `repeats` lone GETs, one at a time, on an idle
//!    service.
//! 2. **Loaded**: `abandon` connections each send a GET and stay; a lone
//!    GET sent `hold_open` later, when the abandoned rounds send theirs,
//!    measures what a lone request would wait after they go if the
//!    service went on with their work (`expected_busy_s`). Sent at once,
//!    it could pass requests not yet in: over HTTP/2, on a connection of
//!    its own, it passed grpcio's 240 held streams (103 ms where 1.2 s
//!    were queued).
//! 3. `repeats` times: `abandon` connections each send a complete GET,
//!    stay open for `hold_open`, and are all closed; a lone GET sent at
//!    once measures what the service still does (after).
//!
//! After each loaded or abandoned round the service is given time to
//! drain: lone GETs until one is back within [`DRAINED`] times the
//! baseline's median, at most [`DRAIN_TRIES`] of them. The verdict is
//! `model::fit::gone::verdict`'s. Every lone GET opens a connection of its
//! own (connecting counts in its latency, in the baseline as after), and
//! one that times out counts as the timeout, a lower bound.
//!
//! Every request is the wire's (method, headers and body; TLS for an
//! `https://` target), a GET by default. Over HTTP/1.1 an abandoned
//! client is a connection closed with its request unanswered. Over
//! HTTP/2 it is what an HTTP/2 client that goes does: the abandoned
//! requests are streams, each reset (`RST_STREAM`, `CANCEL`) when they
//! go, their connections kept open until the lone request after them is
//! answered. A connection carries [`STREAMS_PER_CONNECTION`] of them at
//! most, so that none waits in the client for a slot the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` has not given (hyper's server allows
//! 200; a server allowing fewer than 100 would hold some back).

use std::io;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http2::SendRequest;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::config::invalid;
use super::connection::{Answer, Client};
use super::stop::{interrupted, unless_stopped, wait_until};
use crate::model::deadline::GRPC_TIMEOUT_HEADER;
use crate::model::fit::gone::{Gone, median, verdict};
use crate::model::wire::{Transport, Wire};
use crate::net::h2;
use crate::net::target::Target;
use crate::net::tls::Stream;

/// A lone GET within this many times the baseline's median says the
/// service has drained its backlog.
pub const DRAINED: f64 = 1.5;

/// At most this many lone GETs wait for the service to drain; the next
/// round starts after them whatever they found.
pub const DRAIN_TRIES: u32 = 10;

/// What the second probe does.
#[derive(Debug, Clone, PartialEq)]
pub struct GoneConfig {
    /// The service: an `http://` or `https://` URL, as the closed-loop
    /// probe's.
    pub target: String,
    /// How the requests go on the wire, as the closed-loop probe's; over
    /// HTTP/1.1 only (module doc).
    pub wire: Wire,
    /// Requests sent, each on a connection of its own, then abandoned (at
    /// least 1; within the service's queue, or the lone request after
    /// them is refused).
    pub abandon: u32,
    /// How long the abandoned connections stay open before they close:
    /// well below the time the service takes to serve them all, or there
    /// is nothing left to abandon.
    pub hold_open: Duration,
    /// Lone requests in the baseline, and rounds of abandon (at least 1).
    pub repeats: u32,
    /// A lone request unanswered this long is given up (more than zero).
    pub timeout: Duration,
}

/// What the second probe measured, and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoneProbe {
    /// Requests abandoned each round.
    pub abandon: u32,
    /// Latencies of lone requests on an idle service, seconds.
    pub baseline_s: Vec<f64>,
    /// Latencies of lone requests sent as the abandoned clients went,
    /// seconds, one a round.
    pub after_s: Vec<f64>,
    /// The latency of a lone request sent `hold_open` after `abandon`
    /// others whose clients stayed, seconds.
    pub loaded_s: f64,
    /// What a lone request would wait after the abandon if the service went
    /// on with the work: `loaded_s`, measured at the same moment.
    pub expected_busy_s: f64,
    /// The verdict.
    pub verdict: Gone,
}

/// The probe (module doc).
pub(super) async fn probe(config: &GoneConfig, stop: &AtomicBool) -> io::Result<GoneProbe> {
    let target = Target::resolve(&config.target, &config.wire)
        .await
        .map_err(invalid)?;
    let request = raw_request(&target).await?;
    let lone = |what: &'static str| lone(&target, config.timeout, stop, what);

    let mut baseline_s = Vec::new();
    for _ in 0..config.repeats {
        baseline_s.push(idle(&target, config.timeout, stop).await?);
    }
    let baseline = median(&baseline_s).expect("at least one lone request");
    let given_up = config.timeout.as_secs_f64();

    let held = send_and_hold(&target, &request, config.abandon, stop).await?;
    if !wait_until(Instant::now() + config.hold_open, stop).await {
        return Err(interrupted());
    }
    let loaded_s = lone("beside the requests held").await?.unwrap_or(given_up);
    drop(held.abandon());
    drain(&target, config.timeout, baseline, stop).await?;
    let expected_busy_s = loaded_s;

    let mut after_s = Vec::new();
    for _ in 0..config.repeats {
        let held = send_and_hold(&target, &request, config.abandon, stop).await?;
        if !wait_until(Instant::now() + config.hold_open, stop).await {
            return Err(interrupted());
        }
        let kept = held.abandon();
        after_s.push(lone("after the abandon").await?.unwrap_or(given_up));
        drop(kept);
        drain(&target, config.timeout, baseline, stop).await?;
    }
    Ok(GoneProbe {
        abandon: config.abandon,
        verdict: verdict(&baseline_s, &after_s, expected_busy_s),
        baseline_s,
        after_s,
        loaded_s,
        expected_busy_s,
    })
}

/// The request `target` sends, as HTTP/1.1's bytes on the wire (its
/// method, path, `Host`, the wire's headers and body), without the
/// `grpc-timeout` every attempt of the client carries: an abandoned
/// request asks for no deadline.
pub(super) async fn raw_request(target: &Target) -> io::Result<Vec<u8>> {
    let (mut parts, body) = target.request("").into_parts();
    parts.headers.remove(GRPC_TIMEOUT_HEADER);
    let body = body
        .collect()
        .await
        .map_err(|e| io::Error::other(format!("the request's body: {e}")))?
        .to_bytes();
    let mut raw = format!("{} {} HTTP/1.1\r\n", parts.method, parts.uri).into_bytes();
    for (name, value) in &parts.headers {
        raw.extend_from_slice(name.as_str().as_bytes());
        raw.extend_from_slice(b": ");
        raw.extend_from_slice(value.as_bytes());
        raw.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() {
        raw.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    raw.extend_from_slice(&body);
    Ok(raw)
}

/// The abandoned streams one HTTP/2 connection carries: hyper's client
/// assumes 100 before the server's SETTINGS say otherwise.
pub const STREAMS_PER_CONNECTION: u32 = 100;

/// The abandoned requests while their clients stay.
enum Held {
    /// HTTP/1.1: a connection each; dropped, they close.
    Connections(Vec<Stream>),
    /// HTTP/2: a stream each, [`STREAMS_PER_CONNECTION`] a connection.
    Streams {
        streams: Vec<AbortHandle>,
        connections: Vec<Connection>,
    },
}

/// An HTTP/2 connection kept open, closed when dropped.
struct Connection {
    _sender: SendRequest<Full<Bytes>>,
    task: AbortHandle,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Held {
    /// The clients go: HTTP/1.1's connections close; HTTP/2's streams are
    /// reset (hyper sends `RST_STREAM` as each exchange is dropped) and
    /// their connections are returned, to be kept open until dropped.
    fn abandon(self) -> Option<Vec<Connection>> {
        match self {
            Held::Connections(connections) => {
                drop(connections);
                None
            }
            Held::Streams {
                streams,
                connections,
            } => {
                for stream in streams {
                    stream.abort();
                }
                Some(connections)
            }
        }
    }
}

/// Sends `count` requests, each on a connection of its own over HTTP/1.1
/// (TLS too for an `https://` target, `request` written as is), or each a
/// stream of one connection over HTTP/2; they are held until
/// [`Held::abandon`].
async fn send_and_hold(
    target: &Target,
    request: &[u8],
    count: u32,
    stop: &AtomicBool,
) -> io::Result<Held> {
    let open = async {
        if target.transport == Transport::Http2 {
            return streams(target, count).await;
        }
        let mut held = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let tcp = TcpStream::connect(target.addr).await?;
            let mut stream = target.dialer.dial(tcp).await?;
            stream.write_all(request).await?;
            stream.flush().await?;
            held.push(stream);
        }
        Ok(Held::Connections(held))
    };
    unless_stopped(stop, open)
        .await
        .unwrap_or_else(|| Err(interrupted()))
}

/// `count` requests as streams of new HTTP/2 connections, each awaited
/// by a task of its own, the request without the `grpc-timeout` every
/// attempt of the client carries (an abandoned request asks for no
/// deadline).
async fn streams(target: &Target, count: u32) -> io::Result<Held> {
    let mut streams = Vec::with_capacity(count as usize);
    let mut connections = Vec::new();
    let mut left = count;
    while left > 0 {
        let (mut sender, connection) = connect(target).await?;
        for _ in 0..left.min(STREAMS_PER_CONNECTION) {
            sender.ready().await.map_err(io::Error::other)?;
            let (mut parts, body) = target.request("").into_parts();
            parts.headers.remove(GRPC_TIMEOUT_HEADER);
            let answer = sender.send_request(Request::from_parts(parts, body));
            streams.push(tokio::spawn(answer).abort_handle());
        }
        left = left.saturating_sub(STREAMS_PER_CONNECTION);
        connections.push(Connection {
            _sender: sender,
            task: connection,
        });
    }
    // A connection's task writes its streams' HEADERS when it runs: give
    // the tasks their turn before the hold is timed.
    tokio::task::yield_now().await;
    Ok(Held::Streams {
        streams,
        connections,
    })
}

/// A new HTTP/2 connection to `target` (by ALPN over TLS, by prior
/// knowledge in clear), its task running.
async fn connect(target: &Target) -> io::Result<(SendRequest<Full<Bytes>>, AbortHandle)> {
    let tcp = TcpStream::connect(target.addr).await?;
    let stream = target.dialer.dial(tcp).await?;
    let (sender, connection) = h2::handshake(target, stream).await.map_err(|e| match e {
        h2::Refused::NoAlpn => invalid(e.to_string()),
        h2::Refused::Handshake(e) => io::Error::other(e),
    })?;
    Ok((sender, tokio::spawn(connection).abort_handle()))
}

/// One lone GET on a connection of its own: its latency in seconds, or
/// `None` if it timed out; an error if it was refused, broken or answered
/// other than 2xx (`what` says when it was sent).
pub(super) async fn lone(
    target: &Target,
    timeout: Duration,
    stop: &AtomicBool,
    what: &str,
) -> io::Result<Option<f64>> {
    let mut client = Client::new(target, timeout);
    let sent = Instant::now();
    let answer = unless_stopped(stop, client.get())
        .await
        .ok_or_else(interrupted)?;
    let latency = sent.elapsed().as_secs_f64();
    match answer {
        Answer::Status(status) if status.is_success() => Ok(Some(latency)),
        Answer::TimedOut => Ok(None),
        Answer::Status(status) => Err(io::Error::other(format!(
            "a lone request {what} was answered {status}"
        ))),
        Answer::Grpc(code) => Err(io::Error::other(format!(
            "a lone request {what} was answered {code}"
        ))),
        Answer::Broken(e) => Err(io::Error::other(format!(
            "a lone request {what} got no answer: {e}"
        ))),
    }
}

/// A lone GET on an idle service: its latency in seconds; an error if it
/// was not answered with 2xx within `timeout`, since nothing measured
/// after it would mean anything.
pub(super) async fn idle(target: &Target, timeout: Duration, stop: &AtomicBool) -> io::Result<f64> {
    lone(target, timeout, stop, "on an idle service")
        .await?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("a lone request on an idle service was not answered within {timeout:?}"),
            )
        })
}

/// Lone GETs until one is back within [`DRAINED`] times `baseline`
/// seconds, at most [`DRAIN_TRIES`].
pub(super) async fn drain(
    target: &Target,
    timeout: Duration,
    baseline: f64,
    stop: &AtomicBool,
) -> io::Result<()> {
    for _ in 0..DRAIN_TRIES {
        if let Some(s) = lone(target, timeout, stop, "while draining").await?
            && s <= DRAINED * baseline
        {
            break;
        }
    }
    Ok(())
}
