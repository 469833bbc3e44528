//! One user on the network: the state its lane's users share (connections,
//! timer) and the run's users share (rules, throttle, recorder), and the
//! task that drives a [`User`] through its attempts. The client runs its
//! population with it, and a tier of a chain its calls inward.

use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::balance::Balance;
use super::connections::Connections;
use super::target::Target;
use super::timer::{Sleep, Timer};
use crate::model::outcome::{Hints, Outcome};
use crate::model::user::{Attempt, Rules, Sent, User};
use crate::policy::Throttle;
use crate::report::counts::ClientRecorder;

/// What every user shares, whatever its lane.
pub(super) struct Common {
    pub(super) recorder: ClientRecorder,
    pub(super) rules: Rules,
    pub(super) throttle: Option<Mutex<Throttle>>,
    /// The run's time origin: users and the throttle count from it.
    pub(super) epoch: Instant,
    /// Users waiting for a rate limiter's token sleep on it too, to be
    /// woken one at a time when the throttle says so, in any lane.
    pub(super) waiters: Notify,
    /// Users moving from busy lanes to idle ones.
    pub(super) balance: Balance<Mover>,
}

/// A user as it moves between lanes: its whole state.
pub(super) type Mover = User<Xoshiro256PlusPlus>;

impl Common {
    pub(super) fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// The instant `since` after the epoch; beyond what an `Instant` holds,
    /// a century away (never, for a run).
    pub(super) fn at(&self, since: Duration) -> Instant {
        const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
        self.epoch
            .checked_add(since)
            .unwrap_or(self.epoch + CENTURY)
    }

    /// The throttle, locked, if there is one.
    pub(super) fn throttle(&self) -> Option<MutexGuard<'_, Throttle>> {
        self.throttle
            .as_ref()
            .map(|t| t.lock().expect("throttle lock poisoned"))
    }
}

/// What the users of one lane share: its connections and its timer,
/// both served by the lane's own runtime.
pub(super) struct Shared {
    pub(super) pool: Connections,
    /// Wakes users for their attempts, on the configured steps.
    pub(super) timer: Timer,
    pub(super) common: Arc<Common>,
    /// Which lane this is.
    pub(super) lane: usize,
}

impl Shared {
    /// Lane `lane`'s connections and timer, on the current runtime.
    pub(super) fn start(
        target: Target,
        resolution: Duration,
        common: Arc<Common>,
        lane: usize,
    ) -> std::io::Result<Self> {
        Ok(Shared {
            pool: Connections::new(target, {
                let common = common.clone();
                Arc::new(move |opened| common.recorder.connection(opened))
            }),
            timer: Timer::start(resolution)?,
            common,
            lane,
        })
    }
}

/// How an attempt on the network ended, and when (read as it lands).
type Landed = (Outcome, Hints, Duration);

/// One attempt on the network.
async fn attempt(shared: Arc<Shared>, deadline: Duration) -> Landed {
    let common = &shared.common;
    let (outcome, hints) = shared.pool.attempt(common.at(deadline)).await;
    (outcome, hints, common.now())
}

/// An attempt in flight, polled by its user's own task: what the user
/// sent, and the exchange that lands it. Dropping it drops its
/// connection, which closes the socket.
struct Flight {
    sent: Sent,
    landing: Pin<Box<dyn Future<Output = Landed> + Send>>,
}

/// The first of `flights` to land, taken out of them with what its user
/// sent. Every flight is polled each time the user's task is woken: a user
/// has one in flight, a few when it hedges. An attempt that panics lands
/// as an error at `now()`, which its user goes on from, as it would from a
/// task of its own that died.
fn land(
    flights: &mut Vec<Flight>,
    cx: &mut Context<'_>,
    now: impl Fn() -> Duration,
) -> Poll<(Sent, Landed)> {
    for i in 0..flights.len() {
        let landing = &mut flights[i].landing;
        let landed = match catch_unwind(AssertUnwindSafe(|| landing.as_mut().poll(cx))) {
            Ok(Poll::Pending) => continue,
            Ok(Poll::Ready(landed)) => landed,
            Err(_) => (Outcome::Error, Hints::default(), now()),
        };
        return Poll::Ready((flights.swap_remove(i).sent, landed));
    }
    Poll::Pending
}

