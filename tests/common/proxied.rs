//! The fault proxy's tests' harness, for `tests/proxy.rs` and
//! `tests/proxy_protocols.rs` (each includes this file; no other test
//! binary compiles it): a small echo
//! service on a thread of its own, a raw HTTP/1.1 client connection, and
//! the proxy as a child started as the storm's runner starts it, killed
//! if a test fails.

use std::convert::Infallible;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use retry_storm::report::proxy::ProxyRow;
use retry_storm::report::status::Status;

use crate::common::{Guard, command, signal};

pub const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// How long anything may take on a loaded machine before a test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// How long a connection must stay silent, or a connection attempt
/// unanswered, for a test to take it that nothing will come while the
/// fault is on: the proxy answers within milliseconds otherwise.
pub const SILENCE: Duration = Duration::from_millis(300);

/// A small HTTP/1.1 service on an ephemeral loopback port, on a thread
/// of its own. It answers every request with what it saw as JSON (method,
/// target, headers, body, the port of the connection it came on), except
/// `/status/CODE` (CODE, with a reason and headers of its own) and
/// `/big/N` (N bytes) and `/slow/MS` (its JSON MS late). It counts the
/// requests it sees, and tells their targets as they arrive.
pub struct Upstream {
    pub addr: SocketAddr,
    seen: Arc<AtomicU64>,
    arrived: Receiver<String>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Upstream {
    pub fn start() -> Upstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(AtomicU64::new(0));
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let counter = seen.clone();
        let (arrive, arrived) = mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let (stream, peer) = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => accepted.unwrap(),
                    };
                    let (counter, arrive) = (counter.clone(), arrive.clone());
                    tokio::spawn(async move {
                        let service = service_fn(move |req: Request<Incoming>| {
                            let _ = arrive.send(req.uri().to_string());
                            echo(req, peer, counter.clone())
                        });
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        Upstream {
            addr,
            seen,
            arrived,
            _stop: stop,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Waits until a request for `target` has arrived.
    pub fn arrival(&self, target: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let arrived = self.arrived.recv_timeout(left);
            match arrived {
                Ok(t) if t == target => return,
                Ok(_) => {}
                Err(e) => panic!("{target} never arrived: {e}"),
            }
        }
    }
}

/// What a [`Silent`] target saw on one connection.
#[derive(Debug)]
pub enum Seen {
    /// The first bytes arrived.
    Bytes(String),
    /// The connection ended: everything read on it, and whether a FIN
    /// ended it (not a reset, nor [`PATIENCE`] without a byte).
    Ended { read: String, fin: bool },
}

/// A target of the test's own that never answers, on an ephemeral
/// loopback port: it reads each connection to its end, on a thread of
/// its own, and tells what it sees as it comes.
pub struct Silent {
    pub addr: SocketAddr,
    seen: Receiver<Seen>,
}

impl Silent {
    pub fn start() -> Silent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tell, seen) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let (mut stream, tell) = (stream.unwrap(), tell.clone());
                std::thread::spawn(move || {
                    stream.set_read_timeout(Some(PATIENCE)).unwrap();
                    let mut read = Vec::new();
                    let mut buf = [0u8; 4096];
                    let fin = loop {
                        match stream.read(&mut buf) {
                            Ok(0) => break true,
                            Ok(n) => {
                                if read.is_empty() {
                                    let first = String::from_utf8_lossy(&buf[..n]);
                                    let _ = tell.send(Seen::Bytes(first.into_owned()));
                                }
                                read.extend_from_slice(&buf[..n]);
                            }
                            Err(_) => break false,
                        }
                    };
                    let read = String::from_utf8_lossy(&read).into_owned();
                    let _ = tell.send(Seen::Ended { read, fin });
                });
            }
        });
        Silent { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The next thing it sees, within [`PATIENCE`] (and a little, for a
    /// connection read for that long).
    pub fn next(&self) -> Seen {
        self.seen
            .recv_timeout(PATIENCE + Duration::from_secs(5))
            .expect("the target saw nothing more")
    }

    /// The next `n` connections to end with something read on them: what
    /// was read on each, and whether a FIN ended it, in the order of what
    /// was read. (The proxy may have opened a pooled connection for a
    /// request whose client went before it was written there: it closes
    /// it unused, and sends the request on one of its own.)
    pub fn ended(&self, n: usize) -> Vec<(String, bool)> {
        let mut ended = Vec::new();
        while ended.len() < n {
            match self.next() {
                Seen::Ended { read, fin } if !read.is_empty() => ended.push((read, fin)),
                _ => {}
            }
        }
        ended.sort();
        ended
    }
}

async fn echo(
    req: Request<Incoming>,
    peer: SocketAddr,
    seen: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    seen.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path();
    if let Some(code) = path.strip_prefix("/status/") {
        let mut resp = Response::new(Full::new(Bytes::from_static(b"from upstream\n")));
        *resp.status_mut() = StatusCode::from_u16(code.parse().unwrap()).unwrap();
        resp.headers_mut()
            .insert("x-upstream", code.parse().unwrap());
        resp.headers_mut()
            .insert("retry-after", "7".parse().unwrap());
        resp.extensions_mut()
            .insert(hyper::ext::ReasonPhrase::from_static(b"Upstream Says So"));
        return Ok(resp);
    }
    if let Some(ms) = path.strip_prefix("/slow/") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
    }
    if let Some(n) = path.strip_prefix("/big/") {
        let big = vec![b'b'; n.parse().unwrap()];
        return Ok(Response::new(Full::new(Bytes::from(big))));
    }
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    let said = serde_json::json!({
        "method": parts.method.as_str(),
        "target": parts.uri.to_string(),
        "headers": headers,
        "body": String::from_utf8_lossy(&body),
        "peer": peer.port(),
    });
    let mut resp = Response::new(Full::new(Bytes::from(said.to_string())));
    resp.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    Ok(resp)
}

