//! The `storm calibrate` program: from its flags to a twin of the
//! service, its prediction and checks, and an exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use super::interrupt::stop_on_signal;
use crate::cli::{CalibrateArgs, ProgramFlags};
use crate::experiment::calibrate;
use crate::experiment::{Flags, Stop, StormError};
use crate::report::output::say;

/// Runs the calibration; 0 when every step asked for is done, 2 for bad
/// flags or a service that cannot be probed or fitted, 130 when
/// interrupted (what was measured is kept), 1 otherwise.
pub(super) fn calibrate(args: CalibrateArgs, program: PathBuf) -> ExitCode {
    let command = std::env::args_os()
        .map(|word| word.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let config = match args.config(program, command) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Every case's flags are checked before the probe's minutes, as the
    // twin's storms will take them.
    for case in &config.cases.cases {
        let checked = ProgramFlags
            .client(&case.client)
            .and_then(|_| ProgramFlags.server(&case.server).map(|_| ()));
        if let Err(e) = checked {
            eprintln!("error: case {}: {e}", case.name);
            return ExitCode::from(2);
        }
    }
    let stop = Stop::new();
    if let Err(e) = stop_on_signal(&stop) {
        eprintln!("error: cannot handle SIGINT and SIGTERM: {e}");
        return ExitCode::FAILURE;
    }
    say(format!(
        "calibrate: probing {} at {} level(s); results in {}",
        config.probe.target,
        config.probe.levels.len(),
        config.out.display()
    ));
    match calibrate::run(&config, &ProgramFlags, &stop) {
        Ok(record) => {
            let best = record.fits.as_ref().map(|f| f.best().twin.name());
            say(format!(
                "calibrate: the twin is the {} shape; {} in {}",
                best.unwrap_or("-"),
                match (config.predict.is_some(), config.verify.is_some()) {
                    (_, true) => "calibration.md, twin.toml, predict/ and verify/",
                    (true, false) => "calibration.md, twin.toml and predict/",
                    (false, _) => "calibration.md and twin.toml",
                },
                config.out.display()
            ));
            ExitCode::SUCCESS
        }
        Err(StormError::Interrupted | StormError::InterruptedBeforeLoad) => {
            eprintln!(
                "interrupted: what was measured is in {} (levels.csv, calibration.json)",
                config.out.display()
            );
            ExitCode::from(130)
        }
        Err(e @ (StormError::Flags(_) | StormError::Target(_))) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}; partial results in {}", config.out.display());
            ExitCode::FAILURE
        }
    }
}
