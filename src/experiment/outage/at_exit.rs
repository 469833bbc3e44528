//! What an outage still holds when the program exits, undone then. A
//! second Ctrl-C ends the storm at once (`std::process::exit`), past the
//! values that would have ended the outage when dropped: a handler
//! registered with `atexit` undoes, last registered first, whatever is
//! still registered (continues a stopped process, thaws a cgroup, runs an
//! end command). Only SIGKILL leaves the outage in force.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

/// One undo: what it does, for tests and messages, and the doing.
type Undo = (String, Box<dyn FnOnce() + Send>);

/// Every undo registered and not yet withdrawn, by its number.
static PENDING: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());

/// The next undo's number.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Registers the exit handler once.
static AT_EXIT: Once = Once::new();

fn pending() -> MutexGuard<'static, Vec<(u64, Undo)>> {
    PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Undoes everything still registered, last first, as the program exits.
extern "C" fn undo_all_at_exit() {
    // Taken out first: an undo that runs a command does not hold the lock.
    let undos = std::mem::take(&mut *pending());
    for (_, (_, undo)) in undos.into_iter().rev() {
        undo();
    }
}

/// An undo registered for the exit; withdrawn by whoever undoes it first.
#[derive(Debug)]
#[must_use = "an undo left registered runs at the exit"]
pub(crate) struct Registered(u64);

/// Registers `undo`, described by `what`, to run at the program's exit
/// unless withdrawn before.
pub(crate) fn register(what: String, undo: impl FnOnce() + Send + 'static) -> Registered {
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function, which takes the undos out
        // under a lock that every other user releases, and runs them.
        unsafe {
            nix::libc::atexit(undo_all_at_exit);
        }
    });
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    pending().push((id, (what, Box::new(undo))));
    Registered(id)
}

impl Registered {
    /// Withdraws the undo, for the caller to undo now: false if the exit
    /// has taken it already (it is then done there, not to be done twice).
    pub(crate) fn withdraw(self) -> bool {
        let mut pending = pending();
        match pending.iter().position(|(id, _)| *id == self.0) {
            Some(at) => {
                // Dropped undone: the caller undoes it.
                drop(pending.remove(at));
                true
            }
            None => false,
        }
    }
}

/// What the undos still registered do, for tests.
#[cfg(test)]
pub(crate) fn registered() -> Vec<String> {
    pending()
        .iter()
        .map(|(_, (what, _))| what.clone())
        .collect()
}

/// Tests of what the exit does: each runs itself again in a child
/// process, which does its part and exits with `std::process::exit`, as a
/// second Ctrl-C does.
#[cfg(test)]
pub(crate) mod exiting {
    use std::process::Command;

    const VAR: &str = "RETRY_STORM_EXITING_TEST";

    /// In the child, what the parent passed it.
    pub(crate) fn passed() -> Option<String> {
        std::env::var(VAR).ok()
    }

    /// Runs the test `path` (from `module_path!()`) in a child, passing
    /// it `value`; fails if the child does not exit 0.
    pub(crate) fn run_child(path: &str, value: &str) {
        let test = path.split_once("::").map_or(path, |(_, rest)| rest);
        let status = Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads", "1"])
            .env(VAR, value)
            .status()
            .unwrap();
        assert!(status.success(), "{test}: {status}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_undoes_what_is_still_registered() {
        if let Some(marker) = exiting::passed() {
            let _left = register("a test's undo at the exit".into(), move || {
                std::fs::write(&marker, "undone").unwrap();
            });
            std::process::exit(0);
        }
        let marker =
            std::env::temp_dir().join(format!("retry-storm-at-exit-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        exiting::run_child(
            concat!(module_path!(), "::the_exit_undoes_what_is_still_registered"),
            marker.to_str().unwrap(),
        );
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "undone");
        std::fs::remove_file(&marker).unwrap();
    }

    #[test]
    fn an_undo_is_registered_until_withdrawn_once() {
        let what = format!("a test's undo {}", std::process::id());
        let registered = register(what.clone(), || {});
        assert!(super::registered().contains(&what));
        assert!(registered.withdraw());
        assert!(!super::registered().contains(&what));
        assert!(!Registered(u64::MAX).withdraw(), "gone: not to be done");
    }
}
