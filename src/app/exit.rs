//! How a storm subcommand's error ends the program.

use std::process::ExitCode;

use crate::experiment::StormError;

/// Says why on stderr, and returns the exit code that says so: 2 for bad
/// flags or input (a target that cannot be stormed included), 130 for a stop the user asked for (a sweep writes
/// its files only once it has every setting), 1 for anything else.
pub(super) fn failure(e: StormError) -> ExitCode {
    match e {
        StormError::Flags(msg) | StormError::Target(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        StormError::Interrupted | StormError::InterruptedBeforeLoad => {
            eprintln!("interrupted: nothing written");
            ExitCode::from(130)
        }
        e => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
