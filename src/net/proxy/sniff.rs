//! Which protocol a client connection speaks, told from its first read:
//! HTTP/2 by prior knowledge (h2c) if it opens with HTTP/2's preface,
//! else HTTP/1.1.
//!
//! hyper_util's `auto` builder tells them apart by first reading exactly
//! the preface's 24 bytes, so every HTTP/1.1 connection costs one more
//! read than hyper alone needs. At a stall's end the proxy takes in
//! thousands of connections that each carry one request, and that read
//! was a tenth of its CPU per request (3,000 gone clients' requests: 3
//! reads a request instead of 2, 68 µs of CPU a request against 56). This
//! reads what the socket holds, up to [`FIRST_READ`] bytes, decides, and
//! gives those bytes back to hyper first ([`Sniffed`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The bytes an HTTP/2 client sends first (RFC 9113, section 3.4).
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The most one read takes: a request's head, as a client writes it.
const FIRST_READ: usize = 8192;

/// A connection whose first bytes were read to tell its protocol: reads
/// give them back first, then go to the connection.
pub(super) struct Sniffed<I> {
    read: Bytes,
    io: I,
}

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Speaks {
    /// HTTP/1.1 (or anything that is not HTTP/2's preface).
    Http1,
    /// HTTP/2 by prior knowledge.
    Http2,
}

/// Reads `io` until its bytes tell its protocol: they are no longer a
/// beginning of the preface, or are the whole of it, or the connection
/// ended. Usually one read.
pub(super) async fn sniff<I: AsyncRead + Unpin>(mut io: I) -> io::Result<(Speaks, Sniffed<I>)> {
    let mut read = BytesMut::with_capacity(FIRST_READ);
    loop {
        let n = io.read_buf(&mut read).await?;
        let undecided = read.len() < PREFACE.len() && PREFACE.starts_with(&read);
        if n == 0 || !undecided {
            break;
        }
    }
    let speaks = if read.starts_with(PREFACE) {
        Speaks::Http2
    } else {
        Speaks::Http1
    };
    Ok((
        speaks,
        Sniffed {
            read: read.freeze(),
            io,
        },
    ))
}

impl<I: AsyncRead + Unpin> AsyncRead for Sniffed<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.read.has_remaining() {
            let n = self.read.len().min(buf.remaining());
            buf.put_slice(&self.read[..n]);
            self.read.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Sniffed<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Sniffs what `chunks` write, one write each, then reads everything
    /// back through the result.
    async fn sniffed(chunks: &[&[u8]]) -> (Speaks, Vec<u8>, usize) {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let chunks: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        let writer = tokio::spawn(async move {
            for chunk in chunks {
                client.write_all(&chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let (speaks, mut io) = sniff(server).await.unwrap();
        let held = io.read.len();
        writer.await.unwrap();
        let mut all = Vec::new();
        io.read_to_end(&mut all).await.unwrap();
        (speaks, all, held)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_http1_request_is_told_in_one_read_and_given_back_whole() {
        let request = b"GET /api HTTP/1.1\r\nHost: a\r\n\r\n";
        let (speaks, all, held) = sniffed(&[request]).await;
        assert_eq!(speaks, Speaks::Http1);
        assert_eq!(all, request);
        assert_eq!(held, request.len(), "the whole request in the first read");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_preface_in_pieces_is_read_until_whole() {
        let (speaks, all, _) =
            sniffed(&[&PREFACE[..3], &PREFACE[3..20], &PREFACE[20..], b"frames"]).await;
        assert_eq!(speaks, Speaks::Http2);
        assert_eq!(all, [PREFACE, b"frames"].concat());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_beginning_of_the_preface_that_ends_is_http1() {
        let (speaks, all, _) = sniffed(&[b"PRI * HT"]).await;
        assert_eq!(speaks, Speaks::Http1);
        assert_eq!(all, b"PRI * HT");
        let (speaks, all, held) = sniffed(&[b"PRIX"]).await;
        assert_eq!(
            (speaks, all.as_slice(), held),
            (Speaks::Http1, &b"PRIX"[..], 4)
        );
    }
}