/// An answer as a client reads it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// What a silent connection turned out to be.
#[derive(Debug, PartialEq)]
pub enum Silence {
    /// Nothing came within the bound.
    Kept,
    /// Bytes came.
    Broken,
}

/// One client connection, kept alive, written and read as raw HTTP/1.1.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn to(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, PATIENCE).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    /// Sends a request; the headers as given (repeated names included),
    /// then Host and Content-Length.
    pub fn send(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
        self.try_send(method, target, headers, body).unwrap();
    }

    /// [`Conn::send`], which may fail.
    pub fn try_send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<()> {
        let mut head = format!("{method} {target} HTTP/1.1\r\nhost: proxied.example\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)
    }

    /// Reads one answer (its length given by Content-Length).
    pub fn answer(&mut self) -> io::Result<Answer> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut words = line.trim_end().splitn(3, ' ');
        let (_, status, reason) = (words.next(), words.next(), words.next());
        let status = status.unwrap().parse().unwrap();
        let reason = reason.unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.push((name.to_lowercase(), value.trim().to_string()));
        }
        let mut answer = Answer {
            status,
            reason,
            headers,
            body: Vec::new(),
        };
        let length: usize = answer
            .header("content-length")
            .expect("every answer here has a length")
            .parse()
            .unwrap();
        answer.body = vec![0; length];
        self.reader.read_exact(&mut answer.body)?;
        Ok(answer)
    }

    pub fn request(&mut self, method: &str, target: &str) -> Answer {
        self.send(method, target, &[], b"");
        self.answer().unwrap()
    }

    /// Whether anything comes on the connection within [`SILENCE`].
    pub fn silence(&mut self) -> Silence {
        let stream = self.reader.get_ref();
        stream.set_read_timeout(Some(SILENCE)).unwrap();
        let silence = match self.reader.fill_buf() {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Silence::Kept
            }
            _ => Silence::Broken,
        };
        self.reader
            .get_ref()
            .set_read_timeout(Some(PATIENCE))
            .unwrap();
        silence
    }
}

/// The address of an `http://ADDR/...` URL.
pub fn addr_of(url: &str) -> SocketAddr {
    let authority = url.trim_start_matches("http://").split('/').next();
    authority.unwrap().parse().unwrap()
}

/// A request to a control endpoint, and its JSON answer.
pub fn control(url: &str, method: &str, path: &str) -> serde_json::Value {
    let answer = Conn::to(addr_of(url)).request(method, path);
    assert_eq!(answer.status, 200, "{method} {path}: {answer:?}");
    answer.json()
}

