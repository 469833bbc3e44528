//! An attempt's course through the engine, for the callers of any layer
//! (the client's users, or a tier's calls): due, sent, delivered to the
//! server its layer calls, answered or timed out, and what its user does
//! next. Layer `l`'s attempts go to the server after it: tier `l`, or the
//! backend after the last tier.
//!
//! Each step is compiled twice, for the client's layer (`C`: layer 0,
//! a field of the engine, its events the kinds they were before chains)
//! and for a tier's calls, so that a run without tiers takes the path it
//! took before them; a step that reaches another layer picks the copy by
//! the layer's number.

use std::time::Duration;

use super::engine::Engine;
use super::event::{AttemptId, CALL_GENERATION_MASK, Event, GENERATION_MASK};
use super::host::Delivery;
use super::layer::{Layer, rules_of};
use super::slot::{Flight, State, in_flight};
use crate::model::multiplex::{Conn, Route};
use crate::model::outcome::{Hints, Outcome};
use crate::model::units::nanos;
use crate::model::user::Attempt;

/// The least time an attempt answered at once takes before its user can
/// try again (a loopback round trip, or one pass of a client's event
/// loop): without it, a zero retry delay against an instant refusal would
/// stop virtual time.
const INSTANT_ANSWER: Duration = Duration::from_micros(100);

/// Linux's SYN retransmissions (`tcp_syn_retries`) before a connect fails.
const SYN_RETRIES: u32 = 6;
/// Linux's initial retransmission timeout; each retransmission doubles it.
const SYN_TIMEOUT: Duration = Duration::from_secs(1);

/// The event of a user's next attempt, in layer `l`.
#[inline(always)]
fn due_event<const C: bool>(l: usize, user: u32) -> Event {
    match C {
        true => Event::Due(user),
        false => Event::CallDue(l as u32 - 1, user),
    }
}

/// The timeout of attempt `id`, of layer `l`.
#[inline(always)]
fn deadline_event<const C: bool>(l: usize, id: AttemptId) -> Event {
    match C {
        true => Event::Deadline(id),
        false => Event::CallDeadline(l as u32 - 1, id),
    }
}

/// The retransmitted SYN of attempt `id`, of layer `l`.
fn syn_event<const C: bool>(l: usize, id: AttemptId) -> Event {
    match C {
        true => Event::Syn(id),
        false => Event::CallSyn(l as u32 - 1, id),
    }
}

impl Engine {
    /// Layer `l`: the client's (`C`), or a tier's calls.
    #[inline(always)]
    pub(super) fn layer<const C: bool>(&self, l: usize) -> &Layer {
        debug_assert_eq!(C, l == 0);
        match C {
            true => &self.client,
            false => &self.calls[l - 1],
        }
    }

    /// Layer `l`, to change it.
    #[inline(always)]
    pub(super) fn layer_mut<const C: bool>(&mut self, l: usize) -> &mut Layer {
        debug_assert_eq!(C, l == 0);
        match C {
            true => &mut self.client,
            false => &mut self.calls[l - 1],
        }
    }

    /// Whether attempt `id` of layer `l` is still in flight.
    #[inline]
    pub(super) fn in_flight<const C: bool>(&self, l: usize, id: AttemptId) -> bool {
        let layer = self.layer::<C>(l);
        in_flight(&layer.live, &layer.slots, id)
    }

    /// [`Engine::in_flight`] for a layer known by its number only.
    pub(super) fn in_flight_of(&self, l: usize, id: AttemptId) -> bool {
        match l {
            0 => self.in_flight::<true>(l, id),
            _ => self.in_flight::<false>(l, id),
        }
    }

    /// Where attempt `id` of layer `l` is, if still in flight.
    pub(super) fn current<const C: bool>(&self, l: usize, id: AttemptId) -> Option<State> {
        let layer = self.layer::<C>(l);
        if layer.live.of(id) == Some(false) {
            return None;
        }
        let slot = &layer.slots[id.user as usize];
        slot.position(id)
            .map(|at| slot.flights.iter().nth(at).expect("in flight").state)
    }

