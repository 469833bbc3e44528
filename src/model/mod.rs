//! The model, pure: the server's latency and its completion scheduler, the
//! users' think times and request cycle, what their attempts produce, the
//! planner, time compression and whole units of time, and the server's and
//! client's configuration types. No clock, no I/O and no runtime: both
//! engines drive this code.

pub mod arrivals;
pub mod burst;
pub mod client;
pub mod deadline;
pub mod fault;
pub mod fit;
pub mod grpc;
pub mod grpc_status;
pub mod latency;
pub mod multiplex;
pub mod open;
pub mod outcome;
pub mod planner;
pub mod server;
pub mod service;
pub mod shard;
pub mod tier;
pub(crate) mod timescale;
pub(crate) mod units;
pub mod user;
pub mod wire;
