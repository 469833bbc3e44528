//! The proxy's accept loop: connections accepted while the switch lets it
//! (a stalled proxy accepts none, so that they wait in the kernel's
//! listen queue as in a stopped process's), each served by hyper over
//! HTTP/1.1 with keep-alive or HTTP/2 by prior knowledge (h2c), as its
//! client speaks, in a task of its own, behind the switch's gate, and
//! reset with RST when the fault asks; or reset at once while `reset` is
//! given to every request.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use std::os::fd::{AsRawFd, RawFd};

use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};

use super::connection::{Connection, Watched};
use super::forward::Forward;
use super::gate::Gated;
use super::sniff::{Speaks, sniff};
use super::switch::Switch;
use crate::net::accept::AcceptPause;
use crate::report::proxy::{Occupancy, ProxyEvent};

/// Accepts connections on `listener` until `shutdown`, as `switch`
/// allows, and serves each through `forward`.
pub(super) async fn accept_loop(
    listener: TcpListener,
    switch: Arc<Switch>,
    forward: Arc<Forward>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = pin!(shutdown);
    let mut state = switch.watch();
    let fault = switch.fault();
    let mut pause = AcceptPause::default();
    loop {
        let on = *state.borrow_and_update();
        // A pending accept is dropped as soon as the switch turns, so that
        // nothing is accepted once the proxy is stopped.
        tokio::select! {
            biased;
            _ = &mut shutdown => return,
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            accepted = listener.accept(), if !(on && fault.stops_connections()) => {
                match accepted {
                    Ok((stream, _peer)) if on && fault.resets_connections() => {
                        pause = AcceptPause::default();
                        // Closed with a linger of zero: RST.
                        let _ = stream.set_zero_linger();
                        forward.recorder().count(ProxyEvent::Reset);
                    }
                    Ok((stream, _peer)) => {
                        pause = AcceptPause::default();
                        let _ = stream.set_nodelay(true);
                        serve(stream, &switch, &forward);
                    }
                    Err(e) => {
                        eprintln!("warning: accept: {e}");
                        tokio::select! {
                            _ = &mut shutdown => return,
                            _ = pause.next() => {}
                        }
                    }
                }
            }
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves `stream`, a client connection just accepted, in a task of its
/// own: every request through `forward`, in the protocol its first bytes
/// say, the whole behind `switch`'s gate.
fn serve(stream: TcpStream, switch: &Arc<Switch>, forward: &Arc<Forward>) {
    let recorder = forward.recorder().clone();
    let fd = stream.as_raw_fd();
    let open = recorder.enter(Occupancy::Connection);
    let connection = Connection::new(recorder.clone());
    let registered = switch.register(connection.resetter());
    let watched = Watched::new(stream, connection.clone());
    let io = Gated::new(watched, switch.gate().clone());
    let service = {
        let (forward, connection) = (forward.clone(), connection.clone());
        service_fn(move |req| forward.handle(req, &connection))
    };
    tokio::spawn(async move {
        // No timer: no timeout may end a connection that the gate holds
        // (a stopped process times nothing out either), and no HTTP/2
        // keep-alive ping. Idle connections stay open until their client
        // closes them.
        let serving = async move {
            let (speaks, io) = sniff(io).await?;
            let io = TokioIo::new(io);
            match speaks {
                Speaks::Http1 => http1::Builder::new()
                    .keep_alive(true)
                    .header_read_timeout(None)
                    .serve_connection(io, service)
                    .await
                    .map_err(BoxError::from),
                // Streams its client reset before they were taken in (at
                // a stall's end: the request, then the reset of a client
                // that gave up) are taken in all the same, and forwarded
                // with their client's departure; h2 would otherwise end
                // the connection after 20 of them (ENHANCE_YOUR_CALM),
                // which the target, not the proxy, should decide.
                Speaks::Http2 => http2::Builder::new(TokioExecutor::new())
                    .max_pending_accept_reset_streams(usize::MAX)
                    .serve_connection(io, service)
                    .await
                    .map_err(BoxError::from),
            }
        };
        let mut serving = pin!(serving);
        tokio::select! {
            // Errors here are a client's doing (reset, garbage): the
            // connection ends, the proxy goes on.
            _ = &mut serving => {}
            () = connection.reset_asked() => {
                // Closed with a linger of zero: RST, and nothing more.
                // The socket is still open: `serving` owns it until it is
                // dropped, after this.
                zero_linger(fd);
                recorder.count(ProxyEvent::Reset);
            }
        }
        drop((registered, open));
    });
}

/// Sets a linger of zero on the socket `fd`, so that closing it sends an
/// RST. Its owner keeps it open.
fn zero_linger(fd: RawFd) {
    use nix::libc;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a descriptor its owner keeps open, with a
    // pointer to a linger and its size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