/// How a user's last request ended: whether it succeeded, and how its
/// last attempt ended (`None`: given up before any attempt ended, by a
/// throttle).
pub(super) type Ended = (bool, Option<Outcome>);

/// One simulated user, forever: think, attempt until OK or given up, think
/// again. Its attempts are polled in its own task (a task of their own
/// would cost a spawn, and a wake-up of this one when each lands), one
/// at a time unless it hedges; a hedge that loses is dropped, which closes
/// its connection. It moves to another lane when its own has too much to
/// do ([`Balance::leave`]), between attempts.
///
/// A session ends with its last request, returning how that ended (a
/// user that moved returns `None`). `rules` replace the run's for this
/// user (a tier's call under its caller's deadline); when `cancelled`
/// completes, the attempts in flight are cancelled (their connections
/// closed, recorded as cancelled), nothing more is sent and the user
/// leaves with `None`.
pub(super) async fn user(
    shared: Arc<Shared>,
    mut user: Mover,
    rules: Option<Rules>,
    cancelled: impl Future<Output = ()>,
) -> Option<Ended> {
    let common = shared.common.clone();
    let rules = rules.as_ref().unwrap_or(&common.rules);
    let mut cancelled = pin!(cancelled);
    let mut ended = None;
    let mut flights: Vec<Flight> = Vec::new();
    // The sleep until the next attempt, kept while its instant holds: a
    // dropped sleep stays in the timer's wheel until its deadline.
    let mut sleep: Option<(Duration, Pin<Box<Sleep>>)> = None;
    loop {
        if user.is_gone() {
            // A session of open traffic that made its last request.
            common.balance.left(shared.lane);
            common.recorder.session_left();
            return ended;
        }
        if flights.is_empty()
            && !user.is_waiting()
            && let Some(to) = common.balance.leave(shared.lane)
        {
            common.balance.arrive(to, user);
            return None;
        }
        // Nothing due while the user only waits for its attempts.
        let due = user.due();
        if due != sleep.as_ref().map(|(at, _)| *at) {
            sleep = due.map(|at| (at, Box::pin(shared.timer.sleep_until(common.at(at)))));
        }
        tokio::select! {
            biased;
            (sent, (outcome, hints, now)) = poll_fn(|cx| land(&mut flights, cx, || common.now())), if !flights.is_empty() => {
                let mut throttle = common.throttle();
                let finished =
                    user.finish(rules, throttle.as_deref_mut(), sent, outcome, hints, now);
                common.recorder.finished(finished);
                if finished.wake_a_waiter {
                    common.waiters.notify_one();
                }
                if let Some(request) = finished.request {
                    ended = Some((request.latency.is_some(), Some(outcome)));
                    // The others lost: cancelled, their connections closed.
                    let now = common.now();
                    for flight in flights.drain(..) {
                        let record = flight.sent.cancel(throttle.as_deref_mut(), now);
                        common.recorder.attempt_finished(record);
                    }
                }
            }
            () = &mut cancelled => {
                let now = common.now();
                let mut throttle = common.throttle();
                for flight in flights.drain(..) {
                    let record = flight.sent.cancel(throttle.as_deref_mut(), now);
                    common.recorder.attempt_finished(record);
                }
                // Given up, as the virtual engine gives it up.
                common.recorder.request_finished(user.cancel(rules, now));
                common.balance.left(shared.lane);
                common.recorder.session_left();
                return None;
            }
            () = common.waiters.notified(), if user.is_waiting() => {
                user.wake(common.now());
            }
            () = async { sleep.as_mut().expect("a sleep while due").1.as_mut().await }, if sleep.is_some() => {
                sleep = None;
                let begun = user.begin(rules, common.throttle().as_deref_mut(), common.now());
                match begun {
                    // The loop sleeps until the token is there.
                    Attempt::Wait => {}
                    Attempt::Refused(request) => {
                        common.recorder.request_finished(request);
                        ended = Some((false, None));
                    }
                    Attempt::Rejected(finished) => {
                        common.recorder.finished(finished);
                        if finished.request.is_some() {
                            ended = Some((false, Some(finished.attempt.outcome)));
                        }
                    }
                    Attempt::Held => {}
                    Attempt::Send { deadline, sent } => {
                        common.recorder.attempt_started();
                        flights.push(Flight {
                            sent,
                            landing: Box::pin(attempt(shared.clone(), deadline)),
                        });
                    }
                }
            }
        }
    }
}
