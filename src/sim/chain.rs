//! Service chains in virtual time (docs/chains.md): what a tier
//! does with a request once its own work for it is done.
//!
//! A tier is a server like the backend (a `Host`: any shape, any defence,
//! its backlog) whose handler, once its service lets a request leave as
//! served, calls the next tier inward (or the backend) under its own
//! client policy. The call is the client's `User` state machine as a
//! session of one request, in a layer of calls of its own (its throttle,
//! its pool of connections, its recorder), drawing from the stream of its
//! number among the tier's calls. When the call's request ends, the tier
//! answers the attempt it serves: 200 if the call succeeded, 504 if its
//! last attempt timed out, 503 otherwise (`TierAnswer`). Until then the
//! tier holds the request: the caller's attempt is `State::Calling`. A
//! request the tier's service refuses or drops is answered at once, as
//! the backend answers.
//!
//! - Deadlines: every attempt carries its deadline to the server it
//!   calls. A tier that propagates deadlines answers 504 without work a
//!   request read after its deadline (at resume, say), and gives its call
//!   what is left of the caller's time (`TierCall::rules_for`); none left
//!   when its own work ends: 504 without calling. The call's last attempt
//!   then times out at the caller's deadline, and its timeout comes
//!   before the caller's at that instant (inner layers first): the caller
//!   gets the 504.
//! - A caller that goes (its attempt timed out, or lost to a hedge) while
//!   the tier calls for it: a tier that propagates cancellation cancels
//!   the call (its attempts' connections close, so the next server's
//!   `--on-disconnect` applies as to a client's timeout, and no retry
//!   follows); otherwise the call runs to its end and its answer goes
//!   nowhere. A tier that propagates cancellation makes no call for a
//!   caller already gone when its own work ends; one that does not, calls
//!   anyway (its handler never noticed).
//! - A stopped tier is a stopped process: its server reads nothing (its
//!   backlog fills, SYNs drop, as for the backend), it makes no call and
//!   answers nothing, and nothing its calls do is acted upon: callers
//!   that went, answers that came from inward (the next server has sent
//!   them), attempts falling due, timeouts and retransmitted SYNs all wait
//!   for the resume, where its server first reads what waits, then the
//!   tier cancels the calls of callers gone, reads the answers, and takes
//!   its calls' due attempts and timers, in that order. Its report ticks
//!   are missed and one comes at the resume, as the backend's.

use std::time::Duration;

use super::engine::Engine;
use super::event::{AttemptId, Event};
use super::layer::{Call, rules_of};
use super::slot::{State, in_flight};
use super::tier::Incoming;
use crate::model::arrivals::user_rng;
use crate::model::outcome::{Hints, Outcome};
use crate::model::service::Exit;
use crate::model::tier::TierAnswer;
use crate::model::user::User;

impl Engine {
    /// Tier `t`'s departures due by `now`: it calls inward for those it
    /// served, and answers those dropped from its queue with a 503.
    #[inline(never)]
    pub(super) fn complete_tier(&mut self, t: usize, now: Duration) {
        let tier = &mut self.tiers[t];
        let mut left = std::mem::take(&mut tier.left);
        let layer = t.checked_sub(1).map_or(&self.client, |c| &self.calls[c]);
        // A caller that went during the tier's own work gets no call: the
        // real tier's HTTP server drops its handler when it notices, and
        // only its own work goes on (or stops, as --on-disconnect says).
        tier.host.advance(now, |request, exit| {
            let waiting = in_flight(&layer.live, &layer.slots, request.id);
            if waiting {
                left.push((request, exit, waiting));
            }
            waiting
        });
        for (request, exit, waiting) in left.drain(..) {
            // A hedge answered at the same instant as the winner was
            // cancelled just now.
            let still = waiting && self.in_flight_of(t, request.id);
            match exit {
                Exit::Served if still => self.call_for(t, request, true, now),
                Exit::Served => {
                    self.tiers[t].gone_in_call += 1;
                    self.calls[t].recorder.caller_gone_mut();
                }
                _ if still && t == 0 => self.answer::<true>(t, request.id, exit, now),
                _ if still => self.answer::<false>(t, request.id, exit, now),
                _ => {}
            }
        }
        self.tiers[t].left = left;
    }

    /// Tier `t` has done its own work for `request` at `now` (its caller
    /// still `waiting` or not): it calls inward, or answers 504 if the
    /// caller's propagated deadline has passed.
    fn call_for(&mut self, t: usize, request: Incoming, waiting: bool, now: Duration) {
        let tier = &mut self.tiers[t];
        if !waiting && tier.call.propagate_cancel {
            return;
        }
        let remaining = tier.call.remaining(Some(request.deadline), now);
        let Some(rules) = tier.call.rules_for(remaining) else {
            tier.answers.count(TierAnswer::GatewayTimeout);
            if waiting {
                let hints = Hints {
                    status: Some(504),
                    ..Hints::default()
                };
                self.reply_to(t, request.id, Outcome::Error, hints, now);
            }
            return;
        };
        let rng = user_rng(tier.call.client.seed, tier.calls_made);
        tier.calls_made += 1;
        tier.host.hold_call();
        let call = Call {
            upstream: waiting.then_some(request.id),
            deadline: rules.limits.deadline,
            last: None,
        };
        let user = User::arriving(&rules, rng, now, 1);
        let slot = self.calls[t].take_call(user, call);
        self.calls[t].recorder.session_arrived_mut();
        if waiting {
            self.set_state(t, request.id, State::Calling(slot));
        }
        self.schedule::<false>(t + 1, slot, now, false);
    }

