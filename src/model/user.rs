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
use crate::policy::{AttemptKind, Backoff, Decision, Next, RetryLimits, Strategy};

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
}

/// What to do with the attempt that is due, once the throttle has spoken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attempt {
    /// Send it; it times out at `deadline` (since the epoch).
    Send {
        /// The instant the attempt is given up as timed out.
        deadline: Duration,
    },
    /// Rejected locally by the throttle: an error that never left the
    /// process; record it.
    Rejected(Finished),
    /// The throttle refused a retry: the logical request is given up.
    Refused(RequestRecord),
}

/// The records an ended attempt produces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    /// How the attempt went.
    pub attempt: AttemptRecord,
    /// How the logical request ended, if this attempt ended it.
    pub request: Option<RequestRecord>,
}

/// A simulated user: its random stream and the state of its current
/// logical request.
#[derive(Debug, Clone)]
pub struct User<R> {
    rng: R,
    /// Intended start of the current logical request's first attempt.
    first: Duration,
    /// Intended start of the attempt that is due next.
    due: Duration,
    backoff: Backoff,
    attempts: u32,
    /// How the previous attempt of the current request ended, and whether
    /// it was a throttling answer.
    last: Option<(Outcome, bool)>,
    /// How late the attempt in hand started.
    lateness: Duration,
}

impl<R: Rng> User<R> {
    /// A user that starts thinking at `now`, drawing from `rng`.
    pub fn new(rules: &Rules, mut rng: R, now: Duration) -> Self {
        let think = rules.think.sample(&mut rng);
        User {
            rng,
            first: now.saturating_add(think),
            due: now.saturating_add(think),
            backoff: Backoff::new(think),
            attempts: 0,
            last: None,
            lateness: Duration::ZERO,
        }
    }

    /// The intended start of the next attempt.
    pub fn due(&self) -> Duration {
        self.due
    }

    /// Whether the next attempt is a retry.
    pub fn is_retry(&self) -> bool {
        self.attempts > 0
    }

    /// What a throttle is told of the attempt that is due (or in flight):
    /// whether it is a retry, and whether the attempt before it timed out.
    pub fn attempt_kind(&self) -> AttemptKind {
        AttemptKind {
            retry: self.is_retry(),
            after_timeout: self.last.is_some_and(|(o, _)| o == Outcome::Timeout),
            after_throttle: self.last.is_some_and(|(_, throttled)| throttled),
        }
    }

    /// The user's random stream (a throttle's draws come from it too).
    pub fn rng(&mut self) -> &mut R {
        &mut self.rng
    }

    /// Starts the due attempt at `now`, given the throttle's `decision`
    /// (`Allow` without a throttle).
    pub fn begin(&mut self, rules: &Rules, decision: Decision, now: Duration) -> Attempt {
        self.lateness = now.saturating_sub(self.due);
        match decision {
            Decision::Allow => {
                let started = self.due.saturating_sub(self.first);
                Attempt::Send {
                    deadline: self
                        .first
                        .saturating_add(rules.limits.attempt_end(started, rules.timeout)),
                }
            }
            Decision::Reject => {
                Attempt::Rejected(self.end(rules, Outcome::Error, Hints::default(), now, true))
            }
            Decision::GiveUp => {
                let record = RequestRecord {
                    attempts: self.attempts,
                    latency: None,
                    throttled: true,
                };
                self.next_request(rules, now);
                Attempt::Refused(record)
            }
        }
    }

    /// Ends the attempt that was sent, at `now`, with what the answer
    /// told (`Retry-After`, gRPC's pushback); schedules what comes next.
    pub fn finish(
        &mut self,
        rules: &Rules,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
    ) -> Finished {
        self.end(rules, outcome, hints, now, false)
    }

