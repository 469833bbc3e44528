//! Why a storm or a sweep failed.

use std::fmt;
use std::io;

/// Why a storm or a sweep failed.
#[derive(Debug)]
pub enum StormError {
    /// Flags that a server or client refuses, or a bad scenario.
    Flags(String),
    /// A file or process could not be handled.
    Io(String, io::Error),
    /// A child ended or misbehaved.
    Child(String),
    /// A target that does not answer, or an outage that cannot be caused,
    /// found before any load.
    Target(String),
    /// Stopped by SIGINT or SIGTERM; partial results are on disk.
    Interrupted,
    /// Stopped by SIGINT or SIGTERM before any load, while the storm
    /// waited for its target's first answer: nothing was stopped, nothing
    /// run and nothing written.
    InterruptedBeforeLoad,
}

impl fmt::Display for StormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StormError::Flags(msg) | StormError::Child(msg) | StormError::Target(msg) => {
                write!(f, "{msg}")
            }
            StormError::Io(what, e) => write!(f, "{what}: {e}"),
            StormError::Interrupted => write!(f, "interrupted"),
            StormError::InterruptedBeforeLoad => write!(
                f,
                "interrupted while waiting for the target's first answer, before any load: \
                 nothing stopped, nothing written"
            ),
        }
    }
}

impl std::error::Error for StormError {}

/// Wraps an I/O error with what was being done.
pub(super) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> StormError {
    let what = what.into();
    move |e| StormError::Io(what, e)
}
