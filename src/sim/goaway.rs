//! A server that resumes closes, with GOAWAY `ENHANCE_YOUR_CALM`, each
//! HTTP/2 connection on which more streams written while it was stopped
//! had been reset than it allows (`model::multiplex::too_many_resets`):
//! it reads none of that connection's waiting requests, live or reset,
//! and the attempts still on the connection (waiting, or in service since
//! before the stop) fail with an error, as hyper's client fails a
//! connection's streams when it closes. The work of those in service goes
//! on or stops as `--on-disconnect` says, as for a client's timeout.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use super::engine::Engine;
use super::event::AttemptId;
use super::slot::{State, in_flight};
use crate::model::multiplex::{Conn, too_many_resets};
use crate::model::outcome::Outcome;

/// The connections of a layer its server closes as it resumes, and the
/// requests written on them while it was stopped, which it does not read.
#[derive(Debug, Default)]
pub(super) struct Calmed {
    pub(super) conns: BTreeSet<Conn>,
    pub(super) unread: HashSet<AttemptId>,
}

impl Engine {
    /// What the server layer `l` calls closes as it resumes, allowing
    /// `limit` resets a connection: the layer's streams written while it
    /// was stopped are taken, those no longer in flight counted as reset.
    pub(super) fn calmed(&mut self, l: usize, limit: u32) -> Calmed {
        let layer = match l {
            0 => &mut self.client,
            _ => &mut self.calls[l - 1],
        };
        let unread = std::mem::take(&mut layer.unread);
        if unread.is_empty() {
            return Calmed::default();
        }
        let (live, slots) = (&layer.live, &layer.slots);
        let conns = too_many_resets(
            unread
                .iter()
                .map(|&(id, conn)| (conn, !in_flight(live, slots, id))),
            limit,
        );
        let unread = unread
            .into_iter()
            .filter(|(_, conn)| conns.contains(conn))
            .map(|(id, _)| id)
            .collect();
        Calmed { conns, unread }
    }

    /// The server layer `l` calls has closed `calmed`'s connections at
    /// `now`: they leave the layer's books, and every attempt still on
    /// them fails.
    pub(super) fn gone_away(&mut self, l: usize, calmed: &Calmed, now: Duration) {
        if calmed.conns.is_empty() {
            return;
        }
        let layer = match l {
            0 => &mut self.client,
            _ => &mut self.calls[l - 1],
        };
        let Some(mux) = &mut layer.mux else {
            return;
        };
        for &conn in &calmed.conns {
            mux.closed(conn);
        }
        layer.recorder.set_connections(mux.connections());
        let mut on_them = Vec::new();
        for (user, slot) in layer.slots.iter().enumerate() {
            for flight in slot.flights.iter() {
                let connected = !matches!(flight.state, State::Connecting { .. });
                if connected && calmed.conns.contains(&flight.conn) {
                    on_them.push(AttemptId {
                        user: user as u32,
                        generation: flight.generation,
                    });
                }
            }
        }
        for id in on_them {
            match l {
                0 => self.lost::<true>(l, id, Outcome::Error, now),
                _ => self.lost::<false>(l, id, Outcome::Error, now),
            }
        }
    }
}
