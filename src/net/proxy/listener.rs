//! The proxy's accept loop: connections accepted while the switch lets it
//! (a stalled proxy accepts none, so that they wait in the kernel's
//! listen queue as in a stopped process's), each served in a task of its
//! own, or reset at once while `reset` is given to every request.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::connection::serve;
use super::forward::Forward;
use super::switch::Switch;
use crate::net::server::AcceptPause;
use crate::report::proxy::ProxyEvent;

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
