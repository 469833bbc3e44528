//! The service's gates and shapes together, worked out by hand.

use super::*;
use crate::model::server::{PoolModel, Shedding};
use crate::policy::defence::{AdmissionConfig, CoDel, LimiterConfig, LimiterKind};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn pool(workers: u32, queue: u32) -> ServerConfig {
    ServerConfig {
        shape: Shape::Pool(PoolModel::constant(workers, ms(100), queue)),
        ..ServerConfig::default()
    }
}

/// Everything that left by `until`, looking at every event as the
/// engines do, each answer received.
fn run(s: &mut Service<u32>, until: u64) -> Vec<(u32, Exit)> {
    while let Some(next) = s.next_event().filter(|&t| t <= ms(until)) {
        s.advance(next);
    }
    s.advance(ms(until));
    let mut out = Vec::new();
    s.drain(|d| {
        out.push((d.payload, d.exit));
        true
    });
    out
}

#[test]
fn departures_a_cancel_finds_wait_to_be_handed_out() {
    // delay(1) = 100 ms, doubling with every further request.
    let mut s: Service<u32> = Service::new(&ServerConfig {
        model: crate::model::latency::LatencyModel {
            base: ms(100),
            limit: 1,
            factor: 2.0,
            scale: 1.0,
            max_delay: Duration::from_secs(60),
        },
        ..ServerConfig::default()
    });
    let first = s.admit(ms(0), 1).expect("admitted");
    s.admit(ms(0), 2).expect("admitted");
    assert_eq!(s.next_event(), Some(ms(200)), "two in flight: 200 ms");
    // The first client leaves at 150 ms: alone, the second is past its
    // 100 ms and leaves then; it waits to be handed out, due now.
    s.cancel(ms(150), first);
    assert_eq!(s.undrained(), Some(ms(150)));
    assert_eq!(s.next_event(), None, "nothing in flight");
    let mut out = Vec::new();
    s.drain(|d| {
        out.push((d.payload, d.exit, d.at));
        true
    });
    assert_eq!(
        out,
        vec![(2, Exit::Served, ms(150)), (1, Exit::Cancelled, ms(150))]
    );
    assert_eq!(s.undrained(), None, "all handed out");
}

#[test]
fn shedding_counts_a_pools_queue_as_in_flight() {
    let mut s = Service::new(&ServerConfig {
        shed: Some(Shedding {
            above: 3,
            status: 503,
            retry_after: Duration::from_secs(1),
        }),
        ..pool(2, 10)
    });
    for id in 0..3 {
        assert!(s.admit(ms(0), id).is_ok());
    }
    assert_eq!(
        s.gauges(),
        Gauges {
            queue: 1,
            busy: 2,
            limit: None
        }
    );
    assert_eq!(s.admit(ms(1), 3), Err((3, Refusal::Shed)));
}

#[test]
fn the_limiter_refuses_at_its_limit_and_learns_from_each_answer() {
    let mut s = Service::new(&ServerConfig {
        limiter: Some(LimiterConfig::new(LimiterKind::Aimd)),
        ..pool(40, 0)
    });
    for id in 0..20 {
        assert!(s.admit(ms(0), id).is_ok());
    }
    assert_eq!(s.admit(ms(0), 20), Err((20, Refusal::Limited)));
    // Each of the 20 served was let in with 1..=20 in flight: those with
    // 10 or more (11 of them) were at least half the limit, which grows
    // by one each time: 20 -> 31.
    assert_eq!(run(&mut s, 100).len(), 20);
    assert_eq!(s.gauges().limit, Some(31));
}

