//! One request before any load, to refuse at once what can never work:
//! a TLS handshake that fails, a server that does not speak HTTP/2 when
//! asked to, one that does not speak HTTP at all, a gRPC method the server
//! does not serve. A refused connection, a timeout or any answer else is
//! left to the run: a stopped or overloaded server is what a storm is for.
//! Plain HTTP/1.1 has nothing of the kind to check, and is sent no such
//! request: the server sees only the run's attempts.

use std::time::Duration;

use tokio::time::Instant;

use super::multiplex::Multiplex;
use super::pool::Pool;
use super::target::{BoxError, Target};
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
    let deadline = Instant::now() + LIMIT;
    let sent = async {
        match target.transport {
            Transport::Http1 => Pool::new(target.clone()).send(deadline).await,
            Transport::Http2 => Multiplex::new(target.clone(), None).send(deadline).await,
        }
    };
    let authority = &target.authority;
    match tokio::time::timeout_at(deadline, sent).await {
        Err(_) => Ok(()),
        Ok(Ok(answer)) => match answer.hints.grpc {
            Some(Code::Unimplemented) => Err(format!(
                "{authority} does not serve {what}: it answered UNIMPLEMENTED"
            )),
            _ => Ok(()),
        },
        Ok(Err(e)) => match fatal(&e, target.transport) {
            Some(why) => Err(format!("{authority}: {why}: {e}")),
            None => Ok(()),
        },
    }
}

/// Why the failure `e` means that no attempt can ever succeed, if it
/// does.
fn fatal(e: &BoxError, transport: Transport) -> Option<&'static str> {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        let tls = io
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
        return tls.then_some("the TLS handshake failed");
    }
    if let Some(http) = e.downcast_ref::<hyper::Error>() {
        return match transport {
            // A server without h2c answers the preface in HTTP/1.1 and
            // closes: anything but a timeout says it does not speak it.
            Transport::Http2 if !http.is_timeout() => Some("it does not speak HTTP/2"),
            Transport::Http1 if http.is_parse() => Some("it does not speak HTTP/1.1"),
            _ => None,
        };
    }
    // Said by the client itself: a TLS server that chose another
    // protocol than HTTP/2 by ALPN.
    e.to_string()
        .contains("ALPN")
        .then_some("it does not speak HTTP/2")
}
