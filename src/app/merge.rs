//! `storm merge`, and what a sharded sweep or storm leaves for it: shards'
//! results put back together as one process would have written them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use super::exit::failure;
use crate::cli::{MergeArgs, ProgramFlags, StormCli, StormCommand};
use crate::experiment::shard::{self, Manifest, ShardKind};
use crate::experiment::sweep::{self, Search, SweepConfig, SweepReport};
use crate::experiment::{Storm, StormError, clients, folder};
use crate::model::shard::Shard;
use crate::report::output::say;

/// This process's command line, with `file` (a scenario file) made
/// absolute, so that a merge run elsewhere finds it.
pub(super) fn command_line(file: Option<&Path>) -> Vec<String> {
    let absolute = file.and_then(|f| std::path::absolute(f).ok());
    std::env::args_os()
        .map(|word| match (file, &absolute) {
            (Some(f), Some(abs)) if Path::new(&word) == f => abs.display().to_string(),
            _ => word.to_string_lossy().into_owned(),
        })
        .collect()
}

/// Beside a sweep shard's results, its manifest for `storm merge`; a whole
/// sweep writes none.
pub(super) fn write_sweep_manifest(
    config: &SweepConfig,
    report: &SweepReport,
    command: Vec<String>,
) -> Result<(), StormError> {
    if config.shard.is_whole() {
        return Ok(());
    }
    Manifest {
        kind: ShardKind::Sweep,
        shard: config.shard,
        command,
        settings: config.settings().len(),
        lines: report.lines.clone(),
        runs: report.runs,
        events: report.events,
        wall_s: report.wall.as_secs_f64(),
        search: Some(
            match config.search {
                Search::Adaptive => "adaptive",
                Search::Grid => "grid",
            }
            .to_string(),
        ),
    }
    .write(&config.storm.out)
}

/// Beside a storm shard's results, its manifest for `storm merge`; a whole
/// storm writes none.
pub(super) fn write_storm_manifest(storm: &Storm, command: Vec<String>) -> Result<(), StormError> {
    if storm.shard.is_whole() {
        return Ok(());
    }
    Manifest {
        kind: ShardKind::Run,
        shard: storm.shard,
        command,
        settings: 0,
        lines: Vec::new(),
        runs: 0,
        events: 0,
        wall_s: 0.0,
        search: None,
    }
    .write(&storm.out)
}

/// `storm merge DIR...`.
pub(super) fn merge(args: MergeArgs) -> ExitCode {
    let out = args.out.clone().expect("clap requires --out");
    // The server's CSV is read too: --replace must not remove it.
    let inputs: Vec<PathBuf> = args.dirs.iter().chain(&args.server_csv).cloned().collect();
    if let Err(e) = folder::claim(&out, &inputs, args.existing(), "--out") {
        return failure(e);
    }
    let sharded = args.dirs.iter().any(|d| d.join(shard::MANIFEST).exists());
    let done = if sharded {
        merge_shards(&args.dirs, &out, args.png)
    } else {
        let protocol = match (args.warmup, args.pause, args.observe) {
            (Some(warmup), Some(pause), Some(observe)) => Some(clients::Protocol {
                warmup,
                pause,
                observe,
            }),
            _ => None,
        };
        clients::merge(&clients::MergeRequest {
            dirs: &args.dirs,
            out: &out,
            server_csv: args.server_csv.as_deref(),
            protocol,
            png: args.png,
        })
        .map(|merged| {
            for line in merged {
                say(line);
            }
        })
    };
    match done {
        Ok(()) => {
            say(format!("results: {}", out.display()));
            ExitCode::SUCCESS
        }
        Err(e) => failure(e),
    }
}

/// Sweep or storm shards: checked to be whole, then their rows in one
/// process's order, and every file that process writes.
fn merge_shards(dirs: &[PathBuf], out: &Path, png: bool) -> Result<(), StormError> {
    let parts = shard::whole(dirs)?;
    let first = &parts[0].1;
    let reparse = |what: &str| {
        StormCli::try_parse_from(first.common_command()).map_err(|e| {
            StormError::Flags(format!(
                "the shards' command no longer parses as a {what}: {}",
                e.render()
            ))
        })
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    match first.kind {
        ShardKind::Sweep => {
            let Some(StormCommand::Sweep(args)) = reparse("sweep")?.command else {
                return Err(StormError::Flags(
                    "the shards' manifest says sweep, its command is not one".to_string(),
                ));
            };
            let mut config = args
                .config()
                .map_err(|e| StormError::Flags(e.to_string()))?;
            config.shard = Shard::WHOLE;
            config.storm.out = out.to_path_buf();
            config.storm.png |= png;
            config.validate(&ProgramFlags)?;
            let report = shard::merge_sweep(&parts)?;
            say(format!(
                "merged {} sweep shard(s): {} setting(s)",
                parts.len(),
                report.lines.len()
            ));
            sweep::write(&config, &report, &command)
        }
        ShardKind::Run => {
            let cli = reparse("storm")?;
            let exec = |exec: &crate::cli::ExecArgs, scenario, stem: Option<String>| {
                // A merge runs no child: the program is not needed.
                let mut storm = exec.storm(scenario, PathBuf::new(), stem.as_deref());
                storm.out = out.to_path_buf();
                storm.png |= png;
                storm
            };
            let bad =
                |e: crate::experiment::scenario::ScenarioError| StormError::Flags(e.to_string());
            let storm = match cli.command {
                Some(StormCommand::Run(args)) => {
                    exec(&args.exec, args.scenario().map_err(bad)?, args.stem())
                }
                None => exec(&cli.run.exec, cli.run.scenario().map_err(bad)?, None),
                Some(_) => {
                    return Err(StormError::Flags(
                        "the shards' manifest says storm, its command is not one".to_string(),
                    ));
                }
            };
            let report = shard::merge_runs(&storm, &ProgramFlags, &parts)?;
            say(format!(
                "merged {} storm shard(s): {} run(s)",
                parts.len(),
                report.runs.len()
            ));
            say(report.table().trim_end());
            Ok(())
        }
    }
}
