//! The open-file limit: raised to the hard limit at start, with a warning when
//! it is still below what the run needs; and the descriptor table, grown at
//! start to what the run needs.

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, fcntl};

/// Raises the soft open-file limit as far as the hard limit allows and
/// returns the limit now in force. Returns `None` if the limit is unknown.
pub fn raise_nofile() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok()
}

/// Raises the limit, grows the descriptor table for `needed` descriptors
/// (as many as the limit allows), and, if the limit stays below `needed`,
/// returns a warning naming `what` needs them.
pub fn ensure_nofile(needed: u64, what: &str) -> Option<String> {
    let limit = raise_nofile();
    reserve_descriptors(limit.map_or(needed, |limit| needed.min(limit)));
    match limit {
        Some(limit) if limit < needed => Some(format!(
            "warning: open-file limit is {limit}, below the ~{needed} {what} may need; \
             connections beyond it will fail (raise the hard limit, e.g. `ulimit -Hn`)"
        )),
        Some(_) => None,
        None => Some("warning: could not read or raise the open-file limit".to_string()),
    }
}

/// Grows the process's table of file descriptors to hold `count` of them
/// now, before the run, rather than during it.
///
/// The kernel doubles the table as descriptors are opened, and in a process
/// with several threads each doubling first waits for an RCU grace period,
/// with every thread that opens a descriptor waiting too: 5-11 ms here, each
/// time the open connections pass a power of two (results/bench.md). Grown
/// at start, the table costs that wait once, before any load. It never
/// shrinks. On failure (`count` above the limit, no `/dev/null`) the table
/// grows as it would have.
pub fn reserve_descriptors(count: u64) {
    let Some(highest) = count.checked_sub(1).and_then(|h| RawFd::try_from(h).ok()) else {
        return;
    };
    let Ok(null) = File::open("/dev/null") else {
        return;
    };
    // The copy goes to the lowest free descriptor at or above `highest`,
    // which the table must grow to hold; it is closed at once.
    if let Ok(copy) = fcntl(&null, FcntlArg::F_DUPFD_CLOEXEC(highest)) {
        // SAFETY: fcntl has just opened `copy`, and nothing else owns it.
        drop(unsafe { OwnedFd::from_raw_fd(copy) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor table's size, from /proc/self/status.
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("FDSize:"))
            .and_then(|size| size.trim().parse().ok())
            .expect("an FDSize line")
    }

    #[test]
    fn the_descriptor_table_grows_to_the_reserved_count() {
        let limit = raise_nofile().expect("the open-file limit");
        let count = limit.min(4096);
        reserve_descriptors(count);
        assert!(
            table_size() >= count,
            "table of {} descriptors, {count} reserved",
            table_size()
        );
    }
}
