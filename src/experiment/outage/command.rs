//! A command of the user's run through `sh -c`, timed: stdin null, its
//! output kept (the tails go to `commands.txt` and to messages), in a
//! process group of its own, so that a Ctrl-C at the terminal reaches the
//! storm alone; for at most a limit, past which the group is killed and
//! that is an error. What an `exec` outage's start and end commands are
//! run with, by the guardian ([`super::guardian`]).

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

/// The longest a start or end command may run.
pub const LIMIT: Duration = Duration::from_secs(60);

/// How long a command killed at its limit may take to be gone.
const KILLED_WITHIN: Duration = Duration::from_secs(10);

/// The most lines of a command's stdout or stderr kept, from its end.
const TAIL_LINES: usize = 20;

/// The most bytes of a command's stdout or stderr read, from its end.
const TAIL_BYTES: u64 = 4096;

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
    let waiter = std::thread::Builder::new().spawn(move || {
        let mut child = child;
        sender.send(child.wait())
    });
    if let Err(e) = waiter {
        // No thread to time it: its group killed rather than left unwaited.
        let _ = killpg(group, Signal::SIGKILL);
        return Err(e);
    }
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
    pub(crate) fn output(&self) -> String {
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

#[cfg(test)]
mod tests;
