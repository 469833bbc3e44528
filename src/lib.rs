//! retry-storm: a laboratory for retry storms.
//!
//! A `server` whose latency explodes with concurrency and a `client` that
//! plays N users sending Poisson traffic and retrying failures under a chosen
//! policy. Pause the server (SIGSTOP), resume it, and watch whether the
//! system recovers.
//!
//! The code is in layers, each importing only the layers below it (a test,
//! `tests/layers.rs`, holds the rule):
//!
//! 1. [`model`] and [`policy`], pure: the server's latency and completion
//!    scheduler, the users' request cycle and think times, the retry
//!    strategies, limits and throttles and their catalogue. No clock, no
//!    I/O, no runtime.
//! 2. [`report`]: counters, histograms, report rows, CSV files, status
//!    lines, the verdict and its figures.
//! 3. The engines, side by side: [`net`] (the real server and client, with
//!    hyper and tokio) and [`sim`] (the same model in virtual time, with
//!    neither).
//! 4. [`plot`]: rows in, SVG or PNG files out; beside it, [`view`]: the
//!    live terminal view and the progress bar, rows in, a screen out.
//! 5. [`experiment`]: scenario files, the storm protocol on either engine,
//!    summaries, the sweep.
//! 6. [`cli`]: every program's flags, validated into configurations.
//! 7. [`app`]: the programs as functions, with their exit codes; the
//!    binaries in `src/bin/` parse and call them. [`fuzz`] holds what the
//!    parsers must do with any input.

#![warn(missing_docs)]

pub mod app;
pub mod cli;
pub mod experiment;
pub mod fuzz;
pub mod model;
pub mod net;
pub(crate) mod plot;
pub mod policy;
pub mod report;
pub mod sim;
pub mod view;
