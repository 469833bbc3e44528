//! The virtual engine: each case of a storm in virtual time, writing the
//! same files as a real run.

use std::fs::File;
use std::io::Write;

use super::error::{StormError, io_err};
use super::scenario::join_flags;
use super::storm::{Flags, Storm};
use super::summary::CaseRun;
use crate::sim;
use crate::view::Progress;

/// Runs every case of `storm` in virtual time, each `storm.runs()` times
/// (seeds from the scenario's on), case by case; a bar of the runs done
/// on a terminal's stderr. Stops before the next run once `storm.stop`
/// is set.
pub(super) fn run(
    storm: &Storm,
    flags: &dyn Flags,
    commands: &mut File,
) -> Result<Vec<CaseRun>, StormError> {
    let mut runs = Vec::new();
    let made = |place: usize| (0..storm.runs()).filter(move |&rep| storm.makes(place, rep));
    let total = (0..storm.scenario.cases.len())
        .map(|p| made(p).count())
        .sum::<usize>();
    let bar = Progress::new(total as u64, "runs", storm.progress, false);
    for (place, case) in storm.scenario.cases.iter().enumerate() {
        for rep in made(place) {
            // What ran so far is on disk: each run writes its own files.
            if storm.stop.requested() {
                return Err(StormError::Interrupted);
            }
            bar.message(&case.name);
            let name = storm.run_name(case, rep);
            let config = storm.sim_config(case, rep, flags)?;
            let outcome =
                sim::run(&config).map_err(|e| StormError::Child(format!("{name}: {e}")))?;
            writeln!(
                commands,
                "# {name}, in virtual time (storm --engine sim) with these flags\n\
                 server {}\nclient {}",
                join_flags(&storm.sim_server_argv(case, rep)),
                join_flags(&storm.client_argv(case, rep, "sim"))
            )
            .map_err(io_err("write commands.txt"))?;
            for tier in 1..=case.tiers.len() {
                let argv = storm.tier_argv(case, rep, tier, "sim");
                writeln!(commands, "tier {tier}: server {}", join_flags(&argv))
                    .map_err(io_err("write commands.txt"))?;
            }
            if storm.verbose {
                bar.say(format!("{name}: {}", outcome.speed()));
            }
            bar.inc(1);
            runs.push(CaseRun {
                case: case.clone(),
                rep,
                timeline: storm.timeline(0),
                client: outcome.client.rows,
                tiers: outcome
                    .tiers
                    .into_iter()
                    .map(|t| (t.server_rows, t.calls.rows))
                    .collect(),
                server: outcome.server_rows,
                client_behind: None,
                proxy: Vec::new(),
            });
        }
    }
    Ok(runs)
}
