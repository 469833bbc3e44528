//! Users moving between the client's lanes while it runs.
//!
//! The client deals its users to as many lanes as its users' demand asks
//! ([`lanes::for_demand`]), but a storm sends several times that demand:
//! retries, and a new connection for every attempt that timed out. A lane
//! that cannot keep up starts its attempts late, and since each attempt's
//! timeout counts from its intended start (docs/model.md, "Timing from
//! the intended start"), late attempts time out sooner, are retried
//! sooner and load the lane more: a client stuck in a storm of its own
//! while the server idles. So a lane that is busy hands some of its users
//! to the least busy lane ([`lanes::moves`]), each at a moment it has no
//! attempt in flight. A user carries its whole state with it (its
//! generator, its backoff, the attempt due), so where it runs changes
//! nothing it draws.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::mpsc;

use super::lanes;

/// The lanes' user counts and the moves allowed now, shared by every
/// lane; `T` is what a moving user carries.
pub(crate) struct Balance<T> {
    /// Users each lane runs.
    users: Vec<AtomicUsize>,
    /// How many more users each lane may hand over in this period.
    quota: Vec<AtomicUsize>,
    /// Where each lane's movers go in this period.
    to: Vec<AtomicUsize>,
    /// Each lane's door for the users that come to it.
    doors: Vec<mpsc::UnboundedSender<T>>,
    /// Users that left a lane so far.
    moves: AtomicU64,
}

impl<T> Balance<T> {
    /// How often the moves are planned, each time from the lanes' busy
    /// shares since the last plan: over 100 ms a steady lane's share
    /// swung by a quarter, and users moved after the noise.
    pub(crate) const EVERY: std::time::Duration = std::time::Duration::from_millis(300);

    /// A balance for `lanes` lanes, and the door each lane receives its
    /// arriving users from.
    pub(crate) fn new(lanes: usize) -> (Balance<T>, Vec<mpsc::UnboundedReceiver<T>>) {
        let (doors, arrivals) = (0..lanes).map(|_| mpsc::unbounded_channel()).unzip();
        let zeros = || (0..lanes).map(|_| AtomicUsize::new(0)).collect();
        let balance = Balance {
            users: zeros(),
            quota: zeros(),
            to: zeros(),
            doors,
            moves: AtomicU64::new(0),
        };
        (balance, arrivals)
    }

    /// A user starts on `lane`.
    pub(crate) fn joined(&self, lane: usize) {
        self.users[lane].fetch_add(1, Ordering::Relaxed);
    }

    /// A user of `lane` has left the run (a session of open traffic that
    /// made its last request).
    pub(crate) fn left(&self, lane: usize) {
        self.users[lane].fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether a user of `lane` with nothing in flight should move now, and
    /// where: the lane's quota, taken one at a time. Costs one load while
    /// the lane keeps its users.
    pub(crate) fn leave(&self, lane: usize) -> Option<usize> {
        let quota = &self.quota[lane];
        if quota.load(Ordering::Relaxed) == 0 {
            return None;
        }
        quota
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |q| q.checked_sub(1))
            .ok()?;
        // A plan stored since the quota was taken may send this lane's
        // users nowhere: the user then stays.
        let to = self.to[lane].load(Ordering::Relaxed);
        if to == lane {
            return None;
        }
        self.users[lane].fetch_sub(1, Ordering::Relaxed);
        self.moves.fetch_add(1, Ordering::Relaxed);
        Some(to)
    }

    /// Hands `user`, which left its lane, to lane `to`.
    pub(crate) fn arrive(&self, to: usize, user: T) {
        self.users[to].fetch_add(1, Ordering::Relaxed);
        // A lane that has stopped takes no one: the run is ending.
        let _ = self.doors[to].send(user);
    }

    /// Sets this period's moves from each lane's busy share ([`lanes::moves`]).
    pub(crate) fn plan(&self, busy: &[f64]) {
        for (lane, planned) in lanes::moves(busy, &self.counts()).into_iter().enumerate() {
            let (to, count) = planned.map_or((lane, 0), |m| (m.to, m.count));
            // The quota last, released: a user that takes it sees its
            // destination.
            self.to[lane].store(to, Ordering::Relaxed);
            self.quota[lane].store(count, Ordering::Release);
        }
    }

    /// How many times a user has left its lane.
    pub(crate) fn moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }

    /// Users each lane runs now.
    fn counts(&self) -> Vec<usize> {
        self.users
            .iter()
            .map(|u| u.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_lane_hands_over_its_quota_and_no_more() {
        let (balance, mut arrivals) = Balance::<u32>::new(2);
        for _ in 0..10 {
            balance.joined(0);
        }
        assert_eq!(balance.leave(0), None, "no plan yet");
        // 10 × (1.0 − 0.0) / 2 = 5 may go to lane 1.
        balance.plan(&[1.0, 0.0]);
        let mut moved = 0;
        while let Some(to) = balance.leave(0) {
            assert_eq!(to, 1);
            balance.arrive(to, moved);
            moved += 1;
        }
        assert_eq!(moved, 5);
        assert_eq!(balance.moves(), 5);
        assert_eq!(balance.counts(), vec![5, 5]);
        assert_eq!(balance.leave(1), None, "the idle lane keeps its users");
        let mut came = Vec::new();
        while let Ok(user) = arrivals[1].try_recv() {
            came.push(user);
        }
        assert_eq!(came, vec![0, 1, 2, 3, 4], "in the order they left");
        assert!(arrivals[0].try_recv().is_err());
        // Once the two are even, the next period moves nobody.
        balance.plan(&[0.6, 0.6]);
        assert_eq!(balance.leave(0), None);
    }

    #[test]
    fn a_user_stays_when_a_new_plan_sends_its_lane_nowhere() {
        let (balance, _arrivals) = Balance::<u32>::new(2);
        for _ in 0..4 {
            balance.joined(0);
        }
        // What a leaving user can read while a plan is being stored: the
        // last plan's quota, and this plan's destination, its own lane.
        balance.quota[0].store(1, Ordering::Relaxed);
        balance.to[0].store(0, Ordering::Relaxed);
        assert_eq!(balance.leave(0), None);
        assert_eq!(balance.moves(), 0, "not counted as a move");
        assert_eq!(balance.counts(), vec![4, 0]);
    }
}