    /// A user's attempt falls due at `now` (unless the event is stale).
    pub(super) fn due<const C: bool>(&mut self, l: usize, user: u32, now: Duration) {
        let layer = self.layer_mut::<C>(l);
        let slot = &mut layer.slots[user as usize];
        if slot.due_at != Some(now) {
            return;
        }
        slot.due_at = None;
        let rules = rules_of::<C>(&layer.rules, &layer.calls, user);
        match slot.user.begin(&rules, layer.throttle.as_mut(), now) {
            Attempt::Wait => {
                slot.waits = slot.waits.wrapping_add(1);
                layer.waiters.push_back((user, slot.waits));
                self.schedule::<C>(l, user, now, false);
            }
            Attempt::Refused(request) => {
                layer.recorder.request_finished_mut(request);
                self.schedule::<C>(l, user, now, true);
                self.request_ended::<C>(l, user, false, now);
            }
            Attempt::Rejected(finished) => {
                let ended = finished.request.is_some();
                layer.recorder.finished_mut(finished);
                if !C {
                    layer.calls[user as usize].last = Some(Outcome::Error);
                }
                self.schedule::<C>(l, user, now, true);
                if ended {
                    self.request_ended::<C>(l, user, false, now);
                }
            }
            // A refused hedge, or (grpc-js) a failure's timer with nothing
            // to send: whatever is due later.
            Attempt::Held => self.schedule::<C>(l, user, now, false),
            Attempt::Send { deadline, sent } => {
                layer.recorder.attempt_started_mut();
                let id = AttemptId {
                    user,
                    generation: slot.generation,
                };
                let mask = if C {
                    GENERATION_MASK
                } else {
                    CALL_GENERATION_MASK
                };
                slot.generation = (slot.generation + 1) & mask;
                // Over HTTP/2 a stream on an open connection, or on the
                // one to be opened for it.
                let (pooled, conn) = match &mut layer.mux {
                    None => (layer.pool > 0, NO_CONN),
                    Some(mux) => match mux.stream() {
                        Route::Open(conn) => (true, conn),
                        Route::New => (false, mux.next_conn()),
                    },
                };
                slot.flights.push(Flight {
                    generation: id.generation,
                    state: State::Waiting,
                    sent,
                    conn,
                });
                layer.live.set(user, slot.flights.generations());
                layer.pool -= u64::from(pooled && layer.mux.is_none());
                self.push(deadline.max(now), deadline_event::<C>(l, id));
                let delivery = self.send(l, now, id, deadline, pooled);
                let layer = self.layer_mut::<C>(l);
                layer.connects += u64::from(!pooled);
                layer.syns_dropped += u64::from(delivery == Delivery::Dropped);
                if !pooled && delivery != Delivery::Dropped {
                    self.connected::<C>(l);
                }
                self.delivered::<C>(l, id, delivery, now, 0, deadline);
                // A hedging user's next hedge (an instant refusal has
                // scheduled what follows it already).
                if self.in_flight::<C>(l, id) {
                    self.schedule::<C>(l, user, now, false);
                }
            }
        }
    }

    /// Acts on what the server called did with attempt `id` of layer `l`
    /// at `now`; `tries` SYNs were dropped before, and the attempt times
    /// out at `deadline`.
    pub(super) fn delivered<const C: bool>(
        &mut self,
        l: usize,
        id: AttemptId,
        delivery: Delivery,
        now: Duration,
        tries: u32,
        deadline: Duration,
    ) {
        let state = match delivery {
            Delivery::Admitted(ticket) => State::Admitted(ticket),
            Delivery::Waiting => {
                self.unread_stream::<C>(l, id);
                State::Waiting
            }
            Delivery::Dropped => {
                let backoff = SYN_TIMEOUT * (1u32 << tries.min(16));
                self.push(now + backoff, syn_event::<C>(l, id));
                // The deadline goes with the request only to a tier.
                let to_tier = l < self.tiers.len();
                State::Connecting {
                    tries: tries + 1,
                    deadline: if to_tier { nanos(deadline) } else { 0 },
                }
            }
            Delivery::Refused(why) => {
                // The refusal comes back on a connection that stays open.
                self.kept_open::<C>(l);
                let hints = self.layer_mut::<C>(l).answers.refusal(why);
                self.end::<C>(l, id, Outcome::Error, hints, now, true);
                return;
            }
            Delivery::Expired => {
                self.kept_open::<C>(l);
                let hints = Hints {
                    status: Some(504),
                    ..Hints::default()
                };
                self.end::<C>(l, id, Outcome::Error, hints, now, true);
                return;
            }
        };
        let slot = &mut self.layer_mut::<C>(l).slots[id.user as usize];
        if let Some(at) = slot.position(id) {
            slot.flights.get_mut(at).state = state;
        }
    }

