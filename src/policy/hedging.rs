//! gRPC's hedging policy (gRFC A6): instead of retrying after a failure, a
//! client sends the same request again every `hedgingDelay` while no answer
//! has come, up to `maxAttempts` copies; the first success wins and the
//! others are cancelled.
//!
//! The rules, from the proposal's "Summary of Retry and Hedging Logic":
//! - the first attempt goes at once, then one more every delay, counted
//!   from when the previous one went;
//! - a non-fatal failure sends the next hedge at once; later hedges resume
//!   the delay from there;
//! - pushback `n >= 0` sends the next hedge after exactly `n` ms instead;
//!   negative pushback sends no more hedges;
//! - a hedge the throttle refuses is not sent, and no more are;
//! - all attempts failed and none left to send: the request fails (a
//!   hedged request is never retried).
//!
//! This module is the schedule alone: what is in flight and when the next
//! hedge is due. The user's state machine records attempts around it.

use std::time::Duration;

use crate::model::grpc::Codes;
use crate::model::timescale::compress;
use crate::policy::shipped::GrpcImplementation;

/// gRPC's client-side cap on `maxAttempts`: more is treated as this many,
/// without error.
pub const MAX_HEDGED_ATTEMPTS: u32 = 5;

/// A hedging policy: its delay and its attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hedging {
    /// Time between one attempt's start and the next hedge's.
    pub delay: Duration,
    /// Copies of a request at most, the first included (2 to 5).
    pub max_attempts: u32,
    /// The gRPC implementation whose hedging this is.
    pub implementation: GrpcImplementation,
    /// nonFatalStatusCodes: a failure with one of these sends the next
    /// copy at once; any other ends the call.
    pub non_fatal: Codes,
}

impl Hedging {
    /// A policy; `max_attempts` above 5 is treated as 5, as gRPC clients
    /// do.
    pub fn new(delay: Duration, max_attempts: u32) -> Hedging {
        Hedging {
            delay,
            max_attempts: max_attempts.min(MAX_HEDGED_ATTEMPTS),
            implementation: GrpcImplementation::default(),
            non_fatal: Codes::default(),
        }
    }

    /// The same policy with `codes` as its non-fatal codes.
    pub fn non_fatal(self, codes: Codes) -> Hedging {
        Hedging {
            non_fatal: codes,
            ..self
        }
    }

    /// The same policy as `implementation` does it.
    pub fn following(self, implementation: GrpcImplementation) -> Hedging {
        Hedging {
            implementation,
            ..self
        }
    }

    /// The same policy with time compressed `k` times.
    pub fn scaled(self, k: f64) -> Hedging {
        Hedging {
            delay: compress(self.delay, k),
            ..self
        }
    }

    /// `hedge-DELAY-xN`, for reports.
    pub fn name(&self) -> String {
        format!(
            "hedge-{}-x{}",
            humantime::format_duration(self.delay),
            self.max_attempts
        )
    }
}

/// One logical request's hedges: how many went, how many are in flight,
/// and when the next is due.
///
/// grpc-js (`retrying-call.ts`) departs from A6's text after a non-fatal
/// failure: it leaves the hedging timer running and starts a timer of the
/// failure's own, the pushback's delay (none: at once), that sends the next
/// copy if any is left, or ends the call if none is left to send and none
/// is in flight; a negative pushback ends the call at once, the copies
/// still out cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hedges {
    sent: u32,
    in_flight: u32,
    /// The hedging timer: when the next copy is due, if another is to go.
    next: Option<Duration>,
    /// grpc-js: the failures' own timers still to fire.
    after_failures: [Option<Duration>; MAX_HEDGED_ATTEMPTS as usize],
}

impl Hedges {
    /// A request whose first attempt is due at `first`.
    pub fn new(first: Duration) -> Hedges {
        Hedges {
            sent: 0,
            in_flight: 0,
            next: Some(first),
            after_failures: [None; MAX_HEDGED_ATTEMPTS as usize],
        }
    }

