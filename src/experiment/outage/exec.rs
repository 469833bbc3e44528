//! Commands of the user's for the outage's start and end (`--outage exec`
//! with `--outage-start` and `--outage-end`: `docker pause NAME` and
//! `docker unpause NAME`, say), timed by the storm.
//!
//! Each runs through `sh -c` with stdin null and its output kept (the
//! tails go to `commands.txt` and to messages), in a process group of its
//! own, so that a Ctrl-C at the terminal reaches the storm alone, which
//! decides; for at most [`LIMIT`], past which the group is killed and that
//! is an error. The pause is timed from the start command's exit, the
//! resume is the end command's exit. The outage's guardian runs both
//! ([`super::guardian`]), for the storm, which waits for each.
//!
//! The end command runs once whatever ends the outage: at the resume;
//! after a start command that failed (it may have half applied); on an
//! error or a stop during the pause (the [`Started`] value dropped); and
//! however the storm ends (its guardian runs it when the storm is gone,
//! once the start command has exited: [`super::at_exit`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::at_exit::{self, Registered};
use super::guardian::Undo;
use super::log::Log;

/// The longest a start or end command may run.
pub const LIMIT: Duration = Duration::from_secs(60);

/// How long a command killed at its limit may take to be gone.
const KILLED_WITHIN: Duration = Duration::from_secs(10);

/// The most lines of a command's stdout or stderr kept, from its end.
const TAIL_LINES: usize = 20;

/// The most bytes of a command's stdout or stderr read, from its end.
const TAIL_BYTES: u64 = 4096;

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

/// How a command ended: data, so that the guardian that ran it can say
/// so to the storm.
#[derive(Debug, Serialize, Deserialize)]
enum Ending {
    /// It exited, or a signal ended it: the raw wait status.
    Exited { status: i32 },
    /// Killed with its process group at its time limit.
    TimedOut(Duration),
    /// It could not be started, and why.
    Unstarted(String),
}

/// A command run: how it ended, how long it took, its output's tails.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Ran {
    command: String,
    ending: Ending,
    took: Duration,
    stdout: String,
    stderr: String,
}

/// A file for a command's output, unlinked at once: read back after the
/// command, however long what it started in the background writes on.
fn scratch() -> io::Result<File> {
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "retry-storm-outage-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// The last lines of what was written to `file`.
fn tail(mut file: &File) -> String {
    let len = file.seek(SeekFrom::End(0)).unwrap_or(0);
    let from = len.saturating_sub(TAIL_BYTES);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let kept = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    let cut = from > 0 || kept.len() < lines.len();
    format!("{}{}", if cut { "...\n" } else { "" }, kept.join("\n"))
}

/// Runs `command` through `sh -c` for at most `limit`: how it ended,
/// when, and the files that hold its stdout and stderr.
fn wait_for(command: &str, limit: Duration) -> io::Result<(Ending, Instant, File, File)> {
    let (out, err) = (scratch()?, scratch()?);
    let child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(err.try_clone()?)
        .process_group(0)
        .spawn()?;
    // Its own group: the command and whatever it started.
    let group = Pid::from_raw(child.id() as i32);
    let (sender, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let mut child = child;
        sender.send(child.wait())
    });
    let ending = match exited.recv_timeout(limit) {
        Ok(status) => Ending::Exited {
            status: status?.into_raw(),
        },
        Err(_) => {
            let _ = killpg(group, Signal::SIGKILL);
            let _ = exited.recv_timeout(KILLED_WITHIN);
            Ending::TimedOut(limit)
        }
    };
    Ok((ending, Instant::now(), out, err))
}

/// Runs `command` through `sh -c` for at most `limit`.
pub(crate) fn run(command: &str, limit: Duration) -> Ran {
    let started = Instant::now();
    let (ending, ended, stdout, stderr) = match wait_for(command, limit) {
        Ok((ending, ended, out, err)) => (ending, ended, tail(&out), tail(&err)),
        Err(e) => (
            Ending::Unstarted(e.to_string()),
            Instant::now(),
            String::new(),
            String::new(),
        ),
    };
    Ran {
        command: command.to_string(),
        ending,
        took: ended - started,
        stdout,
        stderr,
    }
}

impl Ran {
    /// A command not run, and why.
    pub(crate) fn unrun(command: &str, why: String) -> Ran {
        Ran {
            command: command.to_string(),
            ending: Ending::Unstarted(why),
            took: Duration::ZERO,
            stdout: String::new(),
            stderr: String::new(),
        }
    }

    /// Whether it ran and exited 0.
    pub(crate) fn ok(&self) -> bool {
        matches!(&self.ending, Ending::Exited { status } if ExitStatus::from_raw(*status).success())
    }

    /// The command, how it ended and how long it took, in a phrase.
    pub(crate) fn summary(&self) -> String {
        let how = match &self.ending {
            Ending::Exited { status } => {
                let status = ExitStatus::from_raw(*status);
                match (status.code(), status.signal()) {
                    (Some(code), _) => format!("exited with status {code}"),
                    (None, Some(signal)) => format!("was killed by signal {signal}"),
                    (None, None) => format!("ended ({status})"),
                }
            }
            Ending::TimedOut(limit) => format!(
                "was still running at its time limit of {} s, and was killed with its \
                 process group",
                limit.as_secs_f64()
            ),
            Ending::Unstarted(e) => format!("could not be run ({e})"),
        };
        format!(
            "'{}' {how} after {:.3} s",
            self.command,
            self.took.as_secs_f64()
        )
    }

    /// The summary and the output's tails, for `commands.txt`.
    pub(crate) fn report(&self) -> String {
        self.summary() + &self.output()
    }

    /// The output's tails, each on lines of its own after a newline.
    fn output(&self) -> String {
        [("stdout", &self.stdout), ("stderr", &self.stderr)]
            .iter()
            .filter(|(_, tail)| !tail.is_empty())
            .map(|(name, tail)| format!("\n{name}:\n{tail}"))
            .collect()
    }

    /// Its stderr's tail, for a message (empty if it wrote nothing).
    pub(crate) fn stderr_tail(&self) -> String {
        match self.stderr.is_empty() {
            true => String::new(),
            false => format!("; its stderr ends:\n{}", self.stderr),
        }
    }
}

/// An outage its start command caused: the end command runs when the
/// value is ended, or dropped, or at the storm's end however it ends,
/// once: the guardian runs both ([`super::guardian`]).
#[derive(Debug)]
pub(crate) struct Started {
    log: Log,
    /// The end command at the exit, until it is run here.
    at_exit: Option<Registered>,
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
        let at_exit = at_exit::register(
            Undo::Run {
                command: end.to_string(),
            },
            log.note(),
        )?;
        let since = Instant::now();
        let ran = at_exit::run(start);
        let said = log.say(&format!("the outage's start command {}", ran.report()));
        let mut started = Started {
            log,
            at_exit: Some(at_exit),
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
        let ran = self.at_exit.take()?.settle()?;
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
