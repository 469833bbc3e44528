//! A tier of a service chain as the engine holds it (docs/chains.md):
//! its server, what it counts of its calls, and what it has not
//! acted upon while stopped. What a tier does is in `chain.rs`.

use std::time::Duration;

use super::event::{AttemptId, Event};
use super::host::{Host, Request};
use crate::model::outcome::{Hints, Outcome};
use crate::model::server::ServerConfig;
use crate::model::service::Exit;
use crate::model::tier::{TierAnswer, TierCall};

/// A request as a tier's model holds it: the caller's attempt, and the
/// instant that attempt times out (the deadline a tier may propagate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Incoming {
    pub(super) id: AttemptId,
    pub(super) deadline: Duration,
}

impl Incoming {
    /// Attempt `id`, timing out at `deadline`.
    pub(super) fn new(id: AttemptId, deadline: Duration) -> Self {
        Incoming { id, deadline }
    }
}

impl Request for Incoming {
    const TIER: bool = true;

    fn deadline(&self) -> Option<Duration> {
        Some(self.deadline)
    }
}

/// A tier's answers once its own work was done, by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierAnswers {
    /// 200: the call succeeded.
    pub ok: u64,
    /// 503: the call failed (errors, or given up by its policy).
    pub unavailable: u64,
    /// 504: the call's last attempt timed out, or the caller's propagated
    /// deadline had passed when the tier's own work ended.
    pub gateway_timeout: u64,
}

impl TierAnswers {
    /// Counts one answer.
    pub(super) fn count(&mut self, answer: TierAnswer) {
        match answer {
            TierAnswer::Ok => self.ok += 1,
            TierAnswer::Unavailable => self.unavailable += 1,
            TierAnswer::GatewayTimeout => self.gateway_timeout += 1,
        }
    }
}

/// What a stopped tier has not acted upon yet.
#[derive(Debug, Clone, Default)]
pub(super) struct Unread {
    /// Calls whose caller went (cancelled at the resume, by a tier that
    /// propagates cancellation).
    pub(super) cancels: Vec<u32>,
    /// Answers to its calls' attempts, in the order they came.
    pub(super) answers: Vec<(AttemptId, Outcome, Hints)>,
    /// Calls whose next attempt fell due.
    pub(super) due: Vec<u32>,
    /// Its calls' timeouts and retransmitted SYNs.
    pub(super) events: Vec<Event>,
}

/// A tier: its server, and what it counts of its calls.
#[derive(Clone)]
pub(super) struct Tier {
    pub(super) host: Host<Incoming>,
    /// How it calls inward.
    pub(super) call: TierCall,
    /// Calls started so far: the next call draws from this stream.
    pub(super) calls_made: u64,
    pub(super) answers: TierAnswers,
    /// Requests whose caller went while the tier was calling for them.
    pub(super) gone_in_call: u64,
    /// Calls cancelled because their caller went.
    pub(super) cancelled: u64,
    pub(super) unread: Unread,
    /// Requests its service let leave at the instant at hand, how, and
    /// whether their caller waited (kept to reuse its memory).
    pub(super) left: Vec<(Incoming, Exit, bool)>,
}

/// A tier's figures at the end of a run, apart from its report rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TierFigures {
    pub(super) answers: TierAnswers,
    pub(super) expired: u64,
    pub(super) cancelled: u64,
    pub(super) gone_in_call: u64,
    pub(super) peak_held: u64,
}

impl Tier {
    /// A running tier of `server`, calling inward as `call` says.
    pub(super) fn new(server: &ServerConfig, call: &TierCall) -> Self {
        Tier {
            host: Host::new(server),
            call: call.clone(),
            calls_made: 0,
            answers: TierAnswers::default(),
            gone_in_call: 0,
            cancelled: 0,
            unread: Unread::default(),
            left: Vec::new(),
        }
    }

    /// An answer to one of its calls' attempts reached the stopped tier:
    /// read when it resumes.
    pub(super) fn unread(&mut self, id: AttemptId, outcome: Outcome, hints: Hints) {
        self.unread.answers.push((id, outcome, hints));
    }

    /// What the tier counted, for its outcome.
    pub(super) fn figures(&self) -> TierFigures {
        TierFigures {
            answers: self.answers,
            expired: self.host.expired(),
            cancelled: self.cancelled,
            gone_in_call: self.gone_in_call,
            peak_held: self.host.peak_held(),
        }
    }
}
