//! The user's state machine, retries and hedges, worked by hand.

use super::*;
use crate::model::arrivals::user_rng;
use crate::policy::ThrottleConfig;
use crate::policy::shipped::ShippedThrottleConfig;

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
        hedging: None,
    }
}

type TestUser = User<rand::rngs::Xoshiro256PlusPlus>;

/// Sends the due attempt at `now`, allowed.
fn send(user: &mut TestUser, r: &Rules, now: Duration) -> (Duration, Sent) {
    match user.begin(r, None, now) {
        Attempt::Send { deadline, sent } => (deadline, sent),
        other => panic!("expected a send, got {other:?}"),
    }
}

fn due(user: &TestUser) -> Duration {
    user.due().expect("an attempt is due")
}

#[test]
fn first_attempt_is_due_after_one_think_time() {
    let r = rules(None);
    let user = User::new(&r, user_rng(1, 0), ms(500));
    let think = r.think.sample(&mut user_rng(1, 0));
    assert_eq!(user.due(), Some(ms(500) + think));
    assert!(!user.is_retry());
}

#[test]
fn failures_retry_on_schedule_and_success_ends_the_request() {
    let r = rules(None);
    let mut user = User::new(&r, user_rng(2, 0), Duration::ZERO);
    let t0 = due(&user);
    let (deadline, sent) = send(&mut user, &r, t0);
    assert_eq!(deadline, t0 + ms(2000));
    assert_eq!(user.due(), None, "nothing is due while it is in flight");
    let end = t0 + ms(2000);
    let f = user.finish(&r, None, sent, Outcome::Timeout, Hints::default(), end);
    assert_eq!(f.request, None);
    assert_eq!(f.attempt.latency, ms(2000));
    assert!(!f.attempt.is_retry);
    assert_eq!(user.due(), Some(end + ms(100)));
    assert!(user.is_retry());

    let t1 = due(&user);
    let (_, sent) = send(&mut user, &r, t1);
    let f = user.finish(&r, None, sent, Outcome::Ok, Hints::default(), t1 + ms(100));
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
    assert!(due(&user) >= t1 + ms(100));
}

