//! Where a service keeps the requests it cannot start yet, from the burst
//! probe: pure, each connection's fate in, the queue's kind out.
//!
//! The burst opens `B` connections at once, each sending one request,
//! and watches them for a short hold. Each ends one of four ways
//! ([`Fate`]): its SYN was sent again (the kernel's count of the socket's
//! retransmissions after the connect, or a connect that took
//! [`SYN_DROPPED_FROM`] or longer, or never completed: the service's
//! listen backlog was full and its kernel dropped the SYN); it was
//! refused (an answer other than success, or the connection closed or
//! reset with no answer); it was answered; or it was still waiting when
//! the hold ended. What the shares say ([`classify`]):
//!
//! - **Dropped SYNs**: the service takes connections in only as it can
//!   start their work, and the kernel's listen backlog is its queue
//!   (gunicorn's sync workers; the project's `--queue backlog`). Its depth
//!   is the connections let in, less one (Linux holds `backlog + 1`
//!   connections: `sk_acceptq_is_full` compares with `>`), less those
//!   finished while the burst arrived. Its workers in service when the
//!   last SYN came may make it too deep by as many.
//! - **Refusals**: the service takes every connection in and refuses
//!   requests past a queue of its own (a bounded executor; the project's
//!   `--queue K`). When the last request came its queue was full, and
//!   everything it had taken in was in service, waiting or finished: its
//!   places are the requests it held (answered or waiting), less those in
//!   service, less those finished while the burst arrived.
//! - **Neither**: it held the whole burst, so its queue holds at least
//!   that many, counted the same way.
//!
//! Those finished while the burst arrived are the answers that reached
//! the prober before its last request was written (the caller's count,
//! from the kernel's time of each answer's arrival): a service of 2,000
//! answers a second finishes 200 while a burst takes 100 ms to send, and
//! takes as many more in than its queue holds.
//!
//! A kind is told from [`SIGN_FROM`] of the burst or more (at least two
//! connections): a few stray refusals or a slow connect do not make one.
//!
//! Where the kernel told the listen queue in front of a service on this
//! machine ([`Listen`]), a backlog's depth is the kernel's, not the count
//! of those let in: a service that accepts ahead of its workers (asyncio's
//! loop takes as many as its backlog at each wake; waitress up to its
//! connection limit) lets in more than its kernel holds, but only the
//! kernel's queue fills while it is stopped. What it let in beyond the
//! kernel's queue, its workers and those finished, it took in itself
//! ([`taken_in`]). Where fewer were let in than the kernel's queue holds,
//! SYNs were dropped before it filled (a SYN queue, a filter) and the
//! count stands.

use serde::{Deserialize, Serialize};

/// A connect this long or longer had its first SYN dropped: Linux sends
/// the first retransmission after 1 s (`TCP_TIMEOUT_INIT`), and on an
/// open path a handshake takes far less.
pub const SYN_DROPPED_FROM: f64 = 0.9;

/// The share of the burst that tells a kind: 1 %.
pub const SIGN_FROM: f64 = 0.01;

/// How one connection of the burst ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fate {
    /// Its SYN was sent again: its connect took [`SYN_DROPPED_FROM`] or
    /// longer, did not end, or the socket counted a retransmission.
    Dropped,
    /// Answered other than success, or closed or reset unanswered.
    Refused,
    /// Answered with success.
    Answered,
    /// Connected and sent, no answer yet when the hold ended.
    Waiting,
}

impl Fate {
    /// The fate of a connection whose connect took `connect_s` seconds
    /// (`None`: it had not connected when the hold ended), whose socket
    /// had sent its SYN again by the connect's end if `syn_resent` (the
    /// kernel's count, which a busy prober's late look cannot inflate),
    /// and whose request then ended as `after` (`None`: not yet; true: a
    /// success).
    pub fn of(connect_s: Option<f64>, syn_resent: bool, after: Option<bool>) -> Fate {
        match (connect_s, after) {
            (None, _) => Fate::Dropped,
            _ if syn_resent => Fate::Dropped,
            (Some(s), _) if s >= SYN_DROPPED_FROM => Fate::Dropped,
            (Some(_), None) => Fate::Waiting,
            (Some(_), Some(true)) => Fate::Answered,
            (Some(_), Some(false)) => Fate::Refused,
        }
    }
}

