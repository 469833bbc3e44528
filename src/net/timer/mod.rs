//! Timers finer than tokio's, for the client's attempt starts and the
//! server's modelled completions.
//!
//! tokio's timer rounds each deadline up to the next millisecond, then parks
//! in `epoll_wait`, whose timeout is itself whole milliseconds: an attempt
//! started after `tokio::time::sleep_until` begins 0-2 ms late (p99 2.07 ms
//! measured at 10,000 req/s). A timerfd has nanosecond resolution and wakes
//! the same epoll the runtime parks in, so one timerfd armed for the
//! earliest deadline, and a task that wakes every sleeper due when it rings,
//! start attempts on time without a thread of their own. Each ring wakes
//! the whole process, so deadlines are rounded up to steps of a [`Grid`]
//! (500 µs by default, zero for exact) and those in one step share a ring.
//! The steps are counted from the monotonic clock's own zero, not from the
//! program's start: a client and a server on one host then ring at the
//! same instants, and each is still awake from its own ring when the
//! other's requests or answers arrive, instead of being woken for them.
//!
//! [`Alarm`] is that timerfd, for one owner (the server's model, which
//! always waits for a single next completion); [`Timer`] serves any number
//! of sleepers with one alarm (the client's users), keeping them in a
//! timing wheel of the grid's steps (`wheel`).
//!
//! A sleep never ends before its deadline. Each time the alarm rings,
//! every sleeper whose deadline has passed is woken at once.
//!
//! Limits: the timerfd counts real time, so these sleeps do not follow
//! tokio's paused clock (`start_paused` tests); and a sleep dropped before
//! its deadline keeps its small place in the wheel until then, which is
//! nothing for the client's users (each awaits its sleep to the end, is
//! stopped with the run, or drops it once when it moves to another lane)
//! but would add up in a loop that drops sleeps.

mod wheel;

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{ClockId as Clock, clock_gettime};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::model::units::nanos;
use wheel::{Timed, Wheel};

/// One timerfd in tokio's reactor: set for an instant, awaited by its
/// owner. Must be created inside a tokio runtime (tokio panics otherwise).
pub struct Alarm {
    fd: AsyncFd<Fd>,
    grid: Grid,
}

/// The instants an alarm may ring at: multiples of `resolution` from
/// `origin`. Deadlines in the same step share one ring, and each ring costs
/// a wake-up of the whole process (on this project's virtual machine, about
/// 20 µs of CPU), so a coarser grid is cheaper and a finer one more exact.
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    /// Where the steps are counted from.
    pub origin: Instant,
    /// The step; zero rings at each deadline exactly.
    pub resolution: Duration,
}

impl Grid {
    /// Steps of `resolution` counted from the zero of the monotonic clock
    /// (which `Instant` reads), so that every alarm of every program on
    /// the host with the same step rings at the same instants (programs in
    /// different time namespaces, as some containers are, have different
    /// zeros and ring apart, as before). Against steps counted from each
    /// program's start this saves wake-ups and CPU in both programs and
    /// makes starts a few microseconds later, since a start now shares its
    /// ring with the answers arriving (results/bench.md).
    pub fn on_clock(resolution: Duration) -> Grid {
        let (now, since_zero) = *CLOCK.get_or_init(read_clock);
        Grid::from_reading(now, since_zero, resolution)
    }

    /// Steps of `resolution` through the clock's zero, given that the
    /// clock read `since_zero` at `now`.
    fn from_reading(now: Instant, since_zero: Duration, resolution: Duration) -> Grid {
        let step = resolution.as_nanos();
        let phase = match step {
            0 => Duration::ZERO,
            _ => Duration::from_nanos((since_zero.as_nanos() % step) as u64),
        };
        Grid {
            origin: now.checked_sub(phase).unwrap_or(now),
            resolution,
        }
    }

    /// The first instant on the grid at or after `deadline`.
    pub fn round_up(&self, deadline: Instant) -> Instant {
        let step = self.resolution.as_nanos();
        if step == 0 {
            return deadline;
        }
        let since = deadline.saturating_duration_since(self.origin).as_nanos();
        let steps = since.div_ceil(step);
        u64::try_from(steps * step)
            .ok()
            .and_then(|nanos| self.origin.checked_add(Duration::from_nanos(nanos)))
            .unwrap_or(deadline)
    }
}

/// The monotonic clock read once for the process, as an instant and as
/// its time since the clock's zero: every grid of the process counts its
/// steps from the same reading, so its alarms agree to the nanosecond.
static CLOCK: OnceLock<(Instant, Duration)> = OnceLock::new();

