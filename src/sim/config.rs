//! What a virtual-time run is given: the programs' configurations and
//! when the server is stopped.

use crate::model::client::ClientConfig;
use crate::model::server::ServerConfig;
use std::time::Duration;

/// A stop of the server: SIGSTOP at `at`, SIGCONT `length` later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// Since the start of the run.
    pub at: Duration,
    /// How long the server stays stopped.
    pub length: Duration,
}

/// One virtual-time experiment: the server's and the client's
/// configurations (as their programs would take them) and the pauses.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The server; its address is unused.
    pub server: ServerConfig,
    /// The client; its URL is unused and `duration` is the run's length.
    pub client: ClientConfig,
    /// When the server is stopped, in order.
    pub pauses: Vec<Pause>,
}
