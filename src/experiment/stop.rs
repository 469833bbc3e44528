//! A request to stop long work: set by the layer above when the user asks
//! (SIGINT or SIGTERM), polled by the virtual engine's loops between runs.
//! Virtual time keeps its thread busy, so it cannot wait on a signal; it
//! looks at this flag instead, often enough that a stop is prompt.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A shared flag asking long work to stop at its next run; clones share
/// it. Never set unless someone asks.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A flag not yet set.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Asks the work to stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop has been asked for.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag itself, for a signal handler to set.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_seen_by_every_clone_and_only_after_it_is_made() {
        let stop = Stop::new();
        let other = stop.clone();
        assert!(!other.requested());
        stop.request();
        assert!(other.requested());
        let flag = Stop::new();
        flag.flag().store(true, Ordering::SeqCst);
        assert!(flag.requested());
    }
}