/// An instant and the monotonic clock's time since its zero at that
/// instant: the reading taken between two of the clock's own that lie
/// closest together, so that a preemption between them does not skew it.
fn read_clock() -> (Instant, Duration) {
    // CLOCK_MONOTONIC cannot fail on Linux; if it did, the zero reading
    // would count the steps from the program's start, as before.
    let since_zero = || {
        clock_gettime(Clock::CLOCK_MONOTONIC)
            .map(Duration::from)
            .unwrap_or_default()
    };
    let mut best: Option<(Duration, Instant, Duration)> = None;
    for _ in 0..8 {
        let before = since_zero();
        // The real clock's instant, even under tokio's paused clock.
        let now = Instant::from_std(std::time::Instant::now());
        let width = since_zero().saturating_sub(before);
        if best.is_none_or(|(narrowest, ..)| width < narrowest) {
            best = Some((width, now, before + width / 2));
        }
        if width < Duration::from_micros(2) {
            break;
        }
    }
    let (_, now, since_zero) = best.expect("the clock was read");
    (now, since_zero)
}

/// The timerfd, in the form tokio's reactor registers.
struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Alarm {
    /// Creates the timerfd, ringing on steps of `resolution` counted from
    /// the monotonic clock's zero ([`Grid::on_clock`]), and registers it
    /// with the current runtime. Fails where none can be had (no file
    /// descriptor left).
    pub fn new(resolution: Duration) -> io::Result<Alarm> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // SAFETY: `Fd` owns the timerfd, which stays open, and is the only
        // descriptor it returns, until the `AsyncFd` that owns it is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(Fd(fd), Interest::READABLE) }?;
        Ok(Alarm {
            fd,
            grid: Grid::on_clock(resolution),
        })
    }

    /// The instant a deadline rings at: the first step of the grid at or
    /// after it.
    pub fn slot(&self, deadline: Instant) -> Instant {
        self.grid.round_up(deadline)
    }

    /// Sets the alarm for `deadline`'s slot, replacing any earlier setting,
    /// and returns the slot; a deadline already past rings at once.
    pub fn set(&self, deadline: Instant) -> Instant {
        let slot = self.slot(deadline);
        // At least a nanosecond: zero would clear the alarm.
        let wait = slot
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        self.settime(Expiration::OneShot(TimeSpec::from_duration(wait)));
        slot
    }

    /// Clears the alarm: it will not ring until set again.
    pub fn clear(&self) {
        self.settime(Expiration::OneShot(TimeSpec::from_duration(Duration::ZERO)));
    }

    fn settime(&self, expiration: Expiration) {
        let set = self
            .fd
            .get_ref()
            .0
            .set(expiration, TimerSetTimeFlags::empty());
        // timerfd_settime on a valid timerfd with a valid time cannot fail.
        debug_assert!(set.is_ok(), "timerfd_settime: {set:?}");
    }

    /// Waits until the alarm rings: at or after the slot it is set for,
    /// or, if it rang for an earlier setting that no wait has taken yet,
    /// at once. Either way its owner takes what is due by now, and sets
    /// the alarm again for what is not. Cancel-safe; fails only if the
    /// runtime is shutting down.
    ///
    /// The expiry count is never read (a `read` saved each ring, which
    /// used to tell a ring of an earlier setting apart): tokio's reactor
    /// watches the timerfd edge-triggered, the kernel reports each expiry
    /// of a one-shot timer as an edge of its own, and setting the timer
    /// again zeroes the count, so forgetting the readiness is enough to
    /// wait for the next ring. tokio keeps any readiness that arrived
    /// since it was handed out, so no ring is lost. (An interval timer
    /// would save the `timerfd_settime` of each ring instead, but Linux
    /// restarts one only when its count is read, in `timerfd_read`: the
    /// same one call a ring; tried, its second ring never came.)
    pub async fn rung(&self) -> io::Result<()> {
        let mut ready = self.fd.readable().await?;
        ready.clear_ready();
        Ok(())
    }
}

/// A handle on a shared precise timer; sleeps made with it are served by
/// one background task, which ends when the last handle is dropped.
#[derive(Clone)]
pub struct Timer {
    shared: Arc<Shared>,
    _driver: Arc<Driver>,
}

/// Aborts the serving task once no handle is left.
struct Driver(AbortHandle);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Shared {
    alarm: Alarm,
    state: Mutex<State>,
}

/// The wheel's buckets (256 KiB of them): with 500 µs steps they reach
/// 33 s ahead, past all but 4 % of the think times at the default 10 s
/// mean; later sleeps wait in the wheel's heap.
const BUCKETS: usize = 65536;