    /// Attempt `id` of layer `l` is now `state`, if still in flight.
    fn set_state(&mut self, l: usize, id: AttemptId, state: State) {
        let layer = match l {
            0 => &mut self.client,
            _ => &mut self.calls[l - 1],
        };
        let slot = &mut layer.slots[id.user as usize];
        if let Some(at) = slot.position(id) {
            slot.flights.get_mut(at).state = state;
        }
    }

    /// The call in `slot` of tier `t` has ended (`ok`: it succeeded): the
    /// tier answers its caller, if that one still waits.
    pub(super) fn call_ended(&mut self, t: usize, slot: u32, ok: bool, now: Duration) {
        let layer = &mut self.calls[t];
        debug_assert!(layer.slots[slot as usize].user.is_gone());
        let call = std::mem::replace(
            &mut layer.calls[slot as usize],
            Call {
                upstream: None,
                deadline: None,
                last: None,
            },
        );
        layer.free.push(slot);
        layer.recorder.session_left_mut();
        let tier = &mut self.tiers[t];
        tier.host.release_call();
        let answer = TierAnswer::of(ok, call.last);
        tier.answers.count(answer);
        let Some(upstream) = call.upstream else {
            return;
        };
        // The answer is on its way: the caller's attempt no longer names
        // this slot, which a later call may take.
        self.set_state(t, upstream, State::Waiting);
        let (outcome, hints) = match answer {
            TierAnswer::Ok => (Outcome::Ok, Hints::default()),
            other => (
                Outcome::Error,
                Hints {
                    status: Some(other.status()),
                    ..Hints::default()
                },
            ),
        };
        self.reply_to(t, upstream, outcome, hints, now);
    }

    /// The caller tier `t` calls for in `slot` has gone at `now`: a tier
    /// that propagates cancellation cancels the call (when it runs).
    pub(super) fn caller_gone(&mut self, t: usize, slot: u32, now: Duration) {
        self.calls[t].calls[slot as usize].upstream = None;
        self.calls[t].recorder.caller_gone_mut();
        let tier = &mut self.tiers[t];
        tier.gone_in_call += 1;
        if !tier.call.propagate_cancel {
            return;
        }
        if tier.host.is_stopped() {
            tier.unread.cancels.push(slot);
            return;
        }
        self.abort_call(t, slot, now);
    }

    /// Cancels the call in `slot` of tier `t` at `now`: its attempts in
    /// flight are cancelled, nothing more is due, and its request is
    /// given up.
    fn abort_call(&mut self, t: usize, slot: u32, now: Duration) {
        self.cancel_flights::<false>(t + 1, slot, now);
        let layer = &mut self.calls[t];
        let rules = rules_of::<false>(&layer.rules, &layer.calls, slot);
        let s = &mut layer.slots[slot as usize];
        let record = s.user.cancel(&rules, now);
        debug_assert!(s.user.is_gone());
        layer.recorder.request_finished_mut(record);
        // Its pending attempt and its wait for a token are stale.
        s.due_at = None;
        s.waits = s.waits.wrapping_add(1);
        layer.free.push(slot);
        layer.recorder.session_left_mut();
        let tier = &mut self.tiers[t];
        tier.host.release_call();
        tier.cancelled += 1;
    }

    /// An event of a tier's calls at `now`: acted upon, unless the tier
    /// is stopped (then kept for its resume).
    #[inline(never)]
    pub(super) fn call_event(&mut self, event: Event, now: Duration) {
        let (t, stopped) = match event {
            Event::CallDue(t, _) | Event::CallDeadline(t, _) | Event::CallSyn(t, _) => {
                (t as usize, self.tiers[t as usize].host.is_stopped())
            }
            _ => unreachable!("an event of a tier's calls"),
        };
        match event {
            Event::CallDue(_, user) if stopped => {
                let slot = &mut self.calls[t].slots[user as usize];
                if slot.due_at == Some(now) {
                    slot.due_at = None;
                    self.tiers[t].unread.due.push(user);
                }
            }
            _ if stopped => self.tiers[t].unread.events.push(event),
            Event::CallDue(_, user) => self.due::<false>(t + 1, user, now),
            Event::CallDeadline(_, id) => self.deadline::<false>(t + 1, id, now),
            Event::CallSyn(_, id) => self.syn::<false>(t + 1, id, now),
            _ => {}
        }
    }

    /// SIGCONT of tier `t` at `now`: its server reads what waits (as the
    /// backend does at resume), then the tier takes what happened while it
    /// was stopped: callers gone, answers to its calls, its calls' timers.
    #[inline(never)]
    pub(super) fn resume_tier(&mut self, t: usize, now: Duration) {
        let mut reads = Vec::new();
        let calmed = self.calmed(t, self.tiers[t].host.pending_resets());
        let layer = t.checked_sub(1).map_or(&self.client, |c| &self.calls[c]);
        self.tiers[t].host.resume(
            now,
            |request| !in_flight(&layer.live, &layer.slots, request.id),
            |request| calmed.unread.contains(&request.id),
            |request, fate| reads.push((request.id, fate)),
        );
        self.read_at_resume(t, reads, now);
        self.gone_away(t, &calmed, now);
        let unread = std::mem::take(&mut self.tiers[t].unread);
        for slot in unread.cancels {
            self.abort_call(t, slot, now);
        }
        for (id, outcome, hints) in unread.answers {
            self.reply::<false>(t + 1, id, outcome, hints, now);
        }
        for user in unread.due {
            self.schedule::<false>(t + 1, user, now, false);
        }
        for event in unread.events {
            self.push(now, event);
        }
        self.complete(now);
    }
}
