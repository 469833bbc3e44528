//! Lanes: a program's work split over threads that each run a
//! current-thread tokio runtime of their own.
//!
//! tokio's multi-threaded scheduler wakes an idle worker whenever a busy
//! one finds new tasks, and on this kind of virtual machine each such
//! wake-up costs an inter-processor interrupt and a context switch on both
//! sides: the largest single cost of a request at a few thousand a second
//! (results/bench.md). A lane never wakes another thread for its own work,
//! so each keeps the one-thread saving, and several lanes still use every
//! core. The calling thread is lane 0; [`Lanes::spawn`] starts the others.

use std::future::Future;
use std::io;
use std::num::NonZeroUsize;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::watch;

/// How many lanes `threads` asks for: that many, or one per core when it
/// is `None` or zero.
pub fn count(threads: Option<u32>) -> usize {
    match threads {
        Some(n) if n > 0 => n as usize,
        _ => cores(),
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// The demand one lane of the client is given by default, in requests a
/// second: a one-thread client kept its start lateness under a millisecond
/// at 10,000 req/s and fell behind at 40,000 (results/bench.md).
pub const LANE_DEMAND: f64 = 20_000.0;

/// How many lanes a client whose users ask `demand` requests a second
/// runs: `threads` if given, else one per [`LANE_DEMAND`], at least one and
/// at most one per core. Fewer lanes mean fewer wake-ups per request, each
/// the largest cost of a request here; more share a heavier load.
pub fn for_demand(threads: Option<u32>, demand: f64) -> usize {
    match threads {
        Some(n) if n > 0 => n as usize,
        _ => ((demand / LANE_DEMAND).ceil() as usize).clamp(1, cores()),
    }
}

/// A lane busier than this share of the time gets no new connection while
/// another is less busy ([`choose`]).
pub const BUSY: f64 = 0.5;

/// The lane new work goes to, given each lane's recent busy share: the
/// first while it is busy less than [`BUSY`] of the time, so that a light
/// load stays on one thread and wakes no other; else the least busy.
pub fn choose(busy: &[f64]) -> usize {
    match busy.first() {
        Some(&first) if first < BUSY => 0,
        _ => busy
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(lane, _)| lane),
    }
}

/// A lane busier than the least busy by less than this keeps its users
/// ([`moves`]): two lanes nearly as busy gain nothing from a move, and a
/// share over 100 ms is noisy (at 0.1, users of two lanes busy in a storm
/// went back and forth some 230 times a second).
pub const MARGIN: f64 = 0.25;

/// Two lanes whose busy shares add up to less than this are gathered
/// into the first of them ([`moves`]): on one lane their work wakes one
/// thread, and at most this share it stays well below [`BUSY`], so the
/// lane does not spill again at once. At 0.3 a client at 4,500 req/s
/// that had spilled stayed on two lanes (0.19 and 0.16 busy), each waking
/// for half the work.
pub const FIT: f64 = 0.4;

/// Users a lane hands over: `count` of them, to lane `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// The lane they go to.
    pub to: usize,
    /// How many go.
    pub count: usize,
}

/// What each lane hands over, given each lane's recent busy share and how
/// many users it runs, lane by lane, each seeing the shares the moves
/// before it leave (a user taken to cost its lane's share over its users):
/// - a lane busy at least [`BUSY`] of the time, and by more than [`MARGIN`]
///   above the least busy lane, sends that lane as many users as would even
///   the two out, `users × (busy − least) / (2 × busy)`; a lane saturated
///   at 1 may need more, and the shares are taken again after every move;
/// - a lane less busy gives all its users to the first lane before it
///   with which it would share less than [`FIT`], so that lanes fill one
///   at a time, as they emptied.
pub fn moves(busy: &[f64], users: &[usize]) -> Vec<Option<Move>> {
    let mut after = busy.to_vec();
    let mut planned = vec![None; busy.len()];
    for (lane, &users) in users.iter().enumerate().take(busy.len()) {
        let share = after[lane];
        if users == 0 {
            continue;
        }
        let planned_move = if share >= BUSY {
            let (to, low) = after
                .iter()
                .copied()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("this lane at least");
            if share - low <= MARGIN {
                continue;
            }
            let count = (users as f64 * (share - low) / (2.0 * share)).floor() as usize;
            if count == 0 {
                continue;
            }
            Move { to, count }
        } else {
            let Some(to) = after[..lane].iter().position(|&b| b + share < FIT) else {
                continue;
            };
            Move { to, count: users }
        };
        let moved = planned_move.count as f64 * share / users as f64;
        after[lane] -= moved;
        after[planned_move.to] += moved;
        planned[lane] = Some(planned_move);
    }
    planned
}

