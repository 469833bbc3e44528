//! retry-storm: a laboratory for retry storms.
//!
//! A `server` whose latency explodes with concurrency and a `client` that
//! plays N users sending Poisson traffic and retrying failures under a chosen
//! policy. Pause the server (SIGSTOP), resume it, and watch whether the
//! system recovers.
//!
//! Pure logic, with no I/O and no clock:
//! - [`latency`]: the server's delay model;
//! - [`scheduler`]: exact completion of in-flight requests under that model;
//! - [`policy`]: retry delay schedules, limits and throttles;
//! - [`arrivals`]: think times and per-user random streams;
//! - [`stats`]: counters, histograms and report rows;
//! - [`planner`]: a strategy's schedule, computed without any network;
//! - [`verdict`]: a run's figures and recovery verdict from its rows;
//! - [`timescale`]: time compression for quick experiments;
//! - [`user`]: one simulated user's request cycle, shared by both engines.
//!
//! I/O:
//! - [`sim`]: the same experiment as a discrete-event engine in virtual
//!   time (it writes the same CSV files); [`sweep`]: critical pauses found
//!   with it;
//! - [`server`]: the hyper server and its reporter;
//! - [`client`]: simulated users and their reporter; [`pool`]: their
//!   keep-alive connections;
//! - [`storm`]: the unattended experiment and its summaries; [`plot`]: plots;
//! - [`programs`]: the server and client programs, shared by the binaries;
//! - [`timer`]: timers finer than tokio's millisecond, for attempt starts
//!   and completions;
//! - [`output`]: CSV files; [`shutdown`]: signals; [`limits`]: open files;
//! - [`cli`]: command-line flags of every program; [`fuzz`]: what its
//!   parsers must do with any input.

pub mod arrivals;
pub mod cli;
pub mod client;
pub mod fuzz;
pub mod latency;
pub mod limits;
pub mod output;
pub mod planner;
pub mod plot;
pub mod policy;
pub mod pool;
pub mod programs;
pub mod scheduler;
pub mod server;
pub mod shutdown;
pub mod sim;
pub mod stats;
pub mod storm;
pub mod sweep;
pub mod timer;
pub mod timescale;
pub mod user;
pub mod verdict;
