//! Where a program's report rows go besides the terminal, a flag group
//! `server` and `client` share.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

/// Where report rows go besides the terminal.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Write report rows to this CSV file.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics, on a listener of
    /// its own: counters, gauges and latency histograms, updated as events
    /// happen (docs/metrics.md) [default: off].
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Write status lines (JSON: a server's address, then every report
    /// row) to this inherited file descriptor, for a supervising program.
    #[arg(long, hide = true, value_parser = clap::value_parser!(i32).range(3..), value_name = "FD")]
    pub status_fd: Option<i32>,
}
