//! The engine's event queue, ordered by time and then by event.
//!
//! Events are two words (the instant in nanoseconds and the event packed
//! into a `u64`), so the order is total and depends on nothing but the
//! events themselves: that is what makes a run reproducible.
//!
//! Most events go into a hierarchical timing wheel. Time is cut into
//! ticks of about a millisecond; an event goes to one of 64 slots of the
//! level given by the highest 6-bit digit in which its tick differs from
//! the wheel's, so that a slot of level `l` holds the events of 64^l
//! ticks. When the events of the wheel's tick are used up, the wheel turns
//! to its next slot in use; a slot of a higher level is then spread over
//! the levels below, each event moving a few times in all (a binary
//! heap's sift through `log n` levels on every pop was half the engine's
//! own time in a sweep). The events of the wheel's tick wait in a sorted
//! list, where an event queued for that tick or before it (one queued
//! while the wheel had turned ahead of the run's instant) goes straight
//! to its place: the order is exact.
//!
//! Timeouts, which a run pushes almost always in time order (now + a
//! fixed timeout), go into a FIFO lane instead when they do not overtake
//! its last entry; popping takes the earlier of the two heads, so the order
//! is exactly that of one heap.

use std::collections::VecDeque;
use std::time::Duration;

use crate::model::units::nanos;

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
            at: nanos(at),
            what,
        }
    }

    /// The instant, as a duration since the start of the run.
    pub fn time(&self) -> Duration {
        Duration::from_nanos(self.at)
    }

    /// The wheel's tick of the key.
    fn tick(&self) -> u64 {
        self.at >> TICK_SHIFT
    }
}

/// A tick is 2^20 ns, about a millisecond.
const TICK_SHIFT: u32 = 20;
/// Slots per level, one per value of a 6-bit digit.
const SLOTS: usize = 64;
const DIGIT: u32 = 6;
/// Levels enough for every tick of a `u64` instant (44 bits).
const LEVELS: usize = 8;
const _: () = assert!(LEVELS as u32 * DIGIT >= 64 - TICK_SHIFT);
/// The most keys whose memory a slot above level 0 keeps once its keys
/// have moved down (64 KB): a small run's slots keep all of theirs, for
/// their next turn and the next run's (`SPARE`); a slot that held more
/// gives its memory back. Such a slot comes round again only 4.3 s of
/// virtual time later (level 1) or 4.6 minutes (level 2), and each kept
/// the largest fill it had seen: with millions of users or requests
/// held, the wheel had kept up to ten times the memory of its keys, and
/// its level-2 slots' memory grew over the first minutes of a run.
const KEPT: usize = 4096;

/// Keys in order.
#[derive(Debug, Clone)]
struct Wheel {
    /// The wheel's tick: every key in a slot is after it.
    tick: u64,
    /// The keys of the wheel's tick or before, largest first.
    ready: Vec<Key>,
    /// `LEVELS` levels of `SLOTS` slots, level by level.
    slots: Vec<Vec<Key>>,
    /// Per level, bit `j` set when slot `j` holds keys.
    used: [u64; LEVELS],
}

impl Default for Wheel {
    fn default() -> Self {
        Wheel {
            tick: 0,
            ready: Vec::new(),
            slots: (0..LEVELS * SLOTS).map(|_| Vec::new()).collect(),
            used: [0; LEVELS],
        }
    }
}

thread_local! {
    /// The wheel of the last queue dropped on this thread, emptied: the
    /// memory its slots grew to over a run serves the next run's (a
    /// sweep's runs each grew 512 slots from nothing).
    static SPARE: std::cell::RefCell<Option<Wheel>> = const { std::cell::RefCell::new(None) };
}

impl Wheel {
    /// An empty wheel, the last one dropped on this thread if any.
    fn reuse() -> Wheel {
        SPARE
            .with(|spare| spare.borrow_mut().take())
            .unwrap_or_default()
    }

    /// Empties the wheel, keeping its memory.
    fn clear(&mut self) {
        self.tick = 0;
        self.ready.clear();
        for slot in &mut self.slots {
            slot.clear();
        }
        self.used = [0; LEVELS];
    }

    /// Files `key`, after the wheel's tick, in its slot.
    fn file(&mut self, key: Key) {
        let tick = key.tick();
        debug_assert!(tick > self.tick);
        let level = (63 - (tick ^ self.tick).leading_zeros()) / DIGIT;
        let slot = (tick >> (level * DIGIT)) as usize % SLOTS;
        self.slots[level as usize * SLOTS + slot].push(key);
        self.used[level as usize] |= 1 << slot;
    }

    fn push(&mut self, key: Key) {
        if key.tick() <= self.tick {
            let at = self.ready.partition_point(|k| *k > key);
            self.ready.insert(at, key);
        } else {
            self.file(key);
        }
    }

    /// Turns the wheel to its next slot in use, if the keys of its tick
    /// are used up; false if there are no keys at all.
    #[inline]
    fn turn(&mut self) -> bool {
        !self.ready.is_empty() || self.turn_to_next()
    }

