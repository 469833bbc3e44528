//! One client connection of the proxy: served by hyper over HTTP/1.1 with
//! keep-alive, behind the switch's gate, its answers' heads watched as
//! they are written (for their latency), and reset with RST when the
//! fault asks.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::forward::Forward;
use super::gate::Gated;
use super::switch::Switch;
use crate::report::proxy::{Occupancy, ProxyEvent, ProxyRecorder};

/// What the proxy knows of one client connection while it is open.
pub(super) struct Connection {
    recorder: Arc<ProxyRecorder>,
    reset: Notify,
    /// An answer of the target handed to hyper whose head has not been
    /// written yet: when its request was read, and its status.
    answer: Mutex<Option<(Instant, u16)>>,
}

impl Connection {
    fn new(recorder: Arc<ProxyRecorder>) -> Arc<Connection> {
        Arc::new(Connection {
            recorder,
            reset: Notify::new(),
            answer: Mutex::new(None),
        })
    }

    /// Resets the connection: RST, without an answer.
    pub(super) fn reset(&self) {
        self.reset.notify_one();
    }

    /// The target's answer with `status` to the request read at `read` is
    /// handed over: it counts once its head is written.
    pub(super) fn answering(&self, read: Instant, status: u16) {
        *self.answer.lock().expect("connection lock poisoned") = Some((read, status));
    }

    /// Bytes went out: the head of the answer handed over, if any.
    fn written(&self) {
        let answer = self.answer.lock().expect("connection lock poisoned").take();
        if let Some((read, status)) = answer {
            self.recorder.answered(status, read.elapsed());
        }
    }
}

impl Drop for Connection {
    /// An answer never written had lost its client.
    fn drop(&mut self) {
        let answer = self.answer.get_mut().map(|a| a.take());
        if let Ok(Some(_)) = answer {
            self.recorder.count(ProxyEvent::Gone);
        }
    }
}

/// A connection's stream, telling the connection when bytes go out.
struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl Watched {
    fn sent(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(1..)) = polled {
            self.connection.written();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.sent(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.sent(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Serves `stream`, a client connection just accepted, in a task of its
/// own: every request through `forward`, the whole behind `switch`'s gate.
pub(super) fn serve(stream: TcpStream, switch: &Arc<Switch>, forward: &Arc<Forward>) {
    let recorder = forward.recorder().clone();
    let open = recorder.enter(Occupancy::Connection);
    let connection = Connection::new(recorder.clone());
    let registered = switch.register(&connection);
    let watched = Watched {
        stream,
        connection: connection.clone(),
    };
    let io = TokioIo::new(Gated::new(watched, switch.gate().clone()));
    let service = {
        let (forward, connection) = (forward.clone(), connection.clone());
        service_fn(move |req| forward.handle(req, &connection))
    };
    tokio::spawn(async move {
        // No timer: no timeout may end a connection that the gate holds
        // (a stopped process times nothing out either). Idle connections
        // stay open until their client closes them.
        let mut serving = http1::Builder::new()
            .keep_alive(true)
            .header_read_timeout(None)
            .serve_connection(io, service);
        tokio::select! {
            // Errors here are a client's doing (reset, garbage): the
            // connection ends, the proxy goes on.
            _ = &mut serving => {}
            () = connection.reset.notified() => {
                let parts = serving.into_parts();
                let stream = &parts.io.inner().get_ref().stream;
                // Closed with a linger of zero: RST, and nothing more.
                let _ = stream.set_zero_linger();
                recorder.count(ProxyEvent::Reset);
            }
        }
        drop((registered, open));
    });
}
