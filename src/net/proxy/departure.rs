//! A request whose client went before the proxy forwarded it, carried to
//! the target with its client's departure: on a connection of its own,
//! the request, then a FIN, then the connection closed, its answer never
//! waited for. A stopped process finds the same in its socket when it
//! resumes: the request, then the FIN its client's kernel left behind it
//! when the client gave up. It reads both, so a service that cancels the
//! work of clients that have gone drops that request at once, and one
//! that goes on with it writes its answer to a socket closed at the other
//! end. Forwarded on a pooled connection kept open until its answer, the
//! request would instead be finished in full by either.
//!
//! hyper writes the request (`hyper::client::conn::http1` on a socket of
//! its own), as it writes every other: the proxy has no HTTP writer of
//! its own. hyper has no hook that says a request has been written, so
//! two small wrappers find it out: [`Tracked`], the request's body, marks
//! when hyper drops it, which hyper does once the body's last bytes (or
//! the head, for a request without one) are in its write buffer; and
//! [`Departing`], the socket, sends the FIN at the first flush after
//! that, since hyper flushes the socket only once its buffer is empty,
//! every byte of the request handed to the kernel.
//!
//! The socket is corked (`TCP_CORK`), so that the FIN leaves in the
//! request's last segment and the target reads the two at once, as it
//! would from a stopped process's socket. Sent apart, the FIN came a
//! moment after the request, and a target busy with the burst at a
//! stall's end could take requests in as work before their FINs came (a
//! cancelling target, fixed retries, `--quick`, single runs: 1.86 to
//! 2.00 attempts a request, median 1.89; corked 1.84 to 2.03, median
//! 1.86; through SIGSTOP 1.75 to 1.83).

use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use hyper::body::{Body, Frame, SizeHint};
use hyper::client::conn::http1;
use hyper::header::{self, HeaderValue};
use hyper::http::uri::Authority;
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How far one request carried with its client's departure has gone.
#[derive(Default)]
struct Progress {
    /// hyper has dropped the body: what it writes of the request is in
    /// its buffer, or written.
    body_done: AtomicBool,
    /// The FIN has followed the request.
    departed: AtomicBool,
    /// Notified when it has.
    told: Notify,
}

/// Sends `req` to the target its URI names (`http://host:port/path`, as
/// the pooled client takes it), on a connection of its own, its target
/// in origin form and with a `Host` if it has none (as the pooled client
/// sends it); shuts down the sending side once the whole request is
/// written, and returns then, closing the connection without reading an
/// answer. An error if the target could not be reached, or closed the
/// connection before the request was written.
pub(super) async fn carry<B>(req: Request<B>) -> Result<(), BoxError>
where
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = req.into_parts();
    let authority = parts
        .uri
        .authority()
        .ok_or("a forwarded request names its target")?
        .clone();
    let port = parts.uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host_of(&authority), port)).await?;
    cork(&stream)?;
    let progress = Arc::new(Progress::default());
    let io = Departing {
        stream,
        progress: progress.clone(),
    };
    let (mut sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    if !parts.headers.contains_key(header::HOST) {
        let host = HeaderValue::from_str(authority.as_str())?;
        parts.headers.insert(header::HOST, host);
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = Uri::try_from(path)?;
    let body = Tracked {
        body,
        progress: progress.clone(),
    };
    // hyper takes the request in at once (a new connection's first one
    // is buffered until the connection is polled). Its answer's future
    // stays unpolled, and alive until the end: dropped, it would cancel
    // the request.
    let _answer = sender.send_request(Request::from_parts(parts, body));
    let mut connection = pin!(connection);
    tokio::select! {
        biased;
        () = progress.told.notified() => {}
        ended = &mut connection => ended?,
    }
    if progress.departed.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err("the target closed the connection before the request was written".into())
    }
}

