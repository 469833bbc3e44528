//! One simulated user's request cycle, as a pure state machine: think, try,
//! retry under the policy until OK or given up, think again.
//!
//! Both engines drive this same code: the real client with the wall clock
//! and a socket per attempt, the virtual-time engine with its event queue. Time is a [`Duration`] since the
//! engine's epoch, added with saturation (an absurd think time or
//! `Retry-After` means "never", not a panic); nothing here reads a clock.

use std::time::Duration;

use rand::Rng;

use super::arrivals::ThinkTime;
use super::outcome::{AttemptRecord, Hints, Outcome, RequestRecord};
use crate::policy::shipped::grpc_retryable;
use crate::policy::{
    Answer, AttemptKind, Backoff, Decision, Failure, Hedges, Hedging, Next, RetryLimits, Strategy,
    Throttle,
};

/// What every user of a run shares: think times, timeout and policy.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Think-time distribution between a user's logical requests.
    pub think: ThinkTime,
    /// Time an attempt may take, from its intended start.
    pub timeout: Duration,
    /// Delay schedule between attempts.
    pub strategy: Strategy,
    /// Attempt limit, deadline and `Retry-After` handling.
    pub limits: RetryLimits,
    /// gRPC's hedging instead of retries: several attempts of a request in
    /// flight, the first success wins.
    pub hedging: Option<Hedging>,
}

/// An attempt that went out, as its engine holds it until it ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    /// What the throttle was told of it (and is told again at its end).
    pub kind: AttemptKind,
    /// Its intended start.
    due: Duration,
    /// How late it started.
    lateness: Duration,
}

impl Sent {
    /// Cancels this attempt at `now`, because another attempt of its
    /// request succeeded first; tells the throttle, and returns its record.
    pub fn cancel(&self, throttle: Option<&mut Throttle>, now: Duration) -> AttemptRecord {
        if let Some(t) = throttle {
            t.cancelled(self.kind, now);
        }
        AttemptRecord {
            outcome: Outcome::Cancelled,
            is_retry: self.kind.retry,
            rejected_locally: false,
            latency: now.saturating_sub(self.due),
            lateness: self.lateness,
        }
    }
}

/// What to do with the attempt that is due, once the throttle has spoken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attempt {
    /// Not yet: a rate limiter has no token for it; [`User::due`] now says
    /// when to ask again.
    Wait,
    /// Send it; it times out at `deadline` (since the epoch). Hand `sent`
    /// back when it ends.
    Send {
        /// The instant the attempt is given up as timed out.
        deadline: Duration,
        /// The attempt, for [`User::finish`].
        sent: Sent,
    },
    /// Rejected locally by the throttle: an error that never left the
    /// process; record it.
    Rejected(Finished),
    /// The logical request is given up before this attempt: a throttle
    /// refused a hedge with none in flight, or a wait for a token ran past
    /// the deadline, or (grpc-js) the throttle refused the retry when its
    /// backoff ended, or (grpc-js hedging) a failure's timer fired with
    /// nothing left to send and nothing in flight.
    Refused(RequestRecord),
    /// Nothing goes now; the attempts in flight may still win: the
    /// throttle refused a hedge (and no more go), or (grpc-js) a failure's
    /// timer fired with nothing left to send.
    Held,
}

/// The records an ended attempt produces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    /// How the attempt went.
    pub attempt: AttemptRecord,
    /// How the logical request ended, if this attempt ended it. Attempts
    /// of it still in flight (hedges that lost) are then to be cancelled.
    pub request: Option<RequestRecord>,
    /// The throttle wakes one user waiting for a token (see
    /// [`User::wake`]): the one that has waited longest.
    pub wake_a_waiter: bool,
}

/// A simulated user: its random stream and the state of its current
/// logical request.
#[derive(Debug, Clone)]
pub struct User<R> {
    rng: R,
    /// Intended start of the current logical request's first attempt.
    first: Duration,
    /// Intended start of the attempt due next; `None` while the one sent
    /// is in flight. Hedging keeps its own schedule instead.
    next: Option<Duration>,
    /// The current request's hedges, when hedging.
    hedges: Option<Hedges>,
    backoff: Backoff,
    /// Attempts of the current request so far, local rejections included.
    attempts: u32,
    /// How the previous attempt of the current request ended, and whether
    /// it was a throttling answer.
    last: Option<(Outcome, bool)>,
    /// When to ask a rate limiter again for the due attempt's token, once
    /// it has made the attempt wait.
    look_again: Option<Duration>,
    /// The throttle is to decide on the retry that is due when it is due
    /// (grpc-js), not at the failure.
    ask_when_due: bool,
    /// Logical requests still to come after the current one: `u64::MAX`
    /// for a user of a closed population (it never leaves), fewer for a
    /// session of open traffic, which leaves when its last one ends.
    more: u64,
    /// The session's last request has ended.
    gone: bool,
}

