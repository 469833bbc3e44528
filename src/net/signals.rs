//! Signals: an orderly stop on SIGINT (Ctrl-C) or SIGTERM; a second signal
//! ends at once.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};

/// Installs SIGINT and SIGTERM handlers now and returns a future that
/// completes on the first of them. From then on, a second one exits the
/// process immediately (code 130), for a user who will not wait for the
/// final report. Must be called inside a tokio runtime.
pub fn requested() -> impl Future<Output = ()> + Send + 'static {
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        tokio::spawn(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            eprintln!("second signal: exiting now");
            std::process::exit(130);
        });
    }
}
