//! A first-in first-out queue kept in blocks of fixed size, with access
//! by position.
//!
//! A `VecDeque` grows by doubling and copying: in a storm the curve's tens
//! of thousands of requests in flight made it copy megabytes into pages
//! never touched before, and those first touches (page faults) were a
//! third of a virtual-time run's time. Here a full block stays where it
//! is and the next is a new one (or the last one emptied), so the memory
//! touched is about what the queue holds at its longest.

use std::collections::VecDeque;

/// Entries per block: 4,096 requests of 32 bytes are 128 KiB.
const BLOCK: usize = 4096;

/// A FIFO of `T` in blocks of `N` (a power of two). Taking an entry from
/// the front leaves `T::default()` in its place until its block is done.
#[derive(Clone, Debug)]
pub(super) struct Fifo<T, const N: usize = BLOCK> {
    /// Every block but the last is full; the first's entries before `head`
    /// have been taken.
    blocks: VecDeque<Vec<T>>,
    /// Where the front is in the first block.
    head: usize,
    len: usize,
    /// The last block emptied, kept for the next one needed.
    spare: Option<Vec<T>>,
}

impl<T: Default, const N: usize> Default for Fifo<T, N> {
    fn default() -> Self {
        Fifo {
            blocks: VecDeque::new(),
            head: 0,
            len: 0,
            spare: None,
        }
    }
}

impl<T: Default, const N: usize> Fifo<T, N> {
    const SHIFT: u32 = {
        assert!(N.is_power_of_two(), "a block holds a power of two");
        N.trailing_zeros()
    };

    /// Entries in the queue.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The block and the place in it of the entry at `index` from the
    /// front.
    fn place(&self, index: usize) -> (usize, usize) {
        let at = self.head + index;
        (at >> Self::SHIFT, at & (N - 1))
    }

    /// The entry at `index` from the front.
    #[inline]
    pub(super) fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        let (block, at) = self.place(index);
        Some(&self.blocks[block][at])
    }

    /// The entry at `index` from the front, to change.
    #[inline]
    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index >= self.len {
            return None;
        }
        let (block, at) = self.place(index);
        Some(&mut self.blocks[block][at])
    }

    /// The front entry.
    #[inline]
    pub(super) fn front(&self) -> Option<&T> {
        // An empty queue has no block.
        self.blocks.front().map(|block| &block[self.head])
    }

    /// Adds `value` at the back.
    #[inline]
    pub(super) fn push_back(&mut self, value: T) {
        match self.blocks.back_mut() {
            Some(block) if block.len() < N => block.push(value),
            _ => self.push_to_new_block(value),
        }
        self.len += 1;
    }

    /// Starts a block with `value`: the spare, or a new one.
    #[cold]
    fn push_to_new_block(&mut self, value: T) {
        let mut block = match self.spare.take() {
            Some(block) => block,
            // The first block grows as it fills: most queues stay short.
            None if self.blocks.is_empty() => Vec::new(),
            None => Vec::with_capacity(N),
        };
        block.push(value);
        self.blocks.push_back(block);
    }

    /// Takes the front entry.
    pub(super) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = std::mem::take(&mut self.blocks[0][self.head]);
        self.head += 1;
        self.len -= 1;
        if self.head == N || self.len == 0 {
            // The first block is done: kept to fill again.
            let mut block = self.blocks.pop_front().expect("the first block");
            block.clear();
            self.spare = Some(block);
            self.head = 0;
        }
        Some(value)
    }

    /// The entries, front first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        let head = self.head;
        self.blocks
            .iter()
            .enumerate()
            .flat_map(move |(i, block)| &block[if i == 0 { head } else { 0 }..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of four, so that a few entries cross several.
    type Small = Fifo<u32, 4>;

    fn contents(q: &Small) -> Vec<u32> {
        q.iter().copied().collect()
    }

    #[test]
    fn entries_leave_in_the_order_they_came_across_blocks() {
        let mut q = Small::default();
        for v in 1..=10 {
            q.push_back(v);
        }
        assert_eq!(q.len(), 10);
        assert_eq!(q.blocks.len(), 3, "4 + 4 + 2");
        assert_eq!(contents(&q), (1..=10).collect::<Vec<_>>());
        for want in 1..=5 {
            assert_eq!(q.pop_front(), Some(want));
        }
        assert_eq!(q.blocks.len(), 2, "the first block is done after 4");
        assert_eq!(q.front(), Some(&6));
        assert_eq!(contents(&q), vec![6, 7, 8, 9, 10]);
        for want in 6..=10 {
            assert_eq!(q.pop_front(), Some(want));
        }
        assert_eq!(q.pop_front(), None);
        assert_eq!((q.len(), q.front()), (0, None));
        assert!(q.blocks.is_empty());
    }

    #[test]
    fn positions_count_from_the_front() {
        let mut q = Small::default();
        for v in 0..9 {
            q.push_back(v * 10);
        }
        q.pop_front();
        q.pop_front();
        q.pop_front();
        // The front is 30, the third entry of the first block.
        assert_eq!(q.get(0), Some(&30));
        assert_eq!(q.get(1), Some(&40), "first of the second block");
        assert_eq!(q.get(5), Some(&80));
        assert_eq!(q.get(6), None);
        *q.get_mut(2).expect("in the queue") = 55;
        assert_eq!(contents(&q), vec![30, 40, 55, 60, 70, 80]);
        assert_eq!(q.get_mut(6), None);
    }

    #[test]
    fn an_emptied_block_is_filled_again_without_a_new_allocation() {
        let mut q = Small::default();
        for v in 0..8 {
            q.push_back(v);
        }
        for _ in 0..4 {
            q.pop_front();
        }
        let spare = q.spare.as_ref().expect("kept").as_ptr();
        for v in 8..12 {
            q.push_back(v);
        }
        assert_eq!(q.blocks.back().expect("a block").as_ptr(), spare);
        assert_eq!(contents(&q), (4..12).collect::<Vec<_>>());
        // Emptied to nothing and filled again, it starts from the front.
        while q.pop_front().is_some() {}
        q.push_back(99);
        assert_eq!((q.head, contents(&q)), (0, vec![99]));
    }

    #[test]
    fn a_clone_is_a_separate_queue() {
        let mut q = Small::default();
        for v in 0..6 {
            q.push_back(v);
        }
        q.pop_front();
        let mut copy = q.clone();
        copy.pop_front();
        copy.push_back(6);
        assert_eq!(contents(&q), vec![1, 2, 3, 4, 5]);
        assert_eq!(contents(&copy), vec![2, 3, 4, 5, 6]);
    }
}
