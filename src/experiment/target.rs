//! A service of the user's, stormed in place of the project's server
//! (`--target URL`, a scenario's `target`): checked before any load (it
//! answers HTTP, and its outage can be caused), checked again before each
//! run, and named in the results. No project server runs: every case's
//! client goes to the URL, one case at a time, and what only the
//! project's server measures is not measured.

use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::time::Duration;

use hyper::Uri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::error::{StormError, io_err};
use super::outage::{Log, Ongoing, Outage};
use crate::model::timescale::compress;

/// How long a probe may take to be answered by a calm target: not
/// scaled, as a target's own times are not.
const CALM_ANSWER: Duration = Duration::from_secs(1);

/// The longest wait for a calm target before a run, and for its first
/// answer before any load.
const CALM_WITHIN: Duration = Duration::from_secs(300);

/// How the storm waits for a target's first answer before any load: each
/// GET may take 10 s; one taken in and not answered is tried again, for
/// at most [`CALM_WITHIN`], with a line every 30 s.
pub(super) const FIRST_ANSWER: Patience = Patience {
    each: Duration::from_secs(10),
    within: CALM_WITHIN,
    say_every: Duration::from_secs(30),
};

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

/// How long the storm waits for a target's first answer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Patience {
    /// How long each GET may take.
    pub(super) each: Duration,
    /// How long the whole wait may take.
    pub(super) within: Duration,
    /// How often a line says that it still waits.
    pub(super) say_every: Duration,
}

/// Why a GET had no answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum NoAnswer {
    /// The connection was made and the request sent, then nothing came
    /// within the limit: a target busy with work before it (a backlog),
    /// or stopped.
    Silent(Duration),
    /// No connection within the limit: nothing answers at that address
    /// (a firewall drops what is sent there), or its listen queue is full
    /// (the kernel drops a connection's first packet then).
    Unconnected(String, Duration),
    /// Anything else, each the user's to fix: a URL that cannot be used,
    /// a connection refused, closed without an answer, or an answer that
    /// is not HTTP.
    Failed(String),
}

impl fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoAnswer::Silent(limit) => write!(f, "no answer within {}", span(*limit)),
            NoAnswer::Unconnected(authority, limit) => {
                write!(f, "no connection to {authority} within {}", span(*limit))
            }
            NoAnswer::Failed(why) => f.write_str(why),
        }
    }
}

/// A duration as the terminal says it: `5 min`, `10 s`, `0.2 s`.
fn span(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 && d.as_secs().is_multiple_of(60) && d.subsec_nanos() == 0 {
        format!("{} min", d.as_secs() / 60)
    } else {
        format!("{s} s")
    }
}

/// One GET to `url`: its status line (any status will do), or why none
/// came within `limit`.
pub(super) async fn probe(url: &str, limit: Duration) -> Result<String, NoAnswer> {
    let (host, port, authority, path) = parts(url).map_err(NoAnswer::Failed)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let deadline = Instant::now() + limit;
    let connect = TcpStream::connect((host.as_str(), port));
    let mut stream = match tokio::time::timeout_at(deadline, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            return Err(NoAnswer::Failed(format!(
                "cannot connect to {authority}: {e}"
            )));
        }
        Err(_) => return Err(NoAnswer::Unconnected(authority, limit)),
    };
    let exchange = async {
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
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(answer) => answer.map_err(NoAnswer::Failed),
        Err(_) => Err(NoAnswer::Silent(limit)),
    }
}

/// What the wait for a first answer does after a GET that had none,
/// `elapsed` into the wait: tries again, first saying the line given if
/// it is time for one (`said`: when the last was said, none before the
/// first silence), or gives up, saying why. Silence is waited for, up to
/// `patience.within`, and so, once the target has been silent, is a
/// connection not made in time (its listen queue full); anything else
/// ends the wait at once.
fn after(
    no: NoAnswer,
    elapsed: Duration,
    said: &mut Option<Duration>,
    patience: &Patience,
) -> Result<Option<String>, String> {
    let waited = |why: String| match said {
        Some(_) => format!(
            "{why}, after {:.0} s waiting for its first answer",
            elapsed.as_secs_f64()
        ),
        None => why,
    };
    match no {
        NoAnswer::Silent(_) => {}
        NoAnswer::Unconnected(..) if said.is_some() => {}
        no => return Err(waited(no.to_string())),
    }
    if elapsed >= patience.within {
        return Err(format!(
            "no answer within {} of waiting (each GET given {}): still working through a \
             backlog, or stopped",
            span(patience.within),
            span(patience.each)
        ));
    }
    match *said {
        None => {
            *said = Some(elapsed);
            Ok(Some(format!(
                "it accepted the connection but has not answered within {}: still working \
                 through a backlog (a run before may have left it one), or stopped? Waiting \
                 for it, at most {} (the limit of the wait for a calm target)",
                span(patience.each),
                span(patience.within)
            )))
        }
        Some(at) if elapsed >= at + patience.say_every => {
            *said = Some(elapsed);
            Ok(Some(format!(
                "still no answer after {:.0} s; waiting at most {}",
                elapsed.as_secs_f64(),
                span(patience.within)
            )))
        }
        Some(_) => Ok(None),
    }
}

/// Waits for the first answer to a GET to `url`: a GET taken in and not
/// answered within `patience.each` is tried again, anew, for at most
/// `patience.within` in all, saying so through `say` at once and every
/// `patience.say_every`; any other failure ends the wait at once. The
/// first answer's status line, or why none came.
pub(super) async fn first_answer(
    url: &str,
    patience: Patience,
    say: &mut dyn FnMut(&str),
) -> Result<String, String> {
    let start = Instant::now();
    let mut said = None;
    loop {
        let limit = patience
            .each
            .min(patience.within.saturating_sub(start.elapsed()));
        let no = if limit.is_zero() {
            NoAnswer::Silent(limit)
        } else {
            match probe(url, limit).await {
                Ok(line) => return Ok(line),
                Err(no) => no,
            }
        };
        if let Some(line) = after(no, start.elapsed(), &mut said, &patience)? {
            say(&line);
        }
    }
}

/// Checks, before any load, that the outage can be caused and that the
/// target answers a GET, waiting for a first answer as `patience` says.
/// Either failing is the user's to fix: exit 2. A signal while it waits
/// (`shutdown`) ends the storm with nothing done.
pub(super) async fn check(
    url: &str,
    outage: &Outage,
    patience: Patience,
    shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Result<(), StormError> {
    outage
        .check()
        .map_err(|e| StormError::Target(format!("--outage {outage}: {e}")))?;
    let mut say = |line: &str| eprintln!("--target {url}: {line}");
    tokio::select! {
        answer = first_answer(url, patience, &mut say) => answer
            .map(drop)
            .map_err(|e| StormError::Target(format!("--target {url}: {e}"))),
        () = shutdown => Err(StormError::InterruptedBeforeLoad),
    }
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