#[test]
fn an_attempt_started_late_records_how_late() {
    let r = rules(None);
    let mut user = User::new(&r, user_rng(5, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, sent) = send(&mut user, &r, t0 + ms(3));
    let f = user.finish(&r, None, sent, Outcome::Ok, Hints::default(), t0 + ms(103));
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
    let t0 = due(&user);
    assert_eq!(t0, Duration::MAX);
    let (_, sent) = send(&mut user, &r, t0);
    user.finish(
        &r,
        None,
        sent,
        Outcome::Error,
        Hints {
            retry_after: Some(Duration::MAX),
            ..Hints::default()
        },
        t0,
    );
    assert_eq!(user.due(), Some(Duration::MAX));
}

#[test]
fn attempt_limit_gives_up() {
    let r = rules(Some(1));
    let mut user = User::new(&r, user_rng(3, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, sent) = send(&mut user, &r, t0);
    let f = user.finish(&r, None, sent, Outcome::Error, Hints::default(), t0 + ms(5));
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

/// gRPC's throttle with 2 tokens, drained to 1 by one failure: retries
/// and hedges refused.
fn drained_bucket() -> Throttle {
    let mut t = Throttle::new(ThrottleConfig::TokenBucket {
        max_tokens: 2.0,
        token_ratio: 0.1,
    });
    t.after(Answer::Failed, AttemptKind::default(), Duration::ZERO);
    t
}

#[test]
fn a_breaker_open_rejects_locally() {
    let r = rules(None);
    let mut breaker = Throttle::new(ThrottleConfig::CircuitBreaker {
        failure_ratio: 1.0,
        min_requests: 1000,
        window: Duration::from_secs(10),
        consecutive: Some(1),
        cooldown: Duration::from_secs(5),
        probes: 1,
    });
    breaker.after(Answer::Failed, AttemptKind::default(), Duration::ZERO);
    let mut user = User::new(&r, user_rng(4, 0), Duration::ZERO);
    let t0 = due(&user);
    let Attempt::Rejected(f) = user.begin(&r, Some(&mut breaker), t0) else {
        panic!("a rejection is recorded as an attempt");
    };
    assert!(f.attempt.rejected_locally);
    assert_eq!(f.attempt.outcome, Outcome::Error);
    assert_eq!(user.due(), Some(t0 + ms(100)));
}

#[test]
fn a_retry_throttle_refuses_at_the_failure_before_any_backoff() {
    let r = rules(None);
    let mut bucket = drained_bucket();
    let mut user = User::new(&r, user_rng(4, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, sent) = send(&mut user, &r, t0);
    // The failure drains the bucket to 0: the request ends with it, not
    // a backoff (100 ms) later.
    let t1 = t0 + ms(5);
    let f = user.finish(
        &r,
        Some(&mut bucket),
        sent,
        Outcome::Error,
        Hints::default(),
        t1,
    );
    assert_eq!(
        f.request,
        Some(RequestRecord {
            attempts: 1,
            latency: None,
            throttled: true,
        })
    );
    assert!(!user.is_retry());
    assert!(due(&user) >= t1);
}

#[test]
fn a_rate_limiter_makes_the_attempt_wait_for_its_token() {
    let r = rules(None);
    let mut limiter = Throttle::new(ThrottleConfig::Shipped(
        ShippedThrottleConfig::aws_adaptive(false),
    ));
    let kind = AttemptKind::default();
    // A 429 at 1 s switches it on.
    limiter.after(Answer::Throttled, kind, ms(1000));
    let mut user = User::new(&r, user_rng(5, 0), ms(1000));
    let t0 = due(&user);
    // Another user takes what the bucket holds at t0 and is told how long
    // until the next token.
    let mut rng = user_rng(0, 0);
    let wait = (0..2)
        .find_map(|_| match limiter.before(kind, t0, &mut rng) {
            Decision::Wait(w) => Some(w),
            _ => None,
        })
        .expect("the bucket holds at most one token at 0.56 a second");
    assert_eq!(user.begin(&r, Some(&mut limiter), t0), Attempt::Wait);
    let at = due(&user);
    assert_eq!(at, t0 + wait, "the same wait: nothing taken in advance");
    // Woken before its sleep ends (a response changed the rate), it looks
    // again then: no token yet, it waits again for the rest.
    let early = t0 + wait / 2;
    assert!(user.is_waiting() && user.wake(early));
    assert_eq!(due(&user), early);
    assert_eq!(user.begin(&r, Some(&mut limiter), early), Attempt::Wait);
    assert!(due(&user).abs_diff(at) < Duration::from_micros(1));
    let at = due(&user);
    // Then it asks again and goes, from its token's instant; the next
    // to ask waits.
    let Attempt::Send { deadline, sent } = user.begin(&r, Some(&mut limiter), at) else {
        panic!("the token is there")
    };
    assert!(matches!(
        limiter.before(kind, at, &mut rng),
        Decision::Wait(_)
    ));
    assert_eq!(deadline, at + ms(2000));
    assert!(!user.is_waiting() && !user.wake(at), "it no longer waits");
    assert_eq!(sent.cancel(None, at + ms(1)).latency, ms(1));
}

#[test]
fn a_grpc_client_obeys_pushback_and_others_ignore_it() {
    use crate::model::grpc::Codes;
    use crate::policy::shipped::{GrpcImplementation, ShippedBackoff};
    let grpc = Rules {
        strategy: Strategy::Shipped(ShippedBackoff::Grpc {
            initial: ms(100),
            multiplier: 2.0,
            max: ms(1000),
            implementation: GrpcImplementation::Core,
            retryable: Codes::default(),
        }),
        ..rules(Some(4))
    };
    let push = |ms| Hints {
        pushback_ms: Some(ms),
        ..Hints::default()
    };
    let mut user = User::new(&grpc, user_rng(5, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, sent) = send(&mut user, &grpc, t0);
    // Pushback 700: the retry comes exactly 700 ms later.
    let f = user.finish(&grpc, None, sent, Outcome::Error, push(700), t0 + ms(5));
    assert_eq!(f.request, None);
    assert_eq!(user.due(), Some(t0 + ms(705)));
    // Negative: the request ends without a retry.
    let t1 = due(&user);
    let (_, sent) = send(&mut user, &grpc, t1);
    let f = user.finish(&grpc, None, sent, Outcome::Error, push(-1), t0 + ms(710));
    assert_eq!(f.request.map(|r| r.attempts), Some(2));
    // A fixed-delay client ignores it.
    let r = rules(None);
    let mut user = User::new(&r, user_rng(5, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, sent) = send(&mut user, &r, t0);
    user.finish(&r, None, sent, Outcome::Error, push(-1), t0 + ms(5));
    assert_eq!(user.due(), Some(t0 + ms(105)), "fixed: 100 ms later");
}

#[test]
fn the_next_attempt_knows_whether_the_last_timed_out_or_was_throttled() {
    let r = rules(None);
    let mut user = User::new(&r, user_rng(6, 0), Duration::ZERO);
    assert_eq!(user.attempt_kind(), AttemptKind::default());
    let t0 = due(&user);
    let (_, sent) = send(&mut user, &r, t0);
    let throttled = Hints {
        throttled: true,
        ..Hints::default()
    };
    user.finish(&r, None, sent, Outcome::Error, throttled, t0 + ms(1));
    let kind = user.attempt_kind();
    assert!(kind.retry && kind.after_throttle && !kind.after_timeout);
    let t1 = due(&user);
    let (_, sent) = send(&mut user, &r, t1);
    assert_eq!(sent.kind, kind, "the attempt carries what it was");
    user.finish(
        &r,
        None,
        sent,
        Outcome::Timeout,
        Hints::default(),
        t0 + ms(3000),
    );
    let kind = user.attempt_kind();
    assert!(kind.retry && kind.after_timeout && !kind.after_throttle);
}

fn hedging(delay: u64, max_attempts: u32) -> Rules {
    Rules {
        hedging: Some(Hedging::new(ms(delay), max_attempts)),
        ..rules(None)
    }
}

#[test]
fn a_hedge_that_answers_first_wins_and_the_first_is_cancelled() {
    let r = hedging(50, 3);
    let mut user = User::new(&r, user_rng(7, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, first) = send(&mut user, &r, t0);
    assert!(!first.kind.retry);
    assert_eq!(user.due(), Some(t0 + ms(50)), "the hedge, 50 ms later");
    let (deadline, hedge) = send(&mut user, &r, t0 + ms(50));
    assert!(hedge.kind.retry, "a hedge counts as a retry");
    assert_eq!(deadline, t0 + ms(2050), "its own timeout");
    assert_eq!(user.due(), Some(t0 + ms(100)));
    let f = user.finish(&r, None, hedge, Outcome::Ok, Hints::default(), t0 + ms(60));
    assert_eq!(
        f.request,
        Some(RequestRecord {
            attempts: 2,
            latency: Some(ms(60)),
            throttled: false,
        })
    );
    assert_eq!(f.attempt.latency, ms(10));
    let lost = first.cancel(None, t0 + ms(60));
    assert_eq!(lost.outcome, Outcome::Cancelled);
    assert_eq!(lost.latency, ms(60));
    assert!(!lost.is_retry);
    assert!(due(&user) >= t0 + ms(60), "the next request");
    assert!(!user.is_retry());
}

#[test]
fn a_failed_hedge_sends_the_next_at_once_and_the_last_failure_ends_the_request() {
    let r = hedging(500, 2);
    let mut user = User::new(&r, user_rng(8, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, first) = send(&mut user, &r, t0);
    let f = user.finish(
        &r,
        None,
        first,
        Outcome::Error,
        Hints::default(),
        t0 + ms(5),
    );
    assert_eq!(f.request, None);
    assert_eq!(user.due(), Some(t0 + ms(5)), "no waiting for the delay");
    let (_, second) = send(&mut user, &r, t0 + ms(5));
    assert_eq!(user.due(), None, "two of two sent");
    let f = user.finish(
        &r,
        None,
        second,
        Outcome::Timeout,
        Hints::default(),
        t0 + ms(2005),
    );
    assert_eq!(
        f.request,
        Some(RequestRecord {
            attempts: 2,
            latency: None,
            throttled: false,
        }),
        "never retried"
    );
}

#[test]
fn a_refused_hedge_stops_hedging_but_the_first_may_still_win() {
    let r = hedging(50, 4);
    let mut user = User::new(&r, user_rng(9, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, first) = send(&mut user, &r, t0);
    let mut bucket = drained_bucket();
    assert_eq!(
        user.begin(&r, Some(&mut bucket), t0 + ms(50)),
        Attempt::Held
    );
    assert_eq!(user.due(), None);
    let f = user.finish(&r, None, first, Outcome::Ok, Hints::default(), t0 + ms(80));
    assert_eq!(f.request.map(|q| q.attempts), Some(1));
    // With nothing in flight, a refused hedge ends the request.
    let t1 = due(&user);
    let (_, first) = send(&mut user, &r, t1);
    user.finish(
        &r,
        None,
        first,
        Outcome::Error,
        Hints::default(),
        t1 + ms(1),
    );
    assert_eq!(
        user.begin(&r, Some(&mut bucket), t1 + ms(1)),
        Attempt::Refused(RequestRecord {
            attempts: 1,
            latency: None,
            throttled: true,
        })
    );
}

#[test]
fn hedging_obeys_pushback_and_the_deadline() {
    let r = hedging(100, 5);
    let mut user = User::new(&r, user_rng(10, 0), Duration::ZERO);
    let t0 = due(&user);
    let (_, first) = send(&mut user, &r, t0);
    let push = Hints {
        pushback_ms: Some(300),
        ..Hints::default()
    };
    user.finish(&r, None, first, Outcome::Error, push, t0 + ms(10));
    assert_eq!(user.due(), Some(t0 + ms(310)));
    let r = Rules {
        limits: RetryLimits {
            deadline: Some(ms(150)),
            ..RetryLimits::default()
        },
        ..hedging(100, 5)
    };
    let mut user = User::new(&r, user_rng(10, 0), Duration::ZERO);
    let t0 = due(&user);
    send(&mut user, &r, t0);
    let (deadline, _) = send(&mut user, &r, t0 + ms(100));
    assert_eq!(deadline, t0 + ms(150), "no attempt runs past it");
    assert_eq!(user.due(), None, "a third would start at 200 ms");
}

#[test]
fn a_wait_for_a_token_past_the_deadline_gives_the_request_up() {
    let r = Rules {
        limits: RetryLimits {
            deadline: Some(ms(100)),
            ..RetryLimits::default()
        },
        ..rules(None)
    };
    let mut limiter = Throttle::new(ThrottleConfig::Shipped(
        ShippedThrottleConfig::aws_adaptive(false),
    ));
    let kind = AttemptKind::default();
    limiter.after(Answer::Throttled, kind, ms(1000));
    let mut user = User::new(&r, user_rng(6, 0), ms(1000));
    let t0 = due(&user);
    // Drain the bucket: at 0.56 a second the next token is over 100 ms
    // away.
    let mut rng = user_rng(0, 0);
    let drained = (0..10).any(|_| limiter.before(kind, t0, &mut rng) != Decision::Allow);
    assert!(drained);
    assert_eq!(user.begin(&r, Some(&mut limiter), t0), Attempt::Wait);
    let at = due(&user);
    assert!(at > t0 + ms(100));
    assert_eq!(
        user.begin(&r, Some(&mut limiter), at),
        Attempt::Refused(RequestRecord {
            attempts: 0,
            latency: None,
            throttled: false,
        })
    );
    assert!(due(&user) > at, "the next request thinks first");
}

#[test]
fn a_session_sends_at_its_arrival_thinks_between_its_requests_and_leaves() {
    let r = rules(Some(2));
    let mut rng = user_rng(8, 0);
    let mut user = User::arriving(&r, user_rng(8, 0), ms(5000), 3);
    // The arrival's first attempt is due at once; the think time drawn
    // first is the sleep exponential-2014 would double, not a wait.
    assert_eq!(user.due(), Some(ms(5000)));
    let _ = r.think.sample(&mut rng);
    // Request 1: succeeds; request 2 is due one think time later.
    let (_, sent) = send(&mut user, &r, ms(5000));
    let f = user.finish(&r, None, sent, Outcome::Ok, Hints::default(), ms(5100));
    assert!(f.request.is_some() && !user.is_gone());
    let think = r.think.sample(&mut rng);
    assert_eq!(user.due(), Some(ms(5100) + think));
    // Request 2: fails twice and is given up (two attempts at most).
    let t = due(&user);
    let (_, sent) = send(&mut user, &r, t);
    let f = user.finish(&r, None, sent, Outcome::Error, Hints::default(), t);
    assert_eq!(f.request, None);
    let retry = due(&user);
    let (_, sent) = send(&mut user, &r, retry);
    let f = user.finish(
        &r,
        None,
        sent,
        Outcome::Error,
        Hints::default(),
        t + ms(100),
    );
    assert_eq!(f.request.map(|q| q.latency), Some(None), "given up");
    assert!(!user.is_gone());
    // Request 3, the last: once it ends, nothing is due and it has left.
    let t = due(&user);
    let (_, sent) = send(&mut user, &r, t);
    assert!(!user.is_gone(), "in flight, not gone");
    let f = user.finish(&r, None, sent, Outcome::Ok, Hints::default(), t + ms(100));
    assert_eq!(f.request.map(|q| q.attempts), Some(1));
    assert!(user.is_gone());
    assert_eq!(user.due(), None);
}

#[test]
fn a_closed_populations_user_never_leaves() {
    let r = rules(Some(1));
    let mut user = User::new(&r, user_rng(9, 0), Duration::ZERO);
    for _ in 0..1000 {
        let t = due(&user);
        let (_, sent) = send(&mut user, &r, t);
        let f = user.finish(&r, None, sent, Outcome::Error, Hints::default(), t);
        assert!(f.request.is_some());
        assert!(!user.is_gone());
    }
    // A session of one request is open traffic: gone after it, even when
    // a throttle refuses it before it is sent.
    let mut one = User::arriving(&r, user_rng(9, 1), ms(1), 1);
    let (_, sent) = send(&mut one, &r, ms(1));
    one.finish(&r, None, sent, Outcome::Timeout, Hints::default(), ms(2001));
    assert!(one.is_gone());
}

#[test]
fn a_request_cancelled_for_its_caller_is_given_up_and_a_call_leaves() {
    let r = rules(Some(3));
    // A tier's call: one request, its first attempt failed, its retry due.
    let mut call = User::arriving(&r, user_rng(4, 0), ms(10), 1);
    let (_, sent) = send(&mut call, &r, ms(10));
    call.finish(&r, None, sent, Outcome::Error, Hints::default(), ms(20));
    assert_eq!(call.due(), Some(ms(120)));
    // Its caller goes: the request ends, given up after one attempt, and
    // nothing more is due.
    let record = call.cancel(&r, ms(50));
    assert_eq!((record.attempts, record.latency), (1, None));
    assert!(!record.throttled);
    assert!(call.is_gone());
    assert_eq!(call.due(), None);
    // A closed population's user goes on to its next request.
    let mut user = User::new(&r, user_rng(4, 1), Duration::ZERO);
    let t = due(&user);
    let _ = send(&mut user, &r, t);
    assert_eq!(user.cancel(&r, t + ms(5)).attempts, 1);
    assert!(!user.is_gone() && due(&user) > t + ms(5));
}