/// The burst's fates, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Connections whose SYN was dropped.
    pub dropped: u32,
    /// Requests refused.
    pub refused: u32,
    /// Requests answered with success.
    pub answered: u32,
    /// Requests still waiting at the hold's end.
    pub waiting: u32,
}

impl Tally {
    /// The tally of `fates`.
    pub fn of(fates: &[Fate]) -> Tally {
        let mut tally = Tally::default();
        for fate in fates {
            match fate {
                Fate::Dropped => tally.dropped += 1,
                Fate::Refused => tally.refused += 1,
                Fate::Answered => tally.answered += 1,
                Fate::Waiting => tally.waiting += 1,
            }
        }
        tally
    }

    /// Connections in the burst.
    pub fn total(&self) -> u32 {
        self.dropped + self.refused + self.answered + self.waiting
    }

    /// Connections let in: those whose SYN was not dropped.
    pub fn let_in(&self) -> u32 {
        self.total() - self.dropped
    }

    /// Whether `count` of the burst is a sign of a kind ([`SIGN_FROM`]).
    fn is_sign(&self, count: u32) -> bool {
        count >= 2 && f64::from(count) >= SIGN_FROM * f64::from(self.total())
    }
}

/// The kernel's listen queue in front of the service, as the kernel told
/// it: the listening sockets that take the service's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listen {
    /// Sockets listening for it (more than one share the port with
    /// `SO_REUSEPORT`, each its own queue).
    pub listeners: u32,
    /// Their listen backlogs, summed, as the kernel keeps them (listen(2)'s
    /// argument, at most `net.core.somaxconn`).
    pub backlog: u32,
}

impl Listen {
    /// Connections the kernel holds: each listener its backlog and one
    /// more (`sk_acceptq_is_full` compares with `>`).
    pub fn holds(&self) -> u32 {
        self.backlog.saturating_add(self.listeners)
    }
}

/// Where the service keeps requests it cannot start yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Queue {
    /// In the kernel's listen backlog, `depth` connections deep.
    Backlog {
        /// Connections the backlog holds (the `listen` backlog).
        depth: u32,
    },
    /// In a queue of its own, refusing past `places`.
    Refuses {
        /// Requests the queue holds beyond those in service.
        places: u32,
    },
    /// In a queue that held the whole burst: `places` or more.
    Holds {
        /// Requests it held beyond those in service: a lower bound.
        places: u32,
    },
}

impl Queue {
    /// The name written in results: `backlog`, `refuses`, `holds`.
    pub fn name(self) -> &'static str {
        match self {
            Queue::Backlog { .. } => "backlog",
            Queue::Refuses { .. } => "refuses",
            Queue::Holds { .. } => "holds",
        }
    }
}

/// The queue `tally` shows, `serving` requests being in service (a pool's
/// workers; 0 where the twin has none, every connection let in then
/// counting as queued), `finished` the requests finished while the burst
/// arrived, and `listen` the kernel's listen queue if it told it (module
/// doc). Dropped SYNs tell first: a service that refuses past a queue of
/// its own still takes the connections in.
pub fn classify(tally: &Tally, serving: u32, finished: u32, listen: Option<Listen>) -> Queue {
    if tally.is_sign(tally.dropped) {
        let counted = tally.let_in().saturating_sub(finished);
        // Fewer let in than the kernel's queue holds: SYNs were dropped
        // before it filled (a SYN queue, a filter), and the count stands.
        let held = listen.map_or(counted, |l| l.holds().min(counted));
        // A backlog of one is the least a listener has.
        return Queue::Backlog {
            depth: held.saturating_sub(1).max(1),
        };
    }
    let held = tally.answered + tally.waiting;
    let places = held.saturating_sub(serving).saturating_sub(finished);
    if tally.is_sign(tally.refused) {
        Queue::Refuses { places }
    } else {
        Queue::Holds { places }
    }
}