    fn end(
        &mut self,
        rules: &Rules,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
        rejected_locally: bool,
    ) -> Finished {
        let attempt = AttemptRecord {
            outcome,
            is_retry: self.is_retry(),
            rejected_locally,
            latency: now.saturating_sub(self.due),
            lateness: self.lateness,
        };
        self.attempts += 1;
        self.last = Some((outcome, hints.throttled));
        let elapsed = now.saturating_sub(self.first);
        let ended = |latency| RequestRecord {
            attempts: self.attempts,
            latency,
            throttled: false,
        };
        let request = if outcome == Outcome::Ok {
            Some(ended(Some(elapsed)))
        } else {
            // A gRPC client obeys the server's pushback: negative, no
            // retry; otherwise exactly that delay, the backoff started over.
            let pushback = hints
                .pushback_ms
                .filter(|_| rules.strategy.honours_pushback());
            let proposed = match pushback {
                Some(ms) if ms >= 0 => {
                    self.backoff.restart();
                    Duration::from_millis(ms.unsigned_abs())
                }
                _ => self.backoff.next_delay(&rules.strategy, &mut self.rng),
            };
            // With a pushback the delay is exact: Retry-After does not
            // stretch it.
            let retry_after = hints.retry_after.filter(|_| pushback.is_none());
            let next = if pushback.is_some_and(|ms| ms < 0) {
                Next::GiveUp
            } else {
                rules
                    .limits
                    .next(self.attempts, elapsed, proposed, retry_after)
            };
            match next {
                Next::Retry(delay) => {
                    self.due = now.saturating_add(delay);
                    None
                }
                Next::GiveUp => Some(ended(None)),
            }
        };
        if request.is_some() {
            self.next_request(rules, now);
        }
        Finished { attempt, request }
    }

