//! Commands of the user's for the outage's start and end (`--outage exec`
//! with `--outage-start` and `--outage-end`: `docker pause NAME` and
//! `docker unpause NAME`, say), timed by the storm.
//!
//! Each runs through `sh -c` with stdin null and its output kept (the
//! tails go to `commands.txt` and to messages), in a process group of its
//! own, so that a Ctrl-C at the terminal reaches the storm alone, which
//! decides; for at most [`super::command::LIMIT`], past which the group is killed and that
//! is an error. The pause is timed from the start command's exit, the
//! resume is the end command's exit. The outage's guardian runs both
//! ([`super::guardian`]), for the storm, which waits for each.
//!
//! The end command runs once whatever ends the outage: at the resume;
//! after a start command that failed (it may have half applied); on an
//! error or a stop during the pause (the [`Started`] value dropped); and
//! however the storm ends (its guardian runs it when the storm is gone,
//! once the start command has exited: [`super::link`]).

use std::process::{Command, Stdio};
use std::time::Instant;

use super::command::Ran;
use super::guardian::Undo;
use super::link::{self, Held};
use super::log::Log;

/// Which of the two commands, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The command that causes the outage.
    Start,
    /// The command that ends it.
    End,
}

impl Which {
    /// Its flag and scenario key, as messages name them.
    pub fn named(self) -> &'static str {
        match self {
            Which::Start => "--outage-start (outage_start)",
            Which::End => "--outage-end (outage_end)",
        }
    }
}

/// The word `sh` looks up to run `command`: its first, past variable
/// assignments (`A=1 cmd`) and a subshell's parentheses.
fn first_word(command: &str) -> Result<String, String> {
    let words = shlex::split(command).ok_or("unbalanced quotes")?;
    words
        .iter()
        .map(|w| w.trim_start_matches('('))
        .find(|w| {
            let assignment = w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            !w.is_empty() && !assignment
        })
        .map(str::to_string)
        .ok_or_else(|| "no command in it".to_string())
}

/// Checks, before any load, that `command` can be run: not empty, and its
/// first word a shell builtin or a program in `PATH` (`command -v`).
pub(crate) fn check(which: Which, command: &str) -> Result<(), String> {
    let named = which.named();
    if command.trim().is_empty() {
        return Err(format!("{named} is empty: give the command to run"));
    }
    let word = first_word(command).map_err(|e| format!("{named} '{command}': {e}"))?;
    let found = Command::new("sh")
        .args(["-c", "command -v \"$1\"", "sh", &word])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{named}: cannot run sh to look '{word}' up: {e}"))?;
    if !found.success() {
        return Err(format!(
            "{named} '{command}': '{word}' is neither a shell builtin nor a program in PATH"
        ));
    }
    Ok(())
}

/// An outage its start command caused: the end command runs when the
/// value is ended, or dropped, or at the storm's end however it ends,
/// once: the guardian runs both ([`super::guardian`]).
#[derive(Debug)]
pub(crate) struct Started {
    log: Log,
    /// The end command, held by the guardian until it is run here.
    held: Option<Held>,
    /// When the start command was started: the outage, as the target saw
    /// it, lasts from then to the end command's exit.
    since: Instant,
}

impl Started {
    /// Runs `start`, saying in `log` how it went; if it fails, runs `end`
    /// all the same (the start may have half applied) and says why.
    pub(crate) fn start(start: &str, end: &str, mut log: Log) -> Result<Started, String> {
        // Held before the start: whatever ends the storm from here, the
        // guardian runs the end command once the start command is done.
        let held = link::hold(
            Undo::Run {
                command: end.to_string(),
            },
            log.note(),
        )?;
        let since = Instant::now();
        let ran = link::run(start);
        let said = log.say(&format!("the outage's start command {}", ran.report()));
        let mut started = Started {
            log,
            held: Some(held),
            since,
        };
        said?;
        if ran.ok() {
            return Ok(started);
        }
        let ended = match started.finish() {
            Some(end) if end.ok() => format!("it {}", end.summary()),
            Some(end) => format!(
                "it {}, so the target may be left in its outage{}",
                end.summary(),
                end.stderr_tail()
            ),
            None => "it was run at the exit".into(),
        };
        Err(format!(
            "its start command {}{}; the end command was run all the same, since the start \
             may have half applied: {ended}",
            ran.summary(),
            ran.stderr_tail()
        ))
    }

    /// Runs the end command unless it has run, saying in the log how it
    /// went: what it did, if it ran here.
    fn finish(&mut self) -> Option<Ran> {
        let ran = self.held.take()?.settle()?;
        // The end has run: a line that cannot be written is not an error
        // of the outage's.
        let _ = self.log.say(&format!(
            "the outage's end command {}; the outage lasted {:.3} s from the start \
             command's start to the end command's exit{}",
            ran.summary(),
            self.since.elapsed().as_secs_f64(),
            ran.output()
        ));
        Some(ran)
    }

    /// Ends the outage: runs the end command; an error if it failed.
    pub(crate) fn end(mut self) -> Result<(), String> {
        match self.finish() {
            Some(ran) if !ran.ok() => Err(format!(
                "its end command {}: the target may be left in its outage{}",
                ran.summary(),
                ran.stderr_tail()
            )),
            _ => Ok(()),
        }
    }

    /// The runs' names, for messages.
    pub(crate) fn names(&self) -> &str {
        self.log.names()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(ran) = self.finish()
            && !ran.ok()
        {
            eprintln!(
                "warning: the outage of {}: its end command {}: the target may be left in \
                 its outage{}",
                self.log.names(),
                ran.summary(),
                ran.stderr_tail()
            );
        }
    }
}

#[cfg(test)]
mod tests;
