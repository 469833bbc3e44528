//! gRPC's implementations in the user's state machine, worked by hand:
//! when the retry throttle decides, what a hedge asks, what a status the
//! policy does not retry costs.

use super::*;
use crate::model::arrivals::user_rng;
use crate::model::grpc::Codes;
use crate::policy::ThrottleConfig;
use crate::policy::shipped::{GrpcImplementation, ShippedBackoff};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// gRPC's retry policy (100 ms, 2, 1 s; 4 attempts) as `implementation`
/// does it, a think time of 1 s.
fn grpc(implementation: GrpcImplementation) -> Rules {
    Rules {
        think: ThinkTime::new(Duration::from_secs(1)),
        timeout: ms(2000),
        strategy: Strategy::Shipped(ShippedBackoff::Grpc {
            initial: ms(100),
            multiplier: 2.0,
            max: ms(1000),
            implementation,
            retryable: Codes::default(),
        }),
        limits: RetryLimits {
            max_attempts: Some(4),
            ..RetryLimits::default()
        },
        hedging: None,
    }
}

/// gRPC's throttle with 4 tokens (no retry at 2 or below), a success
/// giving back 1.
fn bucket() -> Throttle {
    Throttle::new(ThrottleConfig::TokenBucket {
        max_tokens: 4.0,
        token_ratio: 1.0,
    })
}

/// A 503, as gRPC maps it: `UNAVAILABLE`, which its policy retries.
fn unavailable() -> Hints {
    Hints {
        status: Some(503),
        ..Hints::default()
    }
}

type TestUser = User<rand::rngs::Xoshiro256PlusPlus>;

/// A user whose first attempt went out at its due time and failed 5 ms
/// later with a 503; returns the user and that failure's instant.
fn failed_once(r: &Rules, t: &mut Throttle, seed: u64) -> (TestUser, Duration) {
    let mut user = User::new(r, user_rng(seed, 0), Duration::ZERO);
    let t0 = user.due().unwrap();
    let Attempt::Send { sent, .. } = user.begin(r, Some(t), t0) else {
        panic!("the first attempt goes");
    };
    let f = user.finish(r, Some(t), sent, Outcome::Error, unavailable(), t0 + ms(5));
    assert_eq!(f.request, None, "a retry is scheduled");
    (user, t0 + ms(5))
}

