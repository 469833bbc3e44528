//! What the virtual engine's event queue holds, packed into one word
//! each: which attempt an event is about, and what happens.

/// Identifies one attempt: its user and that user's attempt number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AttemptId {
    pub(super) user: u32,
    pub(super) generation: u32,
}

/// What the event queue holds. Completions are not in it: the server's
/// scheduler always knows its next one, and a completion comes before any
/// event at the same instant (an answer due when the timeout falls is in
/// time). At one instant, events come in the order of this list (a resume
/// before a stop, so that back-to-back pauses stay two pauses; an arrival
/// before the attempt it makes due), then by
/// attempt number, then by user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    ClientTick,
    ServerTick,
    Resume,
    /// The server is stopped for pause number `.0`.
    Stop(u32),
    /// The next session of open traffic arrives.
    Arrival,
    /// A user's next attempt is due.
    Due(u32),
    /// An attempt's timeout (stale if the attempt has ended).
    Deadline(AttemptId),
    /// A retransmitted SYN (stale if the attempt has ended).
    Syn(AttemptId),
}

/// Attempt numbers wrap at this mask, to fit in a packed event.
pub(super) const GENERATION_MASK: u32 = (1 << 28) - 1;

impl Event {
    /// Packs the event into one word: kind, attempt number, user.
    pub(super) fn pack(self) -> u64 {
        let (kind, generation, user) = match self {
            Event::ClientTick => (0, 0, 0),
            Event::ServerTick => (1, 0, 0),
            Event::Resume => (2, 0, 0),
            Event::Stop(i) => (3, 0, i),
            Event::Arrival => (4, 0, 0),
            Event::Due(user) => (5, 0, user),
            Event::Deadline(id) => (6, id.generation, id.user),
            Event::Syn(id) => (7, id.generation, id.user),
        };
        (kind << 60) | (u64::from(generation) << 32) | u64::from(user)
    }

    pub(super) fn unpack(word: u64) -> Event {
        let user = word as u32;
        let id = AttemptId {
            user,
            generation: (word >> 32) as u32 & GENERATION_MASK,
        };
        match word >> 60 {
            0 => Event::ClientTick,
            1 => Event::ServerTick,
            2 => Event::Resume,
            3 => Event::Stop(user),
            4 => Event::Arrival,
            5 => Event::Due(user),
            6 => Event::Deadline(id),
            _ => Event::Syn(id),
        }
    }
}
