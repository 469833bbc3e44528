//! Virtual-time experiments from the programs' own flags.

use clap::Parser;
use retry_storm::cli::{ClientCli, ServerArgs};
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
