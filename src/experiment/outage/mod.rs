//! The outage a storm causes in a service it did not start (`--outage`,
//! or a scenario's `outage`), against a target named by URL (`--target`).
//!
//! Four kinds: `sigstop=PID`, a real SIGSTOP to the process and to every
//! descendant it has at the pause, and SIGCONT to each of them at the
//! resume ([`freeze`]); `freeze=CGROUP_DIR`, a cgroup's freezer, every
//! process in it frozen for the pause ([`cgroup`]); `exec`, commands of
//! the user's for the start and the end (`--outage-start`,
//! `--outage-end`: [`exec`]); and a fault of a fault proxy the storm
//! starts in front of the target (`stall`, `blackhole`, `reset`,
//! `status=CODE`, `delay=D`: [`Fault`]), switched on for the pause and off
//! at the resume. Whatever ends the storm ends the outage, down to its
//! SIGKILL: a guardian process holds what undoes it ([`guardian`],
//! [`link`]).

mod cgroup;
mod command;
mod exec;
mod freeze;
mod guardian;
mod link;
mod log;
mod process;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use cgroup::{Cgroup, FrozenCgroup};
use exec::{Started, Which};
use freeze::{Frozen, check_process};

pub use guardian::guard;
pub(super) use link::guard_with;
pub(super) use log::Log;

use super::error::StormError;
use crate::model::fault::{FAULT_FORMS, FAULT_KINDS, Fault};

/// The longest an `exec` outage's start or end command may run: past it,
/// it is killed with its process group, and the storm stops.
pub use command::LIMIT as COMMAND_LIMIT;

/// How the outage is caused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outage {
    /// SIGSTOP to `pid` and its descendants at the pause, SIGCONT to the
    /// same processes at the resume.
    Sigstop {
        /// The process at the root of the stopped tree.
        pid: i32,
    },
    /// The freezer of a cgroup, on for the pause.
    Freeze {
        /// The cgroup's directory (an absolute path).
        cgroup: PathBuf,
    },
    /// Commands of the user's, run through `sh -c`.
    Exec {
        /// Causes the outage; the pause is timed from its exit.
        start: String,
        /// Ends it; the resume is its exit.
        end: String,
    },
    /// A fault of the fault proxy in front of the target, on for the pause.
    Proxy(Fault),
}

/// The kind whose commands come from `--outage-start` and `--outage-end`.
pub const EXEC: &str = "exec";

/// What `--outage` takes, for messages.
fn taken() -> String {
    format!(
        "sigstop=PID (a process and its descendants, stopped for the pause), \
         freeze=CGROUP_DIR (a cgroup's freezer), exec (commands of yours: --outage-start \
         and --outage-end), or a fault of a proxy in front of the target: {FAULT_FORMS}"
    )
}

impl FromStr for Outage {
    type Err = String;

    /// Every kind but `exec`, whose commands are given apart
    /// ([`Outage::with_commands`]).
    fn from_str(s: &str) -> Result<Outage, String> {
        let (_, value) = s.split_once('=').unwrap_or((s, ""));
        let kind = s.split([',', '=']).next().unwrap_or("").trim();
        match kind {
            "sigstop" => {
                let pid: i32 = value.parse().map_err(|_| {
                    format!("'{s}': sigstop= takes a process id, such as sigstop=1234")
                })?;
                if pid <= 1 {
                    return Err(format!(
                        "'{s}': process {pid} cannot be stopped (0 and negative ids name \
                         groups of processes, 1 is init)"
                    ));
                }
                Ok(Outage::Sigstop { pid })
            }
            "freeze" => {
                let cgroup = PathBuf::from(value);
                if !s.starts_with("freeze=") || !cgroup.is_absolute() {
                    return Err(format!(
                        "'{s}': freeze= takes the absolute path of a cgroup's directory, \
                         such as freeze=/sys/fs/cgroup/NAME"
                    ));
                }
                Ok(Outage::Freeze { cgroup })
            }
            EXEC if s == EXEC => Err(format!(
                "'{s}': --outage exec needs its commands, --outage-start CMD and \
                 --outage-end CMD (a scenario's outage_start and outage_end)"
            )),
            EXEC => Err(format!(
                "'{s}': exec takes no value: its commands are --outage-start and \
                 --outage-end"
            )),
            kind if FAULT_KINDS.contains(&kind) => s.parse().map(Outage::Proxy),
            _ => Err(format!("'{s}': unknown outage; the outage is {}", taken())),
        }
    }
}

impl fmt::Display for Outage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outage::Sigstop { pid } => write!(f, "sigstop={pid}"),
            Outage::Freeze { cgroup } => write!(f, "freeze={}", cgroup.display()),
            Outage::Exec { .. } => f.write_str(EXEC),
            Outage::Proxy(fault) => write!(f, "{fault}"),
        }
    }
}

