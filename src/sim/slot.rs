//! A user's place in the engine: its state machine, and its attempts in
//! flight with where each is.

use rand::rngs::Xoshiro256PlusPlus;
use std::time::Duration;

use super::event::AttemptId;
use super::live::Live;
use crate::model::multiplex::Conn;
use crate::model::service::Ticket;
use crate::model::user::{Sent, User};

/// Where one attempt in flight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// The SYN was dropped; retransmission number `tries` is pending. The
    /// attempt's deadline (nanoseconds since the start) goes with the
    /// request when the connection is made, to a tier that propagates it.
    Connecting { tries: u32, deadline: u64 },
    /// Written, waiting for the stopped server to read it.
    Waiting,
    /// In the server's model.
    Admitted(Ticket),
    /// Served by a tier, which is calling inward for it: the call is the
    /// one in this slot of the tier's calls.
    Calling(u32),
}

/// One attempt in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct Flight {
    pub(super) generation: u32,
    pub(super) state: State,
    pub(super) sent: Sent,
    /// Over HTTP/2, the connection its stream is on, once it has one.
    pub(super) conn: Conn,
}

/// A user's attempts in flight, in the order a `Vec` would keep them
/// (`swap_remove` included: the order decides the order of cancellations,
/// and so the output). The first is kept in the slot itself: asking
/// where a user's one attempt is was a second cache miss behind the
/// slot's, on most events.
#[derive(Debug, Clone)]
pub(super) struct Flights<T = Flight> {
    /// The first attempt; none when there is none at all.
    first: Option<T>,
    /// The others (a hedging user's).
    more: Vec<T>,
}

impl<T> Default for Flights<T> {
    fn default() -> Self {
        Flights {
            first: None,
            more: Vec::new(),
        }
    }
}

impl Flights {
    /// The numbers of the attempts, in order.
    pub(super) fn generations(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().map(|f| f.generation)
    }
}

impl<T> Flights<T> {
    /// The attempts in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(self.more.iter())
    }

    /// Attempt number `at` in order.
    pub(super) fn get_mut(&mut self, at: usize) -> &mut T {
        match at {
            0 => self.first.as_mut().expect("an attempt in flight"),
            _ => &mut self.more[at - 1],
        }
    }

    /// Adds an attempt at the end.
    pub(super) fn push(&mut self, flight: T) {
        if self.first.is_none() {
            self.first = Some(flight);
        } else {
            self.more.push(flight);
        }
    }

    /// Removes attempt number `at`, the last taking its place.
    pub(super) fn swap_remove(&mut self, at: usize) -> T {
        let Some(last) = self.more.pop() else {
            debug_assert_eq!(at, 0);
            return self.first.take().expect("an attempt in flight");
        };
        match at {
            0 => self.first.replace(last).expect("an attempt in flight"),
            at if at - 1 == self.more.len() => last,
            at => std::mem::replace(&mut self.more[at - 1], last),
        }
    }

    /// Removes every attempt, passing each to `f` in order.
    pub(super) fn clear_with(&mut self, mut f: impl FnMut(&T)) {
        if let Some(first) = self.first.take() {
            f(&first);
        }
        for flight in self.more.drain(..) {
            f(&flight);
        }
    }
}

/// A user's state in the engine.
#[derive(Clone)]
pub(super) struct Slot {
    pub(super) user: User<Xoshiro256PlusPlus>,
    /// The number the user's next attempt sent will carry.
    pub(super) generation: u32,
    /// Attempts in flight: at most one, unless the user hedges.
    pub(super) flights: Flights,
    /// When the user's live `Due` event falls; others are stale (a hedge
    /// brought forward by a failure, or made moot by a success).
    pub(super) due_at: Option<Duration>,
    /// How many times the user has waited for a rate limiter's token: an
    /// entry of `Engine::waiters` with another number is stale.
    pub(super) waits: u32,
}

impl Slot {
    /// The slot of `user`, with nothing in flight or due.
    pub(super) fn of(user: User<Xoshiro256PlusPlus>) -> Self {
        Slot {
            user,
            generation: 0,
            flights: Flights::default(),
            due_at: None,
            waits: 0,
        }
    }

    /// Where attempt `id` is in the user's flights, if still in flight.
    pub(super) fn position(&self, id: AttemptId) -> Option<usize> {
        self.flights
            .iter()
            .position(|f| f.generation == id.generation)
    }

    fn is_live(&self, id: AttemptId) -> bool {
        self.position(id).is_some()
    }
}

/// Whether attempt `id` is still in flight: from `live` if it knows,
/// else from the user's slot.
pub(super) fn in_flight(live: &Live, slots: &[Slot], id: AttemptId) -> bool {
    live.of(id)
        .unwrap_or_else(|| slots[id.user as usize].is_live(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn a_users_place_takes_the_memory_it_took_before_chains() {
        // What results/bench.md measures per user held: a call's state
        // and a connection's deadline fit in the room an attempt had, and
        // an HTTP/2 stream's connection in the room left.
        assert_eq!(std::mem::size_of::<State>(), 16);
        assert_eq!(std::mem::size_of::<Flight>(), 64);
        assert_eq!(std::mem::size_of::<Slot>(), 360);
    }

    #[test]
    fn flights_keep_the_order_a_vec_keeps() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut flights = Flights::default();
        let mut vec = Vec::new();
        for n in 0..10_000u32 {
            match rng.random_range(0..10) {
                0..5 => {
                    flights.push(n);
                    vec.push(n);
                }
                5..9 if !vec.is_empty() => {
                    let at = rng.random_range(0..vec.len());
                    assert_eq!(flights.swap_remove(at), vec.swap_remove(at));
                }
                _ if !vec.is_empty() => {
                    let at = rng.random_range(0..vec.len());
                    *flights.get_mut(at) += 1_000_000;
                    vec[at] += 1_000_000;
                }
                _ => {}
            }
            assert!(flights.iter().eq(vec.iter()), "after step {n}");
            if n % 1_000 == 999 {
                let mut cleared = Vec::new();
                flights.clear_with(|f| cleared.push(*f));
                assert_eq!(cleared, std::mem::take(&mut vec));
                assert_eq!(flights.iter().count(), 0);
            }
        }
    }
}
