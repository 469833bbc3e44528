//! How a target's outage is caused, as flags: shared by `storm`, `storm
//! run` and `storm calibrate`.

use clap::Args;

use crate::experiment::outage::{EXEC, Outage};
use crate::experiment::scenario::ScenarioError;

/// The flags of a target's outage.
#[derive(Debug, Clone, Args)]
pub struct OutageArgs {
    /// How the --target's outage is caused: sigstop=PID, SIGSTOP to the
    /// process and every descendant it has at the pause, SIGCONT to them
    /// at the resume; freeze=CGROUP_DIR, the cgroup's freezer (v1 or v2)
    /// on for the pause, every process in the cgroup and below it frozen;
    /// exec, the commands --outage-start and --outage-end; or a fault of a
    /// proxy of the storm's own in front of the target: stall, blackhole,
    /// reset, status=CODE or delay=D, each with ,fraction=F
    /// (docs/target.md). Whatever ends the storm ends the outage first
    /// [default: the scenario's outage].
    #[arg(long, value_name = "KIND", value_parser = outage_kind)]
    pub outage: Option<String>,
    /// With --outage exec: the command that starts the outage (`docker
    /// pause NAME`), run through `sh -c` at the pause, which is timed from
    /// its exit. One that fails or runs past 60 s (killed then with its
    /// process group) stops the storm, after the end command has run
    /// [default: the scenario's outage_start].
    #[arg(long, value_name = "CMD")]
    pub outage_start: Option<String>,
    /// With --outage exec: the command that ends the outage (`docker
    /// unpause NAME`), run through `sh -c` when the pause's time is up, or
    /// whatever stops the storm first; the resume is its exit. One that
    /// fails or runs past 60 s stops the storm: the target may be left in
    /// its outage [default: the scenario's outage_end].
    #[arg(long, value_name = "CMD")]
    pub outage_end: Option<String>,
}

impl OutageArgs {
    /// The outage these flags give over the scenario's, `file`: each flag
    /// overrides the scenario's own, and the scenario's commands go with
    /// its `exec`, unless `--outage` names another kind.
    pub fn over(&self, file: Option<Outage>) -> Result<Option<Outage>, ScenarioError> {
        let commands = file.as_ref().and_then(Outage::commands);
        let kind = match (&self.outage, &file) {
            (Some(kind), _) => kind.clone(),
            (None, Some(outage)) => outage.to_string(),
            (None, None) if self.outage_start.is_none() && self.outage_end.is_none() => {
                return Ok(None);
            }
            (None, None) => {
                return Err(ScenarioError(
                    "--outage-start and --outage-end go with --outage exec".into(),
                ));
            }
        };
        let (start, end) = match commands.filter(|_| kind == EXEC) {
            Some((start, end)) => (Some(start.to_string()), Some(end.to_string())),
            None => (None, None),
        };
        Outage::with_commands(
            &kind,
            self.outage_start.clone().or(start),
            self.outage_end.clone().or(end),
        )
        .map(Some)
        .map_err(ScenarioError)
    }
}

/// An outage's kind, as `--outage` takes it: `exec`, whose commands are
/// flags of their own, or any other outage in full.
fn outage_kind(s: &str) -> Result<String, String> {
    match s {
        EXEC => Ok(s.to_string()),
        _ => s.parse::<Outage>().map(|_| s.to_string()),
    }
}