    /// Turns the wheel from a used-up tick to its next slot in use.
    #[inline(never)]
    fn turn_to_next(&mut self) -> bool {
        'turn: loop {
            for level in 0..LEVELS {
                let shift = level as u32 * DIGIT;
                let digit = (self.tick >> shift) % SLOTS as u64;
                // Slots after the wheel's digit (its own is empty: its keys
                // are in a lower level, or ready).
                let later = self.used[level] & (!1u64 << digit);
                if later == 0 {
                    continue;
                }
                let slot = u64::from(later.trailing_zeros());
                let low = (SLOTS as u64) << shift;
                self.tick = (self.tick & !(low - 1)) | (slot << shift);
                self.used[level] &= !(1 << slot);
                let index = level * SLOTS + slot as usize;
                if level == 0 {
                    std::mem::swap(&mut self.ready, &mut self.slots[index]);
                } else {
                    let mut keys = std::mem::take(&mut self.slots[index]);
                    for key in keys.drain(..) {
                        if key.tick() == self.tick {
                            self.ready.push(key);
                        } else {
                            self.file(key);
                        }
                    }
                    // Keep the memory for the slot's next turn, unless
                    // it is large.
                    if keys.capacity() <= KEPT {
                        self.slots[index] = keys;
                    }
                    if self.ready.is_empty() {
                        continue 'turn;
                    }
                }
                self.ready.sort_unstable_by(|a, b| b.cmp(a));
                return true;
            }
            return false;
        }
    }

    fn peek(&mut self) -> Option<Key> {
        if self.turn() {
            self.ready.last().copied()
        } else {
            None
        }
    }

    fn pop(&mut self) -> Option<Key> {
        if self.turn() { self.ready.pop() } else { None }
    }
}

/// Events in order.
#[derive(Debug, Default, Clone)]
pub struct EventQueue {
    heap: Wheel,
    lane: VecDeque<Key>,
}

impl Drop for EventQueue {
    /// Leaves the wheel, emptied, to the next queue on this thread.
    fn drop(&mut self) {
        let mut wheel = std::mem::take(&mut self.heap);
        wheel.clear();
        SPARE.with(|spare| *spare.borrow_mut() = Some(wheel));
    }
}

impl EventQueue {
    /// An empty queue with room for `n` timeouts in order.
    pub fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: Wheel::reuse(),
            lane: VecDeque::with_capacity(n),
        }
    }

    /// Queues an event.
    pub fn push(&mut self, key: Key) {
        self.heap.push(key);
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
    pub fn peek(&mut self) -> Option<Key> {
        let heap = self.heap.peek();
        match (heap, self.lane.front()) {
            (Some(h), Some(&l)) => Some(h.min(l)),
            (h, l) => h.or(l.copied()),
        }
    }

    /// Removes the next event, `next`, which [`EventQueue::peek`] has just
    /// returned (without looking for it again).
    #[inline]
    pub fn pop_peeked(&mut self, next: Key) {
        if self.lane.front() == Some(&next) {
            self.lane.pop_front();
        } else {
            let popped = self.heap.ready.pop();
            debug_assert_eq!(popped, Some(next), "the key peeked");
        }
    }

    /// Removes and returns the next event.
    pub fn pop(&mut self) -> Option<Key> {
        let from_lane = match (self.heap.peek(), self.lane.front()) {
            (Some(h), Some(l)) => *l < h,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if from_lane {
            self.lane.pop_front()
        } else {
            self.heap.pop()
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
            // Delays at every scale, from the same tick to hours.
            let scale = rng.random_range(0..44u32);
            let key = Key {
                at: now + (rng.random_range(0..1_000u64) << scale),
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

    /// The memory the slots above level 0 keep, in keys.
    fn kept(q: &EventQueue) -> usize {
        q.heap.slots[SLOTS..].iter().map(Vec::capacity).sum()
    }

    #[test]
    fn a_large_slot_gives_its_memory_back_once_its_keys_move_down() {
        // Keys of one instant far ahead fill one slot above level 0, and
        // all move to the keys at hand when the wheel turns to it.
        for (n, keeps) in [(KEPT, true), (KEPT + 1, false)] {
            let mut q = EventQueue::default();
            for what in 0..n as u64 {
                q.push(Key { at: 1 << 40, what });
            }
            assert!(kept(&q) >= n);
            assert_eq!(
                q.pop(),
                Some(Key {
                    at: 1 << 40,
                    what: 0
                })
            );
            assert_eq!(kept(&q) > 0, keeps, "{n} keys");
            assert_eq!(std::iter::from_fn(|| q.pop()).count(), n - 1);
        }
    }

    #[test]
    fn the_lane_takes_events_in_order() {
        let mut q = EventQueue::default();
        for at in [5, 7, 7, 9] {
            q.push_ordered(Key { at, what: 0 });
        }
        q.push_ordered(Key { at: 6, what: 0 });
        assert_eq!(q.lane.len(), 4);
        let order: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|k| k.at).collect();
        assert_eq!(order, vec![5, 6, 7, 7, 9]);
    }

    #[test]
    fn keys_below_the_last_taken_come_first() {
        let mut q = EventQueue::default();
        for key in [(10, 5), (10, 9), (1 << 40, 0), (u64::MAX, 3)] {
            q.push(Key {
                at: key.0,
                what: key.1,
            });
        }
        assert_eq!(q.pop(), Some(Key { at: 10, what: 5 }));
        assert_eq!(q.pop(), Some(Key { at: 10, what: 9 }));
        // Queued at the instant at hand, ordered before the last taken.
        q.push(Key { at: 10, what: 2 });
        q.push(Key { at: 10, what: 1 });
        q.push(Key { at: 10, what: 9 });
        q.push(Key { at: 11, what: 0 });
        let order: Vec<(u64, u64)> = std::iter::from_fn(|| q.pop())
            .map(|k| (k.at, k.what))
            .collect();
        assert_eq!(
            order,
            vec![
                (10, 1),
                (10, 2),
                (10, 9),
                (11, 0),
                (1 << 40, 0),
                (u64::MAX, 3)
            ]
        );
    }
}