impl<R: Rng> User<R> {
    /// A user of a closed population, which starts thinking at `now`,
    /// drawing from `rng`, and never leaves.
    pub fn new(rules: &Rules, rng: R, now: Duration) -> Self {
        let mut user = Self::idle(rng, u64::MAX);
        user.next_request(rules, now);
        user
    }

    /// A session of open or partly-open traffic (docs/traffic.md)
    /// that arrives at `now`, drawing from `rng`: its first request is due
    /// at once, then `requests - 1` more with think times between, and it
    /// is gone when the last ends ([`User::is_gone`]). `exponential-2014`
    /// doubles the sleep before an attempt; before an arrival's first one,
    /// that is a think time drawn as a closed user would have slept.
    pub fn arriving(rules: &Rules, rng: R, now: Duration, requests: u64) -> Self {
        let mut user = Self::idle(rng, requests.saturating_sub(1));
        let think = rules.think.sample(&mut user.rng);
        user.request_at(rules, now, think);
        user
    }

    /// A session of partly-open traffic already there at `now`, between
    /// two of its requests: it thinks first, then makes `requests` more.
    pub fn thinking(rules: &Rules, rng: R, now: Duration, requests: u64) -> Self {
        let mut user = Self::idle(rng, requests.max(1));
        user.next_request(rules, now);
        user
    }

    fn idle(rng: R, more: u64) -> Self {
        User {
            rng,
            first: Duration::ZERO,
            next: None,
            hedges: None,
            backoff: Backoff::new(Duration::ZERO),
            attempts: 0,
            last: None,
            look_again: None,
            ask_when_due: false,
            more,
            gone: false,
        }
    }

    /// Whether the user has made its last request and left (a session of
    /// open traffic; a closed population's user never does).
    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// The intended start of the next attempt, or `None` while the user
    /// waits for the attempts in flight.
    pub fn due(&self) -> Option<Duration> {
        if self.look_again.is_some() {
            return self.look_again;
        }
        match &self.hedges {
            Some(h) => h.next(),
            None => self.next,
        }
    }

    /// Whether the next attempt is a retry (or a hedge).
    pub fn is_retry(&self) -> bool {
        self.attempts > 0
    }

    /// What a throttle is told of the attempt that is due: whether it is
    /// a retry, and whether the attempt before it timed out.
    pub fn attempt_kind(&self) -> AttemptKind {
        AttemptKind {
            retry: self.is_retry(),
            after_timeout: self.last.is_some_and(|(o, _)| o == Outcome::Timeout),
            after_throttle: self.last.is_some_and(|(_, throttled)| throttled),
        }
    }

    /// Starts the due attempt at `now`, asking `throttle` (shared by the
    /// process's users) whether it may go: a hedge may be refused, any
    /// attempt rejected locally or made to wait for a token.
    ///
    /// # Panics
    /// If no attempt is due.
    pub fn begin(
        &mut self,
        rules: &Rules,
        throttle: Option<&mut Throttle>,
        now: Duration,
    ) -> Attempt {
        let due = self.due().expect("an attempt is due");
        let kind = self.attempt_kind();
        let waited = self.look_again.take().is_some();
        // A retry held for a token past the request's deadline is not made
        // (the limits refused any that would start past it).
        let past_deadline = rules
            .limits
            .deadline
            .is_some_and(|d| now >= self.first.saturating_add(d));
        if waited && past_deadline && self.hedges.is_none() {
            return self.give_up(rules, now, false);
        }
        if let (Some(h), Some(policy)) = (&mut self.hedges, &rules.hedging)
            && !h.copies_left(policy)
        {
            // grpc-js: a failed copy's timer with none left to send ends
            // the call if none is in flight.
            return match h.nothing_left() {
                true => self.give_up(rules, now, false),
                false => Attempt::Held,
            };
        }
        let mut throttle = throttle;
        // grpc-js decides on a retry when its backoff ends.
        if std::mem::take(&mut self.ask_when_due)
            && let Some(t) = throttle.as_deref_mut()
            && !t.allows_retry(kind, now)
        {
            return self.give_up(rules, now, true);
        }
        let decision = match throttle {
            None => Decision::Allow,
            Some(t) => {
                // A6 asks its throttle for a hedge when the hedge is due
                // (once: not again after a wait for a token); grpc-js
                // never does.
                let hedge = self.hedges.is_some() && kind.retry && !waited;
                let asks = rules
                    .hedging
                    .is_some_and(|p| p.implementation.hedges_ask_throttle());
                if hedge && asks && !t.allows_retry(kind, now) {
                    return self.hedge_refused(rules, now);
                }
                t.before(kind, now, &mut self.rng)
            }
        };
        if let Decision::Wait(wait) = decision {
            self.look_again = Some(now.saturating_add(wait));
            return Attempt::Wait;
        }
        let sent = Sent {
            kind,
            due,
            lateness: now.saturating_sub(due),
        };
        self.attempts += 1;
        self.next = None;
        if let (Some(h), Some(policy)) = (&mut self.hedges, &rules.hedging) {
            h.sent(policy, due);
        }
        self.limit_hedges(rules);
        match decision {
            Decision::Reject => {
                // Never sent: the throttle that rejected it hears nothing.
                let mut finished =
                    self.end(rules, None, sent, Outcome::Error, Hints::default(), now);
                finished.attempt.rejected_locally = true;
                Attempt::Rejected(finished)
            }
            _ => {
                let started = due.saturating_sub(self.first);
                Attempt::Send {
                    deadline: self
                        .first
                        .saturating_add(rules.limits.attempt_end(started, rules.timeout)),
                    sent,
                }
            }
        }
    }

