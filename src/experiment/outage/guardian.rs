//! The outage's guardian: a process of the storm's own (`storm guard`,
//! hidden) that holds what undoes the outage in force, and undoes it when
//! the storm's end of its pipe closes, however the storm ended: an exit,
//! a panic, a signal that kills it (SIGHUP when its terminal goes,
//! SIGQUIT), SIGKILL or the OOM killer. It runs an `exec` outage's
//! commands too, for the storm, so that its end command runs once
//! whatever happens: the guardian is the only process that runs it.
//!
//! The storm writes one JSON request a line on the guardian's stdin
//! ([`Request`]): an undo to hold before the outage is caused, its
//! release once the storm has undone it itself, a held undo to carry out
//! now (an end command), a command to run (a start command). The last two
//! are answered with one JSON line on its stdout ([`Reply`]). A line
//! written to a pipe stays there when its writer dies, so an undo held
//! before the outage began is read, and undone, after a SIGKILL.
//!
//! The guardian is started in a session of its own: a Ctrl-C at the
//! terminal, or the terminal's hangup, does not reach it; it ignores
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT, so that it lives exactly as long
//! as its storm's end of the pipe, and then as long as its undos take.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::command::{LIMIT, Ran, run};
use super::log::Note;
use super::process::name;

/// What undoes one part of an outage, as data: the guardian holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Undo {
    /// SIGCONT to a process stopped.
    Continue {
        /// The process.
        pid: i32,
    },
    /// A value written to a file: a cgroup's freezer thawed.
    Write {
        /// The freezer's control file (`cgroup.freeze`, `freezer.state`).
        path: PathBuf,
        /// What thaws it (`0`, `THAWED`).
        value: String,
    },
    /// An end command run through `sh -c`.
    Run {
        /// The command.
        command: String,
    },
}

impl Undo {
    /// What it does, in a phrase.
    pub(crate) fn describe(&self) -> String {
        match self {
            Undo::Continue { pid } => format!("SIGCONT to {pid}"),
            Undo::Write { path, value } => format!("write {value} to {}", path.display()),
            Undo::Run { command } => format!("the end command {command}"),
        }
    }

    /// Does it: what was done, and the command's run if it ran one.
    pub(crate) fn apply(&self) -> (String, Option<Ran>) {
        match self {
            Undo::Continue { pid } => {
                let named = name(*pid);
                let how = match kill(Pid::from_raw(*pid), Signal::SIGCONT) {
                    Ok(()) => "continued".to_string(),
                    Err(e) => format!("not continued ({e})"),
                };
                (format!("process {pid} ({named}) {how}"), None)
            }
            Undo::Write { path, value } => {
                let how = match std::fs::write(path, value) {
                    Ok(()) => "written".to_string(),
                    Err(e) => format!("not written ({e})"),
                };
                (format!("{value} to {}: {how}", path.display()), None)
            }
            Undo::Run { command } => {
                let ran = run(command, LIMIT);
                (
                    format!("the outage's end command {}", ran.summary()),
                    Some(ran),
                )
            }
        }
    }
}

/// A request of the storm's to its guardian, one JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Request {
    /// Hold `undo`, numbered `id`, until released or the storm ends.
    Hold {
        /// Its number, the storm's.
        id: u64,
        /// What undoes it.
        undo: Undo,
        /// Where to say it was undone, if the guardian undoes it.
        #[serde(default)]
        note: Option<Note>,
    },
    /// The storm undid it itself: forget it.
    Release {
        /// The undo's number.
        id: u64,
    },
    /// Carry out the undo now, if still held, and answer.
    Settle {
        /// The undo's number.
        id: u64,
    },
    /// Run a command through `sh -c` for at most the commands' limit, and
    /// answer how it went.
    Run {
        /// The command.
        command: String,
    },
}

/// The guardian's answer to [`Request::Settle`] and [`Request::Run`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// Whether the undo was still held (always, for a command to run).
    pub held: bool,
    /// The command's run, if one ran.
    pub ran: Option<Ran>,
}

/// Serves the storm's requests read from `input`, answering on `output`,
/// until `input` ends; then undoes what is still held, last first, saying
/// each on `say`.
pub(crate) fn serve(input: impl BufRead, mut output: impl Write, mut say: impl FnMut(&str)) {
    let mut held: Vec<(u64, Undo, Option<Note>)> = Vec::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let request = match serde_json::from_str::<Request>(&line) {
            Ok(request) => request,
            Err(e) => {
                say(&format!(
                    "storm guard: a request it cannot read ({e}): {line}"
                ));
                continue;
            }
        };
        let reply = match request {
            Request::Hold { id, undo, note } => {
                held.push((id, undo, note));
                None
            }
            Request::Release { id } => {
                held.retain(|(held_id, ..)| *held_id != id);
                None
            }
            Request::Settle { id } => match held.iter().position(|(held_id, ..)| *held_id == id) {
                Some(at) => {
                    let (_, undo, _) = held.remove(at);
                    Some(Reply {
                        held: true,
                        ran: undo.apply().1,
                    })
                }
                None => Some(Reply {
                    held: false,
                    ran: None,
                }),
            },
            Request::Run { command } => Some(Reply {
                held: true,
                ran: Some(run(&command, LIMIT)),
            }),
        };
        if let Some(reply) = reply {
            let line = serde_json::to_string(&reply).expect("a reply serialises");
            // A storm gone meanwhile reads no answer: its undos follow.
            if writeln!(output, "{line}")
                .and_then(|()| output.flush())
                .is_err()
            {
                break;
            }
        }
    }
    if held.is_empty() {
        return;
    }
    say(&format!(
        "storm guard: the storm ended with its outage in force; undoing {} thing(s)",
        held.len()
    ));
    for (_, undo, note) in held.into_iter().rev() {
        // One undo that panics (no thread to be had, under the memory
        // pressure that may have killed the storm) leaves the others to do.
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| undo.apply()));
        let (done, ran) = applied.unwrap_or_else(|_| (format!("{} failed", undo.describe()), None));
        let line = format!(
            "storm guard: the storm ended during the outage: {done}{}",
            ran.map(|r| r.stderr_tail()).unwrap_or_default()
        );
        if let Some(note) = note {
            note.say(&line);
        }
        say(&line);
    }
}

/// `storm guard`: the guardian's process. Requests come on stdin,
/// answers go to stdout, what it undoes at the end is said on stderr
/// (ignored if nothing reads it any more: a closed terminal).
pub fn guard() -> io::Result<()> {
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
    ] {
        // A handler that does nothing, not SIG_IGN: the commands it runs
        // get the default dispositions back at their exec.
        signal_hook::flag::register(signal, std::sync::Arc::default())?;
    }
    let stdin = io::stdin().lock();
    let stdout = io::stdout().lock();
    serve(stdin, stdout, |line| {
        let _ = writeln!(io::stderr(), "{line}");
    });
    Ok(())
}

#[cfg(test)]
mod tests;
