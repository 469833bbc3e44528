//! How the server serves one accepted connection: the TLS handshake, if
//! it serves https, then HTTP/1.1 or HTTP/2 on the same listener, told
//! apart by HTTP/2's connection preface (h2c by prior knowledge in clear;
//! over TLS the client has said which by ALPN and sends the preface for
//! h2 alike), with HTTP/2's stream limit and HTTP/1.1's header-read
//! timeout.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::grpc_answer::AnswerBody;
use crate::model::server::ServerConfig;

/// How every connection of a server is served.
pub(super) struct Serving {
    builder: auto::Builder<TokioExecutor>,
    tls: Option<TlsAcceptor>,
    header_read_timeout: Duration,
    /// Whether HTTP/2 is served beside HTTP/1.1.
    http2: bool,
}

impl Serving {
    /// Connections served as `config` says, over `tls` if given. With
    /// `keep_alive` off (a pool waiting in the backlog: one request a
    /// connection, as a sync worker serves it) only HTTP/1.1 is served,
    /// since HTTP/2 would carry the requests of many clients on the one
    /// connection a worker holds.
    pub(super) fn new(config: &ServerConfig, keep_alive: bool, tls: Option<TlsAcceptor>) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(config.header_read_timeout)
            .keep_alive(keep_alive);
        builder
            .http2()
            .max_concurrent_streams(config.max_streams)
            // A storm's clients reset many streams (every attempt that
            // times out), and a server that was stopped reads each
            // stream's HEADERS and RST_STREAM together when it resumes:
            // streams reset before hyper accepted them. h2 answers more
            // than this many of those on a connection with GOAWAY
            // ENHANCE_YOUR_CALM, a rapid-reset defence; by default h2's
            // own 20, what a hyper server does (`model::multiplex`).
            .max_pending_accept_reset_streams(config.pending_resets as usize);
        let builder = if keep_alive {
            builder
        } else {
            builder.http1_only()
        };
        Serving {
            builder,
            tls,
            header_read_timeout: config.header_read_timeout,
            http2: keep_alive,
        }
    }

    /// Serves `stream` with `service` until the connection ends. Errors
    /// are a client's doing (reset, garbage, a failed handshake): the
    /// connection ends, the server goes on.
    pub(super) async fn serve<S>(&self, stream: TcpStream, service: S)
    where
        S: Service<Request<Incoming>, Response = Response<AnswerBody>, Error = Infallible>
            + 'static,
        S::Future: Send + 'static,
    {
        let within = self.header_read_timeout;
        match &self.tls {
            Some(acceptor) => {
                let handshake = tokio::time::timeout(within, acceptor.accept(stream)).await;
                if let Ok(Ok(stream)) = handshake {
                    self.http(stream, service).await;
                }
            }
            None => {
                // Telling HTTP/2 from HTTP/1.1 waits for the first bytes,
                // and hyper's header-read timeout starts only once HTTP/1.1
                // is chosen: a connection that sends nothing is closed
                // after the timeout all the same.
                if self.http2
                    && tokio::time::timeout(within, stream.readable())
                        .await
                        .is_err()
                {
                    return;
                }
                self.http(stream, service).await;
            }
        }
    }

    async fn http<I, S>(&self, io: I, service: S)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: Service<Request<Incoming>, Response = Response<AnswerBody>, Error = Infallible>
            + 'static,
        S::Future: Send + 'static,
    {
        let _ = self
            .builder
            .serve_connection(TokioIo::new(io), service)
            .await;
    }
}
