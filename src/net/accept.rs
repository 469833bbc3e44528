//! Listening and accepting, as every listener of the networked engine
//! does (the server, the small endpoints, the fault proxy): a socket
//! bound with its listen backlog, and an accept loop that survives
//! failures.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};

use super::backlog::{Worker, Workers};

/// Binds a listening socket on `addr` (address reuse on) with `backlog`,
/// as the server does. Must be called inside a tokio runtime.
pub fn listen(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The pause after a failed accept (out of file descriptors, say): 5 ms,
/// doubling with each failure in a row up to half a second, never a
/// busy loop; back to 5 ms once a connection is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptPause(Duration);

impl Default for AcceptPause {
    fn default() -> Self {
        AcceptPause(Duration::from_millis(5))
    }
}

impl AcceptPause {
    /// Waits this pause, and makes the next one longer.
    pub async fn next(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_millis(500));
    }
}

/// Accepts connections until `shutdown` and hands each to `serve`, with
/// no-delay set. Given `workers`, each connection is accepted only once a
/// worker is free, and handed over with it (the rest wait in the listen
/// backlog). Accept failures (such as running out of file descriptors)
/// are counted in `errors` and retried after a growing pause, never a crash
/// or a busy loop.
pub async fn accept_loop(
    listener: TcpListener,
    errors: &AtomicU64,
    shutdown: impl Future<Output = ()>,
    workers: Option<Workers>,
    mut serve: impl FnMut(TcpStream, Option<Worker>),
) {
    let mut shutdown = pin!(shutdown);
    let mut pause = AcceptPause::default();
    let next = async || {
        let worker = match &workers {
            Some(workers) => Some(workers.free().await),
            None => None,
        };
        (listener.accept().await, worker)
    };
    loop {
        let (accepted, worker) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = next() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                pause = AcceptPause::default();
                let _ = stream.set_nodelay(true);
                serve(stream, worker);
            }
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = pause.next() => {}
                }
            }
        }
    }
}
