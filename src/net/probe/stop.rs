//! Waiting while watching the caller's stop flag.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How often a wait looks at the stop flag.
pub(super) const STOP_POLL: Duration = Duration::from_millis(50);

/// The error a stopped probe ends with.
pub(super) fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "stopped")
}

/// Waits until `deadline`, looking at `stop` every [`STOP_POLL`]: true if
/// the deadline came, false if `stop` was set first.
pub(super) async fn wait_until(deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        tokio::time::sleep_until(deadline.min(now + STOP_POLL)).await;
    }
}

/// `work`'s output, or `None` if `stop` is set first (looked at before
/// `work` starts, then every [`STOP_POLL`]).
pub(super) async fn unless_stopped<T>(
    stop: &AtomicBool,
    work: impl Future<Output = T>,
) -> Option<T> {
    let stopped = async {
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(STOP_POLL).await;
        }
    };
    tokio::select! {
        biased;
        () = stopped => None,
        output = work => Some(output),
    }
}
