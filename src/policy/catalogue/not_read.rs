//! The refusal of a parameter that the chosen kind of policy does not
//! read, shared by strategies and throttles.

/// A parameter was given that the chosen kind of policy does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotRead<P, K> {
    /// The parameter.
    pub param: P,
    /// The kind chosen.
    pub kind: K,
}
