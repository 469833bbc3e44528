//! What a throttle says of an attempt that is due.

/// Whether an attempt may go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send it.
    Allow,
    /// A retry refused: give the logical request up.
    GiveUp,
    /// Refused locally: the attempt fails at once as an error.
    Reject,
}