/// The host to connect to, of `authority`: an IPv6 literal without its
/// brackets (`[::1]` is `::1`), as the pooled client connects.
fn host_of(authority: &Authority) -> &str {
    let host = authority.host();
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Corks `stream` (`TCP_CORK`): what is written waits in the kernel,
/// in full segments only, until the FIN, which goes out with the last of
/// it.
fn cork(stream: &TcpStream) -> io::Result<()> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on a descriptor `stream` keeps open, with a
    // pointer to an int and its size.
    let status = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A request's body as hyper writes it: marks when hyper drops it.
struct Tracked<B> {
    body: B,
    progress: Arc<Progress>,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.progress.body_done.store(true, Ordering::SeqCst);
    }
}

/// The socket of a request carried with its client's departure: at the
/// first flush once hyper has dropped the body, it shuts down its
/// sending side, a FIN after the request.
struct Departing {
    stream: TcpStream,
    progress: Arc<Progress>,
}

impl AsyncRead for Departing {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Departing {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.stream).poll_flush(cx))?;
        let progress = self.progress.clone();
        if progress.body_done.load(Ordering::SeqCst) && !progress.departed.load(Ordering::SeqCst) {
            ready!(Pin::new(&mut self.stream).poll_shutdown(cx))?;
            progress.departed.store(true, Ordering::SeqCst);
            progress.told.notify_one();
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::Empty;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// A target of the test's own: it accepts one connection and reads
    /// it to its end, never answering; what it read, and whether a FIN
    /// ended it (rather than a reset, or nothing within 10 s).
    async fn listen() -> (Uri, tokio::task::JoinHandle<(Vec<u8>, bool)>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let reading = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut read = Vec::new();
            let until = std::time::Duration::from_secs(10);
            let ended = tokio::time::timeout(until, stream.read_to_end(&mut read)).await;
            (read, matches!(ended, Ok(Ok(_))))
        });
        (uri, reading)
    }

    fn to(uri: &Uri, path: &str) -> hyper::http::request::Builder {
        Request::get(format!("{uri}{}", path.trim_start_matches('/')))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_target_reads_the_request_then_its_end_without_answering() {
        let (uri, reading) = listen().await;
        let req = to(&uri, "/api?gone=1")
            .header("host", "proxied.example")
            .header("x-custom", "kept")
            .body(Empty::<Bytes>::new())
            .unwrap();
        carry(req).await.unwrap();
        let (read, fin) = reading.await.unwrap();
        let read = String::from_utf8(read).unwrap();
        assert!(fin, "a FIN after the request: {read:?}");
        assert!(read.starts_with("GET /api?gone=1 HTTP/1.1\r\n"), "{read:?}");
        assert!(read.contains("host: proxied.example\r\n"), "{read:?}");
        assert!(read.contains("x-custom: kept\r\n"), "{read:?}");
        assert!(
            read.ends_with("\r\n\r\n"),
            "the head whole, nothing after: {read:?}"
        );
    }

    /// A body in two frames, the second one a poll after the first: hyper
    /// flushes the first before it has the second.
    struct TwoFrames(Vec<&'static str>, bool);

    impl Body for TwoFrames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.0.len() == 1 && !self.1 {
                self.1 = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let next = self.0.pop().map(|s| Ok(Frame::data(Bytes::from(s))));
            Poll::Ready(next)
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_body_in_parts_goes_whole_before_the_end_and_a_host_is_added_if_none() {
        let (uri, reading) = listen().await;
        let req = to(&uri, "/upload")
            .method("POST")
            .body(TwoFrames(vec!["second", "first"], false))
            .unwrap();
        carry(req).await.unwrap();
        let (read, fin) = reading.await.unwrap();
        let read = String::from_utf8(read).unwrap();
        assert!(fin, "{read:?}");
        let authority = uri.authority().unwrap().as_str();
        let head = format!(
            "POST /upload HTTP/1.1\r\nhost: {authority}\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let body = "5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n";
        assert_eq!(read, format!("{head}{body}"));
    }

    #[test]
    fn an_ipv6_literal_is_connected_to_without_its_brackets() {
        let host = |a: &str| host_of(&a.parse().unwrap()).to_string();
        assert_eq!(host("[::1]:8000"), "::1");
        assert_eq!(host("127.0.0.1:8000"), "127.0.0.1");
        assert_eq!(host("example.test"), "example.test");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_target_that_refuses_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let req = Request::get(format!("http://{addr}/api"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert!(carry(req).await.is_err());
    }
}
