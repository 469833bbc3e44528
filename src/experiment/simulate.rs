//! The virtual engine: each case of a storm in virtual time, writing the
//! same files as a real run.

use std::fs::File;
use std::io::Write;

use super::error::{StormError, io_err};
use super::scenario::join_flags;
use super::storm::{Flags, Storm};
use super::summary::CaseRun;
use crate::report::output::say;
use crate::sim;

/// Runs every case of `storm` in virtual time, each `storm.runs()` times
/// (seeds from the scenario's on), case by case.
pub(super) fn run(
    storm: &Storm,
    flags: &dyn Flags,
    commands: &mut File,
) -> Result<Vec<CaseRun>, StormError> {
    let mut runs = Vec::new();
    for (place, case) in storm.scenario.cases.iter().enumerate() {
        for rep in (0..storm.runs()).filter(|&rep| storm.makes(place, rep)) {
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
            if storm.verbose {
                say(format!("{name}: {}", outcome.speed()));
            }
            runs.push(CaseRun {
                case: case.clone(),
                rep,
                timeline: storm.timeline(0),
                client: outcome.client.rows,
                server: outcome.server_rows,
            });
        }
    }
    Ok(runs)
}
