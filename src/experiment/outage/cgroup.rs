//! A cgroup's freezer (`--outage freeze=CGROUP_DIR`): every process in
//! the cgroup and in the cgroups below it frozen for the pause, thawed at
//! the resume. Cgroup v2 writes 1 to `cgroup.freeze` and waits until
//! `cgroup.events` says `frozen 1`; v1 writes `FROZEN` to `freezer.state`
//! and waits until it reads so. A frozen process is held as a stopped one
//! is, its sockets open, but no signal is sent: neither it nor its parent
//! can tell (a supervisor does not restart it), and nothing it forks
//! escapes.
//!
//! The cgroup is thawed whatever ends the outage: at the resume, on an
//! error or a stop (dropped), and however the storm ends, SIGKILL
//! included: the outage's guardian holds the thaw from before the freeze
//! ([`super::link`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::unistd::{AccessFlags, access};

use super::guardian::Undo;
use super::link::{self, Held};
use super::log::Log;
use super::process::{name, this_and_ancestors};

/// How long freezing may take: the kernel freezes each task when it can,
/// which one in an uninterruptible sleep (state D) may delay.
const FREEZE_WITHIN: Duration = Duration::from_secs(10);

/// The longest pause between two looks at a freezing cgroup's state.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// The two freezers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// `freezer.state`: THAWED, FREEZING or FROZEN.
    V1,
    /// `cgroup.freeze` (0 or 1) and `frozen` in `cgroup.events`.
    V2,
}

/// A cgroup with a freezer, checked.
#[derive(Debug, Clone)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    version: Version,
}

/// Every process in the cgroup at `dir` and in those below it.
fn processes_in(dir: &Path) -> Vec<i32> {
    let mut found: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.join("cgroup.procs").is_file() {
            found.extend(processes_in(&path));
        }
    }
    found
}

impl Cgroup {
    /// The cgroup at `dir`, checked before any load: a directory, a cgroup
    /// (it has `cgroup.procs`) with a freezer, that this user may write,
    /// not frozen already, holding at least one process, and holding
    /// neither this process nor any of its ancestors.
    pub(crate) fn open(dir: &Path) -> Result<Cgroup, String> {
        let shown = dir.display();
        if !dir.is_dir() {
            return Err(format!("{shown}: no such directory"));
        }
        if !dir.join("cgroup.procs").is_file() {
            return Err(format!(
                "{shown} is not a cgroup (it has no cgroup.procs): name a directory of a \
                 cgroup hierarchy, such as /sys/fs/cgroup/NAME"
            ));
        }
        let version = if dir.join("freezer.state").is_file() {
            Version::V1
        } else if dir.join("cgroup.freeze").is_file() {
            Version::V2
        } else {
            return Err(format!(
                "{shown} is a cgroup without a freezer (neither cgroup.freeze nor \
                 freezer.state): a v2 hierarchy's root cannot be frozen, and a v1 hierarchy \
                 needs the freezer controller (/sys/fs/cgroup/freezer/NAME)"
            ));
        };
        let cgroup = Cgroup {
            dir: dir.to_path_buf(),
            version,
        };
        let control = cgroup.control();
        access(&control, AccessFlags::W_OK).map_err(|e| {
            format!(
                "{} is not writable by this user ({e}): freezing needs root or a \
                 delegated cgroup",
                control.display()
            )
        })?;
        if cgroup.frozen()? {
            let thaw = match version {
                Version::V1 => "echo THAWED > freezer.state",
                Version::V2 => "echo 0 > cgroup.freeze",
            };
            return Err(format!(
                "{shown} is frozen already (by someone else, by a storm whose guardian was \
                 killed, or by a cgroup above it): thaw it first ({thaw})"
            ));
        }
        let processes = processes_in(dir);
        if processes.is_empty() {
            return Err(format!(
                "{shown} holds no process: put the target's in it first (echo PID > \
                 {shown}/cgroup.procs)"
            ));
        }
        let spared = this_and_ancestors();
        if let Some(pid) = processes.iter().find(|p| spared.contains(p)) {
            return Err(format!(
                "{shown} holds process {pid}, this storm or one of its ancestors (the shell \
                 that started it, say): freezing it would freeze the storm"
            ));
        }
        Ok(cgroup)
    }

