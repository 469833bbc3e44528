//! What `/proc` says of processes: a process's state and parent, every
//! process's children, a tree's descendants, this process's ancestors,
//! a process's name. Read by the outage to stop a tree and to refuse to
//! stop the storm's own line.

use std::collections::BTreeMap;

use nix::unistd::getpid;

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
pub(crate) fn state(pid: i32) -> Option<char> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&line).map(|(state, _)| state)
}

/// Every process's children, from `/proc` as it is now.
pub(crate) fn children() -> BTreeMap<i32, Vec<i32>> {
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
pub(crate) fn descendants(root: i32, tree: &BTreeMap<i32, Vec<i32>>) -> Vec<i32> {
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

/// A process's name (its `comm`), or `?` if it is gone.
pub(crate) fn name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
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
}
