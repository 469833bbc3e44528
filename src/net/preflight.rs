//! One request before any load, to refuse at once what can never work:
//! a TLS handshake that fails, a server that does not speak HTTP/2 when
//! asked to, one that does not speak HTTP at all, a gRPC method the server
//! does not serve. A refused connection, a timeout or any answer else is
//! left to the run: a stopped or overloaded server is what a storm is for.
//! Plain HTTP/1.1 has nothing of the kind to check, and is sent no such
//! request: the server sees only the run's attempts. The request is the
//! one the storm's checks of a target send ([`super::once`]).

use std::time::Duration;

use super::once::{self, Unanswered};
use super::target::Target;
use crate::model::grpc::Code;
use crate::model::wire::Transport;

/// How long the request may take before the run starts anyway.
pub(crate) const LIMIT: Duration = Duration::from_secs(2);

/// Sends one request to `target` and says why the run cannot go on, if
/// its answer or its failure says that it never could.
pub(crate) async fn check(target: &Target, what: &str) -> Result<(), String> {
    if target.transport == Transport::Http1 && !target.dialer.is_tls() && !target.is_grpc() {
        return Ok(());
    }
    match once::send(target, LIMIT).await {
        Ok(reply) => refused(target, &reply, what).map_or(Ok(()), Err),
        Err(Unanswered::Never(why)) => Err(why),
        Err(Unanswered::Unconnected | Unanswered::Silent | Unanswered::Failed(_)) => Ok(()),
    }
}

/// Why the answer `reply` of `target` says that no call to `what` can
/// ever succeed, if it does: a gRPC method the server does not serve.
pub(crate) fn refused(target: &Target, reply: &once::Reply, what: &str) -> Option<String> {
    (reply.grpc == Some(Code::Unimplemented)).then(|| {
        format!(
            "{} does not serve {what}: it answered UNIMPLEMENTED",
            target.authority
        )
    })
}
