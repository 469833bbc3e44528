//! Ctrl-C for work in virtual time. The virtual engine keeps its thread
//! busy and has no runtime to wait on a signal, so a thread of this
//! module's waits for it instead and sets the engine's [`Stop`] flag,
//! which the engine polls between runs. Installing the handler replaces
//! whatever disposition the program inherited: a `storm` started as
//! `storm ... &` from a script, or under nohup, has SIGINT ignored and
//! must stop all the same (docs/exit-codes.md).

use std::io;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::experiment::Stop;

/// Handles SIGINT and SIGTERM from now on: the first sets `stop`, a second
/// ends the program at once with 130, saying so on stderr.
pub(super) fn stop_on_signal(stop: &Stop) -> io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut arrived = signals.forever();
            if arrived.next().is_some() {
                stop.request();
            }
            if arrived.next().is_some() {
                eprintln!("second signal: exiting now");
                std::process::exit(130);
            }
        })?;
    Ok(())
}
