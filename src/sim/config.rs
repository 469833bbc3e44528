//! What a virtual-time run is given: the programs' configurations and
//! when the paused server is stopped.

use crate::model::client::ClientConfig;
use crate::model::server::ServerConfig;
use std::time::Duration;

/// A stop of the paused server: SIGSTOP at `at`, SIGCONT `length` later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// Since the start of the run.
    pub at: Duration,
    /// How long the server stays stopped.
    pub length: Duration,
}

/// One virtual-time experiment: the server's and the client's
/// configurations (as their programs would take them), the tiers of a
/// service chain between them if any, and the pauses.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The backend: the last server of the chain (the only one without
    /// tiers); it makes no call. Its address is unused.
    pub server: ServerConfig,
    /// The client; its URL is unused and `duration` is the run's length.
    pub client: ClientConfig,
    /// The tiers of a service chain (docs/chains.md), from the
    /// client inward: the client calls the first, each calls the next
    /// under its `call`, the last calls the backend. Each must have a
    /// `call` (its URL is unused). Empty: the client calls the backend.
    pub tiers: Vec<ServerConfig>,
    /// Which server the pauses stop: `None` the backend, `Some(i)`
    /// `tiers[i]` (a stopped tier reads nothing and acts on nothing its
    /// calls do until it resumes).
    pub paused: Option<usize>,
    /// When the paused server is stopped, in order.
    pub pauses: Vec<Pause>,
}
