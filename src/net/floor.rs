//! What the benchmark floors (`examples/storm_floor.rs`,
//! `examples/sleep_floor.rs`) share with the server: its descriptor
//! reserve, listener, signals, lanes and accept loop, around a stand-in for
//! its work, so that the floor pays for everything the server pays for but
//! the part being measured.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::TcpStream;

use super::{accept, lanes, rlimit, server, signals};
use crate::report::output::say;

/// Serves on `addr` as the server does, on the lanes `threads` asks for,
/// handing each connection to `serve` on its lane, until SIGINT or
/// SIGTERM. `program` names the floor in warnings; `what` says what it
/// does, after its URL on the first line.
pub async fn serve<S>(
    addr: SocketAddr,
    threads: Option<u32>,
    program: &str,
    what: &str,
    serve: S,
) -> ExitCode
where
    S: Fn(TcpStream) + Send + Clone + 'static,
{
    let backlog = server::default_backlog();
    if let Some(warning) = rlimit::ensure_nofile(server::descriptors_needed(backlog), program) {
        eprintln!("{warning}");
    }
    let listener = match accept::listen(addr, backlog) {
        Ok(listener) => listener,
        Err(source) => {
            eprintln!("error: {}", server::BindError::Listen { addr, source });
            return ExitCode::from(2);
        }
    };
    let shutdown = signals::requested();
    match listener.local_addr() {
        Ok(bound) => say(format_args!(
            "listening on http://{bound}{}: {what}, backlog {backlog}",
            server::API_PATH
        )),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let errors = AtomicU64::new(0);
    let count = lanes::count(threads);
    server::accept_into_lanes(
        listener,
        &errors,
        shutdown,
        count,
        None,
        move |stream, _| serve(stream),
    )
    .await
    .stop();
    if signals::second_arrived() {
        signals::second();
    }
    // Failed accepts (out of descriptors, say) would make the figure wrong.
    let errors = errors.load(Ordering::Relaxed);
    if errors > 0 {
        eprintln!("warning: {errors} accepts failed");
    }
    ExitCode::SUCCESS
}
