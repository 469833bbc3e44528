//! `storm merge`'s flags: the shards' folders and where the whole goes.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::generate::GenerateArgs;
use super::values::duration;
use crate::experiment::folder::Existing;

/// The flags of `storm merge DIR...` (its help is [`super::StormCommand::Merge`]'s).
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' results folders.
    #[arg(value_name = "DIR", required_unless_present = "generate")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged results go.
    #[arg(long, value_name = "DIR", required_unless_present = "generate")]
    pub out: Option<PathBuf>,
    /// Client shards: the server's CSV, for the verdict and the plot.
    #[arg(long, value_name = "PATH", requires = "pause")]
    pub server_csv: Option<PathBuf>,
    /// Client shards: the warm-up before the server was stopped, from the
    /// shards' common start (--start-at).
    #[arg(long, value_parser = duration, value_name = "DURATION", requires = "pause")]
    pub warmup: Option<Duration>,
    /// Client shards: how long the server was stopped.
    #[arg(long, value_parser = duration, value_name = "DURATION", requires_all = ["warmup", "observe", "server_csv"])]
    pub pause: Option<Duration>,
    /// Client shards: the observation window after the resume.
    #[arg(long, value_parser = duration, value_name = "DURATION", requires = "pause")]
    pub observe: Option<Duration>,
    /// Draw PNG plots instead of SVG.
    #[arg(long)]
    pub png: bool,
    /// Let --out name a folder that holds an earlier merge's results, and
    /// remove them first [default: refuse a folder that holds any file].
    #[arg(long)]
    pub replace: bool,
    /// Print a man page or shell completions instead of merging.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

impl MergeArgs {
    /// What to do with an output folder that already holds files.
    pub fn existing(&self) -> Existing {
        super::protocol::existing(self.replace)
    }
}
