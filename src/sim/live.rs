//! Which attempt each user has in flight, one word per user: most events
//! about an attempt (a timeout, a retransmitted SYN, an answer) ask
//! first whether it is still in flight, and for a timeout it usually is
//! not (the answer came first). A user's slot is 360 bytes, a cache
//! miss per question; this table of 4 bytes a user answers most
//! questions from the cache.

use super::event::{AttemptId, GENERATION_MASK};

/// No attempt in flight.
const NONE: u32 = u32::MAX;
/// Several attempts in flight (a hedging user): the slot knows which.
const SEVERAL: u32 = u32::MAX - 1;

// Attempt numbers never take the two marks.
const _: () = assert!(GENERATION_MASK < SEVERAL);

/// Per user: the number of its one attempt in flight, or a mark.
#[derive(Debug, Clone, Default)]
pub(super) struct Live(Vec<u32>);

impl Live {
    /// `users` users, none with an attempt in flight.
    pub(super) fn new(users: usize) -> Self {
        Live(vec![NONE; users])
    }

    /// Makes room for `users` users, the new ones with none in flight.
    pub(super) fn grow(&mut self, users: usize) {
        if users > self.0.len() {
            self.0.resize(users, NONE);
        }
    }

    /// Records the numbers of the attempts `user` has in flight now.
    pub(super) fn set(&mut self, user: u32, mut generations: impl Iterator<Item = u32>) {
        self.0[user as usize] = match (generations.next(), generations.next()) {
            (None, _) => NONE,
            (Some(one), None) => one,
            (Some(_), Some(_)) => SEVERAL,
        };
    }

    /// Whether `id` is in flight, if the table knows: `None` when its
    /// user has several attempts in flight.
    pub(super) fn of(&self, id: AttemptId) -> Option<bool> {
        match self.0[id.user as usize] {
            SEVERAL => None,
            one => Some(one == id.generation),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(user: u32, generation: u32) -> AttemptId {
        AttemptId { user, generation }
    }

    #[test]
    fn knows_one_attempt_and_defers_on_several() {
        let mut live = Live::new(3);
        assert_eq!(live.of(id(1, 0)), Some(false), "nothing in flight");
        live.set(1, [7].into_iter());
        assert_eq!(live.of(id(1, 7)), Some(true));
        assert_eq!(live.of(id(1, 6)), Some(false));
        assert_eq!(live.of(id(0, 7)), Some(false), "another user");
        live.set(1, [7, 8].into_iter());
        assert_eq!(live.of(id(1, 9)), None, "several: ask the slot");
        live.set(1, [8].into_iter());
        assert_eq!(live.of(id(1, 7)), Some(false));
        live.set(1, std::iter::empty());
        assert_eq!(live.of(id(1, 8)), Some(false));
        live.set(2, [GENERATION_MASK].into_iter());
        assert_eq!(live.of(id(2, GENERATION_MASK)), Some(true));
    }
}
