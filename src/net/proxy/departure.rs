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
//!
//! Over TLS the end is TLS's: a `close_notify` alert, then the FIN, both
//! in the request's last segment. Over HTTP/2 a client that gives up
//! resets its stream (RST_STREAM, CANCEL) and keeps its connection: the
//! request goes on a connection of its own all the same, then its
//! stream's reset once hyper has written it whole ([`Written`] reads the
//! frames as they go), then the connection's end. A stopped HTTP/2
//! server would find the request and the reset on the client's own
//! connection: the stream's fate is the same, the connection is one more.

use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use hyper::body::{Body, Frame, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper::header::{self, HeaderValue};
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::frames::{PING, Pong, Written};
use crate::model::wire::Transport;
use crate::net::tls::{Dialer, Stream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a request whose client has gone reaches the target: how to
/// connect (in clear or by TLS), and in which protocol.
#[derive(Clone)]
pub(super) struct Route {
    dialer: Dialer,
    transport: Transport,
}

impl Route {
    /// By `dialer`, in `transport`.
    pub(super) fn new(dialer: Dialer, transport: Transport) -> Route {
        Route { dialer, transport }
    }

    /// The protocol spoken to the target.
    pub(super) fn transport(&self) -> Transport {
        self.transport
    }

    /// [`carry`] by this route.
    pub(super) async fn carry<B>(&self, req: Request<B>) -> Result<(), BoxError>
    where
        B: Body + Unpin + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        carry(req, &self.dialer, self.transport).await
    }
}

/// How far one request carried with its client's departure has gone.
#[derive(Default)]
struct Progress {
    /// hyper has dropped the body: what it writes of the request is in
    /// its buffer, or written.
    body_done: AtomicBool,
    /// HTTP/1.1: the FIN has followed the request. HTTP/2: the request
    /// is written whole, for its stream to be reset.
    departed: AtomicBool,
    /// HTTP/2: the stream's reset is written, and the target has answered
    /// the PING after it.
    closed: AtomicBool,
    /// Notified at each of those.
    told: Notify,
}

/// Sends `req` to the target its URI names (`http://host:port/path`, as
/// the pooled client takes it), on a connection of its own made by
/// `dialer`, in `transport`. Over HTTP/1.1 its target in origin form and
/// with a `Host` if it has none (as the pooled client sends it); the
/// sending side shut down once the whole request is written. Over
/// HTTP/2 its stream reset once the whole request is written, then the
/// sending side shut down. It returns then, closing the connection
/// without reading an answer. An error if the target could not be
/// reached, or closed the connection before the request was written.
pub(super) async fn carry<B>(
    req: Request<B>,
    dialer: &Dialer,
    transport: Transport,
) -> Result<(), BoxError>
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
    let https = parts.uri.scheme() == Some(&Scheme::HTTPS);
    let port = parts.uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = TcpStream::connect((host_of(&authority), port)).await?;
    // In clear the socket is left as it was made (the dialer would set
    // TCP_NODELAY, which the cork has no need of); over TLS it is corked
    // once the handshake is done (corked before, each of its flights
    // would wait for the cork's 200 ms), with TCP_NODELAY off again.
    let stream = match dialer {
        Dialer::Plain => Stream::Plain(tcp),
        Dialer::Tls { .. } => dialer.dial(tcp).await?,
    };
    let tcp = match &stream {
        Stream::Plain(tcp) => tcp,
        Stream::Tls(tls) => {
            let tcp = tls.get_ref().0;
            tcp.set_nodelay(false)?;
            tcp
        }
    };
    cork(tcp)?;
    let progress = Arc::new(Progress::default());
    let io = Departing {
        stream,
        progress: progress.clone(),
        h2: (transport == Transport::Http2).then(Written::new),
        ping: 0,
        pong: Pong::default(),
    };
    if transport == Transport::Http2 {
        return carry_h2(parts, body, io, progress).await;
    }
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

/// [`carry`] over HTTP/2: the request on a stream of its own connection,
/// the stream reset (CANCEL, by dropping its answer's future) once the
/// request is written whole, the connection closed once the target has
/// read the reset (it answered the PING sent after it): not shut down,
/// since h2 ends the connection at its end of file anyway.
async fn carry_h2<B>(
    mut parts: hyper::http::request::Parts,
    body: B,
    io: Departing,
    progress: Arc<Progress>,
) -> Result<(), BoxError>
where
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await?;
    parts.version = hyper::Version::HTTP_2;
    let body = EndAtReset(Some(body));
    let answer = sender.send_request(Request::from_parts(parts, body));
    let mut connection = pin!(connection);
    let written = |flag: &AtomicBool| flag.load(Ordering::SeqCst);
    let mut answer = Some(answer);
    while !written(&progress.closed) {
        if written(&progress.departed) {
            // Dropped, its stream is reset: CANCEL, as a client that gave
            // up sends.
            answer = None;
        }
        tokio::select! {
            biased;
            () = progress.told.notified() => {}
            ended = &mut connection => {
                ended?;
                break;
            }
        }
    }
    drop((answer, sender));
    if written(&progress.closed) {
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

/// The body of a gone HTTP/2 client's request: it ends where its
/// client's reset cut it (the error hyper's server gives), so that the
/// target reads what the client sent, then the stream's reset, CANCEL, as
/// a client that gave up sends. Ended with an error instead, hyper would
/// reset the stream at once and h2 drop the body's frames still queued.
/// A request its client reset halfway through its body reaches the
/// target as a shorter whole one (hyper does not tell the two apart);
/// the reset follows it at once.
struct EndAtReset<B>(Option<B>);

impl<B: Body + Unpin> Body for EndAtReset<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let Some(body) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        match ready!(Pin::new(body).poll_frame(cx)) {
            Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
            Some(Err(_)) | None => {
                self.0 = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.0
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
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

/// The connection of a request carried with its client's departure.
/// HTTP/1.1: at the first flush once hyper has dropped the body, it
/// shuts down its sending side, a FIN after the request. HTTP/2: at the
/// first flush once the request's last frame is written, it says so; at
/// the first once a reset is written, it sends a PING of its own, and
/// says so when the target answers it.
struct Departing {
    stream: Stream,
    progress: Arc<Progress>,
    /// HTTP/2: what the frames written say.
    h2: Option<Written>,
    /// HTTP/2: the bytes of [`PING`] written.
    ping: usize,
    /// HTTP/2: the PING's answer.
    pong: Pong,
}

impl Departing {
    /// `n` bytes of `bufs` were written: HTTP/2 reads its frames.
    fn wrote<'a>(&mut self, bufs: impl IntoIterator<Item = &'a [u8]>, mut n: usize) {
        if let Some(written) = &mut self.h2 {
            for buf in bufs {
                let part = &buf[..n.min(buf.len())];
                written.scan(part);
                n -= part.len();
                if n == 0 {
                    break;
                }
            }
        }
    }
}

impl AsyncRead for Departing {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if self.ping == PING.len() && !self.pong.come {
            self.pong.scan(&buf.filled()[before..]);
            if self.pong.come {
                self.progress.closed.store(true, Ordering::SeqCst);
                self.progress.told.notify_one();
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Departing {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = ready!(Pin::new(&mut self.stream).poll_write(cx, buf))?;
        self.wrote([buf], n);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let n = ready!(Pin::new(&mut self.stream).poll_write_vectored(cx, bufs))?;
        self.wrote(bufs.iter().map(|b| &**b), n);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.stream).poll_flush(cx))?;
        let progress = self.progress.clone();
        let done = |flag: &AtomicBool| flag.load(Ordering::SeqCst);
        let Some(written) = &self.h2 else {
            if done(&progress.body_done) && !done(&progress.departed) {
                ready!(Pin::new(&mut self.stream).poll_shutdown(cx))?;
                progress.departed.store(true, Ordering::SeqCst);
                progress.told.notify_one();
            }
            return Poll::Ready(Ok(()));
        };
        let (ended, reset, boundary) = (written.ended, written.reset, written.at_boundary());
        if ended && !done(&progress.departed) {
            progress.departed.store(true, Ordering::SeqCst);
            progress.told.notify_one();
        }
        if reset && boundary && self.ping < PING.len() {
            while self.ping < PING.len() {
                let from = self.ping;
                let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &PING[from..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.ping += n;
            }
            ready!(Pin::new(&mut self.stream).poll_flush(cx))?;
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
        carry(req, &Dialer::Plain, Transport::Http1).await.unwrap();
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
        carry(req, &Dialer::Plain, Transport::Http1).await.unwrap();
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
        assert!(carry(req, &Dialer::Plain, Transport::Http1).await.is_err());
    }
}
