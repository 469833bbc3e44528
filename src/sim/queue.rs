//! The engine's event queue, ordered by time and then by event.
//!
//! Events are two words (the instant in nanoseconds and the event packed
//! into a `u64`), so the order is total and depends on nothing but the
//! events themselves: that is what makes a run reproducible. Most events go
//! into a 4-ary heap, which keeps siblings in one cache line. Timeouts,
//! which a run pushes almost always in time order (now + a fixed timeout),
//! go into a FIFO lane instead when they do not overtake its last entry;
//! popping takes the earlier of the two heads, so the order is exactly that
//! of one heap.

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::time::Duration;

use dary_heap::QuaternaryHeap;

/// One queued event: when, then what (ties are broken by `what`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// Nanoseconds since the start of the run.
    pub at: u64,
    /// The event, packed.
    pub what: u64,
}

impl Key {
    /// The key of `what` at `at`, saturating far beyond any run.
    pub fn new(at: Duration, what: u64) -> Self {
        Key {
            at: u64::try_from(at.as_nanos()).unwrap_or(u64::MAX),
            what,
        }
    }

    /// The instant, as a duration since the start of the run.
    pub fn time(&self) -> Duration {
        Duration::from_nanos(self.at)
    }
}

/// Events in order.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: QuaternaryHeap<Reverse<Key>>,
    lane: VecDeque<Key>,
}

impl EventQueue {
    /// An empty queue with room for `n` events.
    pub fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: QuaternaryHeap::with_capacity(n),
            lane: VecDeque::with_capacity(n),
        }
    }

    /// Queues an event.
    pub fn push(&mut self, key: Key) {
        self.heap.push(Reverse(key));
    }

    /// Queues an event that usually comes after every event queued this
    /// way so far (the lane takes it then, at O(1)).
    pub fn push_ordered(&mut self, key: Key) {
        if self.lane.back().is_none_or(|last| *last <= key) {
            self.lane.push_back(key);
        } else {
            self.push(key);
        }
    }

    /// The next event, without removing it.
    pub fn peek(&self) -> Option<Key> {
        let heap = self.heap.peek().map(|r| r.0);
        match (heap, self.lane.front()) {
            (Some(h), Some(&l)) => Some(h.min(l)),
            (h, l) => h.or(l.copied()),
        }
    }

    /// Removes and returns the next event.
    pub fn pop(&mut self) -> Option<Key> {
        let from_lane = match (self.heap.peek(), self.lane.front()) {
            (Some(h), Some(l)) => *l < h.0,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if from_lane {
            self.lane.pop_front()
        } else {
            self.heap.pop().map(|r| r.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn pops_in_key_order_whatever_the_mix_of_pushes() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut q = EventQueue::default();
        let mut all = Vec::new();
        let mut now = 0u64;
        for i in 0..20_000u64 {
            // Interleave pops with pushes, as the engine does.
            if i % 3 == 0
                && let Some(k) = q.pop()
            {
                assert!(k.at >= now, "time went backwards");
                now = k.at;
                let i = all
                    .iter()
                    .position(|x| *x == k)
                    .expect("popped a pushed key");
                all.swap_remove(i);
            }
            let key = Key {
                at: now + rng.random_range(0..1_000),
                what: rng.random_range(0..4),
            };
            if rng.random_bool(0.5) {
                q.push_ordered(key);
            } else {
                q.push(key);
            }
            all.push(key);
        }
        all.sort();
        let mut rest = Vec::new();
        while let Some(next) = q.peek() {
            assert_eq!(q.pop(), Some(next));
            rest.push(next);
        }
        assert_eq!(rest, all);
    }

    #[test]
    fn the_lane_takes_events_in_order() {
        let mut q = EventQueue::default();
        for at in [5, 7, 7, 9] {
            q.push_ordered(Key { at, what: 0 });
        }
        q.push_ordered(Key { at: 6, what: 0 });
        assert_eq!((q.lane.len(), q.heap.len()), (4, 1));
        let order: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|k| k.at).collect();
        assert_eq!(order, vec![5, 6, 7, 7, 9]);
    }
}
