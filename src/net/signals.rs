//! Signals: an orderly stop on SIGINT (Ctrl-C) or SIGTERM; a second signal
//! ends at once. SIGUSR1 and SIGUSR2 for a program that is switched by
//! them (the fault proxy's fault, on and off).

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGINT and SIGTERM received so far, counted in the signal handler
/// itself, the moment each arrives.
static RECEIVED: AtomicUsize = AtomicUsize::new(0);

/// Installs SIGINT and SIGTERM handlers now and returns a future that
/// completes on the first of them. From then on, a second one exits the
/// process immediately (code 130), for a user who will not wait for the
/// final report. Must be called inside a tokio runtime.
pub fn requested() -> impl Future<Output = ()> + Send + 'static {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // SAFETY: the action is an atomic add: async-signal-safe.
        unsafe {
            signal_hook::low_level::register(sig, || {
                RECEIVED.fetch_add(1, Ordering::SeqCst);
            })
        }
        .expect("install the signal counter");
    }
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
            second();
        });
    }
}

/// Whether a second signal has arrived. Two that arrive together (both
/// pending while the process was stopped, each handled on a thread of its
/// own) may reach the task that waits for the second only after an
/// orderly stop has finished: a program asks here before it ends with 0.
pub fn second_arrived() -> bool {
    RECEIVED.load(Ordering::SeqCst) >= 2
}

/// A second signal: the program ends at once, with 130.
pub fn second() -> ! {
    eprintln!("second signal: exiting now");
    std::process::exit(130);
}

/// SIGUSR1 and SIGUSR2, handled from the moment [`UserSignals::install`]
/// returns: neither ends the process any more (their default action).
#[derive(Debug)]
pub struct UserSignals {
    one: Signal,
    two: Signal,
}

impl UserSignals {
    /// Installs the handlers. Must be called inside a tokio runtime.
    pub fn install() -> io::Result<UserSignals> {
        Ok(UserSignals {
            one: signal(SignalKind::user_defined1())?,
            two: signal(SignalKind::user_defined2())?,
        })
    }

    /// Waits for the next of them: `true` for SIGUSR1, `false` for
    /// SIGUSR2. Several of one kind that arrive together are one.
    pub async fn next(&mut self) -> bool {
        tokio::select! {
            _ = self.one.recv() => true,
            _ = self.two.recv() => false,
        }
    }
}
