//! The callers of one server: the client's users, or a tier's calls
//! inward (docs/chains.md). Each layer of a chain is one: the
//! client's users call the first tier (or the backend), tier `t`'s calls
//! call the next tier (or the backend). A layer holds what a client
//! process holds: its users' state machines and attempts in flight, its
//! throttle, its recorder and its connections to the server it calls: a
//! pool of keep-alive connections (HTTP/1.1), or connections carrying
//! many streams each (HTTP/2). A tier's calls are sessions of one
//! request each, in slots that later calls reuse, with what the tier
//! keeps beside each.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, UNIX_EPOCH};

use rand::rngs::Xoshiro256PlusPlus;

use super::event::AttemptId;
use super::live::Live;
use super::slot::Slot;
use crate::model::client::ClientConfig;
use crate::model::multiplex::{Conn, Multiplex};
use crate::model::outcome::{Hints, Outcome};
use crate::model::server::ServerConfig;
use crate::model::service::Refusal;
use crate::model::user::{Rules, User};
use crate::model::wire::Transport;
use crate::policy::{RetryLimits, Throttle, format_retry_after, parse_retry_after};
use crate::report::counts::ClientRecorder;

/// How the server a layer calls answers what it does not serve, as its
/// callers read the answer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answers {
    /// The server's `Retry-After` as a client reads it.
    retry_after: Option<Duration>,
    /// The server's gRPC pushback, if it sends one with its refusals.
    pushback_ms: Option<i64>,
    /// The status of a shed request (429 is a throttling answer).
    shed_status: u16,
    /// The status of a failing backend's failures (429 too).
    fail_status: u16,
}

impl Answers {
    /// How a server of `config` answers.
    pub(super) fn of(config: &ServerConfig) -> Self {
        Answers {
            retry_after: config
                .shed
                .and_then(|s| parse_retry_after(&format_retry_after(s.retry_after), UNIX_EPOCH)),
            pushback_ms: config.pushback_ms,
            shed_status: config.shed.map_or(503, |s| s.status),
            fail_status: config.fail.map_or(500, |f| f.status),
        }
    }

    /// What a refusal at the door tells its caller; only shedding sends
    /// `Retry-After`, and a failure (an error, not a push-back) no
    /// pushback either.
    pub(super) fn refusal(&self, why: Refusal) -> Hints {
        let shed = why == Refusal::Shed;
        let status = match why {
            Refusal::Shed => self.shed_status,
            Refusal::Failed => self.fail_status,
            _ => 503,
        };
        Hints {
            retry_after: self.retry_after.filter(|_| shed),
            pushback_ms: self.pushback_ms.filter(|_| why != Refusal::Failed),
            // As the networked client reads an answer.
            throttled: status == 429,
            // The networked server sends x-amz-retry-after beside
            // Retry-After, the same wait in milliseconds.
            amz_retry_after: self.retry_after.filter(|_| shed),
            throttle_code: false,
            status: Some(status),
            grpc: None,
        }
    }

    /// What a request dropped from the server's queue tells its caller:
    /// a 503, with the pushback if the server sends one.
    pub(super) fn dropped(&self) -> Hints {
        Hints {
            pushback_ms: self.pushback_ms,
            status: Some(503),
            ..Hints::default()
        }
    }
}

/// What a tier keeps beside each of its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Call {
    /// The caller's attempt the call's end answers, while that caller
    /// waits; `None` once it has gone (the answer then goes nowhere).
    pub(super) upstream: Option<AttemptId>,
    /// The call's deadline across its attempts: the tier's own, or less
    /// when the caller's remaining time was propagated.
    pub(super) deadline: Option<Duration>,
    /// How the call's last attempt ended, which decides between 503 and
    /// 504 when the call fails.
    pub(super) last: Option<Outcome>,
}