#[test]
fn grpc_js_asks_its_throttle_when_the_backoff_ends_and_core_at_the_failure() {
    // The failure takes the bucket from 4 to 3 (above 2): both schedule the
    // retry. Another call's failure meanwhile takes it to 2.
    for (implementation, retried) in [
        (GrpcImplementation::Core, true),
        (GrpcImplementation::Js, false),
    ] {
        let r = grpc(implementation);
        let mut t = bucket();
        let (mut user, failed) = failed_once(&r, &mut t, 1);
        let due = user.due().expect("a retry is due");
        assert!(due > failed);
        t.after(Answer::Failed, AttemptKind::default(), failed + ms(1));
        assert_eq!(t.tokens(), Some(2.0));
        match user.begin(&r, Some(&mut t), due) {
            Attempt::Send { sent, .. } => assert!(retried && sent.kind.retry),
            Attempt::Refused(record) => {
                assert!(!retried, "{implementation:?}");
                // Refused when the timer fired: a backoff after the failure.
                assert_eq!(record.attempts, 1);
                assert!(record.throttled);
                assert!(user.due().unwrap() > due, "thinking again");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn grpc_js_counts_tokens_earned_during_the_backoff() {
    // Three failures take the bucket from 4 to 1: at or below 2, core
    // refuses at the failure. grpc-js, failing next (1 to 0), schedules
    // the retry anyway; three successes of other calls during its backoff
    // lift the bucket to 3, above 2, and the retry goes.
    let mut t = bucket();
    t.after(Answer::Failed, AttemptKind::default(), Duration::ZERO);
    t.after(Answer::Failed, AttemptKind::default(), Duration::ZERO);
    let core = grpc(GrpcImplementation::Core);
    let mut user = User::new(&core, user_rng(2, 0), Duration::ZERO);
    let t0 = user.due().unwrap();
    let Attempt::Send { sent, .. } = user.begin(&core, Some(&mut t), t0) else {
        panic!("the first attempt goes");
    };
    let f = user.finish(&core, Some(&mut t), sent, Outcome::Error, unavailable(), t0);
    assert!(
        f.request.is_some_and(|r| r.throttled),
        "core: refused at once"
    );
    assert_eq!(t.tokens(), Some(1.0));

    let js = grpc(GrpcImplementation::Js);
    let (mut user, failed) = failed_once(&js, &mut t, 3);
    assert_eq!(t.tokens(), Some(0.0));
    let due = user.due().expect("grpc-js schedules it");
    for _ in 0..3 {
        t.after(Answer::Ok, AttemptKind::default(), failed);
    }
    assert_eq!(t.tokens(), Some(3.0));
    assert!(matches!(
        user.begin(&js, Some(&mut t), due),
        Attempt::Send { .. }
    ));
}

#[test]
fn a_status_grpc_does_not_retry_takes_no_token() {
    // A 500 is UNKNOWN to gRPC: not retried, and the bucket hears nothing
    // of it; a 429 is UNAVAILABLE: retried, one token.
    for implementation in [GrpcImplementation::Core, GrpcImplementation::Js] {
        let r = grpc(implementation);
        let mut t = bucket();
        let mut user = User::new(&r, user_rng(4, 0), Duration::ZERO);
        let t0 = user.due().unwrap();
        let Attempt::Send { sent, .. } = user.begin(&r, Some(&mut t), t0) else {
            panic!("the first attempt goes");
        };
        let internal = Hints {
            status: Some(500),
            ..Hints::default()
        };
        let f = user.finish(&r, Some(&mut t), sent, Outcome::Error, internal, t0);
        assert_eq!(
            f.request.map(|r| (r.attempts, r.throttled)),
            Some((1, false))
        );
        assert_eq!(t.tokens(), Some(4.0));
        let t1 = user.due().unwrap();
        let Attempt::Send { sent, .. } = user.begin(&r, Some(&mut t), t1) else {
            panic!("the next request goes");
        };
        let shed = Hints {
            status: Some(429),
            throttled: true,
            ..Hints::default()
        };
        let f = user.finish(&r, Some(&mut t), sent, Outcome::Error, shed, t1);
        assert_eq!(f.request, None);
        assert_eq!(t.tokens(), Some(3.0));
    }
}

/// Hedging every 50 ms, 3 copies, as `implementation` does it.
fn hedged(implementation: GrpcImplementation) -> Rules {
    Rules {
        hedging: Some(Hedging::new(ms(50), 3).following(implementation)),
        ..grpc(implementation)
    }
}

#[test]
fn a_grpc_js_hedge_never_asks_the_throttle() {
    // A bucket of 4 drained to 2: A6's text refuses the hedge, grpc-js
    // sends it.
    for (implementation, hedged_anyway) in [
        (GrpcImplementation::Core, false),
        (GrpcImplementation::Js, true),
    ] {
        let r = hedged(implementation);
        let mut t = bucket();
        t.after(Answer::Failed, AttemptKind::default(), Duration::ZERO);
        t.after(Answer::Failed, AttemptKind::default(), Duration::ZERO);
        let mut user = User::new(&r, user_rng(5, 0), Duration::ZERO);
        let t0 = user.due().unwrap();
        assert!(matches!(
            user.begin(&r, Some(&mut t), t0),
            Attempt::Send { .. }
        ));
        let hedge = user.begin(&r, Some(&mut t), t0 + ms(50));
        assert_eq!(
            matches!(hedge, Attempt::Send { .. }),
            hedged_anyway,
            "{implementation:?}: {hedge:?}"
        );
    }
}

#[test]
fn a_negative_pushback_ends_a_grpc_js_hedged_call_at_once() {
    let push = Hints {
        pushback_ms: Some(-1),
        ..unavailable()
    };
    for (implementation, ends) in [
        (GrpcImplementation::Core, false),
        (GrpcImplementation::Js, true),
    ] {
        let r = hedged(implementation);
        let mut user = User::new(&r, user_rng(6, 0), Duration::ZERO);
        let t0 = user.due().unwrap();
        let Attempt::Send { sent: first, .. } = user.begin(&r, None, t0) else {
            panic!("the first copy goes");
        };
        assert!(matches!(
            user.begin(&r, None, t0 + ms(50)),
            Attempt::Send { .. }
        ));
        // The first copy fails with a negative pushback; the second is
        // still out. A6: no more copies, the second may still win.
        // grpc-js: the call fails now, the second to be cancelled.
        let f = user.finish(&r, None, first, Outcome::Error, push, t0 + ms(60));
        assert_eq!(f.request.is_some(), ends, "{implementation:?}");
        if !ends {
            assert_eq!(user.due(), None, "no more copies");
        }
    }
}

#[test]
fn a_grpc_js_failure_timer_fires_by_the_schedule_even_when_acted_on_late() {
    // Three copies every 50 ms; the first two fail at 60 and 61 ms, each
    // starting a timer of its own; the network client acts a little late.
    let r = hedged(GrpcImplementation::Js);
    let mut user = User::new(&r, user_rng(7, 0), Duration::ZERO);
    let t0 = user.due().unwrap();
    let go = |user: &mut TestUser, at| match user.begin(&r, None, at) {
        Attempt::Send { sent, .. } => sent,
        other => panic!("{other:?}"),
    };
    let first = go(&mut user, t0);
    let second = go(&mut user, t0 + ms(50));
    for (sent, at) in [(first, 60), (second, 61)] {
        let f = user.finish(&r, None, sent, Outcome::Error, unavailable(), t0 + ms(at));
        assert_eq!(f.request, None);
    }
    // The first timer sends the last copy, 2 ms late.
    assert_eq!(user.due(), Some(t0 + ms(60)));
    let third = go(&mut user, t0 + ms(62));
    // The second timer finds nothing to send and a copy in flight: the
    // call goes on, and nothing more is due (not the past timer forever).
    assert_eq!(user.due(), Some(t0 + ms(61)));
    assert_eq!(user.begin(&r, None, t0 + ms(63)), Attempt::Held);
    assert_eq!(user.due(), None);
    let f = user.finish(&r, None, third, Outcome::Error, unavailable(), t0 + ms(90));
    assert!(f.request.is_some(), "the last copy failed: the call ends");
}

#[test]
fn a_status_grpc_does_not_retry_still_counts_for_other_throttles() {
    // A breaker that opens at one failure hears of a 500 under gRPC's
    // policy, though gRPC's own bucket would take no token for it.
    let r = grpc(GrpcImplementation::Core);
    let mut breaker = Throttle::new(ThrottleConfig::CircuitBreaker {
        failure_ratio: 1.0,
        min_requests: 1000,
        window: Duration::from_secs(10),
        consecutive: Some(1),
        cooldown: Duration::from_secs(5),
        probes: 1,
    });
    let mut user = User::new(&r, user_rng(8, 0), Duration::ZERO);
    let t0 = user.due().unwrap();
    let Attempt::Send { sent, .. } = user.begin(&r, Some(&mut breaker), t0) else {
        panic!("the first attempt goes");
    };
    let internal = Hints {
        status: Some(500),
        ..Hints::default()
    };
    user.finish(&r, Some(&mut breaker), sent, Outcome::Error, internal, t0);
    let t1 = user.due().unwrap();
    assert!(matches!(
        user.begin(&r, Some(&mut breaker), t1),
        Attempt::Rejected(_)
    ));
}
