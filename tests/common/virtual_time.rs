//! Virtual-time experiments from the programs' own flags, and service
//! chains made of them.

use clap::Parser;
use retry_storm::cli::{ClientCli, ServerArgs};
use retry_storm::model::client::ClientConfig;
use retry_storm::model::server::ServerConfig;
use retry_storm::model::tier::TierCall;
use retry_storm::sim::{Pause, SimConfig};

/// A quiet virtual experiment: the server's and the client's flags as
/// their programs take them, and the pauses.
pub fn sim_config(server: &[&str], client: &[&str], pauses: Vec<Pause>) -> SimConfig {
    let mut server = ServerArgs::try_parse_from(["server"].iter().chain(server))
        .unwrap()
        .config()
        .unwrap();
    let mut client = ClientCli::try_parse_from(["client"].iter().chain(client))
        .unwrap()
        .run
        .config()
        .unwrap();
    server.quiet = true;
    client.quiet = true;
    SimConfig {
        server,
        client,
        tiers: Vec::new(),
        paused: None,
        pauses,
    }
}

/// A quiet server of `flags`, as the server program takes them.
pub fn server(flags: &[&str]) -> ServerConfig {
    let mut config = ServerArgs::try_parse_from(["server"].iter().chain(flags))
        .unwrap()
        .config()
        .unwrap();
    config.quiet = true;
    config
}

/// A quiet client of `flags`, as the client program takes them.
pub fn client(flags: &[&str]) -> ClientConfig {
    let mut config = ClientCli::try_parse_from(["client"].iter().chain(flags))
        .unwrap()
        .run
        .config()
        .unwrap();
    config.quiet = true;
    config
}

/// What a tier passes inward of its caller's request.
#[derive(Debug, Clone, Copy)]
pub struct Propagate {
    /// The caller's deadline.
    pub deadline: bool,
    /// The caller's going.
    pub cancel: bool,
}

/// A tier that passes nothing inward.
pub const NEITHER: Propagate = Propagate {
    deadline: false,
    cancel: false,
};

/// A tier: a server of `flags` whose handler then calls inward under the
/// client flags `call`.
pub fn tier(flags: &[&str], call: &[&str], propagate: Propagate) -> ServerConfig {
    let mut config = server(flags);
    config.call = Some(Box::new(TierCall {
        url: "http://next-tier/api".to_string(),
        client: client(call),
        propagate_deadline: propagate.deadline,
        propagate_cancel: propagate.cancel,
    }));
    config
}

/// A chain without pauses: the client of `client_flags`, the tiers, the
/// backend of `backend_flags`.
pub fn chain(client_flags: &[&str], tiers: Vec<ServerConfig>, backend_flags: &[&str]) -> SimConfig {
    let mut config = sim_config(backend_flags, client_flags, Vec::new());
    config.tiers = tiers;
    config
}
