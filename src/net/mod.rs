//! The networked engine: the real server and client over HTTP, with hyper
//! and tokio, and what they need from the system (timers finer than
//! tokio's, the open-file limit, signals, the runtime and its lanes), the
//! fault proxy, the probe of a real service (a virtual twin's
//! measurements), and the Prometheus metrics endpoint. Everything they
//! compute comes from the model, policy and report layers below.

mod accept;
mod backlog;
mod balance;
pub mod client;
mod connection;
mod connections;
pub mod endpoint;
pub mod floor;
mod grpc_answer;
mod h2;
mod handler;
pub mod lanes;
mod listen_queue;
pub mod metrics;
mod model_actor;
mod multiplex;
pub(crate) mod once;
mod pool;
pub(crate) mod preflight;
pub mod probe;
pub mod proxy;
pub mod rlimit;
pub mod runtime;
pub mod server;
mod server_tls;
pub mod signals;
pub(crate) mod target;
mod tier;
mod timer;
pub mod tls;
mod user;
