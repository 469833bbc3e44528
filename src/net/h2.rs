//! The client's HTTP/2 handshake on a dialled stream, one for every part
//! that opens an HTTP/2 connection: the storm's clients
//! ([`super::multiplex`]), the one-request check ([`super::once`]) and the
//! probe of work for gone clients.

use std::fmt;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http2::{self, Connection, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::target::Target;
use super::tls::Stream;

/// An HTTP/2 connection's driver, to be spawned (or polled) for its
/// streams to move.
pub(crate) type Driver = Connection<TokioIo<Stream>, Full<Bytes>, TokioExecutor>;

/// Why no HTTP/2 connection was opened on a stream.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Over TLS, the server did not accept `h2` by ALPN: it does not
    /// speak HTTP/2 there.
    NoAlpn,
    /// The handshake (the preface and SETTINGS) failed.
    Handshake(hyper::Error),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NoAlpn => f.write_str("the server did not accept HTTP/2 by ALPN"),
            Refused::Handshake(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Refused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Refused::NoAlpn => None,
            Refused::Handshake(e) => Some(e),
        }
    }
}

/// An HTTP/2 connection to `target` on `stream`, already dialled (TLS
/// too, for an `https://` target): its sender and its driver.
pub(crate) async fn handshake(
    target: &Target,
    stream: Stream,
) -> Result<(SendRequest<Full<Bytes>>, Driver), Refused> {
    if target.dialer.is_tls() && !stream.alpn_h2() {
        return Err(Refused::NoAlpn);
    }
    http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(TokioIo::new(stream))
        .await
        .map_err(Refused::Handshake)
}