    /// The throttle refused the hedge that was due: no more go; if none
    /// is in flight, the request is given up.
    fn hedge_refused(&mut self, rules: &Rules, now: Duration) -> Attempt {
        if let Some(h) = &mut self.hedges
            && h.in_flight() > 0
        {
            h.refused();
            return Attempt::Held;
        }
        self.give_up(rules, now, true)
    }

    /// Gives the request up at `now` before its due attempt (`throttled`:
    /// because a throttle refused it), and thinks before the next.
    fn give_up(&mut self, rules: &Rules, now: Duration, throttled: bool) -> Attempt {
        let record = RequestRecord {
            attempts: self.attempts,
            latency: None,
            throttled,
        };
        self.next_request(rules, now);
        Attempt::Refused(record)
    }

    /// Ends attempt `sent` at `now`, with what the answer told
    /// (`Retry-After`, gRPC's pushback); tells `throttle` how it ended and,
    /// if the strategy would retry, asks it whether the retry may follow;
    /// schedules what comes next.
    pub fn finish(
        &mut self,
        rules: &Rules,
        throttle: Option<&mut Throttle>,
        sent: Sent,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
    ) -> Finished {
        let mut throttle = throttle;
        let failure = Failure::of(&hints);
        let wake_a_waiter = throttle.as_deref_mut().is_some_and(|t| {
            let answer = match outcome {
                Outcome::Ok => Answer::Ok,
                _ if !self.grpc_counts(rules, &failure) => Answer::NotRetried,
                _ if rules.strategy.throttling(&failure) => Answer::Throttled,
                _ => Answer::Failed,
            };
            t.after(answer, sent.kind, now)
        });
        Finished {
            wake_a_waiter,
            ..self.end(rules, throttle, sent, outcome, hints, now)
        }
    }

    /// Whether gRPC's retry throttling would take a token for `failure`:
    /// a hedged request's status is fatal or not as gRPC maps it, and only
    /// a non-fatal one counts; a gRPC retry policy counts what it retries;
    /// other clients count every failure.
    fn grpc_counts(&self, rules: &Rules, failure: &Failure) -> bool {
        match rules.hedging {
            Some(h) => grpc_retryable(failure.status, failure.grpc, h.non_fatal),
            None => rules.strategy.grpc_counts(failure),
        }
    }

    /// Gives the current request up at `now` because whoever it was made
    /// for has cancelled it (a tier's call whose caller has gone): nothing
    /// more of it is due, and the engine cancels its attempts in flight.
    /// The user thinks before its next request, or leaves.
    pub fn cancel(&mut self, rules: &Rules, now: Duration) -> RequestRecord {
        let record = RequestRecord {
            attempts: self.attempts,
            latency: None,
            throttled: false,
        };
        self.next_request(rules, now);
        record
    }

    /// Whether the user waits for a rate limiter's token.
    pub fn is_waiting(&self) -> bool {
        self.look_again.is_some()
    }

    /// Wakes the user, if it waits for a token, to look again at `now`
    /// (botocore's waiters sleep on a condition that every change of the
    /// rate notifies). False if it was not waiting.
    pub fn wake(&mut self, now: Duration) -> bool {
        match &mut self.look_again {
            Some(at) => {
                *at = (*at).min(now);
                true
            }
            None => false,
        }
    }