/// How busy each lane has been lately: the share of the last
/// [`Load::EVERY`] its runtime spent running tasks, by the runtime's own
/// count.
pub struct Load {
    handles: Vec<Handle>,
    busy: Vec<Duration>,
    at: Instant,
    shares: Vec<f64>,
}

impl Load {
    /// How often the shares are taken again.
    pub const EVERY: Duration = Duration::from_millis(100);

    /// The load of the lanes whose runtimes are `handles` (the first
    /// lane's first).
    pub fn new(handles: Vec<Handle>) -> Load {
        let busy = handles.iter().map(busy_time).collect();
        let shares = vec![0.0; handles.len()];
        Load {
            handles,
            busy,
            at: Instant::now(),
            shares,
        }
    }

    /// Each lane's busy share over the last period, taken again when the
    /// last is older than [`Load::EVERY`].
    pub fn shares(&mut self) -> &[f64] {
        if self.at.elapsed() >= Self::EVERY {
            self.measure();
        }
        &self.shares
    }

    /// Each lane's busy share since the shares were last taken, taken
    /// now.
    pub fn measure(&mut self) -> &[f64] {
        let elapsed = self.at.elapsed().max(Duration::from_nanos(1));
        self.at = Instant::now();
        for (lane, handle) in self.handles.iter().enumerate() {
            let busy = busy_time(handle);
            let spent = busy.saturating_sub(self.busy[lane]);
            self.shares[lane] = spent.as_secs_f64() / elapsed.as_secs_f64();
            self.busy[lane] = busy;
        }
        &self.shares
    }
}

/// The time a lane's runtime has spent running tasks so far.
fn busy_time(handle: &Handle) -> Duration {
    handle.metrics().worker_total_busy_duration(0)
}

/// The lanes after the first, each a thread running one future on its own
/// current-thread runtime until [`Lanes::stop`].
pub struct Lanes {
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    handles: Vec<Handle>,
}