/// The callers of one server.
#[derive(Clone)]
pub(super) struct Layer {
    /// What every user (or call) of the layer follows; a call's own
    /// deadline is in [`Layer::calls`].
    pub(super) rules: Rules,
    pub(super) slots: Vec<Slot>,
    /// Each slot's attempt in flight, in sync with `slots`.
    pub(super) live: Live,
    pub(super) throttle: Option<Throttle>,
    pub(super) recorder: ClientRecorder,
    /// Idle keep-alive connections to the server called (HTTP/1.1).
    pub(super) pool: u64,
    /// The connections to the server called and their streams, when the
    /// layer speaks HTTP/2 (its attempts are streams, `pool` unused).
    pub(super) mux: Option<Multiplex>,
    /// Over HTTP/2, the streams written to the server called while it is
    /// stopped, each with its connection: at its resume, those reset by
    /// then count towards the connection's GOAWAY.
    pub(super) unread: Vec<(AttemptId, Conn)>,
    /// Connections the layer set out to open (first SYNs), and SYNs the
    /// server's full backlog dropped (first ones and retransmissions).
    pub(super) connects: u64,
    pub(super) syns_dropped: u64,
    /// How the server called answers refusals.
    pub(super) answers: Answers,
    /// Users waiting for a rate limiter's token, longest first, with the
    /// number of their wait.
    pub(super) waiters: VecDeque<(u32, u32)>,
    /// Slots whose session has left, to be taken by the next ones.
    pub(super) free: Vec<u32>,
    /// Per slot, for a tier's calls: what the tier keeps beside the call.
    /// Empty for the client's users.
    pub(super) calls: Vec<Call>,
}

impl Layer {
    /// Callers under `config` (its rules and its throttle) of a server of
    /// `called`, in `slots`: the client's closed population (open
    /// traffic's sessions come later), or none yet for a tier's calls.
    pub(super) fn new(config: &ClientConfig, called: &ServerConfig, slots: Vec<Slot>) -> Layer {
        Layer {
            rules: config.rules(),
            live: Live::new(slots.len()),
            slots,
            throttle: config.throttle.map(Throttle::new),
            recorder: ClientRecorder::new(),
            pool: 0,
            mux: multiplexed(config).then(|| Multiplex::new(called.max_streams)),
            unread: Vec::new(),
            connects: 0,
            syns_dropped: 0,
            answers: Answers::of(called),
            waiters: VecDeque::new(),
            free: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// Puts a session in a free slot (or a new one) and returns the slot.
    /// A slot taken again keeps its attempt numbers and its count of
    /// waits, so that events of the session before are stale.
    pub(super) fn take_slot(&mut self, user: User<Xoshiro256PlusPlus>) -> u32 {
        match self.free.pop() {
            Some(free) => {
                self.slots[free as usize].user = user;
                free
            }
            None => {
                self.slots.push(Slot::of(user));
                self.live.grow(self.slots.len());
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Takes a slot for a tier's call, kept beside it as `call`.
    pub(super) fn take_call(&mut self, user: User<Xoshiro256PlusPlus>, call: Call) -> u32 {
        let slot = self.take_slot(user);
        match self.calls.get_mut(slot as usize) {
            Some(kept) => *kept = call,
            None => self.calls.push(call),
        }
        debug_assert_eq!(self.calls.len(), self.slots.len());
        slot
    }
}

/// Whether a client of `config` sends its attempts as HTTP/2 streams (a
/// run checks first that the server it calls keeps connections open).
fn multiplexed(config: &ClientConfig) -> bool {
    config.wire.transport == Transport::Http2
}

/// The rules `user` of a layer (the client's: `C`) follows: the layer's,
/// but for a call's own deadline (a copy made only then: the client's
/// users share one).
#[inline(always)]
pub(super) fn rules_of<'a, const C: bool>(
    rules: &'a Rules,
    calls: &[Call],
    user: u32,
) -> Cow<'a, Rules> {
    if C {
        return Cow::Borrowed(rules);
    }
    match calls.get(user as usize) {
        Some(call) if call.deadline != rules.limits.deadline => Cow::Owned(Rules {
            limits: RetryLimits {
                deadline: call.deadline,
                ..rules.limits
            },
            ..*rules
        }),
        _ => Cow::Borrowed(rules),
    }
}
