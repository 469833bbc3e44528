//! `proxy_latency`: what the fault proxy adds to a request outside the
//! outage, against a direct connection, interleaved (`scripts/bench.sh
//! proxy`).
//!
//! An upstream in this process answers every request at once with 200
//! "OK" (the floor: no service time to hide the proxy's); `storm proxy`
//! runs in front of it as its own process, its fault off. Round after
//! round, for each number of connections, closed loops on keep-alive
//! connections send GETs for a few seconds directly and through the proxy,
//! in alternating order, so that the host's drift falls on both alike.
//! Each line gives requests a second, latency p50 and p99 (µs, from the
//! request sent to its body read), and for the proxy its CPU a request
//! (user and system, from /proc). The last lines give the medians over
//! the rounds: latency added, and throughput through the proxy as a share
//! of the direct one.
//!
//! `cargo run --release --example proxy_latency -- --storm target/release/storm`

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// Measures the fault proxy's latency against a direct connection.
#[derive(Debug, Parser)]
struct Args {
    /// The storm binary whose `proxy` subcommand is measured.
    #[arg(long, default_value = "target/release/storm")]
    storm: PathBuf,
    /// Rounds, each measuring every path and number of connections once.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// How long each measurement sends, seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Numbers of connections, each a closed loop of one request at a
    /// time.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    connections: Vec<usize>,
}

/// The proxy's process, killed when dropped.
struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One measurement: requests answered and their latencies, µs.
struct Measured {
    requests: u64,
    latency: Histogram<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let upstream = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let direct = upstream.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(serve(upstream));
    let port = free_port()?;
    let through: SocketAddr = ([127, 0, 0, 1], port).into();
    let proxy = Proxy(
        Command::new(&args.storm)
            .args(["proxy", "--listen", &through.to_string(), "--upstream"])
            .arg(format!("http://{direct}/"))
            .args(["--fault", "stall", "--report-interval", "1h"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", args.storm.display()))?,
    );
    wait_answering(through).await?;
    let pid = proxy.0.id();
    println!("round connections path      req/s   p50_us   p99_us  proxy_cpu_us_per_req");
    let mut added: Vec<(usize, f64, f64, f64)> = Vec::new();
    for round in 1..=args.rounds {
        for &c in &args.connections {
            let mut paths = [("direct", direct), ("proxy", through)];
            if round % 2 == 0 {
                paths.reverse();
            }
            let mut got = Vec::new();
            for (name, addr) in paths {
                let ticks = cpu_ticks(pid);
                let m = measure(addr, c, Duration::from_secs(args.seconds)).await?;
                let cpu = (name == "proxy").then(|| {
                    let us = (cpu_ticks(pid) - ticks) as f64 * 1e6 / ticks_per_s();
                    us / m.requests.max(1) as f64
                });
                let rate = m.requests as f64 / args.seconds as f64;
                let (p50, p99) = (
                    m.latency.value_at_quantile(0.5),
                    m.latency.value_at_quantile(0.99),
                );
                println!(
                    "{round:>5} {c:>11} {name:<7} {rate:>9.0} {p50:>8} {p99:>8}  {}",
                    cpu.map_or("-".into(), |us| format!("{us:.1}"))
                );
                got.push((name, rate, p50 as f64, p99 as f64));
            }
            got.sort_by_key(|g| g.0);
            let (d, p) = (got[0], got[1]);
            added.push((c, p.2 - d.2, p.3 - d.3, p.1 / d.1));
        }
    }
    for &c in &args.connections {
        let mine: Vec<_> = added.iter().filter(|a| a.0 == c).collect();
        let median = |f: fn(&&(usize, f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = mine.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "median over {} rounds, {c} connection(s): added p50 {:.0} us, added p99 {:.0} us, \
             throughput through the proxy {:.2} of direct",
            mine.len(),
            median(|a| a.1),
            median(|a| a.2),
            median(|a| a.3)
        );
    }
    Ok(())
}

/// Answers every request at once with 200 "OK".
async fn serve(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|_req: Request<hyper::body::Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"OK"))))
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A port free a moment ago, for the proxy to listen on.
fn free_port() -> Result<u16, String> {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(socket.local_addr().map_err(|e| e.to_string())?.port())
}

/// Waits, at most 10 s, until a GET through `addr` is answered.
async fn wait_answering(addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if measure(addr, 1, Duration::from_millis(1)).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("the proxy at {addr} did not answer within 10 s"))
}

/// Closed loops on `connections` keep-alive connections to `addr` for
/// `length`: every request's latency.
async fn measure(
    addr: SocketAddr,
    connections: usize,
    length: Duration,
) -> Result<Measured, String> {
    let end = Instant::now() + length;
    let loops: Vec<_> = (0..connections)
        .map(|_| tokio::spawn(closed_loop(addr, end)))
        .collect();
    let mut total = Measured {
        requests: 0,
        latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
    };
    for one in loops {
        let m = one.await.map_err(|e| e.to_string())??;
        total.requests += m.requests;
        total.latency.add(&m.latency).map_err(|e| e.to_string())?;
    }
    Ok(total)
}

/// One connection sending a GET at a time until `end`.
async fn closed_loop(addr: SocketAddr, end: Instant) -> Result<Measured, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let mut m = Measured {
        requests: 0,
        latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
    };
    loop {
        let sent = Instant::now();
        let request = Request::get("/")
            .header("host", addr.to_string())
            .body(Empty::<Bytes>::new())
            .expect("a valid request");
        let answer = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        answer
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        m.latency
            .saturating_record(sent.elapsed().as_micros().max(1) as u64);
        m.requests += 1;
        if Instant::now() >= end {
            return Ok(m);
        }
    }
}

/// User and system CPU time of process `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the state.
    field(11) + field(12)
}

/// Clock ticks a second: Linux's USER_HZ, 100 on every architecture
/// the project builds for.
fn ticks_per_s() -> f64 {
    100.0
}
