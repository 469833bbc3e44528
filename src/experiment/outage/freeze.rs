//! A process tree stopped and continued: SIGSTOP to a process and to every
//! descendant it has (read from `/proc` at that moment), SIGCONT to the
//! same processes afterwards.
//!
//! The root goes first, so that it cannot fork new children unseen; then
//! its descendants, parents before children; then `/proc` is read once
//! more for any a descendant forked before it stopped. Every process
//! stopped is continued when the [`Frozen`] value goes, however it goes:
//! at the resume, on an error or a stop (dropped), and however the storm
//! ends, SIGKILL included: the outage's guardian holds each SIGCONT from
//! before its SIGSTOP ([`super::link`]).

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::guardian::Undo;
use super::link::{self, Held};
use super::log::Note;
use super::process::{children, descendants, name, state, this_and_ancestors};

/// Checks that process `pid` can be stopped by this one: it exists, may
/// be signalled (kill with signal 0), is neither this process nor one of
/// its ancestors, and is not stopped already.
pub(crate) fn check_process(pid: i32) -> Result<(), String> {
    match kill(Pid::from_raw(pid), None) {
        Ok(()) => {}
        Err(Errno::ESRCH) => return Err(format!("process {pid}: no such process")),
        Err(Errno::EPERM) => {
            return Err(format!(
                "process {pid}: not ours to signal (it belongs to another user)"
            ));
        }
        Err(e) => return Err(format!("process {pid}: {e}")),
    }
    if this_and_ancestors().contains(&pid) {
        return Err(format!(
            "process {pid} is this storm or one of its ancestors (the shell that started \
             it, say): stopping it would stop the storm"
        ));
    }
    if matches!(state(pid), Some('T' | 't')) {
        return Err(format!(
            "process {pid} is stopped already: continue it first (kill -CONT {pid})"
        ));
    }
    Ok(())
}

/// Processes this storm stopped, in the order it stopped them; each is
/// continued when the value goes.
#[derive(Debug)]
pub(crate) struct Frozen {
    pids: Vec<i32>,
    /// Each process's SIGCONT, held by the guardian until it is continued
    /// here.
    held: Vec<Held>,
    /// Descendants that could not be signalled, and why.
    refused: Vec<String>,
    /// Where the guardian says what it continued.
    note: Option<Note>,
}

impl Frozen {
    /// Stops `root`, then its descendants, then any they forked before
    /// they stopped. Fails only if `root` cannot be stopped.
    pub(crate) fn stop(root: i32, note: Option<Note>) -> Result<Frozen, String> {
        let spared = this_and_ancestors();
        let mut frozen = Frozen {
            pids: Vec::new(),
            held: Vec::new(),
            refused: Vec::new(),
            note,
        };
        match frozen.add(root)? {
            Ok(()) => {}
            Err(Errno::ESRCH) => return Err(format!("process {root} is gone")),
            Err(e) => return Err(format!("process {root}: SIGSTOP: {e}")),
        }
        // The descendants, then once more those forked meanwhile.
        for _ in 0..2 {
            for pid in descendants(root, &children()) {
                if frozen.pids.contains(&pid) || spared.contains(&pid) {
                    continue;
                }
                match frozen.add(pid)? {
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(e) => frozen.refused.push(format!("{pid} ({e})")),
                }
            }
        }
        Ok(frozen)
    }

    /// Stops `pid` and records it: how the SIGSTOP went, or why it was
    /// not sent (the guardian could not hold its SIGCONT).
    fn add(&mut self, pid: i32) -> Result<Result<(), Errno>, String> {
        // Held by the guardian first, so that no end of the storm misses it.
        let _causing = link::causing();
        let held = link::hold(Undo::Continue { pid }, self.note.clone())?;
        Ok(match kill(Pid::from_raw(pid), Signal::SIGSTOP) {
            Ok(()) => {
                self.pids.push(pid);
                self.held.push(held);
                Ok(())
            }
            Err(e) => {
                held.withdraw();
                Err(e)
            }
        })
    }

    /// The processes stopped, in order.
    #[cfg(test)]
    fn pids(&self) -> &[i32] {
        &self.pids
    }

    /// What was stopped: every process with its name, and any that could
    /// not be.
    pub(crate) fn report(&self) -> String {
        let listed: Vec<String> = self
            .pids
            .iter()
            .map(|&pid| format!("{pid} ({})", name(pid)))
            .collect();
        let mut line = format!(
            "SIGSTOP to {} process(es): {}",
            self.pids.len(),
            listed.join(", ")
        );
        if !self.refused.is_empty() {
            line.push_str(&format!("; could not stop {}", self.refused.join(", ")));
        }
        line
    }

    /// Continues every process stopped, children before their parents.
    pub(crate) fn thaw(self) {
        drop(self);
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for &pid in self.pids.iter().rev() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        for held in self.held.drain(..) {
            held.withdraw();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    use super::*;

    /// Waits (bounded) until `ok` holds of the states of `pids`.
    fn wait_states(pids: &[i32], what: &str, ok: impl Fn(char) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let states: Vec<Option<char>> = pids.iter().map(|&p| state(p)).collect();
            if states.iter().all(|s| s.is_some_and(&ok)) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {pids:?} {states:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills a shell and its children when the test ends.
    struct Tree(Child, Vec<i32>);

    impl Drop for Tree {
        fn drop(&mut self) {
            for &pid in &self.1 {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_tree_is_stopped_whole_and_continued_whole() {
        let shell = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let root = shell.id() as i32;
        let mut tree = Tree(shell, Vec::new());
        let deadline = Instant::now() + Duration::from_secs(10);
        // Forked and named: a child reads as its parent until its exec.
        let named_sleeps = || {
            let found = descendants(root, &children());
            found.len() >= 2 && found.iter().all(|&pid| name(pid) == "sleep")
        };
        while !named_sleeps() {
            assert!(
                Instant::now() < deadline,
                "the shell never forked two sleeps"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        tree.1 = descendants(root, &children());
        check_process(root).unwrap();
        let frozen = Frozen::stop(root, None).unwrap();
        assert_eq!(frozen.pids()[0], root, "the root first");
        assert_eq!(frozen.pids().len(), 3, "{}", frozen.report());
        assert!(frozen.report().contains("(sleep)"), "{}", frozen.report());
        let all = frozen.pids().to_vec();
        wait_states(&all, "stopped", |s| s == 'T');
        let err = check_process(root).unwrap_err();
        assert!(err.contains("stopped already"), "{err}");
        let continued = format!("SIGCONT to {root}");
        assert!(link::held().contains(&continued));
        frozen.thaw();
        wait_states(&all, "continued", |s| s != 'T');
        assert!(!link::held().contains(&continued));
    }

    #[test]
    fn this_process_its_ancestors_and_the_absent_are_refused() {
        let me = std::process::id() as i32;
        let err = check_process(me).unwrap_err();
        assert!(err.contains("ancestors"), "{err}");
        let parent = nix::unistd::getppid().as_raw();
        assert!(check_process(parent).unwrap_err().contains("ancestors"));
        let max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let err = check_process(max + 1).unwrap_err();
        assert!(err.contains("no such process"), "{err}");
        let err = Frozen::stop(max + 1, None).unwrap_err();
        assert!(err.contains("is gone"), "{err}");
    }
}