/// The width of the wheel's buckets on an exact timer (`0s` steps), where
/// they sort the sleeps but do not decide when the alarm rings.
const EXACT_BUCKET: Duration = Duration::from_micros(100);

struct State {
    /// Pending sleeps, by their deadlines in nanoseconds from the grid's
    /// origin.
    sleepers: Wheel<Sleeper>,
    /// The slot the alarm is set for, if any.
    armed: Option<Instant>,
    /// Breaks ties between equal deadlines, in the order they came.
    next: u64,
}

/// One sleep waiting in the wheel.
struct Sleeper {
    /// The deadline, in nanoseconds from the grid's origin.
    at: u64,
    order: u64,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl PartialEq for Sleeper {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl Eq for Sleeper {}

impl PartialOrd for Sleeper {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Sleeper {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

impl Timed for Sleeper {
    fn at(&self) -> u64 {
        self.at
    }
}

impl Timer {
    /// Creates the alarm, on steps of `resolution` (see [`Grid`]), and
    /// starts serving it on the current tokio runtime. Fails where no
    /// timerfd can be had (no file descriptor left).
    pub fn start(resolution: Duration) -> io::Result<Timer> {
        let width = match resolution {
            Duration::ZERO => EXACT_BUCKET,
            step => step,
        };
        let shared = Arc::new(Shared {
            alarm: Alarm::new(resolution)?,
            state: Mutex::new(State {
                sleepers: Wheel::new(nanos(width), BUCKETS),
                armed: None,
                next: 0,
            }),
        });
        let driver = tokio::spawn(serve(shared.clone())).abort_handle();
        Ok(Timer {
            shared,
            _driver: Arc::new(Driver(driver)),
        })
    }

    /// Waits until `deadline`, never less: to the first ring at or after it
    /// (rings fall on the grid's steps). A deadline already past ends at
    /// once.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep {
            timer: self.clone(),
            deadline,
            waker: None,
        }
    }
}

/// A pending [`Timer::sleep_until`].
pub struct Sleep {
    /// A handle, so that the serving task outlives every pending sleep.
    timer: Timer,
    deadline: Instant,
    /// Set once the sleep is in the wheel; the serving task wakes through it.
    waker: Option<Arc<Mutex<Option<Waker>>>>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        match &self.waker {
            Some(slot) => {
                let mut slot = slot.lock().expect("timer lock poisoned");
                match &mut *slot {
                    Some(w) => w.clone_from(cx.waker()),
                    // The serving task took the waker: the deadline passed
                    // between the check above and this lock.
                    None => return Poll::Ready(()),
                }
            }
            None => {
                let slot = Arc::new(Mutex::new(Some(cx.waker().clone())));
                self.timer.shared.insert(self.deadline, slot.clone());
                self.waker = Some(slot);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // The wheel keeps the entry until its deadline; it wakes no one.
        if let Some(slot) = &self.waker {
            slot.lock().expect("timer lock poisoned").take();
        }
    }
}

impl Shared {
    /// `instant` in nanoseconds from the grid's origin (zero before it).
    fn since_origin(&self, instant: Instant) -> u64 {
        nanos(instant.saturating_duration_since(self.alarm.grid.origin))
    }

    fn insert(&self, deadline: Instant, waker: Arc<Mutex<Option<Waker>>>) {
        let at = self.since_origin(deadline);
        let mut state = self.state.lock().expect("timer lock poisoned");
        let order = state.next;
        state.next += 1;
        state.sleepers.push(Sleeper { at, order, waker });
        if state
            .armed
            .is_none_or(|armed| self.alarm.slot(deadline) < armed)
        {
            self.arm(&mut state, deadline);
        }
    }

    fn arm(&self, state: &mut State, deadline: Instant) {
        state.armed = Some(self.alarm.set(deadline));
    }

    /// Takes every sleeper due by now, earliest first, and arms the timer
    /// for the next.
    fn due(&self) -> Vec<Waker> {
        let mut state = self.state.lock().expect("timer lock poisoned");
        state.armed = None;
        let now = self.since_origin(Instant::now());
        let mut sleepers = Vec::new();
        state.sleepers.take_due(now, &mut sleepers);
        if let Some(next) = state.sleepers.next_at() {
            let deadline = self.alarm.grid.origin + Duration::from_nanos(next);
            self.arm(&mut state, deadline);
        }
        drop(state);
        sleepers
            .into_iter()
            .filter_map(|sleeper| sleeper.waker.lock().expect("timer lock poisoned").take())
            .collect()
    }
}

/// Wakes the sleepers due each time the alarm rings, until aborted.
async fn serve(shared: Arc<Shared>) {
    while shared.alarm.rung().await.is_ok() {
        for waker in shared.due() {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests;