    /// When the next attempt is due (or, in grpc-js, a failure's timer
    /// fires), if any.
    pub fn next(&self) -> Option<Duration> {
        self.after_failures
            .iter()
            .flatten()
            .chain(&self.next)
            .min()
            .copied()
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Whether a copy is left to send under `policy`.
    pub fn copies_left(&self, policy: &Hedging) -> bool {
        self.sent < policy.max_attempts
    }

    /// The attempt due at `due` went out (or was rejected locally, which
    /// [`Hedges::failed`] then ends): the next is due a delay later, if
    /// any is left.
    pub fn sent(&mut self, policy: &Hedging, due: Duration) {
        self.fire();
        self.sent += 1;
        self.in_flight += 1;
        self.next = self
            .copies_left(policy)
            .then(|| due.saturating_add(policy.delay));
    }

    /// The throttle refused the hedge that was due: no more go.
    pub fn refused(&mut self) {
        self.next = None;
    }

    /// An attempt failed at `now` (an error or a timeout) with a
    /// non-fatal status and the server's pushback, if any. Returns whether
    /// the request has failed now: under A6's text, nothing in flight and
    /// nothing left to send; in grpc-js, a negative pushback, or nothing
    /// in flight, nothing left to send and no pushback to wait.
    pub fn failed(&mut self, policy: &Hedging, pushback_ms: Option<i64>, now: Duration) -> bool {
        self.in_flight = self.in_flight.saturating_sub(1);
        let after = pushback_ms.map(|ms| Duration::from_millis(ms.unsigned_abs()));
        match policy.implementation {
            GrpcImplementation::Core => {
                if self.next.is_some() {
                    self.next = match pushback_ms {
                        Some(ms) if ms < 0 => None,
                        _ => Some(now.saturating_add(after.unwrap_or_default())),
                    };
                }
                self.is_over()
            }
            GrpcImplementation::Js => {
                if pushback_ms.is_some_and(|ms| ms < 0) {
                    self.next = None;
                    self.after_failures = [None; MAX_HEDGED_ATTEMPTS as usize];
                    return true;
                }
                let at = now.saturating_add(after.unwrap_or_default());
                if at == now && !self.copies_left(policy) {
                    // Its timer would fire at once with nothing to send.
                    return self.in_flight == 0;
                }
                if let Some(slot) = self.after_failures.iter_mut().find(|s| s.is_none()) {
                    *slot = Some(at);
                }
                false
            }
        }
    }

    /// grpc-js: a failure's timer fired with no copy left to send.
    /// Returns whether the call ends: none is in flight.
    pub fn nothing_left(&mut self) -> bool {
        self.fire();
        self.in_flight == 0
    }

    /// Whether the request has failed: nothing in flight, nothing left to
    /// send or wait for.
    pub fn is_over(&self) -> bool {
        self.in_flight == 0 && self.next().is_none()
    }

    /// No hedge goes after `limit` (the request's deadline).
    pub fn not_after(&mut self, limit: Duration) {
        self.next = self.next.filter(|&at| at < limit);
        for slot in &mut self.after_failures {
            *slot = slot.filter(|&at| at < limit);
        }
    }

    /// What was due fired: the earliest failure's timer, if it comes no
    /// later than the hedging timer (by the schedule, not by the clock of
    /// whoever acts on it, which may be late).
    fn fire(&mut self) {
        let earliest = self
            .after_failures
            .iter_mut()
            .filter(|s| s.is_some())
            .min_by_key(|s| **s);
        if let Some(slot) = earliest
            && self
                .next
                .is_none_or(|timer| slot.is_some_and(|at| at <= timer))
        {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A6's example: maxAttempts 4, hedgingDelay 500 ms.
    fn a6() -> Hedging {
        Hedging::new(ms(500), 4)
    }

    #[test]
    fn hedges_go_every_delay_until_max_attempts() {
        // A6: "after 1ms there would be one outstanding RPC, after 501ms
        // two, after 1001ms three, and after 1501ms four".
        let p = a6();
        let mut h = Hedges::new(ms(0));
        let mut starts = Vec::new();
        while let Some(at) = h.next() {
            starts.push(at);
            h.sent(&p, at);
        }
        assert_eq!(starts, [ms(0), ms(500), ms(1000), ms(1500)]);
        assert_eq!(h.in_flight(), 4);
    }

    #[test]
    fn more_than_five_attempts_are_five() {
        assert_eq!(Hedging::new(ms(10), 9).max_attempts, 5);
        assert_eq!(Hedging::new(ms(10), 3).max_attempts, 3);
    }

    #[test]
    fn a_failure_sends_the_next_hedge_at_once_and_the_delay_resumes_from_it() {
        let p = a6();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        assert!(!h.failed(&p, None, ms(120)));
        assert_eq!(h.next(), Some(ms(120)), "shortcut: at once");
        h.sent(&p, ms(120));
        assert_eq!(h.next(), Some(ms(620)), "then the delay again");
    }

    #[test]
    fn pushback_delays_the_next_hedge_or_stops_them() {
        let p = a6();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.sent(&p, ms(500));
        assert!(!h.failed(&p, Some(300), ms(600)));
        assert_eq!(h.next(), Some(ms(900)), "exactly n ms later");
        h.sent(&p, ms(900));
        assert_eq!(h.next(), Some(ms(1400)), "then n + hedgingDelay");
        // Three went, one failed. Negative pushback: no more, but the
        // one left in flight may still win.
        assert!(!h.failed(&p, Some(-1), ms(950)));
        assert_eq!(h.next(), None);
        assert_eq!(h.in_flight(), 1);
        assert!(h.failed(&p, None, ms(1100)), "the last one failed: over");
    }

    #[test]
    fn a_refused_hedge_stops_the_rest_and_the_request_ends_with_the_last_failure() {
        let p = a6();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.refused();
        assert_eq!(h.next(), None);
        assert!(h.failed(&p, None, ms(2000)));
    }

    #[test]
    fn when_all_were_sent_only_the_last_failure_ends_the_request() {
        let p = Hedging::new(ms(100), 2);
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.sent(&p, ms(100));
        assert_eq!(h.next(), None);
        assert!(
            !h.failed(&p, None, ms(150)),
            "a failure does not send a third"
        );
        assert_eq!(h.next(), None);
        assert!(h.failed(&p, None, ms(2100)));
    }

    /// A6's example as grpc-js does it.
    fn js() -> Hedging {
        a6().following(GrpcImplementation::Js)
    }

    #[test]
    fn grpc_js_leaves_the_hedging_timer_running_through_a_pushback() {
        let p = js();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        // Pushback 300 at 100: a copy at 400, before the timer's 500; the
        // timer starts again from it.
        assert!(!h.failed(&p, Some(300), ms(100)));
        assert_eq!(h.next(), Some(ms(400)));
        h.sent(&p, ms(400));
        assert_eq!(h.next(), Some(ms(900)));
        // Pushback 700 at 450: the timer's copy at 900 goes first, then the
        // failure's own at 1150.
        assert!(!h.failed(&p, Some(700), ms(450)));
        assert_eq!(h.next(), Some(ms(900)));
        h.sent(&p, ms(900));
        assert_eq!(h.next(), Some(ms(1150)));
        h.sent(&p, ms(1150));
        assert_eq!(h.next(), None, "four went: none left");
        assert_eq!(h.in_flight(), 2);
    }

    #[test]
    fn grpc_js_ends_the_call_at_a_negative_pushback_with_copies_out() {
        let p = js();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.sent(&p, ms(500));
        assert!(h.failed(&p, Some(-1), ms(600)), "ends with one still out");
        assert_eq!(h.next(), None);
    }

    #[test]
    fn grpc_js_ends_a_call_with_nothing_left_when_the_failures_timer_fires() {
        let p = Hedging::new(ms(100), 2).following(GrpcImplementation::Js);
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.sent(&p, ms(100));
        assert!(!h.copies_left(&p));
        // One fails with a pushback of 50, the other is still out: at 200
        // the failure's timer finds it in flight; the call goes on.
        assert!(!h.failed(&p, Some(50), ms(150)));
        assert_eq!(h.next(), Some(ms(200)));
        assert!(!h.nothing_left());
        assert_eq!(h.next(), None);
        // The last fails with a pushback of 30: the call ends 30 ms later,
        // not at the failure.
        assert!(!h.failed(&p, Some(30), ms(300)));
        assert!(!h.is_over());
        assert_eq!(h.next(), Some(ms(330)));
        assert!(h.nothing_left());
        // Without a pushback the last failure ends it at once.
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.sent(&p, ms(100));
        assert!(!h.failed(&p, None, ms(150)));
        assert!(h.failed(&p, None, ms(160)));
    }

    #[test]
    fn a_copy_sent_late_takes_the_failures_timer_that_was_due() {
        // A failure's timer due at 100 ms, the hedging timer at 500: the
        // copy goes at 130 (after a wait for a token), and the timer that
        // sent it is spent; the hedging timer starts again from 130.
        let p = js();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        assert!(!h.failed(&p, None, ms(100)));
        assert_eq!(h.next(), Some(ms(100)));
        h.sent(&p, ms(130));
        assert_eq!(h.next(), Some(ms(630)));
    }

    #[test]
    fn no_hedge_goes_past_the_deadline() {
        let p = a6();
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.not_after(ms(500));
        assert_eq!(h.next(), None, "due at the deadline: too late");
        let mut h = Hedges::new(ms(0));
        h.sent(&p, ms(0));
        h.not_after(ms(501));
        assert_eq!(h.next(), Some(ms(500)));
    }

    #[test]
    fn time_compression_scales_the_delay_only() {
        assert_eq!(a6().scaled(10.0), Hedging::new(ms(50), 4));
        assert_eq!(a6().name(), "hedge-500ms-x4");
    }
}