#[test]
fn a_queue_timeout_drop_is_a_drop_for_the_limiter() {
    let mut s = Service::new(&ServerConfig {
        limiter: Some(LimiterConfig::new(LimiterKind::Vegas)),
        shape: Shape::Pool(PoolModel {
            codel: Some(CoDel::default()),
            ..PoolModel::constant(1, ms(100), 2)
        }),
        ..ServerConfig::default()
    });
    for id in 0..3 {
        assert!(s.admit(ms(0), id).is_ok());
    }
    // Refused by the full queue at once: a round trip of zero, which
    // Vegas refuses as a sample.
    assert_eq!(s.admit(ms(0), 3), Err((3, Refusal::Full)));
    assert_eq!(s.limiter.as_ref().unwrap().inflight(), 3);
    // "0" (100 ms) sets Vegas' no-load time; "1" waited 100 ms, not
    // over N, and is served by 200 (app-limited: no change); "2"
    // waited 200 ms and is dropped then: Vegas shrinks by L = 1.
    let left = run(&mut s, 1000);
    assert_eq!(
        left,
        vec![(0, Exit::Served), (1, Exit::Served), (2, Exit::Dropped)]
    );
    assert_eq!(s.gauges().limit, Some(19));
    assert_eq!(s.limiter.as_ref().unwrap().inflight(), 0, "no place leaks");
    assert!(s.let_in.is_empty());
}

#[test]
fn admission_control_rejects_after_failures_and_does_not_count_its_own() {
    let mut s = Service::new(&ServerConfig {
        admission: Some(AdmissionConfig::default()),
        ..pool(1, 0)
    });
    // One served, then 99 refused by the full pool: n = 100, s = 1,
    // p = min((100 - 1 / 0.95) / 101, 0.8) = 0.8.
    assert!(s.admit(ms(0), 0).is_ok());
    let mut full = 0;
    let mut rejected = 0;
    for id in 1..1000 {
        match s.admit(ms(1), id) {
            Err((_, Refusal::Full)) => full += 1,
            Err((_, Refusal::Rejected)) => rejected += 1,
            other => panic!("{other:?}"),
        }
    }
    // While the window fills the probability climbs towards 0.8; the
    // rejections are not recorded, so it stays there.
    let share = f64::from(rejected) / 999.0;
    assert!((0.7..0.8).contains(&share), "{share}");
    let admission = s.admission.as_mut().unwrap();
    assert_eq!(admission.counts(ms(1)), (full, 0));
    assert!((admission.probability(ms(1)) - 0.8).abs() < 1e-12);
    // The one served, answered, counts as a success.
    run(&mut s, 100);
    assert_eq!(s.admission.as_mut().unwrap().counts(ms(100)), (full + 1, 1));
}

#[test]
fn a_pool_waiting_in_the_backlog_drops_connections_beyond_it_unanswered() {
    // One worker, 100 ms each, a backlog of 1: Linux's accept queue holds
    // two connections, and a third attempt is dropped.
    let mut s: Service<u32> = Service::new(&ServerConfig {
        shape: Shape::Pool(PoolModel::backlog(1, ms(100))),
        backlog: 1,
        ..ServerConfig::default()
    });
    s.admit(ms(0), 1).expect("served at once");
    s.admit(ms(1), 2).expect("waits");
    s.admit(ms(2), 3).expect("waits");
    assert_eq!(s.backlog_waiting(), 2);
    assert_eq!(s.admit(ms(3), 4), Err((4, Refusal::Unaccepted)));
    // The first leaves at 100 ms, the second is accepted: room for one.
    assert_eq!(run(&mut s, 100), vec![(1, Exit::Served)]);
    assert_eq!(s.backlog_waiting(), 1);
    s.admit(ms(100), 4).expect("room again");
    assert_eq!(s.admit(ms(100), 5), Err((5, Refusal::Unaccepted)));
    assert_eq!(
        run(&mut s, 400),
        vec![(2, Exit::Served), (3, Exit::Served), (4, Exit::Served)]
    );
    // An application queue of the same size answers instead.
    let mut a: Service<u32> = Service::new(&pool(1, 2));
    for (at, id) in [(0, 1), (1, 2), (2, 3)] {
        a.admit(ms(at), id).expect("admitted");
    }
    assert_eq!(a.backlog_waiting(), 0, "its queue is the application's");
    assert_eq!(a.admit(ms(3), 4), Err((4, Refusal::Full)));
}
