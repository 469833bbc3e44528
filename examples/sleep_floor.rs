//! `sleep_floor`: the server with a plain 100 ms sleep in place of the
//! latency model, to measure what the model costs per request
//! (`scripts/bench.sh cpu`).
//!
//! It listens, accepts and serves HTTP/1.1 as `server` does (same
//! listener, accept loop, lanes, allocator, descriptor reserve and hyper
//! settings) and answers a GET of the API path with the same 200 "OK"
//! after `tokio::time::sleep` of the delay. Under the same load at the
//! server's base latency (`server --limit 1000000` keeps it at 100 ms),
//! the CPU the server takes beyond this program's is the model's: the
//! admission, the completion timer and the hop to the model's task.
//!
//! `cargo run --release --example sleep_floor -- --listen 127.0.0.1:0`

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
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
use retry_storm::net::{lanes, rlimit, server, signals};
use retry_storm::report::output::say;

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
    block_on(serve(args.listen, args.delay, args.runtime.threads))
}

async fn serve(addr: SocketAddr, delay: Duration, threads: Option<u32>) -> ExitCode {
    let backlog = server::default_backlog();
    if let Some(warning) = rlimit::ensure_nofile(server::descriptors_needed(backlog), "sleep_floor")
    {
        eprintln!("{warning}");
    }
    let listener = match server::listen(addr, backlog) {
        Ok(listener) => listener,
        Err(source) => {
            eprintln!("error: {}", server::BindError::Listen { addr, source });
            return ExitCode::from(2);
        }
    };
    let shutdown = signals::requested();
    match listener.local_addr() {
        Ok(bound) => say(format_args!(
            "listening on http://{bound}{}: sleeps {} then answers, backlog {backlog}",
            server::API_PATH,
            humantime::format_duration(delay)
        )),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let errors = AtomicU64::new(0);
    // The server's default, so idle connections are treated alike.
    let header_read_timeout = ServerConfig::default().header_read_timeout;
    let serve = move |stream| {
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(req, delay));
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    };
    let lanes =
        server::accept_into_lanes(listener, &errors, shutdown, lanes::count(threads), serve).await;
    lanes.stop();
    ExitCode::SUCCESS
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