    /// Ends attempt `id` of layer `l` at `now` (`instant` if it was
    /// answered the moment it was sent) and schedules what comes next; if
    /// it ended its request, the request's other attempts (hedges that
    /// lost) are cancelled.
    pub(super) fn end<const C: bool>(
        &mut self,
        l: usize,
        id: AttemptId,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
        instant: bool,
    ) {
        let layer = &mut self.layer_mut::<C>(l);
        let slot = &mut layer.slots[id.user as usize];
        let Some(at) = slot.position(id) else {
            return;
        };
        let flight = slot.flights.swap_remove(at);
        let sent = flight.sent;
        layer.live.set(id.user, slot.flights.generations());
        let rules = rules_of::<C>(&layer.rules, &layer.calls, id.user);
        let finished = slot
            .user
            .finish(&rules, layer.throttle.as_mut(), sent, outcome, hints, now);
        layer.recorder.finished_mut(finished);
        stream_ended(layer, &flight);
        if !C {
            layer.calls[id.user as usize].last = Some(outcome);
        }
        if finished.request.is_some() {
            self.cancel_flights::<C>(l, id.user, now);
        }
        self.schedule::<C>(l, id.user, now, instant);
        if let Some(request) = finished.request {
            self.request_ended::<C>(l, id.user, request.latency.is_some(), now);
        }
        if finished.wake_a_waiter {
            self.wake_a_waiter::<C>(l, now);
        }
    }

    /// A user's request has ended (`ok`: it succeeded): a session of open
    /// traffic that made its last leaves; a tier's call answers its caller.
    fn request_ended<const C: bool>(&mut self, l: usize, user: u32, ok: bool, now: Duration) {
        match C {
            true => self.retire_if_gone(user),
            false => self.call_ended(l - 1, user, ok, now),
        }
    }

    /// The next session of open traffic arrives at `now`: it takes a free
    /// slot (or a new one) and its first attempt is due at once, unless
    /// the client holds its bound of sessions; the arrival after it is
    /// queued.
    pub(super) fn arrival(&mut self, now: Duration) {
        let client = &mut self.client;
        let source = self.source.as_mut().expect("arrivals come from a source");
        let admitted = source.arrive(&client.rules, client.recorder.outstanding());
        let next = source.next_at();
        self.push(next, Event::Arrival);
        let client = &mut self.client;
        let Some(session) = admitted else {
            client.recorder.arrival_refused_mut();
            return;
        };
        client.recorder.session_arrived_mut();
        let user = client.take_slot(session.user);
        self.schedule::<true>(0, user, now, false);
    }

    /// Frees the slot of a client's session that has made its last
    /// request.
    fn retire_if_gone(&mut self, user: u32) {
        let client = &mut self.client;
        let slot = &client.slots[user as usize];
        if slot.user.is_gone() {
            debug_assert!(slot.flights.iter().next().is_none() && slot.due_at.is_none());
            client.free.push(user);
            client.recorder.session_left_mut();
        }
    }

    /// Wakes the user of layer `l` that has waited longest for a token to
    /// look again.
    fn wake_a_waiter<const C: bool>(&mut self, l: usize, now: Duration) {
        let layer = &mut self.layer_mut::<C>(l);
        while let Some((user, wait)) = layer.waiters.pop_front() {
            let slot = &mut layer.slots[user as usize];
            if slot.waits == wait && slot.user.wake(now) {
                self.schedule::<C>(l, user, now, false);
                return;
            }
        }
    }

    /// Cancels a user's attempts still in flight: their connections close
    /// (a tier calling for one is told its caller has gone).
    pub(super) fn cancel_flights<const C: bool>(&mut self, l: usize, user: u32, now: Duration) {
        let layer = &mut self.layer_mut::<C>(l);
        let mut flights = std::mem::take(&mut layer.slots[user as usize].flights);
        layer.live.set(user, std::iter::empty());
        flights.clear_with(|flight| {
            let layer = &mut self.layer_mut::<C>(l);
            let record = flight.sent.cancel(layer.throttle.as_mut(), now);
            layer.recorder.attempt_finished_mut(record);
            stream_ended(layer, flight);
            match flight.state {
                State::Admitted(ticket) => self.recomplete |= self.disconnect(l, now, ticket),
                State::Calling(call) => self.caller_gone(l, call, now),
                State::Connecting { .. } | State::Waiting => {}
            }
        });
        // Keep the memory.
        self.layer_mut::<C>(l).slots[user as usize].flights = flights;
    }

