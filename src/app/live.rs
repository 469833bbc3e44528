//! The live view's part in the programs (`--tui`): refused without a
//! terminal, opened once the program's signal handling is in place (`q`
//! raises SIGINT), fed from the program's status sink, and closed before
//! the summary prints.

use std::process::ExitCode;

use crate::report::status::StatusSink;
use crate::view::{LiveView, OwnKey, Setup, terminal};

/// Refuses `--tui` where stdout is not a terminal (exit 2).
pub(super) fn check(tui: bool) -> Result<(), ExitCode> {
    match terminal::refusal() {
        Some(why) if tui => {
            eprintln!("error: {why}");
            Err(ExitCode::from(2))
        }
        _ => Ok(()),
    }
}

/// Opens the view when asked for; exits 1 if the terminal cannot be had.
pub(super) fn open(tui: bool, setup: impl FnOnce() -> Setup) -> Result<Option<LiveView>, ExitCode> {
    open_with(tui, setup, None)
}

/// [`open`], with a key of the program's own.
pub(super) fn open_with(
    tui: bool,
    setup: impl FnOnce() -> Setup,
    key: Option<OwnKey>,
) -> Result<Option<LiveView>, ExitCode> {
    if !tui {
        return Ok(None);
    }
    LiveView::open_with(setup(), key).map(Some).map_err(|e| {
        eprintln!("error: --tui: cannot take the terminal: {e}");
        ExitCode::FAILURE
    })
}

/// The program's status sink, with the view's tap when it is up.
pub(super) fn sink(status: Option<StatusSink>, view: Option<&LiveView>) -> Option<StatusSink> {
    match view {
        Some(view) => Some(StatusSink::tapped(status, view.tap())),
        None => status,
    }
}
