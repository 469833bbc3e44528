//! What a service hands out and gives back: a ticket for each admitted
//! request, and a departure when it leaves.

use std::time::Duration;

/// Identifies an admitted request, in the order of admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub(super) u64);

/// How a request left the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Its work was done: answer OK (if anyone still waits).
    Served,
    /// Dropped from the queue by the queue timeout: answer 503 at once.
    Dropped,
    /// Its client had gone and the server noticed before serving it: no
    /// answer, and wasted work if it had started.
    Cancelled,
}

impl Exit {
    /// How a request that left this way counts, its answer `received` by
    /// a waiting client or not.
    pub fn fate(self, received: bool) -> Fate {
        match (self, received) {
            (Exit::Dropped, _) => Fate::Dropped,
            (Exit::Served, true) => Fate::Completed,
            (Exit::Served | Exit::Cancelled, _) => Fate::Abandoned,
        }
    }
}

/// How a request that left the service counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Served to a waiting client.
    Completed,
    /// Its client had gone: served for nobody, or cancelled.
    Abandoned,
    /// Dropped from the queue by the queue timeout, whoever waited.
    Dropped,
}

/// A request leaving the service.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure<T> {
    /// What the caller attached at admission.
    pub payload: T,
    /// Its ticket.
    pub ticket: Ticket,
    /// When it was admitted.
    pub start: Duration,
    /// The exact instant it left (at or before the `now` that revealed it).
    pub at: Duration,
    /// How.
    pub exit: Exit,
}