/// A proxy child, started as the storm's runner starts it.
pub struct Proxy {
    guard: Guard,
    /// Its URL, from its status line.
    pub url: String,
    pub addr: SocketAddr,
    /// Its start-up line.
    start: String,
    /// Its report rows, from its status descriptor, as they come.
    rows: Receiver<ProxyRow>,
    /// Every row received so far.
    received: Vec<ProxyRow>,
    /// What it printed after its start-up line.
    stdout: Arc<Mutex<String>>,
}

impl Proxy {
    pub fn start(upstream: &str, args: &[&str]) -> Proxy {
        let (status, writer) = std::io::pipe().unwrap();
        let writer = OwnedFd::from(writer);
        let raw = writer.as_raw_fd();
        let mut cmd = command(STORM);
        cmd.args(["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(["--report-interval", "100ms", "--status-fd", "3"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        // SAFETY: between fork and exec, only dup2 and fcntl on a
        // descriptor open in the parent until after the spawn.
        unsafe {
            cmd.pre_exec(move || {
                if raw == 3 {
                    fcntl(
                        BorrowedFd::borrow_raw(raw),
                        FcntlArg::F_SETFD(FdFlag::empty()),
                    )?;
                } else if nix::libc::dup2(raw, 3) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        drop(writer);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let guard = Guard(child);
        let mut lines = BufReader::new(status).lines();
        let first = lines.next().expect("a status line").unwrap();
        let Ok(Status::Listening { url }) = Status::parse(&first) else {
            panic!("the first status line says where it listens: {first}");
        };
        let (tx, rows) = mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                match Status::parse(&line) {
                    Ok(Status::ProxyRow(row)) => {
                        let _ = tx.send(row);
                    }
                    other => panic!("a proxy sends its rows only: {other:?}"),
                }
            }
        });
        let mut start = String::new();
        out.read_line(&mut start).unwrap();
        let stdout = Arc::new(Mutex::new(String::new()));
        let rest = stdout.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            rest.lock().unwrap().push_str(&text);
        });
        let addr = addr_of(&url);
        Proxy {
            guard,
            url,
            addr,
            start,
            rows,
            received: Vec::new(),
            stdout,
        }
    }

    /// A proxy of `upstream`'s `/api` whose `fault` is on from the start,
    /// its draws seeded with `seed`.
    pub fn faulted(upstream: &Upstream, fault: &str, seed: &str) -> Proxy {
        let args = ["--fault", fault, "--fault-on", "--seed", seed];
        Proxy::start(&upstream.url("/api"), &args)
    }

    /// A proxy of `upstream`'s `/api` with `fault`, off, and the URL of
    /// its control endpoint.
    pub fn controlled(upstream: &Upstream, fault: &str) -> (Proxy, String) {
        let args = ["--fault", fault, "--control", "127.0.0.1:0"];
        let proxy = Proxy::start(&upstream.url("/api"), &args);
        let url = proxy.url_after("control at ");
        (proxy, url)
    }

    pub fn pid(&self) -> u32 {
        self.guard.0.id()
    }

    /// The URL after `what` on the start-up line (`control at`, `metrics
    /// on`).
    pub fn url_after(&self, what: &str) -> String {
        let at = self.start.find(what).expect(what) + what.len();
        self.start[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches(';')
            .to_string()
    }

    /// Waits for a row that holds `what`.
    pub fn row_where(&mut self, what: &str, holds: impl Fn(&ProxyRow) -> bool) -> ProxyRow {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let row = self
                .rows
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no row with {what} ({e}): {:?}", self.received));
            self.received.push(row.clone());
            if holds(&row) {
                return row;
            }
        }
    }

    /// Sends `sig`, and waits for a row with the fault as it asks.
    pub fn switch(&mut self, sig: &str) {
        signal(self.pid(), sig);
        let on = sig == "USR1";
        self.row_where(&format!("the fault {on}"), |r| r.faulted == on);
    }

    /// Stops it with SIGTERM; its exit status, what it printed meanwhile,
    /// and every row it sent.
    pub fn terminate(mut self) -> (ExitStatus, String, Vec<ProxyRow>) {
        signal(self.pid(), "TERM");
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.guard.0.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "still running after SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        };
        // Its descriptor closed, every row is in the channel.
        self.received.extend(self.rows.iter());
        let deadline = Instant::now() + PATIENCE;
        let stdout = loop {
            let text = self.stdout.lock().unwrap().clone();
            if text.contains("proxy stopped") || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        (status, stdout, self.received)
    }
}
