//! Defences that act on a server's queue (Facebook, "Fail at Scale", 2015):
//! the controlled-delay queue timeout and adaptive LIFO. Both read one
//! signal, whether the queue has been empty at any time within the last
//! interval N, which [`QueueWatch`] keeps.

use std::time::Duration;

use crate::model::timescale::compress;

/// When the queue was last empty: the state CoDel and adaptive LIFO read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueWatch {
    /// The instant the queue last went from empty to non-empty; `None`
    /// while it is empty.
    busy_since: Option<Duration>,
}

impl QueueWatch {
    /// The queue holds `len` requests from `now` on.
    pub fn on_length(&mut self, now: Duration, len: usize) {
        if len == 0 {
            self.busy_since = None;
        } else if self.busy_since.is_none() {
            self.busy_since = Some(now);
        }
    }

    /// Whether the queue has not been empty at any time in the last
    /// `interval` before `now` (it was empty at `busy_since` itself, so
    /// exactly `interval` ago still counts as empty within it).
    pub fn overloaded(&self, now: Duration, interval: Duration) -> bool {
        self.busy_since
            .is_some_and(|since| now.saturating_sub(since) > interval)
    }
}

/// The controlled-delay queue timeout: while the queue has not been empty
/// in the last `interval` (N), a request that waited more than `target`
/// (M) is dropped when it reaches the head; otherwise one that waited more
/// than N. As in the paper's pseudo-code, a request's limit is set when it
/// joins the queue, from the state at that instant. (folly's `Codel`
/// class, used by some of Facebook's servers, works differently: it calls
/// the queue overloaded when the least delay seen in an interval exceeded
/// the target, and then drops requests that waited over twice the target.
/// This follows the paper, as docs/servers.md says.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoDel {
    /// M: the longest wait allowed while the queue is overloaded (5 ms).
    pub target: Duration,
    /// N: the window in which the queue must have been empty, and the
    /// longest wait allowed otherwise (100 ms).
    pub interval: Duration,
}

impl Default for CoDel {
    /// The paper's values: M = 5 ms, N = 100 ms.
    fn default() -> Self {
        CoDel {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
        }
    }
}

impl CoDel {
    /// The longest a request joining the queue at `now` may wait.
    pub fn limit(&self, watch: &QueueWatch, now: Duration) -> Duration {
        if watch.overloaded(now, self.interval) {
            self.target
        } else {
            self.interval
        }
    }

    /// The same defence with time compressed `k` times.
    pub fn scaled(self, k: f64) -> CoDel {
        CoDel {
            target: compress(self.target, k),
            interval: compress(self.interval, k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_limit_switches_from_n_to_m_after_100_ms_without_an_empty_queue() {
        let codel = CoDel::default();
        let mut watch = QueueWatch::default();
        // Empty: the limit is N.
        assert_eq!(codel.limit(&watch, ms(0)), ms(100));
        // The queue fills at 1000 ms and never empties.
        watch.on_length(ms(1000), 1);
        watch.on_length(ms(1040), 7);
        assert_eq!(codel.limit(&watch, ms(1050)), ms(100));
        // Exactly 100 ms later it was still empty within the window.
        assert_eq!(codel.limit(&watch, ms(1100)), ms(100));
        assert!(!watch.overloaded(ms(1100), ms(100)));
        // Past it, the limit is M.
        assert_eq!(codel.limit(&watch, ms(1101)), ms(5));
        assert!(watch.overloaded(ms(1101), ms(100)));
        // A growing queue does not reset the clock.
        watch.on_length(ms(1200), 30);
        assert_eq!(codel.limit(&watch, ms(1200)), ms(5));
        // Once empty, it is back to N, and the clock starts again when
        // the queue next fills.
        watch.on_length(ms(1300), 0);
        assert_eq!(codel.limit(&watch, ms(1300)), ms(100));
        watch.on_length(ms(1310), 1);
        assert_eq!(codel.limit(&watch, ms(1400)), ms(100));
        assert_eq!(codel.limit(&watch, ms(1411)), ms(5));
    }

    #[test]
    fn scaling_compresses_both_times() {
        let codel = CoDel::default().scaled(10.0);
        assert_eq!(codel.target, Duration::from_micros(500));
        assert_eq!(codel.interval, ms(10));
    }
}
