//! The experiment in virtual time: a discrete-event engine that runs the
//! same model as the real server and client, in milliseconds instead of
//! minutes.
//!
//! One implementation, two engines: users are the same [`User`] state
//! machines as the real client's, drawing from the same per-user random
//! streams through the same policies and throttle; the server is the same
//! completion scheduler over the same latency model; counts go through the
//! same recorder into the same report rows and CSV files. This module
//! imports nothing from the networked engine, nor hyper or tokio. What the
//! engine adds is a model of what the network does, and only of what
//! decides the outcome:
//!
//! - a running server reads every request the instant it is sent (loopback
//!   takes microseconds against delays of 100 ms and more);
//! - a stopped server reads nothing: a request written on a pooled
//!   keep-alive connection waits in its socket, and a new connection waits
//!   in the listen backlog while there is room; beyond the backlog the
//!   kernel drops the SYN, which is retransmitted after 1 s, 3 s, 7 s...
//!   (Linux's schedule) and fails after six retransmissions;
//! - a pool waiting in the backlog holds its waiting connections in that
//!   same queue whether it runs or not, drops SYNs beyond it, and closes
//!   each connection after its one request;
//! - on resume the server reads every waiting request at once, including
//!   those whose client has already timed out and closed the connection:
//!   that is the burst of abandoned work the storm starts from;
//! - a timed-out attempt closes its connection; in `cancel` mode the server
//!   drops the work when it notices (at once, or at resume), in `continue`
//!   mode the work counts until its modelled completion;
//! - the server's report ticks stop while it is stopped and the missed one
//!   fires at resume, as tokio's interval does in the real server.
//! - over HTTP/2 (`--http2`) the users of a client share connections,
//!   each attempt a stream on one with a stream free (the server's
//!   `max_streams`), a new connection only when every one is full
//!   (`model::multiplex`); a timed-out attempt resets its stream, freeing
//!   its slot at once and leaving the connection open, so a stopped
//!   server sees no new SYN while slots remain: the attempts wait in the
//!   sockets of live connections, and at resume the server reads each
//!   request and then its reset, as it reads a closed connection's; but
//!   a connection on which more of those were reset than the server
//!   allows (h2's 20) it closes with GOAWAY, all of them unread and the
//!   attempts on it failed (`model::multiplex`, `goaway.rs`).
//!
//! Between the client and the backend a run may have the tiers of a
//! service chain (docs/chains.md): servers of their own whose
//! handler calls the next inward under its own client policy, each a
//! server like the backend with a layer of calls like the client's
//! users (`chain.rs`, `layer.rs`). Without tiers the engine runs as it
//! did before them, to the event.

mod attempt;
mod chain;
mod chain_report;
mod config;
mod course;
mod engine;
mod event;
mod goaway;
mod host;
mod layer;
mod live;
mod queue;
mod slot;
mod tier;

pub use chain_report::TierOutcome;
pub use config::{Pause, SimConfig};
pub use course::{SimError, SimOutcome, WarmedUp, run};
pub use event::MAX_TIERS;
pub use tier::TierAnswers;