    fn end(
        &mut self,
        rules: &Rules,
        throttle: Option<&mut Throttle>,
        sent: Sent,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
    ) -> Finished {
        let attempt = AttemptRecord {
            outcome,
            is_retry: sent.kind.retry,
            rejected_locally: false,
            latency: now.saturating_sub(sent.due),
            lateness: sent.lateness,
        };
        self.last = Some((outcome, rules.strategy.throttling(&Failure::of(&hints))));
        let elapsed = now.saturating_sub(self.first);
        let attempts = self.attempts;
        let ended = |latency, throttled| RequestRecord {
            attempts,
            latency,
            throttled,
        };
        let request = if outcome == Outcome::Ok {
            Some(ended(Some(elapsed), false))
        } else if let (Some(_), Some(policy)) = (&self.hedges, &rules.hedging)
            && !grpc_retryable(hints.status, hints.grpc, policy.non_fatal)
        {
            // A fatal status commits the hedged call: it ends with it, and
            // the copies still out are cancelled.
            Some(ended(None, false))
        } else if let (Some(h), Some(policy)) = (&mut self.hedges, &rules.hedging) {
            // Hedging is gRPC's: it always reads the pushback.
            let failed_now = h.failed(policy, hints.pushback_ms, now);
            self.limit_hedges(rules);
            (failed_now || self.hedges.is_some_and(|h| h.is_over())).then(|| ended(None, false))
        } else {
            match self.retry_after_failure(rules, throttle, hints, now, elapsed) {
                Retry::Scheduled => None,
                Retry::GivenUp => Some(ended(None, false)),
                Retry::Refused => Some(ended(None, true)),
            }
        };
        if request.is_some() {
            self.next_request(rules, now);
        }
        Finished {
            attempt,
            request,
            wake_a_waiter: false,
        }
    }

    /// Schedules the retry of a failed attempt, if the strategy, the
    /// limits and the throttle agree, in that order (botocore's).
    fn retry_after_failure(
        &mut self,
        rules: &Rules,
        throttle: Option<&mut Throttle>,
        hints: Hints,
        now: Duration,
        elapsed: Duration,
    ) -> Retry {
        // A gRPC client obeys the server's pushback: negative, no retry;
        // otherwise exactly that delay, the backoff started over.
        // The AWS SDKs up to botocore 1.43 do not retry a bare 429.
        if !rules.strategy.retries(&Failure::of(&hints)) {
            return Retry::GivenUp;
        }
        let pushback = hints
            .pushback_ms
            .filter(|_| rules.strategy.honours_pushback());
        let proposed = match pushback {
            Some(ms) if ms >= 0 => {
                self.backoff.restart();
                Duration::from_millis(ms.unsigned_abs())
            }
            _ => {
                let failure = Failure::of(&hints);
                self.backoff
                    .next_delay_after(&rules.strategy, failure, &mut self.rng)
            }
        };
        // With a pushback the delay is exact: Retry-After does not
        // stretch it.
        let retry_after = hints.retry_after.filter(|_| pushback.is_none());
        if pushback.is_some_and(|ms| ms < 0) {
            return Retry::GivenUp;
        }
        let Next::Retry(delay) = rules
            .limits
            .next(self.attempts, elapsed, proposed, retry_after)
        else {
            return Retry::GivenUp;
        };
        if rules.strategy.throttle_decides_after_backoff() {
            self.ask_when_due = throttle.is_some();
        } else if let Some(t) = throttle
            && !t.allows_retry(self.attempt_kind(), now)
        {
            return Retry::Refused;
        }
        self.next = Some(now.saturating_add(delay));
        Retry::Scheduled
    }

    /// No hedge goes once the request's deadline has passed.
    fn limit_hedges(&mut self, rules: &Rules) {
        if let (Some(h), Some(deadline)) = (&mut self.hedges, rules.limits.deadline) {
            h.not_after(self.first.saturating_add(deadline));
        }
    }

    /// Thinks from `now` before the next logical request, if the user
    /// makes another; else leaves.
    fn next_request(&mut self, rules: &Rules, now: Duration) {
        if self.more == 0 {
            self.leave();
            return;
        }
        if self.more != u64::MAX {
            self.more -= 1;
        }
        let think = rules.think.sample(&mut self.rng);
        self.request_at(rules, now.saturating_add(think), think);
    }

    /// Starts a logical request whose first attempt is due at `at`, after
    /// a sleep of `think`.
    fn request_at(&mut self, rules: &Rules, at: Duration, think: Duration) {
        self.first = at;
        self.next = Some(at);
        self.hedges = rules.hedging.map(|_| Hedges::new(at));
        self.backoff = Backoff::new(think);
        self.attempts = 0;
        self.last = None;
        self.look_again = None;
        self.ask_when_due = false;
    }

    /// The last request has ended: nothing is due any more.
    fn leave(&mut self) {
        self.gone = true;
        self.next = None;
        self.hedges = None;
        self.attempts = 0;
        self.last = None;
        self.look_again = None;
        self.ask_when_due = false;
    }
}

/// What follows a failed attempt that is not hedged.
enum Retry {
    /// A retry, at the user's `next`.
    Scheduled,
    /// None: the strategy, the pushback or the limits say so.
    GivenUp,
    /// None: the throttle refused it.
    Refused,
}

#[cfg(test)]
mod grpc_tests;
#[cfg(test)]
mod tests;
