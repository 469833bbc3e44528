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
//! before its SIGSTOP ([`super::at_exit`]).

use std::collections::BTreeMap;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, getpid};

use super::at_exit::{self, Registered};
use super::guardian::{Note, Undo};

/// A process's state letter and parent, from its `/proc/PID/stat` line:
/// `pid (comm) state ppid ...`, where the name may hold spaces and
/// parentheses (hence the last `)`).
fn parse_stat(line: &str) -> Option<(char, i32)> {
    let after = &line[line.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// A process's state letter (`R`, `S`, `T` for stopped, `Z`...), if it
/// exists.
fn state(pid: i32) -> Option<char> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&line).map(|(state, _)| state)
}

/// Every process's children, from `/proc` as it is now.
fn children() -> BTreeMap<i32, Vec<i32>> {
    let mut tree: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return tree;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // A process may end between the listing and the read.
        let Ok(line) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((_, ppid)) = parse_stat(&line) {
            tree.entry(ppid).or_default().push(pid);
        }
    }
    tree
}

/// The descendants of `root` in `tree`, parents before their children.
fn descendants(root: i32, tree: &BTreeMap<i32, Vec<i32>>) -> Vec<i32> {
    let mut found = Vec::new();
    let mut next = vec![root];
    // A table read while processes come and go may hold a reused id
    // twice: each process is taken once, so the walk ends.
    while let Some(pid) = next.pop() {
        for &child in tree.get(&pid).into_iter().flatten() {
            if child != root && !found.contains(&child) {
                found.push(child);
                next.push(child);
            }
        }
    }
    found
}

/// This process and its ancestors: never to be stopped.
pub(crate) fn this_and_ancestors() -> Vec<i32> {
    let mut line = vec![getpid().as_raw()];
    while let Some(&pid) = line.last() {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|l| parse_stat(&l))
            .map(|(_, ppid)| ppid);
        match parent {
            Some(ppid) if ppid > 0 && !line.contains(&ppid) => line.push(ppid),
            _ => break,
        }
    }
    line
}

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

/// A process's name (its `comm`), or `?` if it is gone.
pub(crate) fn name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Processes this storm stopped, in the order it stopped them; each is
/// continued when the value goes.
#[derive(Debug)]
pub(crate) struct Frozen {
    pids: Vec<i32>,
    /// Each process's SIGCONT at the exit, until it is continued here.
    at_exit: Vec<Registered>,
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
            at_exit: Vec::new(),
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
        let at_exit = at_exit::register(Undo::Continue { pid }, self.note.clone())?;
        Ok(match kill(Pid::from_raw(pid), Signal::SIGSTOP) {
            Ok(()) => {
                self.pids.push(pid);
                self.at_exit.push(at_exit);
                Ok(())
            }
            Err(e) => {
                at_exit.withdraw();
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
        for registered in self.at_exit.drain(..) {
            registered.withdraw();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_stat_line_reads_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (a (b) c) T 17 4242 4242 0 -1 4194560";
        assert_eq!(parse_stat(line), Some(('T', 17)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_come_parents_first_and_nothing_else() {
        let mut tree = BTreeMap::new();
        tree.insert(1, vec![10, 20]);
        tree.insert(10, vec![11, 12]);
        tree.insert(12, vec![13]);
        tree.insert(20, vec![21]);
        let found = descendants(10, &tree);
        assert_eq!(found.len(), 3);
        let at = |p| found.iter().position(|&x| x == p).unwrap();
        assert!(at(12) < at(13), "{found:?}");
        assert!(!found.contains(&20) && !found.contains(&1));
    }

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
        assert!(at_exit::registered().contains(&continued));
        frozen.thaw();
        wait_states(&all, "continued", |s| s != 'T');
        assert!(!at_exit::registered().contains(&continued));
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