    /// The file that freezes and thaws it.
    fn control(&self) -> PathBuf {
        self.dir.join(match self.version {
            Version::V1 => "freezer.state",
            Version::V2 => "cgroup.freeze",
        })
    }

    /// Whether it is frozen (or, v1, being frozen), by itself or by a
    /// cgroup above it.
    fn frozen(&self) -> Result<bool, String> {
        let read = |file: &str| {
            let path = self.dir.join(file);
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        };
        Ok(match self.version {
            Version::V1 => read("freezer.state")?.trim() != "THAWED",
            Version::V2 => {
                read("cgroup.freeze")?.trim() == "1"
                    || read("cgroup.events")?
                        .lines()
                        .any(|l| l.trim() == "frozen 1")
            }
        })
    }

    /// Whether freezing is complete: every task frozen.
    fn frozen_whole(&self) -> bool {
        let (file, done) = match self.version {
            Version::V1 => ("freezer.state", "FROZEN"),
            Version::V2 => ("cgroup.events", "frozen 1"),
        };
        std::fs::read_to_string(self.dir.join(file))
            .is_ok_and(|text| text.lines().any(|l| l.trim() == done))
    }

    /// What its control file takes to freeze or thaw it.
    fn value(&self, frozen: bool) -> &'static str {
        match (self.version, frozen) {
            (Version::V1, true) => "FROZEN",
            (Version::V1, false) => "THAWED",
            (Version::V2, true) => "1",
            (Version::V2, false) => "0",
        }
    }

    /// Freezes or thaws it.
    fn set(&self, frozen: bool) -> std::io::Result<()> {
        std::fs::write(self.control(), self.value(frozen))
    }

    /// Freezes it and waits until every task is frozen, at most
    /// [`FREEZE_WITHIN`]; says in `log` what was frozen and how long that
    /// took. Thawed again if it does not freeze in time.
    pub(crate) fn freeze(self, log: &mut Log) -> Result<FrozenCgroup, String> {
        // From the thaw's hold to the freeze: an exit waits (link::causing).
        let causing = link::causing();
        let held = link::hold(
            Undo::Write {
                path: self.control(),
                value: self.value(false).to_string(),
            },
            log.note(),
        )?;
        let frozen = FrozenCgroup {
            cgroup: self,
            held: Some(held),
        };
        let cgroup = &frozen.cgroup;
        let shown = cgroup.dir.display();
        let start = Instant::now();
        let caused = cgroup.set(true);
        drop(causing);
        caused
            .map_err(|e| format!("cannot freeze {shown}: {}: {e}", cgroup.control().display()))?;
        let mut pause = Duration::from_micros(100);
        while !cgroup.frozen_whole() {
            if start.elapsed() >= FREEZE_WITHIN {
                return Err(format!(
                    "{shown} was not frozen within {} s (a process in an uninterruptible \
                     sleep holds it up); thawed again",
                    FREEZE_WITHIN.as_secs()
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(LOOK_EVERY);
        }
        let took = start.elapsed();
        let pids = processes_in(&cgroup.dir);
        let listed: Vec<String> = pids.iter().map(|&p| format!("{p} ({})", name(p))).collect();
        log.say(&format!(
            "froze the cgroup {shown} (cgroup {}) in {:.3} s: {} process(es): {}",
            match cgroup.version {
                Version::V1 => "v1",
                Version::V2 => "v2",
            },
            took.as_secs_f64(),
            pids.len(),
            listed.join(", ")
        ))?;
        Ok(frozen)
    }
}

/// A cgroup this storm froze: thawed when the value goes.
#[derive(Debug)]
pub(crate) struct FrozenCgroup {
    cgroup: Cgroup,
    /// The thaw, held by the guardian until it is thawed here.
    held: Option<Held>,
}

impl FrozenCgroup {
    /// Thaws it.
    pub(crate) fn thaw(self) {
        drop(self);
    }
}

impl Drop for FrozenCgroup {
    fn drop(&mut self) {
        // Gone if its cgroup went: then nothing in it is frozen.
        let _ = self.cgroup.set(false);
        if let Some(held) = self.held.take() {
            held.withdraw();
        }
    }
}

#[cfg(test)]
mod tests;
