//! `sleep_floor`: the server with a plain 100 ms sleep in place of the
//! latency model, to measure what the model costs per request
//! (`scripts/bench.sh peers`).
//!
//! It listens, accepts and serves HTTP/1.1 as `server` does (same
//! listener, accept loop, lanes, allocator, descriptor reserve and hyper
//! settings) and answers a GET of the API path with the same 200 "OK"
//! after `tokio::time::sleep` of the delay. Under the same load at the
//! server's base latency (`server --limit 1000000` keeps it at 100 ms),
//! the CPU the server takes beyond this program's is the model's: the
//! admission, the completion timer and the hop to the model's task.
//!
//! With a delay longer than the run (`--delay 1h`) it never answers, as
//! the server does not in a retry storm: `scripts/bench.sh storm` runs it
//! beside the server and `storm_floor` so that what the server costs
//! there splits into hyper's connection and the model's hold of each
//! request.
//!
//! `cargo run --release --example sleep_floor -- --listen 127.0.0.1:0`

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use retry_storm::cli::RuntimeArgs;
use retry_storm::model::server::ServerConfig;
use retry_storm::net::runtime::block_on;
use retry_storm::net::{floor, server};
use tokio::net::TcpStream;

// The server's allocator, so that the floor pays what the server pays.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Answers every GET of the API path with 200 OK after a plain sleep.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on (port 0 picks a free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:8070")]
    listen: SocketAddr,
    /// How long each request sleeps before its answer (the server's base
    /// delay).
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    delay: Duration,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let what = format!(
        "sleeps {} then answers",
        humantime::format_duration(args.delay)
    );
    let delay = args.delay;
    block_on(floor::serve(
        args.listen,
        args.runtime.threads,
        "sleep_floor",
        &what,
        move |stream| serve(stream, delay),
    ))
}

/// Serves each connection with hyper as the server does, answering
/// through [`answer`].
fn serve(stream: TcpStream, delay: Duration) {
    // The server's default, so idle connections are treated alike.
    let header_read_timeout = ServerConfig::default().header_read_timeout;
    tokio::spawn(async move {
        let service = service_fn(move |req| answer(req, delay));
        let _ = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .serve_connection(TokioIo::new(stream), service)
            .await;
    });
}

/// 200 "OK" for a GET of the API path after `delay`; 404 otherwise.
async fn answer(
    req: Request<hyper::body::Incoming>,
    delay: Duration,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() != server::API_PATH {
        let mut resp = Response::new(Full::new(Bytes::from_static(b"not found\n")));
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return Ok(resp);
    }
    tokio::time::sleep(delay).await;
    Ok(Response::new(Full::new(Bytes::from_static(b"OK"))))
}