/// The connections a service whose kernel told its `listen` queue, and
/// whose SYNs were dropped, took in itself beyond that queue, its
/// `serving` workers and the `finished` (module doc); `None` where the
/// kernel did not tell or the queue is not the backlog.
pub fn taken_in(tally: &Tally, serving: u32, finished: u32, listen: Option<Listen>) -> Option<u32> {
    let listen = listen.filter(|_| tally.is_sign(tally.dropped))?;
    Some(
        tally.let_in().saturating_sub(
            listen
                .holds()
                .saturating_add(serving)
                .saturating_add(finished),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(dropped: u32, refused: u32, answered: u32, waiting: u32) -> Tally {
        Tally {
            dropped,
            refused,
            answered,
            waiting,
        }
    }

    #[test]
    fn a_connect_of_a_second_or_none_at_all_is_a_dropped_syn() {
        assert_eq!(Fate::of(None, false, None), Fate::Dropped);
        assert_eq!(Fate::of(Some(1.02), false, Some(true)), Fate::Dropped);
        assert_eq!(Fate::of(Some(0.9), false, None), Fate::Dropped);
        assert_eq!(Fate::of(Some(0.0004), false, None), Fate::Waiting);
        assert_eq!(Fate::of(Some(0.0004), false, Some(true)), Fate::Answered);
        assert_eq!(Fate::of(Some(0.0004), false, Some(false)), Fate::Refused);
        // The kernel's count tells a drop whatever the prober timed.
        assert_eq!(Fate::of(Some(0.2), true, Some(true)), Fate::Dropped);
        let fates = [Fate::Dropped, Fate::Waiting, Fate::Dropped, Fate::Refused];
        assert_eq!(Tally::of(&fates), tally(2, 1, 0, 1));
    }

    #[test]
    fn gunicorns_burst_is_its_listen_backlog() {
        // listen(1000): Linux lets 1,001 wait; of 2,048 connections 1,047
        // SYNs dropped, and the 1,001 let in less the one Linux adds is
        // 1,000.
        let burst = tally(1047, 0, 0, 1001);
        assert_eq!(
            classify(&burst, 20, 0, None),
            Queue::Backlog { depth: 1000 }
        );
        // Had its 20 workers taken 20 in during the burst, 1,021 got in:
        // 20 too deep.
        let burst = tally(1027, 0, 0, 1021);
        assert_eq!(
            classify(&burst, 20, 0, None),
            Queue::Backlog { depth: 1020 }
        );
        // At 200 answers a second over a burst of 50 ms, 10 finished and
        // 10 more got in.
        let burst = tally(1037, 0, 10, 1001);
        assert_eq!(
            classify(&burst, 20, 10, None),
            Queue::Backlog { depth: 1000 }
        );
        // One let in of 64 would be a backlog of none: the server's least
        // is one.
        assert_eq!(
            classify(&tally(63, 0, 1, 0), 2, 0, None),
            Queue::Backlog { depth: 1 }
        );
        // Refusals beside the drops do not change the kind.
        let burst = tally(1047, 300, 0, 701);
        assert_eq!(
            classify(&burst, 20, 0, None),
            Queue::Backlog { depth: 1000 }
        );
    }

    #[test]
    fn the_kernels_queue_is_the_backlog_and_the_rest_was_taken_in() {
        let told = |listeners, backlog| Some(Listen { listeners, backlog });
        // aiohttp's loop of one worker, listen(1000): 1,001 in the
        // kernel's queue, one in service, 50 finished, and 2,400 the loop
        // accepted itself while it ran: 3,452 let in of 5,000.
        let burst = tally(1548, 0, 50, 3402);
        assert_eq!(
            classify(&burst, 1, 50, told(1, 1000)),
            Queue::Backlog { depth: 1000 }
        );
        assert_eq!(taken_in(&burst, 1, 50, told(1, 1000)), Some(2400));
        // Counted, the loop's own would be the backlog's.
        assert_eq!(
            classify(&burst, 1, 50, None),
            Queue::Backlog { depth: 3401 }
        );
        assert_eq!(taken_in(&burst, 1, 50, None), None);
        // gunicorn's sync workers take one each: 1,001 and 20 let in,
        // none taken in, the count's 20 too deep gone.
        let burst = tally(1027, 0, 0, 1021);
        assert_eq!(
            classify(&burst, 20, 0, told(1, 1000)),
            Queue::Backlog { depth: 1000 }
        );
        assert_eq!(taken_in(&burst, 20, 0, told(1, 1000)), Some(0));
        // Two listeners sharing the port: 2 × 101 held, depth 201.
        assert_eq!(
            classify(&tally(500, 0, 0, 204), 2, 0, told(2, 200)),
            Queue::Backlog { depth: 201 }
        );
        // Drops with fewer let in than the kernel holds: not its queue's.
        assert_eq!(
            classify(&tally(900, 0, 0, 100), 0, 0, told(1, 1000)),
            Queue::Backlog { depth: 99 }
        );
        // Where no SYN was dropped the kernel's queue did not fill: the
        // service's own queue tells, as counted.
        let held = tally(0, 0, 40, 2008);
        assert_eq!(
            classify(&held, 20, 0, told(1, 1000)),
            Queue::Holds { places: 2028 }
        );
        assert_eq!(taken_in(&held, 20, 0, told(1, 1000)), None);
    }

    #[test]
    fn a_bounded_executor_refuses_past_its_places() {
        // 2 workers and 8 places: of 64 requests 10 held (2 answered
        // within the hold), 54 answered 503.
        let burst = tally(0, 54, 2, 8);
        assert_eq!(classify(&burst, 2, 0, None), Queue::Refuses { places: 8 });
        // 20 workers of 10 ms and 1,000 places, a burst of 5,000 arriving
        // over 100 ms: 200 finished meanwhile, whose places went to
        // requests that came after them, so 1,220 held.
        let burst = tally(0, 3780, 1220, 0);
        assert_eq!(
            classify(&burst, 20, 200, None),
            Queue::Refuses { places: 1000 }
        );
    }

    #[test]
    fn a_service_that_held_the_burst_holds_at_least_as_many() {
        assert_eq!(
            classify(&tally(0, 0, 40, 2008), 20, 0, None),
            Queue::Holds { places: 2028 }
        );
        // Without workers (a curve), every request held counts.
        assert_eq!(
            classify(&tally(0, 0, 64, 0), 0, 0, None),
            Queue::Holds { places: 64 }
        );
    }

    #[test]
    fn fewer_than_one_in_a_hundred_or_a_lone_one_is_no_sign() {
        // 20 of 2,048 is under 1 %; 21 is over.
        assert_eq!(
            classify(&tally(20, 0, 0, 2028), 20, 0, None),
            Queue::Holds { places: 2008 }
        );
        assert_eq!(
            classify(&tally(21, 0, 0, 2027), 20, 0, None),
            Queue::Backlog { depth: 2026 }
        );
        // One of 64 is over 1 %, but one alone tells nothing.
        assert_eq!(
            classify(&tally(0, 1, 0, 63), 2, 0, None),
            Queue::Holds { places: 61 }
        );
        assert_eq!(
            classify(&tally(0, 2, 0, 62), 2, 0, None),
            Queue::Refuses { places: 60 }
        );
    }
}
