//! The third probe: where does the service keep requests it cannot start
//! yet?
//!
//! A lone request first measures the idle service, and one request as the
//! burst writes it (the wire's, as the gone-client probe writes it) must
//! be answered with success. Then `connections` connections are opened at
//! once, each writing its request as soon as it is connected, and each is
//! watched for `hold` from the burst's start: how long its connect took
//! and whether its SYN was sent again (the socket's `TCP_INFO`, which a
//! prober too busy to look at once cannot inflate), and whether an
//! answer's status line came (success or not) or the connection closed
//! unanswered. At the hold's end every connection is closed, and the
//! service is given time to drain as after the gone-client probe (a
//! drain stopped or refused keeps the fates).
//! Before it, the kernel is asked for the listen queue in front of a
//! service on this machine (`net::listen_queue`). `model::fit::queue`
//! reads the fates.
//!
//! Over HTTP/1.1 only, TLS or not: an HTTP/2 client would carry the burst
//! as streams of a few connections, which tells nothing of a listen
//! backlog. Over TLS a connection whose handshake has not ended by the
//! hold's end counts as waiting.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::abandon::{drain, idle, raw_request};
use super::config::{enough_descriptors, invalid};
use super::stop::{interrupted, unless_stopped};
use crate::model::fit::queue::{Fate, Listen, Tally};
use crate::model::wire::{Transport, Wire};
use crate::net::backlog::tcp_info;
use crate::net::listen_queue;
use crate::net::target::Target;
use crate::net::tls::Stream;

/// What the burst probe does.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstConfig {
    /// The service: an `http://` or `https://` URL, as the closed-loop
    /// probe's.
    pub target: String,
    /// How the requests go on the wire; HTTP/1.1 only (module doc).
    pub wire: Wire,
    /// Connections opened at once (at least 1): more than the service's
    /// queue may hold, or its kind does not show.
    pub connections: u32,
    /// How long they are watched from the burst's start: past the 1 s at
    /// which Linux sends a dropped SYN again.
    pub hold: Duration,
    /// A lone request unanswered this long is given up (more than zero).
    pub timeout: Duration,
}

/// What the burst probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstProbe {
    /// Connections opened at once.
    pub connections: u32,
    /// How they ended.
    pub tally: Tally,
    /// The slowest connect of those not dropped, seconds.
    pub connect_max_s: f64,
    /// From the burst's start until its last request was written (of those
    /// not dropped), seconds: a service that answers meanwhile takes in
    /// more than its queue holds.
    pub spread_s: f64,
    /// Requests answered with success while the burst arrived (by then,
    /// or by its last refusal's answer if later), as the kernel timed
    /// their answers' arrival.
    pub finished: u32,
    /// A lone request on the idle service before the burst, seconds.
    pub baseline_s: f64,
    /// The kernel's listen queue in front of the service, as the kernel
    /// told it before the burst (none: not on this machine, or not told).
    pub listen: Option<Listen>,
    /// Why the kernel could not be asked (sock_diag refused), if so.
    #[serde(default)]
    pub listen_error: Option<String>,
}

