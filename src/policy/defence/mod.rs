//! Server-side defences against retry storms, each a pure state machine
//! that both engines drive through the model's service: the controlled-delay
//! queue timeout and adaptive LIFO (Facebook), adaptive concurrency limits
//! (Netflix's concurrency-limits) and probabilistic admission control
//! (Envoy). docs/servers.md gives each with its source's defaults.

mod admission;
mod limiter;
mod queue;

pub use admission::{ACCURACY, AdmissionConfig, AdmissionControl};
pub use limiter::{Limiter, LimiterConfig, LimiterKind};
pub use queue::{CoDel, QueueWatch};