impl Lanes {
    /// Starts lanes `1..count`, each running `work(lane)` on a runtime of
    /// its own until it ends or [`Lanes::stop`] is called. `work` is called
    /// on the lane's thread, inside its runtime, so what it builds (timers,
    /// sockets) belongs to that lane.
    pub fn spawn<F, Fut>(count: usize, name: &str, work: F) -> io::Result<Lanes>
    where
        F: Fn(usize) -> Fut + Send + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let mut lanes = Lanes {
            stop,
            threads: Vec::new(),
            handles: Vec::new(),
        };
        for lane in 1..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            lanes.handles.push(runtime.handle().clone());
            let work = work.clone();
            let mut stopped = stopped.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{name}-{lane}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        tokio::select! {
                            () = work(lane) => {}
                            _ = stopped.wait_for(|stop| *stop) => {}
                        }
                    });
                    // Dropping the runtime here cancels the lane's tasks
                    // on its own thread.
                    drop(runtime);
                })?;
            lanes.threads.push(thread);
        }
        Ok(lanes)
    }

    /// No lane but the calling thread's.
    pub fn none() -> Lanes {
        Lanes {
            stop: watch::channel(false).0,
            threads: Vec::new(),
            handles: Vec::new(),
        }
    }

    /// The runtimes of lanes `1..count`.
    pub fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// Stops every lane and waits for its thread: once this returns, no
    /// task of theirs runs any more.
    pub fn stop(self) {
        let _ = self.stop.send(true);
        for thread in self.threads {
            // A lane that panicked has already said so on stderr.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;
    use std::sync::Mutex;

    use tokio::runtime::{Handle, RuntimeFlavor};

    #[test]
    fn a_count_is_what_is_asked_or_one_per_core() {
        assert_eq!(count(Some(3)), 3);
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(count(None), cores);
        assert_eq!(count(Some(0)), cores);
    }

    #[test]
    fn a_client_has_a_lane_per_lane_demand_within_the_cores() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(for_demand(None, 4_500.0), 1);
        assert_eq!(for_demand(None, 0.0), 1);
        assert_eq!(for_demand(None, 20_000.0), 1);
        assert_eq!(for_demand(None, 20_001.0), 2.min(cores));
        assert_eq!(for_demand(None, 1e9), cores);
        assert_eq!(for_demand(Some(3), 10.0), 3, "asked for");
    }

    #[test]
    fn work_stays_on_the_first_lane_until_it_is_busy_then_goes_to_the_least_busy() {
        assert_eq!(choose(&[0.0, 0.0]), 0);
        assert_eq!(choose(&[0.49, 0.0]), 0);
        assert_eq!(choose(&[0.5, 0.1]), 1);
        assert_eq!(choose(&[0.9, 0.7, 0.6]), 2);
        assert_eq!(choose(&[0.6, 0.9]), 0, "the first is the least busy");
        assert_eq!(choose(&[0.3]), 0);
        assert_eq!(choose(&[]), 0);
    }

    #[test]
    fn a_busy_lane_sends_the_least_busy_what_evens_them_out() {
        let to = |to, count| Some(Move { to, count });
        // 0.8 against 0.2: 100 × 0.6 / 1.6 = 37.5, so 37 users.
        assert_eq!(moves(&[0.8, 0.2], &[100, 0]), vec![to(1, 37), None]);
        // Saturated against idle: half of them.
        assert_eq!(moves(&[1.0, 0.0], &[1000, 0]), vec![to(1, 500), None]);
        // Below BUSY nobody moves, however uneven.
        assert_eq!(moves(&[0.45, 0.0], &[100, 0]), vec![None, None]);
        // Within MARGIN of each other: no move.
        assert_eq!(moves(&[0.95, 0.9], &[100, 100]), vec![None, None]);
        // Two busy lanes and an idle third. The first sends 9 × 0.9 / 1.8
        // = 4.5, so 4 users worth 0.1 each: the shares become 0.5, 0.6,
        // 0.4, and the second, now within MARGIN of the third, keeps its
        // users.
        assert_eq!(
            moves(&[0.9, 0.6, 0.0], &[9, 10, 0]),
            vec![to(2, 4), None, None]
        );
        // Without the first's move the second would have sent 10 × 0.6 /
        // 1.2 = 5.
        assert_eq!(
            moves(&[0.4, 0.6, 0.0], &[9, 10, 0]),
            vec![None, to(2, 5), None]
        );
        // Too few users to split: none moves.
        assert_eq!(moves(&[1.0, 0.0], &[1, 0]), vec![None, None]);
        assert_eq!(moves(&[1.0], &[100]), vec![None], "one lane");
        assert!(moves(&[], &[]).is_empty());
    }

    #[test]
    fn lanes_that_fit_on_one_gather_into_the_first() {
        let to = |to, count| Some(Move { to, count });
        // 0.19 + 0.16 < FIT: the second lane's 50 users go back to the
        // first.
        assert_eq!(moves(&[0.19, 0.16], &[50, 50]), vec![None, to(0, 50)]);
        // 0.25 + 0.2 is not below FIT: both stay.
        assert_eq!(moves(&[0.25, 0.2], &[50, 50]), vec![None, None]);
        // The second lane gathers into the first (0.3); the third, 0.15,
        // no longer fits there (0.45) but does in the second, now empty.
        assert_eq!(
            moves(&[0.1, 0.2, 0.15], &[10, 20, 30]),
            vec![None, to(0, 20), to(1, 30)]
        );
        // An empty lane has nothing to give.
        assert_eq!(moves(&[0.0, 0.0], &[10, 0]), vec![None, None]);
    }

    #[test]
    fn a_lane_that_ran_a_task_counts_the_time_as_busy() {
        let lanes = Lanes::spawn(2, "busy", |_| std::future::pending::<()>()).unwrap();
        let handle = lanes.handles()[0].clone();
        let mut load = Load::new(vec![handle.clone()]);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        handle.spawn(async move {
            // Blocks inside the poll: busy time for the runtime.
            std::thread::sleep(Duration::from_millis(Load::EVERY.as_millis() as u64 + 50));
            done_tx.send(()).unwrap();
        });
        done_rx.recv().unwrap();
        // The runtime counts a poll's time once it parks or yields again.
        let mut share = 0.0;
        for _ in 0..100 {
            std::thread::sleep(Load::EVERY);
            share += load.shares()[0];
            if share > 0.0 {
                break;
            }
        }
        assert!(share > 0.0, "a lane that ran for 150 ms was never busy");
        lanes.stop();
    }

    #[test]
    fn each_lane_runs_on_a_current_thread_runtime_of_its_own_until_stopped() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let record = seen.clone();
        let lanes = Lanes::spawn(3, "test", move |lane| {
            let record = record.clone();
            let ready = ready_tx.clone();
            async move {
                let flavor = Handle::current().runtime_flavor();
                let thread = std::thread::current().name().map(str::to_string);
                record.lock().unwrap().push((lane, flavor, thread));
                ready.send(()).unwrap();
                // Runs until stopped.
                std::future::pending::<()>().await;
            }
        })
        .unwrap();
        for _ in 0..2 {
            ready_rx.recv().unwrap();
        }
        lanes.stop();
        let mut seen = std::mem::take(&mut *seen.lock().unwrap());
        seen.sort_by_key(|(lane, _, _)| *lane);
        let current = |lane: usize| (lane, true, Some(format!("test-{lane}")));
        let seen: Vec<_> = seen
            .into_iter()
            .map(|(lane, flavor, name)| (lane, flavor == RuntimeFlavor::CurrentThread, name))
            .collect();
        assert_eq!(seen, vec![current(1), current(2)]);
    }
}
