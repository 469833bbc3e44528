//! What the proxy knows of one client connection while it is open: its
//! answer in the making, watched until its head is written (for its
//! latency), and whether the fault asks for it to be reset.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::report::proxy::{ProxyEvent, ProxyRecorder};

/// What the proxy knows of one client connection while it is open.
pub(super) struct Connection {
    recorder: Arc<ProxyRecorder>,
    /// Notified to reset the connection (by its request's action, or by
    /// the switch).
    reset: Arc<Notify>,
    /// An answer of the target handed to hyper whose head has not been
    /// written yet: when its request was read, and its status.
    answer: Mutex<Option<(Instant, u16)>>,
}

impl Connection {
    /// A connection just accepted, its events counted by `recorder`.
    pub(super) fn new(recorder: Arc<ProxyRecorder>) -> Arc<Connection> {
        Arc::new(Connection {
            recorder,
            reset: Arc::new(Notify::new()),
            answer: Mutex::new(None),
        })
    }

    /// Resets the connection: RST, without an answer.
    pub(super) fn reset(&self) {
        self.reset.notify_one();
    }

    /// What resets the connection when notified, for the switch.
    pub(super) fn resetter(&self) -> &Arc<Notify> {
        &self.reset
    }

    /// Waits until the connection is to be reset.
    pub(super) async fn reset_asked(&self) {
        self.reset.notified().await;
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
pub(super) struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
}

impl Watched {
    /// `stream`, the socket of `connection`.
    pub(super) fn new(stream: TcpStream, connection: Arc<Connection>) -> Watched {
        Watched { stream, connection }
    }
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
