//! A service of the user's, stormed in place of the project's server
//! (`--target URL`, a scenario's `target`): checked before any load (it
//! answers HTTP, and its outage can be caused), checked again before each
//! run, and named in the results. No project server runs: every case's
//! client goes to the URL, one case at a time, and what only the
//! project's server measures is not measured.

use std::fs::File;
use std::io::Write;
use std::time::Duration;

use hyper::Uri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::error::{StormError, io_err};
use super::outage::{Log, Ongoing, Outage};
use crate::model::timescale::compress;

/// How long the target may take to answer before the storm starts.
const FIRST_ANSWER: Duration = Duration::from_secs(10);

/// How long a probe may take to be answered by a calm target: not
/// scaled, as a target's own times are not.
const CALM_ANSWER: Duration = Duration::from_secs(1);

/// The longest wait for a calm target before a run.
const CALM_WITHIN: Duration = Duration::from_secs(300);

/// The most bytes read looking for the status line.
const MAX_HEAD: usize = 8192;

/// Where a GET to `url` goes: host, port, authority (`HOST:PORT`) and
/// path; or why the URL cannot be used.
fn parts(url: &str) -> Result<(String, u16, String, String), String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("'{url}' is not a URL: {e}"))?;
    let (Some("http"), Some(authority), Some(host)) =
        (uri.scheme_str(), uri.authority(), uri.host())
    else {
        return Err(format!("'{url}' is not an http://host:port/path URL"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Ok((host.into(), port, authority.to_string(), path.into()))
}

/// Checks that `url` is an `http://host:port/path` URL.
pub(super) fn check_url(url: &str) -> Result<(), String> {
    parts(url).map(drop)
}

/// One GET to `url`: its status line (any status will do), or why none
/// came within `limit`.
pub(super) async fn probe(url: &str, limit: Duration) -> Result<String, String> {
    let (host, port, authority, path) = parts(url)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let exchange = async {
        let mut stream = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("cannot send a request to {authority}: {e}"))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.contains(&b'\n') && head.len() < MAX_HEAD {
            let n = stream
                .read(&mut buf)
                .await
                .map_err(|e| format!("no answer from {authority}: {e}"))?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&head);
        let line = text.lines().next().unwrap_or("").trim().to_string();
        match line {
            _ if line.starts_with("HTTP/") => Ok(line),
            _ if head.is_empty() => Err(format!(
                "{authority} closed the connection without an answer"
            )),
            _ => Err(format!("{authority} answered '{line}', not HTTP")),
        }
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| format!("no answer within {} s", limit.as_secs()))?
}

/// Checks, before any load, that the outage can be caused and that the
/// target answers a GET. Either failing is the user's to fix: exit 2.
pub(super) async fn check(url: &str, outage: &Outage) -> Result<(), StormError> {
    outage
        .check()
        .map_err(|e| StormError::Target(format!("--outage {outage}: {e}")))?;
    probe(url, FIRST_ANSWER)
        .await
        .map(drop)
        .map_err(|e| StormError::Target(format!("--target {url}: {e}")))
}

/// Waits, before the runs `names` begin, until the target is calm: it
/// has answered a GET every second (a tenth of that with `--quick`, as
/// the protocol's phases), each within [`CALM_ANSWER`], for `calm_for`
/// (the protocol's `calm`, likewise scaled) in a row; and says in
/// `commands.txt` how long that took. A run before may have left it a backlog of work for clients that
/// have gone, or connections its clients gave up still arriving (the
/// kernel retransmits for them after they close), and a warm-up against
/// that would measure no baseline. Fails after [`CALM_WITHIN`].
pub(super) async fn calm(
    url: &str,
    calm_for: Duration,
    time_scale: f64,
    names: &[String],
    commands: &mut File,
) -> Result<(), StormError> {
    let names = names.join(", ");
    let every = compress(Duration::from_secs(1), time_scale);
    let needed = compress(calm_for, time_scale);
    let start = Instant::now();
    let mut since: Option<Instant> = None;
    loop {
        let sent = Instant::now();
        match probe(url, CALM_ANSWER).await {
            Ok(_) => {
                let calm_since = *since.get_or_insert(sent);
                if sent - calm_since >= needed {
                    break;
                }
            }
            Err(e) if start.elapsed() >= CALM_WITHIN => {
                return Err(StormError::Child(format!(
                    "the target {url} was not calm before {names} within {} s: {e} (the \
                     run before may have left it overloaded)",
                    CALM_WITHIN.as_secs()
                )));
            }
            Err(_) => since = None,
        }
        tokio::time::sleep_until(sent + every).await;
    }
    writeln!(
        commands,
        "# {names}: the target calm after {:.1} s (a GET answered within {} s every {} s for {} s)",
        start.elapsed().as_secs_f64(),
        CALM_ANSWER.as_secs_f64(),
        every.as_secs_f64(),
        needed.as_secs_f64()
    )
    .map_err(io_err("write commands.txt"))
}

/// What `commands.txt` says of the target and its outage.
pub(super) fn commands_header(url: &str, outage: &Outage) -> String {
    format!(
        "# Target: {url}, a service the storm did not start; no project server runs.\n\
         # Outage: {outage} ({}).\n",
        outage.describe()
    )
}

/// Causes the outage of the runs `names`, which says in `commands.txt`
/// what it did (nothing for a fault proxy's fault: the runner switches
/// the runs' proxies).
pub(super) fn begin(
    cause: &Outage,
    names: &[&str],
    commands: &mut File,
) -> Result<Option<Ongoing>, StormError> {
    let names = names.join(", ");
    let log = Log::new(commands, &names).map_err(io_err("write commands.txt"))?;
    cause
        .begin(log)
        .map_err(|e| StormError::Child(format!("the outage of {names}: {e}")))
}

#[cfg(test)]
mod tests;
