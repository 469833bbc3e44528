//! Experiments: a scenario's cases through the storm protocol (warm-up,
//! the server stopped, resumed, observed) on either engine, the figures
//! and verdict of each run, the summaries and plots; and the sweep that
//! maps where each policy breaks.
//!
//! The real engine runs each case's server and client as child processes
//! and learns their state from the status lines they write on a pipe; the
//! virtual engine runs the same configurations in virtual time. Flags are
//! turned into configurations by the programs' own parsers, which the
//! layer above hands in as [`Flags`].

mod children;
mod runner;
pub mod scenario;
mod simulate;
mod storm;
pub mod summary;
pub mod sweep;

use std::fmt;
use std::io;

pub use storm::{Storm, run};

use crate::model::client::ClientConfig;
use crate::model::server::ServerConfig;

/// The programs' own flag parsers: a server's or client's configuration
/// from its flags (without the program's name), exactly as the program
/// would take them, or the first line of the program's complaint.
pub trait Flags: Sync {
    /// The server's configuration.
    fn server(&self, argv: &[String]) -> Result<ServerConfig, String>;
    /// The client's configuration.
    fn client(&self, argv: &[String]) -> Result<ClientConfig, String>;
}

/// Why a storm or a sweep failed.
#[derive(Debug)]
pub enum StormError {
    /// Flags that a server or client refuses, or a bad scenario.
    Flags(String),
    /// A file or process could not be handled.
    Io(String, io::Error),
    /// A child ended or misbehaved.
    Child(String),
    /// Stopped by SIGINT or SIGTERM; partial results are on disk.
    Interrupted,
}

impl fmt::Display for StormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StormError::Flags(msg) | StormError::Child(msg) => write!(f, "{msg}"),
            StormError::Io(what, e) => write!(f, "{what}: {e}"),
            StormError::Interrupted => write!(f, "interrupted"),
        }
    }
}

impl std::error::Error for StormError {}

/// Wraps an I/O error with what was being done.
fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> StormError {
    let what = what.into();
    move |e| StormError::Io(what, e)
}
