//! Storm shards put back together: every run's files in one folder, and
//! the summaries and plots of all the runs, as one process writes them.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::super::error::{StormError, io_err};
use super::super::judge;
use super::super::storm::{Flags, Storm};
use super::super::summary::{CaseRun, StormReport};
use super::manifest::Manifest;
use crate::report::histogram::Percentiles;
use crate::report::output::read_rows;
use crate::report::verdict::Timeline;

/// What a storm shard's `summary.json` says of each of its runs.
#[derive(Debug, Deserialize)]
struct RunFiles {
    case: String,
    run: u32,
    timeline: Timeline,
    client_behind: Option<Percentiles>,
    client_csv: String,
    server_csv: Option<String>,
}

/// The runs of a storm shard's `summary.json`.
#[derive(Debug, Deserialize)]
struct ShardSummary {
    runs: Vec<RunFiles>,
}

/// The whole storm from its shards' folders (as [`super::manifest::whole`] checked
/// them):
/// every run's files copied into `storm.out`, and the summaries and plots
/// of every run together, as one process would have written them.
pub fn merge_runs(
    storm: &Storm,
    flags: &dyn Flags,
    parts: &[(PathBuf, Manifest)],
) -> Result<StormReport, StormError> {
    let out = &storm.out;
    std::fs::create_dir_all(out).map_err(io_err(format!("create {}", out.display())))?;
    let mut runs = Vec::new();
    let mut commands = String::new();
    for (dir, _) in parts {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(io_err(format!(
            "read {} (did the shard finish?)",
            path.display()
        )))?;
        let summary: ShardSummary = serde_json::from_str(&text)
            .map_err(|e| StormError::Flags(format!("{}: {e}", path.display())))?;
        for r in summary.runs {
            let case = storm
                .scenario
                .cases
                .iter()
                .find(|c| c.name == r.case)
                .ok_or_else(|| {
                    StormError::Flags(format!(
                        "{}: case {} is not the scenario's",
                        path.display(),
                        r.case
                    ))
                })?;
            let rep = r.run.saturating_sub(1);
            let name = storm.run_name(case, rep);
            copy_run_files(dir, out, &name)?;
            // Read in the shard, so that a file it lacks is named there.
            runs.push(CaseRun {
                case: case.clone(),
                rep,
                timeline: r.timeline,
                client: read_rows(&dir.join(&r.client_csv)).map_err(io_err("read"))?,
                server: match &r.server_csv {
                    Some(file) => read_rows(&dir.join(file)).map_err(io_err("read"))?,
                    None => Vec::new(),
                },
                tiers: storm.read_tiers(dir, case, rep)?,
                client_behind: r.client_behind,
                proxy: Vec::new(),
            });
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("commands.txt")) {
            commands.push_str(&text);
        }
    }
    let expected = storm.scenario.cases.len() * storm.runs() as usize;
    if runs.len() != expected {
        return Err(StormError::Flags(format!(
            "the shards hold {} run(s) of the {expected} the storm makes",
            runs.len()
        )));
    }
    std::fs::write(out.join("scenario.toml"), storm.scenario_as_run().to_toml())
        .map_err(io_err("write scenario.toml"))?;
    std::fs::write(out.join("commands.txt"), commands).map_err(io_err("write commands.txt"))?;
    judge::write(storm, flags, runs)
}

/// Copies a run's files (`NAME.client.csv`, `NAME.server.log`, ...) from a
/// shard's folder.
fn copy_run_files(from: &Path, to: &Path, name: &str) -> Result<(), StormError> {
    let prefix = format!("{name}.");
    let entries = std::fs::read_dir(from).map_err(io_err(format!("read {}", from.display())))?;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let is_run_file = file.starts_with(&prefix)
            && [".csv", ".hlog", ".log", ".err"]
                .iter()
                .any(|e| file.ends_with(e));
        if is_run_file {
            std::fs::copy(entry.path(), to.join(&*file))
                .map_err(io_err(format!("copy {}", entry.path().display())))?;
        }
    }
    Ok(())
}