/// The probe (module doc).
pub(super) async fn probe(config: &BurstConfig, stop: &AtomicBool) -> io::Result<BurstProbe> {
    if config.wire.transport == Transport::Http2 {
        return Err(invalid(
            "the burst probe speaks HTTP/1.1 only: over HTTP/2 a burst is streams of a few \
             connections",
        ));
    }
    enough_descriptors(config.connections, "a burst")?;
    let target = Arc::new(
        Target::resolve(&config.target, &config.wire)
            .await
            .map_err(invalid)?,
    );
    // Asked before the burst, whose connections would be in the answer.
    let (listen, listen_error) = match listen_queue::of(target.addr) {
        Ok(listen) => (listen, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let request: Arc<[u8]> = raw_request(&target).await?.into();
    let baseline_s = idle(&target, config.timeout, stop).await?;
    check_request(&target, &request, config.timeout).await?;
    let started = Instant::now();
    let deadline = started + config.hold;
    let mut tasks: Vec<_> = (0..config.connections)
        .map(|_| tokio::spawn(one(target.clone(), request.clone(), started, deadline)))
        .collect();
    let ended = unless_stopped(stop, async {
        let mut ended = Vec::with_capacity(tasks.len());
        for task in tasks.iter_mut() {
            ended.push(task.await.map_err(io::Error::other)?);
        }
        io::Result::Ok(ended)
    })
    .await;
    let Some(ended) = ended else {
        for task in &tasks {
            task.abort();
        }
        return Err(interrupted());
    };
    let ended = ended?;
    if let Some(e) = ended.iter().find_map(|e| e.local.as_ref()) {
        return Err(io::Error::new(
            e.kind(),
            format!("the burst could not open its connections: {e}"),
        ));
    }
    // Every fate is in: a drain cut short (stopped, or a lone request
    // refused by a queue still full) loses nothing of them, and nothing
    // probes the service after the burst.
    let _ = drain(&target, config.timeout, baseline_s, stop).await;
    let fates: Vec<Fate> = ended.iter().map(Exchange::fate).collect();
    // Each connection beside its fate, those of one fate.
    let of = |fate: Fate| {
        ended
            .iter()
            .zip(&fates)
            .filter(move |(_, f)| **f == fate)
            .map(|(e, _)| e)
    };
    let let_in = || {
        ended
            .iter()
            .zip(&fates)
            .filter(|(_, f)| **f != Fate::Dropped)
            .map(|(e, _)| e)
    };
    let connect_max_s = let_in().filter_map(|e| e.connect_s).fold(0.0, f64::max);
    // Those whose SYN was dropped came a second later, when the burst had
    // long arrived.
    let spread_s = let_in().filter_map(|e| e.written_s).fold(0.0, f64::max);
    // The burst has arrived once its last request is written and the
    // service has answered its last refusal (it reads its connections
    // later than they were written); the answers that arrived by then, by
    // the kernel's clock of their arrival (the prober, busy writing, reads
    // them late), finished while it arrived.
    let arrived_s = of(Fate::Refused)
        .filter_map(|e| e.arrived_s)
        .fold(spread_s, f64::max);
    let finished = of(Fate::Answered)
        .filter(|e| e.arrived_s.is_some_and(|s| s <= arrived_s))
        .count();
    Ok(BurstProbe {
        connections: config.connections,
        tally: Tally::of(&fates),
        finished: u32::try_from(finished).unwrap_or(u32::MAX),
        connect_max_s,
        spread_s,
        baseline_s,
        listen,
        listen_error,
    })
}

/// One request as the burst writes it, on a connection of its own, before
/// the burst: a service that does not answer it with success would make
/// every connection of the burst look refused.
async fn check_request(target: &Target, request: &[u8], timeout: Duration) -> io::Result<()> {
    let mut x = Exchange::default();
    let _ = tokio::time::timeout(timeout, x.run(target, request, Instant::now())).await;
    if let Some(e) = x.local {
        return Err(e);
    }
    match x.status {
        Some(code) if (200..300).contains(&code) => Ok(()),
        Some(code) => Err(invalid(format!(
            "the service answered the burst's request, as written on the wire, {code}"
        ))),
        None => Err(invalid(format!(
            "the service did not answer the burst's request, as written on the wire, within \
             {timeout:?}"
        ))),
    }
}

/// How one connection of the burst went, as far as it got.
#[derive(Default)]
struct Exchange {
    /// Seconds from the burst's start to the connect's end.
    connect_s: Option<f64>,
    /// The socket had sent its SYN again by then (`TCP_INFO`).
    syn_resent: bool,
    /// Seconds from the burst's start until the request was written.
    written_s: Option<f64>,
    /// The answer's status code, if its status line came.
    status: Option<u16>,
    /// Seconds from the burst's start until its first bytes arrived (the
    /// kernel's time of the last data received, which the status line's
    /// first read takes).
    arrived_s: Option<f64>,
    /// The exchange ended without an answer (closed, reset, refused).
    unanswered: bool,
    /// The prober's own failure to connect (out of descriptors or ports),
    /// which says nothing of the service.
    local: Option<io::Error>,
}

impl Exchange {
    /// Connect, write `request`, read the status line of its answer; each
    /// step noted as it ends, so that a deadline may cut it anywhere.
    /// Returns the connection, to be held open.
    async fn run(&mut self, target: &Target, request: &[u8], started: Instant) -> Option<Stream> {
        let connected = TcpStream::connect(target.addr).await;
        self.connect_s = Some(started.elapsed().as_secs_f64());
        let tcp = match connected {
            Ok(tcp) => tcp,
            Err(e) => {
                self.unanswered = true;
                if !answered_by_service(&e) {
                    self.local = Some(e);
                }
                return None;
            }
        };
        self.syn_resent = tcp_info(&tcp).is_some_and(|info| info.tcpi_total_retrans > 0);
        let fd = tcp.as_raw_fd();
        let Ok(mut stream) = target.dialer.dial(tcp).await else {
            self.unanswered = true;
            return None;
        };
        if stream.write_all(request).await.is_err() || stream.flush().await.is_err() {
            self.unanswered = true;
            return None;
        }
        self.written_s = Some(started.elapsed().as_secs_f64());
        self.status = status_line(&mut stream).await;
        if self.status.is_some() {
            let now = started.elapsed().as_secs_f64();
            let ago_ms = tcp_info(&fd).map_or(0, |info| info.tcpi_last_data_recv);
            self.arrived_s = Some((now - f64::from(ago_ms) / 1e3).max(0.0));
        }
        self.unanswered = self.status.is_none();
        Some(stream)
    }

    fn fate(&self) -> Fate {
        let after = match (self.status, self.unanswered) {
            (Some(code), _) => Some((200..300).contains(&code)),
            (None, true) => Some(false),
            (None, false) => None,
        };
        Fate::of(self.connect_s, self.syn_resent, after)
    }
}

/// Whether a failed connect is the service's answer (refused or reset),
/// not the prober's own failure.
fn answered_by_service(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
    )
}

/// One connection of the burst: its exchange until `deadline`, when the
/// connection closes whatever came (held open until then, as a client
/// that waits for its body).
async fn one(
    target: Arc<Target>,
    request: Arc<[u8]>,
    started: Instant,
    deadline: Instant,
) -> Exchange {
    let mut x = Exchange::default();
    let held = tokio::time::timeout_at(deadline, x.run(&target, &request, started)).await;
    if let Ok(Some(_stream)) = held {
        tokio::time::sleep_until(deadline).await;
    }
    x
}

/// The status code of an HTTP/1.x answer's status line read from
/// `stream`, or `None` if the connection ended first or the line is not
/// one.
async fn status_line(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<u16> {
    let mut line = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    while !line.windows(2).any(|w| w == b"\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || line.len() > 4096 {
            return None;
        }
        line.extend_from_slice(&buf[..n]);
    }
    parse_status(&line)
}

/// The code of a status line `HTTP/1.x NNN ...`.
fn parse_status(line: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(line.get(..12)?).ok()?;
    let code = text.strip_prefix("HTTP/1.")?.get(2..5)?;
    code.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_gives_its_code() {
        assert_eq!(
            parse_status(b"HTTP/1.1 503 Service Unavailable\r\n"),
            Some(503)
        );
        assert_eq!(
            parse_status(b"HTTP/1.0 200 OK\r\ncontent-length: 0"),
            Some(200)
        );
        assert_eq!(parse_status(b"HTTP/2 200\r\n"), None);
        assert_eq!(parse_status(b"garbage\r\n"), None);
    }
}
