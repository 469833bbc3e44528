//! The host's backlog, pauses and disconnects, worked out by hand.

use super::*;
use crate::model::latency::LatencyModel;

impl Request for u32 {
    const TIER: bool = false;

    fn deadline(&self) -> Option<Duration> {
        None
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn host(backlog: u32, on_disconnect: OnDisconnect) -> Host<u32> {
    Host::new(&ServerConfig {
        backlog,
        on_disconnect,
        ..ServerConfig::default()
    })
}

/// delay(c) = 100 ms * 2^(c - 1).
fn doubling(on_disconnect: OnDisconnect) -> Host<u32> {
    Host::new(&ServerConfig {
        model: LatencyModel {
            base: ms(100),
            limit: 1,
            factor: 2.0,
            scale: 1.0,
            max_delay: Duration::from_secs(60),
        },
        on_disconnect,
        ..ServerConfig::default()
    })
}

fn complete_all(h: &mut Host<u32>, now: Duration, waiting: &[u32]) -> Vec<u32> {
    let mut answered = Vec::new();
    h.advance(now, |id, _| {
        let w = waiting.contains(&id);
        if w {
            answered.push(id);
        }
        w
    });
    answered
}

#[test]
fn a_running_server_admits_at_once_and_answers_after_the_base_delay() {
    let mut h = host(4096, OnDisconnect::Continue);
    assert!(matches!(h.send(ms(10), 1, false), Delivery::Admitted(_)));
    assert_eq!(h.concurrency(), 1);
    assert_eq!(h.next_completion(), Some(ms(110)));
    assert_eq!(complete_all(&mut h, ms(110), &[1]), vec![1]);
    assert_eq!((h.totals().completed, h.totals().abandoned), (1, 0));
    assert_eq!(h.next_completion(), None);
}

#[test]
fn a_cascade_of_completions_at_one_instant() {
    // delay(c) = 100 ms * 2^(c - 1): with three in flight, 400 ms.
    let mut h = doubling(OnDisconnect::Continue);
    let tickets: Vec<Ticket> = [0, 10, 20]
        .into_iter()
        .enumerate()
        .map(|(i, at)| match h.send(ms(at), i as u32, false) {
            Delivery::Admitted(ticket) => ticket,
            other => panic!("a running server admits: {other:?}"),
        })
        .collect();
    // The first is due at 0 + 400 ms. Its completion brings the delay
    // to 200 ms, which the second (10 + 200) has already passed, and
    // then to 100 ms, which the third (20 + 100) has passed too.
    assert_eq!(h.next_completion(), Some(ms(400)));
    assert!(complete_all(&mut h, ms(399), &[0, 1, 2]).is_empty());
    // The second client gives up at 300 ms: the model holds its work for
    // nobody, and its completion is wasted work.
    assert!(!h.disconnect(ms(300), tickets[1]), "the work goes on");
    assert_eq!(h.held(ms(300)).count, 1);
    assert_eq!(h.held(ms(300)).time, ms(290), "held since 10 ms");
    assert_eq!(complete_all(&mut h, ms(400), &[0, 2]), vec![0, 2]);
    assert_eq!((h.totals().completed, h.totals().abandoned), (2, 1));
    assert_eq!(h.totals().abandoned_time, ms(390), "in the model 10-400 ms");
    assert_eq!(h.held(ms(400)), Held::default());
    assert_eq!(h.concurrency(), 0);
}

#[test]
fn a_full_backlog_drops_connections_but_not_requests_on_open_ones() {
    // A backlog of 1 holds two connections, as Linux's does.
    let mut h = host(1, OnDisconnect::Continue);
    h.stop();
    assert_eq!(h.send(ms(1), 1, false), Delivery::Waiting);
    assert_eq!(h.send(ms(2), 2, false), Delivery::Waiting);
    assert_eq!(h.send(ms(3), 3, false), Delivery::Dropped);
    // A pooled connection is already accepted: its request just waits.
    assert_eq!(h.send(ms(4), 4, true), Delivery::Waiting);
    assert_eq!(h.retry_connect(ms(5), 3), Delivery::Dropped);
    assert_eq!(h.concurrency(), 0);
    assert_eq!(
        h.next_completion(),
        None,
        "a stopped server completes nothing"
    );
    // At resume every waiting request is read, gone or not (1 is gone).
    let mut read = Vec::new();
    h.resume(
        ms(500),
        |&id| id == 1,
        |_| false,
        |id, fate| read.push((id, fate)),
    );
    assert_eq!(read.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 4]);
    assert!(read.iter().all(|r| matches!(r.1, Delivery::Admitted(_))));
    assert_eq!(h.concurrency(), 3);
    assert_eq!(h.books.peak, 3);
    // The backlog is free again, and the server runs.
    assert!(matches!(h.retry_connect(ms(501), 3), Delivery::Admitted(_)));
    assert_eq!(complete_all(&mut h, ms(601), &[2, 3, 4]), vec![2, 4, 3]);
    assert_eq!((h.totals().completed, h.totals().abandoned), (3, 1));
}

#[test]
fn cancel_mode_drops_gone_requests_when_it_notices() {
    let mut h = host(8, OnDisconnect::Cancel);
    let Delivery::Admitted(ticket) = h.send(ms(0), 1, false) else {
        panic!("a running server admits");
    };
    h.stop();
    h.send(ms(10), 2, false);
    h.send(ms(20), 3, false);
    // Client 1 gives up while the server is stopped: noticed at resume.
    assert!(!h.disconnect(ms(50), ticket), "not noticed yet");
    assert_eq!(h.concurrency(), 1);
    let mut read = Vec::new();
    h.resume(ms(80), |&id| id == 2, |_| false, |id, _| read.push(id));
    assert_eq!(read, vec![3]);
    assert_eq!(h.concurrency(), 1);
    // Both dropped requests are counted as they are taken.
    assert!(complete_all(&mut h, ms(80), &[3]).is_empty());
    assert_eq!(h.totals().abandoned, 2);
}

#[test]
fn a_disconnect_that_lowers_the_delay_completes_others_at_once() {
    let mut h = doubling(OnDisconnect::Cancel);
    let Delivery::Admitted(first) = h.send(ms(0), 0, false) else {
        panic!("a running server admits");
    };
    h.send(ms(0), 1, false);
    // Two in flight: 200 ms each. The first client leaves at 150 ms;
    // alone, the second is past its 100 ms and done then.
    assert!(h.disconnect(ms(150), first), "cancelled at once");
    assert!(!h.disconnect(ms(150), first), "already gone");
    assert_eq!(h.next_completion(), Some(ms(150)), "the second's answer");
    assert_eq!(complete_all(&mut h, ms(150), &[1]), vec![1]);
    assert_eq!((h.totals().completed, h.totals().abandoned), (1, 1));
}

#[test]
fn shedding_refuses_at_the_threshold() {
    let mut h: Host<u32> = Host::new(&ServerConfig {
        shed: Some(crate::model::server::Shedding {
            above: 1,
            status: 503,
            retry_after: Duration::from_secs(1),
        }),
        ..ServerConfig::default()
    });
    assert!(matches!(h.send(ms(0), 1, false), Delivery::Admitted(_)));
    assert_eq!(h.send(ms(1), 2, false), Delivery::Refused(Refusal::Shed));
    assert_eq!(h.totals().shed, 1);
    complete_all(&mut h, ms(100), &[1]);
    assert!(matches!(h.send(ms(101), 3, false), Delivery::Admitted(_)));
}

#[test]
fn a_pool_notices_at_resume_who_left_during_the_pause_before_serving() {
    use crate::model::server::{PoolModel, Shape};
    let mut h: Host<u32> = Host::new(&ServerConfig {
        shape: Shape::Pool(PoolModel::constant(1, ms(100), 10)),
        on_disconnect: OnDisconnect::Cancel,
        ..ServerConfig::default()
    });
    assert!(matches!(h.send(ms(0), 1, false), Delivery::Admitted(_)));
    let Delivery::Admitted(second) = h.send(ms(0), 2, false) else {
        panic!("queued");
    };
    h.stop();
    // The second client leaves during the pause; at resume the server
    // notices before its worker, free since 100 ms, takes the request.
    h.disconnect(ms(1000), second);
    h.resume(ms(2000), |_| false, |_| false, |_, _| {});
    assert_eq!(complete_all(&mut h, ms(2000), &[1]), vec![1]);
    assert_eq!(h.concurrency(), 0, "dropped unserved, not started");
    assert_eq!((h.totals().completed, h.totals().abandoned), (1, 1));
    assert_eq!(h.totals().abandoned_time, ms(2000), "queued 0-2000 ms");
    assert_eq!(h.held(ms(2000)), Held::default());
}

/// Every answer by `until`, event by event as the engine goes.
fn step_until(h: &mut Host<u32>, until: u64, waiting: &[u32]) -> Vec<u32> {
    let mut answered = Vec::new();
    while let Some(next) = h.next_completion().filter(|&t| t <= ms(until)) {
        answered.extend(complete_all(h, next, waiting));
    }
    answered
}

/// One worker serving 100 ms, waiting in a backlog of 1 (two places).
fn backlog_pool() -> Host<u32> {
    use crate::model::server::{PoolModel, Shape};
    Host::new(&ServerConfig {
        shape: Shape::Pool(PoolModel::backlog(1, ms(100))),
        backlog: 1,
        ..ServerConfig::default()
    })
}

#[test]
fn a_pool_waiting_in_the_backlog_drops_attempts_beyond_it_while_it_runs() {
    let mut h = backlog_pool();
    assert!(!h.keeps_alive(), "one request a connection");
    assert!(matches!(h.send(ms(0), 1, false), Delivery::Admitted(_)));
    let Delivery::Admitted(second) = h.send(ms(1), 2, false) else {
        panic!("waits in the backlog");
    };
    assert!(matches!(h.send(ms(2), 3, false), Delivery::Admitted(_)));
    assert_eq!(h.send(ms(3), 4, false), Delivery::Dropped);
    assert_eq!(h.totals().refused, 0, "a dropped SYN is no answer");
    // The second's client gives up while its connection waits: its worker
    // serves it all the same (wasted work).
    assert!(!h.disconnect(ms(50), second));
    assert_eq!(complete_all(&mut h, ms(100), &[1, 3]), vec![1]);
    // Room for the retransmitted SYN once the first has left.
    assert!(matches!(h.retry_connect(ms(100), 4), Delivery::Admitted(_)));
    assert_eq!(step_until(&mut h, 400, &[3, 4]), vec![3, 4]);
    assert_eq!((h.totals().completed, h.totals().abandoned), (3, 1));
}

#[test]
fn a_stopped_pool_waiting_in_the_backlog_counts_its_waiting_connections() {
    let mut h = backlog_pool();
    assert!(matches!(h.send(ms(0), 1, false), Delivery::Admitted(_)));
    assert!(matches!(h.send(ms(1), 2, false), Delivery::Admitted(_)));
    h.stop();
    // One place left of the two: the model holds one connection waiting.
    assert_eq!(h.send(ms(10), 3, false), Delivery::Waiting);
    assert_eq!(h.send(ms(11), 4, false), Delivery::Dropped);
    let mut read = Vec::new();
    h.resume(
        ms(500),
        |_| false,
        |_| false,
        |id, fate| read.push((id, fate)),
    );
    assert_eq!(read.len(), 1);
    assert!(matches!(read[0], (3, Delivery::Admitted(_))));
    // The worker, free since 100 ms, took 2 at the resume; 3 waits.
    assert_eq!(step_until(&mut h, 600, &[1, 2, 3]), vec![1, 2]);
    assert_eq!(step_until(&mut h, 700, &[3]), vec![3]);
}

#[test]
fn requests_on_a_connection_closed_at_resume_are_not_read() {
    let mut h = host(8, OnDisconnect::Continue);
    h.stop();
    for id in 1..=4u32 {
        assert_eq!(h.send(ms(u64::from(id)), id, true), Delivery::Waiting);
    }
    // 2 and 3 were on a connection the server closes unread; 3 is gone.
    let mut read = Vec::new();
    h.resume(
        ms(500),
        |&id| id == 3,
        |&id| id == 2 || id == 3,
        |id, _| read.push(id),
    );
    assert_eq!(read, vec![1, 4]);
    assert_eq!(h.concurrency(), 2);
    assert_eq!(h.books.gone, 0, "nothing read was gone");
}
