//! The open-file limit: raised to the hard limit at start, with a warning when
//! it is still below what the run needs.

/// Raises the soft open-file limit as far as the hard limit allows and
/// returns the limit now in force. Returns `None` if the limit is unknown.
pub fn raise_nofile() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok()
}

/// Raises the limit and, if it stays below `needed` file descriptors, returns
/// a warning naming `what` needs them.
pub fn ensure_nofile(needed: u64, what: &str) -> Option<String> {
    match raise_nofile() {
        Some(limit) if limit < needed => Some(format!(
            "warning: open-file limit is {limit}, below the ~{needed} {what} may need; \
             connections beyond it will fail (raise the hard limit, e.g. `ulimit -Hn`)"
        )),
        Some(_) => None,
        None => Some("warning: could not read or raise the open-file limit".to_string()),
    }
}
