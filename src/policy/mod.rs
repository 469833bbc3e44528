//! Retry policies: how long a client waits before retrying a failed attempt,
//! when it gives up, and whether a shared throttle lets the attempt out;
//! and the catalogue that names each policy and holds its defaults.
//!
//! Policies are pure: they take the failure history, the time and a random
//! generator and return decisions. No clock and no runtime, so one
//! implementation serves any engine and tests can check exact sequences.

mod answer;
mod backoff;
mod catalogue;
mod decision;
pub mod defence;
mod failure;
mod hedging;
mod retry_limits;
pub mod shipped;
mod throttle;

pub use answer::{AWS_THROTTLING_CODES, parse_amz_retry_after, read_hints};
pub use backoff::{Backoff, Failure, Strategy};
pub use catalogue::{
    Implementation, NotRead, StrategyError, StrategyKind, StrategyParam, StrategyParams,
    ThrottleKind, ThrottleParam, ThrottleParams,
};
pub use hedging::{Hedges, Hedging, MAX_HEDGED_ATTEMPTS};
pub use retry_limits::{MAX_RETRY_AFTER, Next, RetryLimits, format_retry_after, parse_retry_after};
pub use shipped::{Answer, AttemptKind};
pub use throttle::{Decision, Throttle, ThrottleConfig};
