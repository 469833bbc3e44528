//! A lane's connections, HTTP/1.1 or HTTP/2 as the client was asked, and
//! one attempt on them, classified.

use tokio::time::Instant;

use super::multiplex::{Gauge, Multiplex};
use super::pool::Pool;
use super::target::Target;
use crate::model::outcome::{Hints, Outcome};
use crate::model::wire::Transport;

/// A lane's connections.
pub(crate) enum Connections {
    /// HTTP/1.1 keep-alive connections, one attempt on each at a time.
    Http1(Pool),
    /// HTTP/2 connections, many streams on each.
    Http2(Multiplex),
}

impl Connections {
    /// Connections to `target`, by its transport; HTTP/2's told to
    /// `gauge` as they open and close (where a connection carries many
    /// attempts, the figures count connections apart).
    pub(crate) fn new(target: Target, gauge: Gauge) -> Connections {
        match target.transport {
            Transport::Http1 => Connections::Http1(Pool::new(target)),
            Transport::Http2 => Connections::Http2(Multiplex::new(target, Some(gauge))),
        }
    }

    /// Closes the HTTP/1.1 connections idle too long (HTTP/2 connections
    /// stay open).
    pub(crate) fn expire_idle(&self) {
        if let Connections::Http1(pool) = self {
            pool.expire_idle();
        }
    }

    /// One attempt, classified, with what a refusal told (`Retry-After`,
    /// gRPC's status and pushback). `deadline` bounds connect and answer.
    pub(crate) async fn attempt(&self, deadline: Instant) -> (Outcome, Hints) {
        let answer = match self {
            Connections::Http1(pool) => {
                tokio::time::timeout_at(deadline, pool.send(deadline)).await
            }
            Connections::Http2(mux) => tokio::time::timeout_at(deadline, mux.send(deadline)).await,
        };
        match answer {
            Err(_) => (Outcome::Timeout, Hints::default()),
            Ok(Ok(answer)) if answer.ok => (Outcome::Ok, Hints::default()),
            Ok(Ok(answer)) => (Outcome::Error, answer.hints),
            Ok(Err(_)) => (Outcome::Error, Hints::default()),
        }
    }
}
