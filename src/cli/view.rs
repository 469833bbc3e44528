//! The live view's flag, shared by `server`, `client`, `storm` and `storm
//! run`.

use clap::Args;

/// How a run is shown.
#[derive(Debug, Clone, Args)]
pub struct ViewArgs {
    /// Show a live view instead of the report lines: charts over time of
    /// the rates and of the concurrency, pauses shaded, the last
    /// interval's figures; for a storm, the phase, the time left and each
    /// run's verdict as it forms. q or Ctrl-C stops as Ctrl-C does; the
    /// summary prints once the terminal is back. Needs stdout to be a
    /// terminal (docs/live-view.md).
    #[arg(long)]
    pub tui: bool,
}
