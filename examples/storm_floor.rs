//! `storm_floor`: the server with neither HTTP nor the latency model, to
//! measure what a retry storm's connections cost by themselves
//! (`scripts/bench.sh storm`).
//!
//! It listens, accepts and sets up each connection as `server` does (same
//! listener, accept loop, lanes, allocator and descriptor reserve), reads
//! whatever the client sends until the client closes, and never answers.
//! Under the fixed-retry storm every attempt times out at the real server
//! too, so the CPU this program takes under the same storm is the floor
//! under the server's: the runtime's and the kernel's cost of a connection
//! per attempt.
//!
//! `cargo run --release --example storm_floor -- --listen 127.0.0.1:0`

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use retry_storm::cli::RuntimeArgs;
use retry_storm::net::floor;
use retry_storm::net::runtime::block_on;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

// The server's allocator, so that the floor pays what the server pays.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Accepts connections and reads them until their clients close them;
/// never answers.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on (port 0 picks a free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:8070")]
    listen: SocketAddr,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    block_on(floor::serve(
        args.listen,
        args.runtime.threads,
        "storm_floor",
        "never answers",
        |stream| {
            tokio::spawn(drain(stream));
        },
    ))
}

/// Reads `stream` until its peer closes it (or resets it), then closes it.
async fn drain(mut stream: TcpStream) {
    let mut buf = [0u8; 1024];
    while let Ok(1..) = stream.read(&mut buf).await {}
}
