//! The client's keep-alive connections: where attempts go, the idle
//! connections kept for reuse, and one GET on them.
//!
//! Idle connections are reused last-in, first-out, so after a burst the
//! surplus sits untouched at the bottom of the stack and is closed once it
//! has been idle for [`IDLE_TIMEOUT`]: the pool follows recent demand instead
//! of keeping the most connections it ever needed.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode, Uri, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::model::deadline::{GRPC_TIMEOUT_HEADER, encode_grpc_timeout};
use crate::model::outcome::{Hints, Outcome};
use crate::policy::read_hints;

/// Where attempts go: the resolved address and the request's parts.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The address the host resolved to.
    pub(crate) addr: SocketAddr,
    /// `host:port` as the URL wrote it, for the `Host` header.
    pub(crate) authority: String,
    /// The path and query requested.
    pub(crate) path: Uri,
}

impl Target {
    /// Resolves an `http://host:port/path` URL, or says why it cannot be
    /// used.
    pub(crate) async fn resolve(url: &str) -> Result<Target, String> {
        let (url, host, port) = Target::parse(url)?;
        let addr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .ok()
            .and_then(|mut addrs| addrs.next());
        Target::at(&url, &host, addr)
    }

    /// [`Target::resolve`], blocking the thread while a host name is
    /// looked up (for a server's start, before it serves anything).
    pub(crate) fn resolve_now(url: &str) -> Result<Target, String> {
        use std::net::ToSocketAddrs;
        let (url, host, port) = Target::parse(url)?;
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next());
        Target::at(&url, &host, addr)
    }

    /// An `http://` URL, its host and its port.
    fn parse(url: &str) -> Result<(Uri, String, u16), String> {
        let url: Uri = url
            .parse()
            .map_err(|e| format!("'{url}' is not a URL: {e}"))?;
        if url.scheme_str() != Some("http") {
            return Err(format!(
                "'{url}' is not an http:// URL (only plain HTTP is supported)"
            ));
        }
        let host = url.host().ok_or_else(|| format!("'{url}' has no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port_u16().unwrap_or(80);
        Ok((url, host, port))
    }

    /// The target of `url` at `addr`, the address its `host` resolved to.
    fn at(url: &Uri, host: &str, addr: Option<SocketAddr>) -> Result<Target, String> {
        let addr = addr.ok_or_else(|| format!("cannot resolve host '{host}'"))?;
        let path = url
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .expect("a path taken from a URI is a valid URI");
        Ok(Target {
            addr,
            authority: url.authority().expect("a URL with a host").to_string(),
            path,
        })
    }
}

/// A connection in use or in the pool. Dropping it closes the socket.
struct Conn {
    sender: SendRequest<Empty<Bytes>>,
    task: AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request on one connection got no good answer.
enum Failure {
    /// The connection closed before any answer began.
    Unanswered(BoxError),
    /// Anything else: refused, reset mid-answer, malformed.
    Other(BoxError),
}

impl Failure {
    fn of(e: hyper::Error) -> Failure {
        if e.is_closed() || e.is_canceled() || e.is_incomplete_message() {
            Failure::Unanswered(e.into())
        } else {
            Failure::Other(e.into())
        }
    }

    fn into_error(self) -> BoxError {
        match self {
            Failure::Unanswered(e) | Failure::Other(e) => e,
        }
    }
}

/// How long a connection may sit unused in the pool before it is closed.
///
/// Below the server's default header-read timeout (60 s), which also closes
/// idle connections, so the client normally closes first and a reused
/// connection is rarely one the server is closing at that moment.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Idle items, most recently returned on top.
///
/// Items are pushed and popped at the back, so the front holds the ones
/// unused longest, in the order they were returned; expiry takes them from
/// there.
#[derive(Debug)]
pub struct IdleStack<T> {
    items: VecDeque<(T, Instant)>,
}

impl<T> Default for IdleStack<T> {
    fn default() -> Self {
        IdleStack {
            items: VecDeque::new(),
        }
    }
}

impl<T> IdleStack<T> {
    /// Returns `item`, idle from `now`.
    pub fn push(&mut self, item: T, now: Instant) {
        self.items.push_back((item, now));
    }

    /// The most recently returned item.
    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_back().map(|(item, _)| item)
    }

    /// Removes and returns the items idle for `timeout` or longer at `now`.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<T> {
        let mut expired = Vec::new();
        while let Some((_, since)) = self.items.front() {
            if now.saturating_duration_since(*since) < timeout {
                break;
            }
            expired.extend(self.items.pop_front().map(|(item, _)| item));
        }
        expired
    }

    /// Number of idle items.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there is no idle item.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Keep-alive connections shared by all users of the process.
pub(crate) struct Pool {
    target: Target,
    idle: Mutex<IdleStack<Conn>>,
}

impl Pool {
    pub(crate) fn new(target: Target) -> Pool {
        Pool {
            target,
            idle: Mutex::new(IdleStack::default()),
        }
    }

    fn checkout(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().expect("pool lock poisoned");
        while let Some(conn) = idle.pop() {
            if !conn.sender.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    fn checkin(&self, conn: Conn) {
        if conn.sender.is_closed() {
            return;
        }
        let expired = {
            let mut idle = self.idle.lock().expect("pool lock poisoned");
            let now = Instant::now();
            idle.push(conn, now);
            idle.expire(now, IDLE_TIMEOUT)
        };
        // Closed outside the lock: dropping a connection aborts its task.
        drop(expired);
    }

    /// Closes the connections idle for [`IDLE_TIMEOUT`]; check-ins do it
    /// too, this is for when none come (a storm where every attempt times
    /// out, or no traffic at all).
    pub(crate) fn expire_idle(&self) {
        let expired = self
            .idle
            .lock()
            .expect("pool lock poisoned")
            .expire(Instant::now(), IDLE_TIMEOUT);
        drop(expired);
    }

    async fn connect(&self) -> Result<Conn, BoxError> {
        let stream = TcpStream::connect(self.target.addr).await?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        let task = tokio::spawn(async move {
            let _ = connection.await;
        })
        .abort_handle();
        Ok(Conn { sender, task })
    }

    /// One GET; returns the status and any `Retry-After` once the whole
    /// body has arrived. If the future is dropped midway (timeout), the
    /// connection is closed.
    async fn get(&self, deadline: Instant) -> Result<(StatusCode, Hints), BoxError> {
        if let Some(conn) = self.checkout() {
            match self.exchange(conn, deadline).await {
                Ok(answer) => return Ok(answer),
                Err(Failure::Other(e)) => return Err(e),
                // The server closed this idle connection (its idle or
                // header-read timeout) just as it was reused: there was no
                // answer, so the GET goes again on a new connection, as
                // HTTP clients do for an idempotent request.
                Err(Failure::Unanswered(_)) => {}
            }
        }
        let conn = self.connect().await?;
        self.exchange(conn, deadline)
            .await
            .map_err(Failure::into_error)
    }

    /// One request and its whole answer on `conn`, which goes back to the
    /// pool if all went well. The request says when the attempt times out
    /// (`grpc-timeout`), for a tier that passes deadlines on.
    async fn exchange(
        &self,
        mut conn: Conn,
        deadline: Instant,
    ) -> Result<(StatusCode, Hints), Failure> {
        conn.sender.ready().await.map_err(Failure::of)?;
        let left = encode_grpc_timeout(deadline.saturating_duration_since(Instant::now()));
        let request = Request::get(self.target.path.clone())
            .header(header::HOST, &self.target.authority)
            .header(GRPC_TIMEOUT_HEADER, left)
            .body(Empty::new())
            .map_err(|e| Failure::Other(e.into()))?;
        let response = conn
            .sender
            .send_request(request)
            .await
            .map_err(Failure::of)?;
        let status = response.status();
        let headers = response.headers();
        // A server that closes after its answer (one request a connection,
        // as gunicorn's sync workers) says so: the connection is not kept.
        let closing = headers
            .get(header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        let hints = read_hints(
            status.as_u16(),
            |name| headers.get(name).and_then(|v| v.to_str().ok()),
            std::time::SystemTime::now(),
        );
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure::Other(e.into()))?;
        if !closing {
            self.checkin(conn);
        }
        Ok((status, hints))
    }

    /// One attempt, classified, with what a refusal told (`Retry-After`,
    /// gRPC's pushback). `deadline` bounds connect and response.
    pub(crate) async fn attempt(&self, deadline: Instant) -> (Outcome, Hints) {
        match tokio::time::timeout_at(deadline, self.get(deadline)).await {
            Err(_) => (Outcome::Timeout, Hints::default()),
            Ok(Ok((status, _))) if status.is_success() => (Outcome::Ok, Hints::default()),
            Ok(Ok((_, hints))) => (Outcome::Error, hints),
            Ok(Err(_)) => (Outcome::Error, Hints::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_most_recently_returned_item_is_reused_first() {
        let t0 = Instant::now();
        let mut stack = IdleStack::default();
        for (i, at) in [(1, 0), (2, 1), (3, 2)] {
            stack.push(i, t0 + secs(at));
        }
        assert_eq!(stack.pop(), Some(3));
        stack.push(4, t0 + secs(3));
        assert_eq!(stack.pop(), Some(4));
        assert_eq!(stack.pop(), Some(2));
        assert_eq!(stack.pop(), Some(1));
        assert_eq!(stack.pop(), None);
    }

    #[test]
    fn after_a_burst_the_unused_surplus_expires_and_the_busy_items_stay() {
        let t0 = Instant::now();
        let mut stack = IdleStack::default();
        // A burst needed ten connections at once; all come back at t0.
        for i in 0..10 {
            stack.push(i, t0);
        }
        // Then demand is two at a time, every second, for a minute: the two
        // on top are taken and returned, the eight below them never.
        for s in 1..=60 {
            let now = t0 + secs(s);
            let a = stack.pop().unwrap();
            let b = stack.pop().unwrap();
            stack.push(b, now);
            stack.push(a, now);
            let expired = stack.expire(now, IDLE_TIMEOUT);
            if s < 30 {
                assert!(expired.is_empty(), "nothing is idle 30 s at {s} s");
            } else if s == 30 {
                assert_eq!(expired.len(), 8, "the surplus goes after 30 s");
            } else {
                assert!(expired.is_empty());
            }
        }
        assert_eq!(stack.len(), 2);
        assert_eq!(
            stack
                .expire(t0 + secs(60) + IDLE_TIMEOUT, IDLE_TIMEOUT)
                .len(),
            2,
            "with no demand at all, everything goes"
        );
        assert!(stack.is_empty());
    }

    #[test]
    fn expiry_stops_at_the_first_item_still_fresh() {
        let t0 = Instant::now();
        let mut stack = IdleStack::default();
        stack.push("old", t0);
        stack.push("fresh", t0 + secs(20));
        stack.push("older-looking but on top", t0);
        let expired = stack.expire(t0 + secs(30), IDLE_TIMEOUT);
        assert_eq!(expired, vec!["old"]);
        assert_eq!(stack.len(), 2);
    }
}
