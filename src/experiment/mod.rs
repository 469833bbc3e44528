//! Experiments: a scenario's cases through the storm protocol (warm-up,
//! the server stopped, resumed, observed) on either engine, the figures
//! and verdict of each run, the summaries and plots; and the sweep that
//! maps where each policy breaks.
//!
//! The real engine runs each case's server and client as child processes
//! and learns their state from the status lines they write on a pipe (or,
//! against a target, a service of the user's, only the clients, the
//! outage caused as [`outage`] says); the virtual engine runs the same
//! configurations in virtual time. Flags are turned into configurations
//! by the programs' own parsers, which the layer above hands in as
//! [`Flags`].

pub mod calibrate;
mod children;
pub mod clients;
mod error;
pub mod folder;
mod judge;
pub mod outage;
mod runner;
pub mod scenario;
pub mod shard;
mod simulate;
mod stop;
mod storm;
pub mod summary;
pub mod sweep;
mod tables;
mod target;

use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::pin::pin;

pub use error::StormError;
pub use stop::Stop;
pub use storm::{Flags, Storm};

use error::io_err;
use scenario::Engine;
use summary::StormReport;

/// Runs `storm` as [`run`] does, on an async runtime of its own, ended
/// once `stop` is asked for: a real storm made by long work that is not
/// itself async (a sweep's run, a calibration's check).
pub fn run_until_stopped(
    storm: &Storm,
    flags: &dyn Flags,
    stop: &Stop,
) -> Result<StormReport, StormError> {
    let stop = stop.clone();
    let shutdown = async move {
        while !stop.requested() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StormError::Io("start the async runtime".into(), e))?
        .block_on(run(storm, flags, shutdown))
}

/// Runs the whole comparison on its engine; writes every file into
/// `storm.out`: the scenario, the command lines, each case's CSV files, the
/// summaries and the plots.
pub async fn run(
    storm: &Storm,
    flags: &dyn Flags,
    shutdown: impl Future<Output = ()>,
) -> Result<StormReport, StormError> {
    storm.validate(flags)?;
    let mut shutdown = pin!(shutdown);
    let mut wires = target::Wires::default();
    // Against a target, nothing is written before it has answered (a
    // target still busy with a run before is waited for), as each case's
    // clients will ask it, and its outage is known to be possible.
    if let (Engine::Real, Some(url), Some(outage)) =
        (storm.engine, &storm.scenario.target, &storm.scenario.outage)
    {
        wires = target::Wires::of(storm, url, flags)?;
        target::check(url, &wires, outage, target::FIRST_ANSWER, shutdown.as_mut()).await?;
        // Before the first outage: whatever ends this storm, its guardian
        // undoes what the outage holds. A fault proxy's ends with it.
        if outage.fault().is_none() {
            outage::guard_with(&storm.program).map_err(StormError::Target)?;
        }
    }
    folder::claim(&storm.out, &[], storm.existing, "--out")?;
    std::fs::create_dir_all(&storm.out)
        .map_err(io_err(format!("create {}", storm.out.display())))?;
    std::fs::write(
        storm.out.join("scenario.toml"),
        storm.scenario_as_run().to_toml(),
    )
    .map_err(io_err("write scenario.toml"))?;
    let mut commands =
        File::create(storm.out.join("commands.txt")).map_err(io_err("create commands.txt"))?;
    if storm.engine == Engine::Real {
        writeln!(
            commands,
            "# Each child wrote status lines to the runner's pipe, its descriptor 3: \
             to run a line by hand, add 3>/dev/null (or 3>FILE)."
        )
        .map_err(io_err("write commands.txt"))?;
    }
    let runs = match storm.engine {
        Engine::Sim => simulate::run(storm, flags, &mut commands)?,
        Engine::Real => runner::run(storm, &wires, &mut commands, shutdown).await?,
    };
    commands.flush().map_err(io_err("write commands.txt"))?;
    judge::write(storm, flags, runs)
}