impl Outage {
    /// The outage `kind` names (as `--outage` takes it), with the commands
    /// that `exec` needs and the other kinds refuse.
    pub fn with_commands(
        kind: &str,
        start: Option<String>,
        end: Option<String>,
    ) -> Result<Outage, String> {
        if kind != EXEC {
            if start.is_some() || end.is_some() {
                return Err(format!(
                    "--outage-start and --outage-end (a scenario's outage_start and \
                     outage_end) go with --outage exec, not with {kind}"
                ));
            }
            return kind.parse();
        }
        let missing: Vec<&str> = [(&start, Which::Start), (&end, Which::End)]
            .iter()
            .filter(|(command, _)| command.is_none())
            .map(|(_, which)| which.named())
            .collect();
        match (start, end) {
            (Some(start), Some(end)) => {
                for (command, which) in [(&start, Which::Start), (&end, Which::End)] {
                    if command.trim().is_empty() {
                        return Err(format!(
                            "{} is empty: give the command to run",
                            which.named()
                        ));
                    }
                }
                Ok(Outage::Exec { start, end })
            }
            _ => Err(format!(
                "--outage exec needs {}: the commands that start and end the outage",
                missing.join(" and ")
            )),
        }
    }

    /// An `exec` outage's commands, start and end.
    pub fn commands(&self) -> Option<(&str, &str)> {
        match self {
            Outage::Exec { start, end } => Some((start, end)),
            _ => None,
        }
    }

    /// What the outage does, in a sentence's words.
    pub fn describe(&self) -> String {
        match self {
            Outage::Sigstop { pid } => format!(
                "SIGSTOP to process {pid} and its descendants at the pause, SIGCONT to the \
                 same processes at the resume"
            ),
            Outage::Freeze { cgroup } => format!(
                "the freezer of the cgroup {}: every process in it and below it frozen at \
                 the pause, thawed at the resume",
                cgroup.display()
            ),
            Outage::Exec { start, end } => format!(
                "sh -c '{start}' at the pause, which is timed from its exit, and sh -c \
                 '{end}' at the resume, which is its exit; each for at most {} s",
                COMMAND_LIMIT.as_secs()
            ),
            Outage::Proxy(fault) => fault.describe(),
        }
    }

    /// How the outage was undone when a storm is interrupted, for its
    /// last words.
    pub fn undone(&self) -> &'static str {
        match self {
            Outage::Sigstop { .. } => {
                "every process the outage stopped continued, the target left running"
            }
            Outage::Freeze { .. } => "the cgroup the outage froze thawed, the target left running",
            Outage::Exec { .. } => "the outage's end command run, the target left running",
            Outage::Proxy(_) => "the fault proxy stopped, its fault with it, the target untouched",
        }
    }

    /// Checks, before any load, that the outage can be caused: a process
    /// to stop exists and may be signalled by this one, is neither this
    /// process nor one of its ancestors, and is not stopped already; a
    /// cgroup to freeze likewise ([`Cgroup::open`]); commands are there to
    /// run. A fault proxy's fault needs no check: the storm starts the
    /// proxy.
    pub(super) fn check(&self) -> Result<(), String> {
        match self {
            Outage::Sigstop { pid } => check_process(*pid),
            Outage::Freeze { cgroup } => Cgroup::open(cgroup).map(drop),
            Outage::Exec { start, end } => {
                exec::check(Which::Start, start)?;
                exec::check(Which::End, end)
            }
            Outage::Proxy(_) => Ok(()),
        }
    }

    /// The fault, when the outage is a fault proxy's: the runs then go
    /// through proxies of their own, which the runner switches.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Outage::Proxy(fault) => Some(fault),
            _ => None,
        }
    }

    /// Causes the outage, saying in `log` what was done; it lasts until
    /// the value returned is ended or dropped. Nothing for a fault proxy's
    /// fault: the runner switches its runs' proxies.
    pub(super) fn begin(&self, mut log: Log) -> Result<Option<Ongoing>, String> {
        let ongoing = match self {
            Outage::Sigstop { pid } => {
                let frozen = Frozen::stop(*pid, log.note())?;
                log.say(&frozen.report())?;
                Ongoing::Stopped(frozen)
            }
            Outage::Freeze { cgroup } => Ongoing::Frozen(Cgroup::open(cgroup)?.freeze(&mut log)?),
            Outage::Exec { start, end } => Ongoing::Commanded(Started::start(start, end, log)?),
            Outage::Proxy(_) => return Ok(None),
        };
        Ok(Some(ongoing))
    }
}

/// An outage in progress: ended by [`Ongoing::end`], or when dropped (an
/// error or a stop on the way), so that nothing stays down.
#[derive(Debug)]
pub(super) enum Ongoing {
    /// The processes stopped, in the order they were.
    Stopped(Frozen),
    /// The cgroup frozen.
    Frozen(FrozenCgroup),
    /// The start command run; the end command to run.
    Commanded(Started),
}

impl Ongoing {
    /// Ends the outage: an error if an end command failed, which may have
    /// left the target in its outage.
    pub(super) fn end(self) -> Result<(), StormError> {
        match self {
            Ongoing::Stopped(frozen) => frozen.thaw(),
            Ongoing::Frozen(cgroup) => cgroup.thaw(),
            Ongoing::Commanded(started) => {
                let names = started.names().to_string();
                started
                    .end()
                    .map_err(|e| StormError::Child(format!("the outage of {names}: {e}")))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