    /// Thinks from `now` before the next logical request.
    fn next_request(&mut self, rules: &Rules, now: Duration) {
        let think = rules.think.sample(&mut self.rng);
        self.first = now.saturating_add(think);
        self.due = self.first;
        self.backoff = Backoff::new(think);
        self.attempts = 0;
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::arrivals::user_rng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn rules(max_attempts: Option<u32>) -> Rules {
        Rules {
            think: ThinkTime::new(Duration::from_secs(1)),
            timeout: ms(2000),
            strategy: Strategy::Fixed { delay: ms(100) },
            limits: RetryLimits {
                max_attempts,
                ..RetryLimits::default()
            },
        }
    }

    #[test]
    fn first_attempt_is_due_after_one_think_time() {
        let r = rules(None);
        let user = User::new(&r, user_rng(1, 0), ms(500));
        let think = r.think.sample(&mut user_rng(1, 0));
        assert_eq!(user.due(), ms(500) + think);
        assert!(!user.is_retry());
    }

    #[test]
    fn failures_retry_on_schedule_and_success_ends_the_request() {
        let r = rules(None);
        let mut user = User::new(&r, user_rng(2, 0), Duration::ZERO);
        let t0 = user.due();
        assert_eq!(
            user.begin(&r, Decision::Allow, t0),
            Attempt::Send {
                deadline: t0 + ms(2000)
            }
        );
        let end = t0 + ms(2000);
        let f = user.finish(&r, Outcome::Timeout, Hints::default(), end);
        assert_eq!(f.request, None);
        assert_eq!(f.attempt.latency, ms(2000));
        assert!(!f.attempt.is_retry);
        assert_eq!(user.due(), end + ms(100));
        assert!(user.is_retry());

        let t1 = user.due();
        assert!(matches!(
            user.begin(&r, Decision::Allow, t1),
            Attempt::Send { .. }
        ));
        let f = user.finish(&r, Outcome::Ok, Hints::default(), t1 + ms(100));
        assert!(f.attempt.is_retry);
        assert_eq!(
            f.request,
            Some(RequestRecord {
                attempts: 2,
                latency: Some(t1 + ms(100) - t0),
                throttled: false,
            })
        );
        assert!(!user.is_retry());
        assert!(user.due() >= t1 + ms(100));
    }

    #[test]
    fn an_attempt_started_late_records_how_late() {
        let r = rules(None);
        let mut user = User::new(&r, user_rng(5, 0), Duration::ZERO);
        let due = user.due();
        user.begin(&r, Decision::Allow, due + ms(3));
        let f = user.finish(&r, Outcome::Ok, Hints::default(), due + ms(103));
        assert_eq!(f.attempt.lateness, ms(3));
        assert_eq!(
            f.attempt.latency,
            ms(103),
            "latency counts from the intended start"
        );
    }

    #[test]
    fn an_absurd_wait_saturates_instead_of_overflowing() {
        let r = Rules {
            limits: RetryLimits {
                respect_retry_after: true,
                ..RetryLimits::default()
            },
            ..rules(None)
        };
        let mut user = User::new(&r, user_rng(6, 0), Duration::MAX - ms(1));
        let due = user.due();
        assert_eq!(due, Duration::MAX);
        user.begin(&r, Decision::Allow, due);
        user.finish(
            &r,
            Outcome::Error,
            Hints {
                retry_after: Some(Duration::MAX),
                ..Hints::default()
            },
            due,
        );
        assert_eq!(user.due(), Duration::MAX);
    }

    #[test]
    fn attempt_limit_gives_up() {
        let r = rules(Some(1));
        let mut user = User::new(&r, user_rng(3, 0), Duration::ZERO);
        let t0 = user.due();
        user.begin(&r, Decision::Allow, t0);
        let f = user.finish(&r, Outcome::Error, Hints::default(), t0 + ms(5));
        assert_eq!(
            f.request,
            Some(RequestRecord {
                attempts: 1,
                latency: None,
                throttled: false,
            })
        );
        assert!(!user.is_retry());
    }

    #[test]
    fn throttle_decisions() {
        let r = rules(None);
        let mut user = User::new(&r, user_rng(4, 0), Duration::ZERO);
        let t0 = user.due();
        let Attempt::Rejected(f) = user.begin(&r, Decision::Reject, t0) else {
            panic!("a rejection is recorded as an attempt");
        };
        assert!(f.attempt.rejected_locally);
        assert_eq!(f.attempt.outcome, Outcome::Error);
        assert_eq!(user.due(), t0 + ms(100));
        let t1 = user.due();
        assert_eq!(
            user.begin(&r, Decision::GiveUp, t1),
            Attempt::Refused(RequestRecord {
                attempts: 1,
                latency: None,
                throttled: true,
            })
        );
        assert!(!user.is_retry());
        assert!(user.due() >= t1);
    }

    #[test]
    fn a_grpc_client_obeys_pushback_and_others_ignore_it() {
        use crate::policy::shipped::ShippedBackoff;
        let grpc = Rules {
            strategy: Strategy::Shipped(ShippedBackoff::Grpc {
                initial: ms(100),
                multiplier: 2.0,
                max: ms(1000),
            }),
            ..rules(Some(4))
        };
        let push = |ms| Hints {
            pushback_ms: Some(ms),
            ..Hints::default()
        };
        let mut user = User::new(&grpc, user_rng(5, 0), Duration::ZERO);
        let t0 = user.due();
        user.begin(&grpc, Decision::Allow, t0);
        // Pushback 700: the retry comes exactly 700 ms later.
        let f = user.finish(&grpc, Outcome::Error, push(700), t0 + ms(5));
        assert_eq!(f.request, None);
        assert_eq!(user.due(), t0 + ms(705));
        // Negative: the request ends without a retry.
        user.begin(&grpc, Decision::Allow, user.due());
        let f = user.finish(&grpc, Outcome::Error, push(-1), t0 + ms(710));
        assert_eq!(f.request.map(|r| r.attempts), Some(2));
        // A fixed-delay client ignores it.
        let r = rules(None);
        let mut user = User::new(&r, user_rng(5, 0), Duration::ZERO);
        let t0 = user.due();
        user.begin(&r, Decision::Allow, t0);
        user.finish(&r, Outcome::Error, push(-1), t0 + ms(5));
        assert_eq!(user.due(), t0 + ms(105), "fixed: 100 ms later");
    }

    #[test]
    fn the_next_attempt_knows_whether_the_last_timed_out_or_was_throttled() {
        let r = rules(None);
        let mut user = User::new(&r, user_rng(6, 0), Duration::ZERO);
        assert_eq!(user.attempt_kind(), AttemptKind::default());
        let t0 = user.due();
        user.begin(&r, Decision::Allow, t0);
        let throttled = Hints {
            throttled: true,
            ..Hints::default()
        };
        user.finish(&r, Outcome::Error, throttled, t0 + ms(1));
        let kind = user.attempt_kind();
        assert!(kind.retry && kind.after_throttle && !kind.after_timeout);
        user.begin(&r, Decision::Allow, user.due());
        user.finish(&r, Outcome::Timeout, Hints::default(), t0 + ms(3000));
        let kind = user.attempt_kind();
        assert!(kind.retry && kind.after_timeout && !kind.after_throttle);
    }
}
