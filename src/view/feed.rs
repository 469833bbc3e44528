//! What the live view is fed, over a channel from the threads that run
//! the program: the report rows as each program writes them (the same
//! status lines a supervisor reads), and a storm's batches and phases.

use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::report::status::Status;

/// Which program the view watches, and what it knows from the start.
#[derive(Debug, Clone)]
pub enum Setup {
    /// A server run by hand.
    Server {
        /// Its start-up line (where it listens, its model).
        title: String,
        /// Its report interval.
        interval: Duration,
    },
    /// A client run by hand.
    Client {
        /// Its start-up line (users, target, policy, seed).
        title: String,
        /// Its report interval.
        interval: Duration,
        /// How long it runs, if it stops on its own.
        duration: Option<Duration>,
    },
    /// A fault proxy run by hand.
    Proxy {
        /// Its start-up line (where it listens, the target, the fault).
        title: String,
        /// Its report interval.
        interval: Duration,
    },
    /// A storm on the real engine.
    Storm {
        /// Its start-up line (cases, scale, results folder).
        title: String,
        /// How many batches of runs side by side it makes.
        batches: usize,
    },
}

impl Setup {
    /// The program's start-up line.
    pub fn title(&self) -> &str {
        match self {
            Setup::Server { title, .. }
            | Setup::Client { title, .. }
            | Setup::Proxy { title, .. }
            | Setup::Storm { title, .. } => title,
        }
    }

    /// The program's name.
    pub fn program(&self) -> &'static str {
        match self {
            Setup::Server { .. } => "server",
            Setup::Client { .. } => "client",
            Setup::Proxy { .. } => "proxy",
            Setup::Storm { .. } => "storm",
        }
    }
}

/// A storm phase, as the runner goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the server is stopped.
    Warmup,
    /// The server stopped (SIGSTOP).
    Pause,
    /// After the resume (SIGCONT): the window, the tail, the confirmation.
    Observe,
}

impl Phase {
    /// As the storm's progress line names it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warm-up",
            Phase::Pause => "pause",
            Phase::Observe => "observe",
        }
    }
}

/// The lengths of a storm's phases as they run (already compressed by
/// `--quick`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Warm-up before the stop.
    pub warmup: Duration,
    /// The pause.
    pub pause: Duration,
    /// The observation window after the resume: a recovery must start in it.
    pub observe: Duration,
    /// The intervals after the window that confirm a recovery.
    pub confirm: Duration,
    /// From the resume to the clients' end: window, tail and confirmation.
    pub rest: Duration,
}

impl Plan {
    /// A batch's whole length, from its clients' start.
    pub fn length(&self) -> Duration {
        self.warmup + self.pause + self.rest
    }
}

/// One message to the view.
#[derive(Debug, Clone)]
pub enum Feed {
    /// A status line of run `run` (a storm's: its place in the batch; a
    /// program's own: 0).
    Status {
        /// Which run.
        run: usize,
        /// The line.
        status: Status,
    },
    /// A status line of a tier of a storm's run `run`: its server's rows
    /// and its calls'.
    Tier {
        /// Which run.
        run: usize,
        /// Which tier, from 1: the client's side first.
        tier: usize,
        /// The line.
        status: Status,
    },
    /// A storm's batch of runs side by side starts: its clients start now.
    Batch {
        /// Which batch, from 0.
        index: usize,
        /// Its runs' names, in order.
        names: Vec<String>,
        /// When its clients start, Unix milliseconds.
        start_ms: u64,
        /// Its phases' lengths.
        plan: Plan,
    },
    /// A phase of the batch begins.
    Phase {
        /// Which.
        phase: Phase,
        /// When, Unix milliseconds.
        at_ms: u64,
    },
}

/// The sending end of a view's feed: cheap to clone, and silent once the
/// view has gone.
#[derive(Debug, Clone)]
pub struct Watch {
    tx: Sender<Feed>,
}

impl Watch {
    /// A watch sending on `tx`.
    pub fn new(tx: Sender<Feed>) -> Watch {
        Watch { tx }
    }

    /// Sends one message.
    pub fn send(&self, feed: Feed) {
        let _ = self.tx.send(feed);
    }

    /// The watch of one run: its status lines go to the view as that run's.
    pub fn run(&self, run: usize) -> RunWatch {
        RunWatch {
            watch: self.clone(),
            run,
            tier: None,
        }
    }
}

/// The watch of one run, or of one of its tiers.
#[derive(Debug, Clone)]
pub struct RunWatch {
    watch: Watch,
    run: usize,
    tier: Option<usize>,
}

impl RunWatch {
    /// The watch of the run's tier `tier` (from 1, the client's side
    /// first): its status lines go to the view as that tier's.
    pub fn tier(&self, tier: usize) -> RunWatch {
        RunWatch {
            tier: Some(tier),
            ..self.clone()
        }
    }

    /// Sends one of the run's (or its tier's) status lines.
    pub fn status(&self, status: &Status) {
        let (run, status) = (self.run, status.clone());
        self.watch.send(match self.tier {
            None => Feed::Status { run, status },
            Some(tier) => Feed::Tier { run, tier, status },
        });
    }
}