    /// Queues a user's next attempt, if one is due; after an instant
    /// answer, no sooner than a round trip later.
    pub(super) fn schedule<const C: bool>(
        &mut self,
        l: usize,
        user: u32,
        now: Duration,
        instant: bool,
    ) {
        let slot = &mut self.layer_mut::<C>(l).slots[user as usize];
        let Some(due) = slot.user.due() else {
            slot.due_at = None;
            return;
        };
        // A hedge due a delay after a copy that went late is due now, not
        // in the past.
        let due = if instant {
            due.max(now + INSTANT_ANSWER)
        } else {
            due.max(now)
        };
        if slot.due_at == Some(due) {
            return;
        }
        slot.due_at = Some(due);
        self.push(due, due_event::<C>(l, user));
    }

    /// Attempt `id` of layer `l` times out at `now`, unless it has ended.
    pub(super) fn deadline<const C: bool>(&mut self, l: usize, id: AttemptId, now: Duration) {
        self.lost::<C>(l, id, Outcome::Timeout, now);
    }

    /// Attempt `id` of layer `l` ends at `now` with `outcome` while the
    /// server still holds it, unless it has ended: a timeout, or its
    /// connection closed. The server learns its client has gone.
    pub(super) fn lost<const C: bool>(
        &mut self,
        l: usize,
        id: AttemptId,
        outcome: Outcome,
        now: Duration,
    ) {
        let Some(state) = self.current::<C>(l, id) else {
            return;
        };
        self.end::<C>(l, id, outcome, Hints::default(), now, false);
        match state {
            // A cancellation lowers the delay: others may be done at once.
            State::Admitted(ticket) => {
                if self.disconnect(l, now, ticket) {
                    self.complete(now);
                }
            }
            State::Calling(call) => {
                self.caller_gone(l, call, now);
                if std::mem::take(&mut self.recomplete) {
                    self.complete(now);
                }
            }
            State::Connecting { .. } | State::Waiting => {}
        }
    }

    /// The retransmitted SYN of attempt `id` of layer `l` arrives at
    /// `now`, unless the attempt has ended.
    pub(super) fn syn<const C: bool>(&mut self, l: usize, id: AttemptId, now: Duration) {
        let Some(State::Connecting { tries, deadline }) = self.current::<C>(l, id) else {
            return;
        };
        if tries > SYN_RETRIES {
            self.end::<C>(l, id, Outcome::Error, Hints::default(), now, false);
            return;
        }
        let deadline = Duration::from_nanos(deadline);
        let delivery = self.retry_connect(l, now, id, deadline);
        self.layer_mut::<C>(l).syns_dropped += u64::from(delivery == Delivery::Dropped);
        if delivery != Delivery::Dropped
            && let Some(conn) = self.connected::<C>(l)
        {
            // Connected: the attempt is a stream on the new connection,
            // written, whatever the server does with it next.
            let slot = &mut self.layer_mut::<C>(l).slots[id.user as usize];
            if let Some(at) = slot.position(id) {
                let flight = slot.flights.get_mut(at);
                flight.state = State::Waiting;
                flight.conn = conn;
            }
        }
        self.delivered::<C>(l, id, delivery, now, tries, deadline);
    }

    /// A new connection of layer `l` has opened for an attempt: over
    /// HTTP/2 it carries that attempt's stream, and later ones; it is
    /// returned.
    fn connected<const C: bool>(&mut self, l: usize) -> Option<Conn> {
        let layer = self.layer_mut::<C>(l);
        let mux = layer.mux.as_mut()?;
        let conn = mux.opened();
        layer.recorder.set_connections(mux.connections());
        Some(conn)
    }

    /// Attempt `id` of layer `l` waits unread in a stopped server: over
    /// HTTP/2, noted with its connection for the server's resume.
    fn unread_stream<const C: bool>(&mut self, l: usize, id: AttemptId) {
        let layer = self.layer_mut::<C>(l);
        if layer.mux.is_none() {
            return;
        }
        let slot = &layer.slots[id.user as usize];
        if let Some(at) = slot.position(id) {
            let conn = slot.flights.iter().nth(at).expect("in flight").conn;
            layer.unread.push((id, conn));
        }
    }
}

/// The connection of an attempt that has none (HTTP/1.1's).
pub(super) const NO_CONN: Conn = Conn(u32::MAX);

/// An attempt of `layer` has ended (answered, timed out or cancelled):
/// over HTTP/2 its stream's slot is free at once (a timeout or a cancel
/// resets the stream; the connection stays), unless it never had one
/// (its SYN was still unanswered).
fn stream_ended(layer: &mut Layer, flight: &Flight) {
    if let Some(mux) = &mut layer.mux
        && !matches!(flight.state, State::Connecting { .. })
    {
        mux.ended(flight.conn);
    }
}
