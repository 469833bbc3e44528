//! The fault proxy (`storm proxy`), run as the storm's runner runs it (a
//! child with `--status-fd 3`, switched by SIGUSR1 and SIGUSR2) or through
//! its control endpoint, in front of a small echo service in this test
//! process: forwarding is faithful, each fault does what docs/proxy.md
//! says, and its rows, CSV and metrics say what passed. Loopback only;
//! reports every 100 ms; every wait bounded; every child killed if a test
//! fails.

mod common;

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

use common::pty::Pty;
use common::{Guard, command, signal, temp_dir, unowned_port};
use retry_storm::report::output::read_rows;
use retry_storm::report::proxy::ProxyRow;
use retry_storm::report::status::Status;

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// How long anything may take on a loaded machine before a test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// How long a connection must stay silent, or a connection attempt
/// unanswered, for a test to take it that nothing will come while the
/// fault is on: the proxy answers within milliseconds otherwise.
const SILENCE: Duration = Duration::from_millis(300);

/// A small HTTP/1.1 service on an ephemeral loopback port, on a thread
/// of its own. It answers every request with what it saw as JSON (method,
/// target, headers, body, the port of the connection it came on), except
/// `/status/CODE` (CODE, with a reason and headers of its own) and
/// `/big/N` (N bytes) and `/slow/MS` (its JSON MS late). It counts the
/// requests it sees, and tells their targets as they arrive.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<AtomicU64>,
    arrived: Receiver<String>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Upstream {
    fn start() -> Upstream {
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

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Waits until a request for `target` has arrived.
    fn arrival(&self, target: &str) {
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
struct Answer {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// What a silent connection turned out to be.
#[derive(Debug, PartialEq)]
enum Silence {
    /// Nothing came within the bound.
    Kept,
    /// Bytes came.
    Broken,
}

/// One client connection, kept alive, written and read as raw HTTP/1.1.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn to(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, PATIENCE).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    /// Sends a request; the headers as given (repeated names included),
    /// then Host and Content-Length.
    fn send(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
        self.try_send(method, target, headers, body).unwrap();
    }

    /// [`Conn::send`], which may fail.
    fn try_send(
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
    fn answer(&mut self) -> io::Result<Answer> {
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

    fn request(&mut self, method: &str, target: &str) -> Answer {
        self.send(method, target, &[], b"");
        self.answer().unwrap()
    }

    /// Whether anything comes on the connection within [`SILENCE`].
    fn silence(&mut self) -> Silence {
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

/// A request to a control endpoint, and its JSON answer.
fn control(url: &str, method: &str, path: &str) -> serde_json::Value {
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let answer = Conn::to(addr).request(method, path);
    assert_eq!(answer.status, 200, "{method} {path}: {answer:?}");
    answer.json()
}

/// A proxy child, started as the storm's runner starts it.
struct Proxy {
    guard: Guard,
    /// Its URL, from its status line.
    url: String,
    addr: SocketAddr,
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
    fn start(upstream: &str, args: &[&str]) -> Proxy {
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
        let addr = url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
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
    fn faulted(upstream: &Upstream, fault: &str, seed: &str) -> Proxy {
        let args = ["--fault", fault, "--fault-on", "--seed", seed];
        Proxy::start(&upstream.url("/api"), &args)
    }

    /// A proxy of `upstream`'s `/api` with `fault`, off, and the URL of
    /// its control endpoint.
    fn controlled(upstream: &Upstream, fault: &str) -> (Proxy, String) {
        let args = ["--fault", fault, "--control", "127.0.0.1:0"];
        let proxy = Proxy::start(&upstream.url("/api"), &args);
        let url = proxy.url_after("control at ");
        (proxy, url)
    }

    fn pid(&self) -> u32 {
        self.guard.0.id()
    }

    /// The URL after `what` on the start-up line (`control at`, `metrics
    /// on`).
    fn url_after(&self, what: &str) -> String {
        let at = self.start.find(what).expect(what) + what.len();
        self.start[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches(';')
            .to_string()
    }

    /// Waits for a row that holds `what`.
    fn row_where(&mut self, what: &str, holds: impl Fn(&ProxyRow) -> bool) -> ProxyRow {
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
    fn switch(&mut self, sig: &str) {
        signal(self.pid(), sig);
        let on = sig == "USR1";
        self.row_where(&format!("the fault {on}"), |r| r.faulted == on);
    }

    /// Stops it with SIGTERM; its exit status, what it printed meanwhile,
    /// and every row it sent.
    fn terminate(mut self) -> (ExitStatus, String, Vec<ProxyRow>) {
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

#[test]
fn requests_and_answers_pass_through_unchanged_on_kept_alive_connections() {
    let upstream = Upstream::start();
    let proxy = Proxy::start(&upstream.url("/api?from=proxy"), &[]);
    assert_eq!(
        proxy.url,
        format!("http://{}/api?from=proxy", proxy.addr),
        "the proxy's URL carries the target's path and query"
    );
    let mut conn = Conn::to(proxy.addr);
    conn.send(
        "POST",
        "/echo/path?q=1&r=two",
        &[
            ("x-custom", "one"),
            ("x-multi", "a"),
            ("x-multi", "b"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "dropped"),
            ("keep-alive", "timeout=5"),
        ],
        b"hello body",
    );
    let answer = conn.answer().unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let seen = answer.json();
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["target"], "/echo/path?q=1&r=two");
    assert_eq!(seen["body"], "hello body");
    let headers: Vec<(String, String)> = serde_json::from_value(seen["headers"].clone()).unwrap();
    let values = |name: &str| -> Vec<&str> {
        headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(
        values("host"),
        ["proxied.example"],
        "Host as the client sent it"
    );
    assert_eq!(values("x-custom"), ["one"]);
    assert_eq!(values("x-multi"), ["a", "b"]);
    for hop in ["x-hop", "keep-alive", "connection"] {
        assert!(values(hop).is_empty(), "{hop} is hop-by-hop: {headers:?}");
    }
    let first_peer = seen["peer"].as_u64().unwrap();
    // The target's statuses, reasons and headers come back as they were.
    for code in [404, 503] {
        let answer = conn.request("GET", &format!("/status/{code}"));
        assert_eq!(answer.status, code);
        assert_eq!(answer.reason, "Upstream Says So");
        assert_eq!(answer.header("x-upstream"), Some(code.to_string().as_str()));
        assert_eq!(answer.header("retry-after"), Some("7"));
        assert_eq!(answer.body, b"from upstream\n");
    }
    // Large bodies both ways, on the same connection.
    let big = vec![b'x'; 1 << 20];
    conn.send("PUT", "/upload", &[], &big);
    let answer = conn.answer().unwrap();
    assert_eq!(answer.json()["body"].as_str().unwrap().len(), big.len());
    let answer = conn.request("GET", "/big/1000000");
    assert_eq!(answer.body.len(), 1_000_000);
    // Every request so far on one client connection, and on one
    // connection to the target.
    let again = conn.request("GET", "/again").json();
    assert_eq!(again["peer"].as_u64(), Some(first_peer));
    assert_eq!(upstream.seen(), 6);
}

#[test]
fn status_answers_without_the_target_and_the_rows_csv_and_metrics_say_so() {
    let upstream = Upstream::start();
    let dir = temp_dir("proxy-status");
    let csv = dir.join("proxy.csv");
    let mut proxy = Proxy::start(
        &upstream.url("/api"),
        &[
            "--fault",
            "status=503,retry-after=2s",
            "--seed",
            "3",
            "--csv",
            csv.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let mut conn = Conn::to(proxy.addr);
    assert_eq!(conn.request("GET", "/api").status, 200);
    proxy.switch("USR1");
    let answer = conn.request("GET", "/api");
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("retry-after"), Some("2"));
    assert_eq!(answer.header("x-amz-retry-after"), Some("2000"));
    assert_eq!(
        upstream.seen(),
        1,
        "the fault's answer never reaches the target"
    );
    let row = proxy.row_where("the injected answer", |r| r.injected_per_s > 0.0);
    assert!(row.faulted && row.answers_5xx_per_s == 0.0, "{row:?}");
    let metrics = proxy.url_after("metrics on ");
    let addr = metrics
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
    let scraped = String::from_utf8(Conn::to(addr).request("GET", "/metrics").body).unwrap();
    for sample in [
        "retry_storm_proxy_requests_total 2",
        "retry_storm_proxy_injected_total 1",
        "retry_storm_proxy_answers_total{class=\"2xx\"} 1",
        "retry_storm_proxy_faulted 1",
        "retry_storm_proxy_connections 1",
        "retry_storm_proxy_answer_duration_seconds_count 1",
    ] {
        assert!(scraped.contains(sample), "{sample}: {scraped}");
    }
    proxy.switch("USR2");
    assert_eq!(conn.request("GET", "/api").status, 200);
    assert_eq!(upstream.seen(), 2);
    let (status, stdout, rows) = proxy.terminate();
    assert_eq!(status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("proxy stopped: requests 3, answers passed back 2"),
        "{stdout}"
    );
    // The CSV holds every row the status lines gave, the last one too.
    let written: Vec<ProxyRow> = read_rows(&csv).unwrap();
    assert_eq!(written, rows);
    // Plausible rows: the fault's answers only while it was on, the
    // target's latency while it answered.
    assert!(rows.iter().any(|r| r.faulted) && !rows.last().unwrap().faulted);
    assert!(rows.iter().all(|r| r.injected_per_s == 0.0 || r.faulted));
    assert!(
        rows.iter()
            .all(|r| r.upstream_errors_per_s == 0.0 && r.held == 0)
    );
    assert!(rows.iter().any(|r| r.p99_ms.is_some()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stall_answers_nothing_until_it_ends_and_then_everything() {
    let upstream = Upstream::start();
    let (mut proxy, control_url) = Proxy::controlled(&upstream, "stall");
    let mut held = Conn::to(proxy.addr);
    assert_eq!(held.request("GET", "/api").status, 200);
    // A request forwarded before the stall, its answer due 100 ms later.
    let mut slow = Conn::to(proxy.addr);
    slow.send("GET", "/slow/100", &[], b"");
    upstream.arrival("/slow/100");
    let on = control(&control_url, "POST", "/fault/on");
    assert_eq!(on, serde_json::json!({"faulted": true, "fault": "stall"}));
    // Its answer comes back from the target, and waits unwritten.
    assert_eq!(slow.silence(), Silence::Kept);
    // A request on a connection open before: never read.
    held.send("GET", "/api?held", &[], b"");
    assert_eq!(held.silence(), Silence::Kept);
    // A new connection: the kernel completes it into the listen queue,
    // and nothing more.
    let mut queued = Conn::to(proxy.addr);
    queued.send("GET", "/api?queued", &[], b"");
    assert_eq!(queued.silence(), Silence::Kept);
    let row = proxy.row_where("a queued connection", |r| r.faulted && r.queued >= 1);
    assert_eq!((row.connections, row.held), (2, 0), "nothing read: {row:?}");
    assert_eq!(upstream.seen(), 2, "nothing forwarded while stalled");
    // Switched off (twice: idempotent), every one gets the target's answer.
    control(&control_url, "POST", "/fault/off");
    let off = control(&control_url, "POST", "/fault/off");
    assert_eq!(off["faulted"], false);
    assert_eq!(slow.answer().unwrap().json()["target"], "/slow/100");
    assert_eq!(held.answer().unwrap().json()["target"], "/api?held");
    assert_eq!(queued.answer().unwrap().json()["target"], "/api?queued");
    assert_eq!(upstream.seen(), 4);
    assert_eq!(control(&control_url, "GET", "/fault")["faulted"], false);
}

#[test]
fn a_request_held_by_a_fraction_goes_when_the_fault_ends_and_a_swallowed_one_never() {
    let upstream = Upstream::start();
    // Seed 1 draws the first request into the fraction of 0.99.
    let mut stalled = Proxy::faulted(&upstream, "stall,fraction=0.99", "1");
    let mut conn = Conn::to(stalled.addr);
    conn.send("GET", "/api?held", &[], b"");
    stalled.row_where("the request held", |r| r.held == 1);
    assert_eq!(conn.silence(), Silence::Kept);
    stalled.switch("USR2");
    assert_eq!(conn.answer().unwrap().json()["target"], "/api?held");
    let mut swallowing = Proxy::faulted(&upstream, "blackhole,fraction=0.99", "1");
    let mut conn = Conn::to(swallowing.addr);
    conn.send("GET", "/api?swallowed", &[], b"");
    swallowing.row_where("the request swallowed", |r| r.held == 1);
    swallowing.switch("USR2");
    assert_eq!(conn.silence(), Silence::Kept, "swallowed for good");
    drop(conn);
    let row = swallowing.row_where("its client gone", |r| r.gone_per_s > 0.0);
    assert_eq!(row.held, 0, "{row:?}");
    assert_eq!(upstream.seen(), 1);
}

#[test]
fn a_blackhole_queues_one_connection_and_leaves_the_next_unanswered() {
    let upstream = Upstream::start();
    let mut proxy = Proxy::faulted(&upstream, "blackhole", "1");
    let mut first = Conn::to(proxy.addr);
    first.send("GET", "/api", &[], b"");
    assert_eq!(first.silence(), Silence::Kept);
    let refused = TcpStream::connect_timeout(&proxy.addr, SILENCE);
    assert!(
        refused.is_err(),
        "beyond a queue of one, the handshake does not complete"
    );
    proxy.switch("USR2");
    assert_eq!(first.answer().unwrap().status, 200);
    assert_eq!(Conn::to(proxy.addr).request("GET", "/api").status, 200);
}

#[test]
fn a_reset_resets_open_connections_and_new_ones_until_it_ends() {
    let upstream = Upstream::start();
    let (mut proxy, control_url) = Proxy::controlled(&upstream, "reset");
    let mut open = Conn::to(proxy.addr);
    assert_eq!(open.request("GET", "/api").status, 200);
    control(&control_url, "POST", "/fault/on");
    let reset = open.answer().unwrap_err();
    assert_eq!(reset.kind(), io::ErrorKind::ConnectionReset, "{reset}");
    // A new connection is reset as it is accepted: its request's write
    // or its answer's read says so, whichever meets the RST first.
    let mut new = Conn::to(proxy.addr);
    let sent = new.try_send("GET", "/api", &[], b"");
    let read = new.answer();
    let was_reset = |r: &io::Error| r.kind() == io::ErrorKind::ConnectionReset;
    assert!(
        sent.as_ref().err().is_some_and(was_reset) || read.as_ref().err().is_some_and(was_reset),
        "{sent:?}, {read:?}"
    );
    let row = proxy.row_where("two resets", |r| r.resets_per_s > 0.0);
    assert!(row.faulted, "{row:?}");
    control(&control_url, "POST", "/fault/off");
    assert_eq!(Conn::to(proxy.addr).request("GET", "/api").status, 200);
    assert_eq!(upstream.seen(), 2);
}

#[test]
fn a_delay_forwards_late_and_off_forwards_at_once() {
    let upstream = Upstream::start();
    let mut proxy = Proxy::faulted(&upstream, "delay=300ms", "1");
    let mut conn = Conn::to(proxy.addr);
    let started = Instant::now();
    assert_eq!(conn.request("GET", "/api").status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let row = proxy.row_where("the delayed answer", |r| r.answers_2xx_per_s > 0.0);
    assert!(row.p50_ms.unwrap() >= 300.0, "{row:?}");
    proxy.switch("USR2");
    let started = Instant::now();
    assert_eq!(conn.request("GET", "/api").status, 200);
    assert!(started.elapsed() < Duration::from_millis(300));
}

#[test]
fn a_fraction_faults_about_its_share_the_same_for_the_same_seed() {
    let upstream = Upstream::start();
    let faulted = |seed: &str| {
        let proxy = Proxy::faulted(&upstream, "status=503,fraction=0.5", seed);
        let mut conn = Conn::to(proxy.addr);
        (0..200)
            .filter(|_| conn.request("GET", "/api").status == 503)
            .count()
    };
    let share = faulted("7");
    assert!((60..=140).contains(&share), "{share} of 200");
    assert_eq!(faulted("7"), share, "the same seed, the same requests");
    assert_eq!(upstream.seen() as usize, 2 * (200 - share));
}

#[test]
fn a_target_that_refuses_gets_its_clients_a_502() {
    let port = unowned_port();
    let mut proxy = Proxy::start(&format!("http://127.0.0.1:{port}/api"), &[]);
    let answer = Conn::to(proxy.addr).request("GET", "/api");
    assert_eq!(answer.status, 502);
    let row = proxy.row_where("the upstream error", |r| r.upstream_errors_per_s > 0.0);
    assert_eq!(
        row.answers_5xx_per_s, 0.0,
        "a 502 of the proxy's own: {row:?}"
    );
}

#[test]
fn the_live_views_key_switches_the_fault() {
    let upstream = Upstream::start();
    let port = unowned_port();
    let control_url = format!("http://127.0.0.1:{port}/fault");
    let mut pty = Pty::spawn(
        STORM,
        &[
            "proxy",
            "--tui",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &upstream.url("/api"),
            "--report-interval",
            "100ms",
            "--control",
            &format!("127.0.0.1:{port}"),
        ],
        &[("NO_COLOR", "1")],
        120,
        40,
    );
    pty.wait_for_text(&["f: fault on/off", "fault         off", "connections, held"]);
    pty.keys("f");
    pty.wait_for_text(&["fault         ON", "░ fault on"]);
    assert_eq!(control(&control_url, "GET", "/fault")["faulted"], true);
    pty.keys("q");
    let (status, screen, alternate) = pty.wait_end();
    assert!(status.success(), "{status}: {screen}");
    assert!(!alternate, "the terminal is given back");
    assert!(screen.contains("proxy stopped"), "{screen}");
}
