//! The client's HTTP/2 connections: every attempt a stream on a
//! connection with a stream free, up to the limit the server's SETTINGS
//! give (`SETTINGS_MAX_CONCURRENT_STREAMS`); another connection only when
//! every one is full. A timed-out attempt resets its stream (hyper sends
//! `RST_STREAM` with `CANCEL` when the exchange is dropped) and leaves
//! the connection open, unlike HTTP/1.1, where it closes the connection.
//! So a stopped server sees no new SYN while streams remain: attempts
//! wait in the sockets of live connections.

use std::future::{Future, poll_fn};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http2::SendRequest;
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::h2;
use super::target::{Answer, BoxError, Target};
use crate::model::deadline::encode_grpc_timeout;

/// Told of each connection opened (`true`) and closed (`false`).
pub(crate) type Gauge = Arc<dyn Fn(bool) + Send + Sync>;

/// One HTTP/2 connection and the client's streams open on it.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    /// Streams of this client open on it.
    streams: AtomicUsize,
    /// The most the server lets this client open at once, as its last
    /// SETTINGS said (h2's initial 100 before they arrive).
    limit: Arc<AtomicUsize>,
    task: AbortHandle,
    gauge: Option<Gauge>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(gauge) = &self.gauge {
            gauge(false);
        }
    }
}

impl Conn {
    /// Takes a stream slot if one is free: fewer streams open than the
    /// server allows (before its SETTINGS arrive, h2's initial 100).
    fn take_slot(self: &Arc<Conn>) -> Option<Slot> {
        let limit = self.limit.load(Ordering::Acquire);
        self.streams
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }
}

/// A stream slot taken on a connection, given back when dropped (the
/// answer read, or the attempt timed out and its stream reset).
struct Slot(Arc<Conn>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The HTTP/2 connections of a lane's users.
pub(crate) struct Multiplex {
    target: Target,
    gauge: Option<Gauge>,
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Held while a connection is being opened, so that users finding
    /// every connection full wait for the one being opened instead of
    /// each opening their own.
    opening: tokio::sync::Mutex<()>,
}

impl Multiplex {
    /// Connections to `target`, each one opened and closed told to
    /// `gauge`, if given.
    pub(crate) fn new(target: Target, gauge: Option<Gauge>) -> Multiplex {
        Multiplex {
            target,
            gauge,
            conns: Mutex::new(Vec::new()),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// A free stream on an open connection, the closed ones dropped.
    fn free_slot(&self) -> Option<(SendRequest<Full<Bytes>>, Slot)> {
        let mut conns = self.conns.lock().expect("connections lock poisoned");
        conns.retain(|c| !c.sender.is_closed());
        conns
            .iter()
            .find_map(|c| c.take_slot().map(|slot| (c.sender.clone(), slot)))
    }

    async fn connect(&self) -> Result<Arc<Conn>, BoxError> {
        let tcp = TcpStream::connect(self.target.addr).await?;
        let stream = self.target.dialer.dial(tcp).await?;
        let (sender, connection) = h2::handshake(&self.target, stream).await?;
        // hyper tells the server's stream limit only through the
        // connection's driver, so the driver's task notes it each time it
        // has run (a SETTINGS frame is read there).
        let mut connection = Box::pin(connection);
        let limit = Arc::new(AtomicUsize::new(connection.current_max_send_streams()));
        let noted = limit.clone();
        let task = tokio::spawn(poll_fn(move |cx| {
            let done = connection.as_mut().poll(cx);
            noted.store(connection.current_max_send_streams(), Ordering::Release);
            done.map(drop)
        }))
        .abort_handle();
        if let Some(gauge) = &self.gauge {
            gauge(true);
        }
        Ok(Arc::new(Conn {
            sender,
            streams: AtomicUsize::new(0),
            limit,
            task,
            gauge: self.gauge.clone(),
        }))
    }

    /// A stream: on an open connection if one has room, else on a new
    /// one (one opened at a time).
    async fn stream(&self) -> Result<(SendRequest<Full<Bytes>>, Slot), BoxError> {
        if let Some(free) = self.free_slot() {
            return Ok(free);
        }
        let _opening = self.opening.lock().await;
        if let Some(free) = self.free_slot() {
            return Ok(free);
        }
        let conn = self.connect().await?;
        let slot = conn.take_slot().ok_or("a new connection has no stream")?;
        let sender = conn.sender.clone();
        self.conns
            .lock()
            .expect("connections lock poisoned")
            .push(conn);
        Ok((sender, slot))
    }

    /// One request as a stream, its answer read to the end (trailers
    /// too). Dropped midway (a timeout), the stream is reset.
    pub(crate) async fn send(&self, deadline: Instant) -> Result<Answer, BoxError> {
        let (mut sender, _slot) = self.stream().await?;
        sender.ready().await?;
        let left = encode_grpc_timeout(deadline.saturating_duration_since(Instant::now()));
        let response = sender.send_request(self.target.request(&left)).await?;
        self.target.read(response).await
    }
}
