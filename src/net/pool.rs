//! The client's HTTP/1.1 keep-alive connections: the idle connections
//! kept for reuse, and one request on them.
//!
//! Idle connections are reused last-in, first-out, so after a burst the
//! surplus sits untouched at the bottom of the stack and is closed once it
//! has been idle for [`IDLE_TIMEOUT`]: the pool follows recent demand instead
//! of keeping the most connections it ever needed.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::target::{Answer, BoxError, Target};
use crate::model::deadline::encode_grpc_timeout;

/// A connection in use or in the pool. Dropping it closes the socket.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    task: AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

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

/// HTTP/1.1 keep-alive connections shared by the users of a lane.
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
        let tcp = TcpStream::connect(self.target.addr).await?;
        let stream = self.target.dialer.dial(tcp).await?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        let task = tokio::spawn(async move {
            let _ = connection.await;
        })
        .abort_handle();
        Ok(Conn { sender, task })
    }

    /// One request; returns its answer once the whole body has arrived.
    /// If the future is dropped midway (timeout), the connection is
    /// closed.
    pub(crate) async fn send(&self, deadline: Instant) -> Result<Answer, BoxError> {
        if let Some(conn) = self.checkout() {
            match self.exchange(conn, deadline).await {
                Ok(answer) => return Ok(answer),
                Err(Failure::Other(e)) => return Err(e),
                // The server closed this idle connection (its idle or
                // header-read timeout) just as it was reused: there was no
                // answer, so the request goes again on a new connection,
                // as HTTP clients do when nothing of it was answered.
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
    async fn exchange(&self, mut conn: Conn, deadline: Instant) -> Result<Answer, Failure> {
        conn.sender.ready().await.map_err(Failure::of)?;
        let left = encode_grpc_timeout(deadline.saturating_duration_since(Instant::now()));
        let response = conn
            .sender
            .send_request(self.target.request(&left))
            .await
            .map_err(Failure::of)?;
        let answer = self.target.read(response).await.map_err(Failure::Other)?;
        if !answer.closing {
            self.checkin(conn);
        }
        Ok(answer)
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
