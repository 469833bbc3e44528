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

use tokio::sync::watch;

/// How many lanes `threads` asks for: that many, or one per core when it
/// is `None` or zero.
pub fn count(threads: Option<u32>) -> usize {
    match threads {
        Some(n) if n > 0 => n as usize,
        _ => std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
    }
}

/// The lanes after the first, each a thread running one future on its own
/// current-thread runtime until [`Lanes::stop`].
pub struct Lanes {
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
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
        };
        for lane in 1..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
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
        }
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
