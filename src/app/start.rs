//! How a program that reports as it goes starts (`server`, `client`,
//! `storm proxy`): `--tui` refused without a terminal, the status
//! descriptor taken before anything opens a descriptor of its own, then
//! the runtime.

use std::future::Future;
use std::process::ExitCode;

use super::live;
use crate::net::runtime::block_on;
use crate::report::status::StatusSink;

/// Runs a program that reports as it goes: refuses `--tui` without a
/// terminal (exit 2), takes the status descriptor before anything opens
/// a descriptor of its own (exit 2 if it is unusable), then runs
/// `program` with it on the runtime.
pub(super) fn run_program<F: Future<Output = ExitCode>>(
    tui: bool,
    status_fd: Option<i32>,
    program: impl FnOnce(Option<StatusSink>) -> F,
) -> ExitCode {
    match live::check(tui).and_then(|()| status_sink(status_fd)) {
        Ok(status) => block_on(program(status)),
        Err(code) => code,
    }
}

/// Takes the status descriptor a supervisor gave (`--status-fd`), before
/// the program opens any descriptor of its own; exits 2 if it is unusable.
fn status_sink(fd: Option<i32>) -> Result<Option<StatusSink>, ExitCode> {
    let Some(fd) = fd else {
        return Ok(None);
    };
    // SAFETY: called before the runtime starts: nothing in this process
    // has opened a descriptor yet, so an open `fd` is the inherited one.
    match unsafe { StatusSink::from_fd(fd) } {
        Ok(sink) => Ok(Some(sink)),
        Err(e) => {
            eprintln!("error: --status-fd {fd}: {e}");
            Err(ExitCode::from(2))
        }
    }
}
