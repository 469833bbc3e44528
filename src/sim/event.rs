//! What the virtual engine's event queue holds, packed into one word
//! each: which attempt an event is about, and what happens.
//!
//! The events of a tier's calls (docs/chains.md) are kinds of their
//! own beside the client's, with the tier's number in the top bits of the
//! attempt number: the client's path never asks which layer an event
//! belongs to, and a run without tiers takes its events in the order it
//! took them before chains.

/// Identifies one attempt: its user (or call) and that user's attempt
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct AttemptId {
    pub(super) user: u32,
    pub(super) generation: u32,
}

/// What the event queue holds. Completions are not in it: each server's
/// scheduler always knows its next one, and a completion comes before any
/// event at the same instant (an answer due when the timeout falls is in
/// time). At one instant, events come in the order of this list (a resume
/// before a stop, so that back-to-back pauses stay two pauses; an arrival
/// before the attempt it makes due; the timeouts of the tiers' calls
/// before the client's, inner tiers first: a deadline propagated inward
/// falls at its caller's instant, and the inner tier's 504 reaches the
/// caller as its own timeout falls), then by tier (inner first), then by
/// attempt number, then by user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    ClientTick,
    ServerTick,
    /// Tier `.0`'s report tick.
    TierTick(u32),
    Resume,
    /// The paused server is stopped for pause number `.0`.
    Stop(u32),
    /// The next session of open traffic arrives.
    Arrival,
    /// A user's next attempt is due.
    Due(u32),
    /// The next attempt of a call of tier `.0` is due.
    CallDue(u32, u32),
    /// The timeout of a call's attempt, of tier `.0`.
    CallDeadline(u32, AttemptId),
    /// An attempt's timeout (stale if the attempt has ended).
    Deadline(AttemptId),
    /// A retransmitted SYN (stale if the attempt has ended).
    Syn(AttemptId),
    /// A retransmitted SYN of a call's attempt, of tier `.0`.
    CallSyn(u32, AttemptId),
}

/// Attempt numbers wrap at this mask, to fit in a packed event.
pub(super) const GENERATION_MASK: u32 = (1 << 28) - 1;

/// Bits of a call's attempt number; the tier's number takes the four
/// above them.
const CALL_BITS: u32 = 24;

/// A call's attempt numbers wrap at this mask (a call's slot is reused by
/// later calls, whose attempt numbers go on from the last one's, so that
/// events of the calls before stay stale).
pub(super) const CALL_GENERATION_MASK: u32 = (1 << CALL_BITS) - 1;

/// The most tiers a chain may have in virtual time: their numbers fit in
/// the four bits above a call's attempt number.
pub const MAX_TIERS: usize = 1 << (28 - CALL_BITS);

/// The bits of tier `tier` above a call's attempt number: inner tiers
/// (higher numbers) below outer ones, so that they come first.
fn tier_bits(tier: u32) -> u32 {
    debug_assert!((tier as usize) < MAX_TIERS);
    (MAX_TIERS as u32 - 1 - tier) << CALL_BITS
}

impl Event {
    /// Packs the event into one word: kind, attempt number (with a
    /// call's tier above it), user.
    pub(super) fn pack(self) -> u64 {
        let call =
            |tier: u32, generation: u32| tier_bits(tier) | (generation & CALL_GENERATION_MASK);
        let (kind, generation, user) = match self {
            Event::ClientTick => (0, 0, 0),
            Event::ServerTick => (1, 0, 0),
            Event::TierTick(tier) => (2, 0, tier),
            Event::Resume => (3, 0, 0),
            Event::Stop(i) => (4, 0, i),
            Event::Arrival => (5, 0, 0),
            Event::Due(user) => (6, 0, user),
            Event::CallDue(tier, user) => (7, call(tier, 0), user),
            Event::CallDeadline(tier, id) => (8, call(tier, id.generation), id.user),
            Event::Deadline(id) => (9, id.generation, id.user),
            Event::Syn(id) => (10, id.generation, id.user),
            Event::CallSyn(tier, id) => (11, call(tier, id.generation), id.user),
        };
        (kind << 60) | (u64::from(generation) << 32) | u64::from(user)
    }

    #[inline(always)]
    pub(super) fn unpack(word: u64) -> Event {
        let user = word as u32;
        let generation = (word >> 32) as u32 & GENERATION_MASK;
        let id = AttemptId { user, generation };
        match word >> 60 {
            0 => Event::ClientTick,
            1 => Event::ServerTick,
            3 => Event::Resume,
            4 => Event::Stop(user),
            5 => Event::Arrival,
            6 => Event::Due(user),
            9 => Event::Deadline(id),
            10 => Event::Syn(id),
            kind => Event::unpack_tier(kind, generation, user),
        }
    }

    /// The events of the tiers (apart, so that the client's events unpack
    /// as fast as before chains).
    #[inline(never)]
    fn unpack_tier(kind: u64, generation: u32, user: u32) -> Event {
        let tier = MAX_TIERS as u32 - 1 - (generation >> CALL_BITS);
        let call = AttemptId {
            user,
            generation: generation & CALL_GENERATION_MASK,
        };
        match kind {
            2 => Event::TierTick(user),
            7 => Event::CallDue(tier, user),
            8 => Event::CallDeadline(tier, call),
            _ => Event::CallSyn(tier, call),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_unpacks_to_itself() {
        let id = AttemptId {
            user: u32::MAX,
            generation: GENERATION_MASK,
        };
        let call = AttemptId {
            user: 7,
            generation: CALL_GENERATION_MASK,
        };
        let last = MAX_TIERS as u32 - 1;
        for event in [
            Event::ClientTick,
            Event::ServerTick,
            Event::Resume,
            Event::Stop(3),
            Event::Arrival,
            Event::Due(u32::MAX),
            Event::Deadline(id),
            Event::Syn(id),
            Event::TierTick(last),
            Event::CallDue(last, 9),
            Event::CallDeadline(0, call),
            Event::CallSyn(last, call),
        ] {
            assert_eq!(Event::unpack(event.pack()), event);
        }
    }

    #[test]
    fn events_at_one_instant_come_in_the_order_of_the_list() {
        let id = AttemptId {
            user: 5,
            generation: 3,
        };
        let order = [
            Event::ClientTick,
            Event::ServerTick,
            Event::TierTick(0),
            Event::Resume,
            Event::Stop(0),
            Event::Arrival,
            Event::Due(9),
            Event::CallDue(0, 0),
            // The innermost tier's timeouts first.
            Event::CallDeadline(1, id),
            Event::CallDeadline(0, id),
            Event::Deadline(id),
            Event::Syn(id),
            Event::CallSyn(0, id),
        ];
        for pair in order.windows(2) {
            assert!(pair[0].pack() < pair[1].pack(), "{pair:?}");
        }
        // Then by attempt number, then by user.
        let later = AttemptId {
            user: 0,
            generation: 4,
        };
        assert!(Event::Deadline(id).pack() < Event::Deadline(later).pack());
        assert!(Event::Due(1).pack() < Event::Due(2).pack());
    }
}
