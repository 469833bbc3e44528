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

use tokio::time::Instant;

use super::error::{StormError, io_err};
use super::outage::{Log, Ongoing, Outage};
use super::scenario::Case;
use super::storm::{Flags, Storm};
use crate::model::timescale::compress;
use crate::model::wire::Wire;
use crate::net::once::{self, Reply, Unanswered};
use crate::net::preflight;
use crate::net::target::{self as net_target, Target};

/// How long a probe may take to be answered by a calm target: not
/// scaled, as a target's own times are not.
const CALM_ANSWER: Duration = Duration::from_secs(1);

/// The longest wait for a calm target before a run, and for its first
/// answer before any load.
const CALM_WITHIN: Duration = Duration::from_secs(300);

/// How the storm waits for a target's first answer before any load: each
/// request may take 10 s; one taken in and not answered is tried again,
/// for at most [`CALM_WITHIN`], with a line every 30 s.
pub(super) const FIRST_ANSWER: Patience = Patience {
    each: Duration::from_secs(10),
    within: CALM_WITHIN,
    say_every: Duration::from_secs(30),
};

/// How each case's clients go on the wire, as their own flags say
/// (parsed by the client's own parser): the storm's own requests to the
/// target, its check before any load and its wait for calm before each
/// run, go the same way, so that an https, HTTP/2 or gRPC service is
/// asked as its clients will ask it.
#[derive(Debug, Clone, Default)]
pub(super) struct Wires(Vec<(String, Wire)>);

impl Wires {
    /// Each case's wire, its flags checked against `url` without sending
    /// anything (a method, header or certificate file that cannot be
    /// used is refused naming its case).
    pub(super) fn of(storm: &Storm, url: &str, flags: &dyn Flags) -> Result<Wires, StormError> {
        storm
            .scenario
            .cases
            .iter()
            .map(|case| {
                let wire = storm.client_config(case, 0, flags)?.wire;
                net_target::check_wire(url, &wire).map_err(|e| {
                    StormError::Flags(format!("case {}: client flags: {e}", case.name))
                })?;
                Ok((case.name.clone(), wire))
            })
            .collect::<Result<_, StormError>>()
            .map(Wires)
    }

    /// The wire of `case`'s clients (plain HTTP/1.1 for a case not known).
    pub(super) fn of_case(&self, case: &Case) -> Wire {
        self.0
            .iter()
            .find(|(name, _)| *name == case.name)
            .map(|(_, wire)| wire.clone())
            .unwrap_or_default()
    }

    /// The different wires, each with the first case that speaks it, in
    /// the cases' order.
    fn distinct(&self) -> Vec<(&str, &Wire)> {
        let mut seen: Vec<(&str, &Wire)> = Vec::new();
        for (name, wire) in &self.0 {
            if !seen.iter().any(|(_, w)| *w == wire) {
                seen.push((name, wire));
            }
        }
        seen
    }
}

/// How long the storm waits for a target's first answer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Patience {
    /// How long each request may take.
    pub(super) each: Duration,
    /// How long the whole wait may take.
    pub(super) within: Duration,
    /// How often a line says that it still waits.
    pub(super) say_every: Duration,
}

/// Why a request had no answer.
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
    /// Anything else, each the user's to fix: a connection refused,
    /// closed without an answer, an answer that is not HTTP, a TLS
    /// handshake that fails, a server that does not speak HTTP/2.
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

/// One request to `target`, as its clients' wire says: its answer (any
/// status will do, and any gRPC status), or why none came within
/// `limit`.
pub(super) async fn probe(target: &Target, limit: Duration) -> Result<Reply, NoAnswer> {
    once::send(target, limit).await.map_err(|no| match no {
        Unanswered::Unconnected => NoAnswer::Unconnected(target.authority.clone(), limit),
        Unanswered::Silent => NoAnswer::Silent(limit),
        Unanswered::Never(why) | Unanswered::Failed(why) => NoAnswer::Failed(why),
    })
}

/// What the wait for a first answer does after a request that had none,
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
            "no answer within {} of waiting (each request given {}): still working through a \
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

/// Waits for the first answer to a request to `target`: one taken in
/// and not answered within `patience.each` is tried again, anew, for at
/// most `patience.within` in all, saying so through `say` at once and
/// every `patience.say_every`; any other failure ends the wait at once.
/// The first answer, or why none came.
pub(super) async fn first_answer(
    target: &Target,
    patience: Patience,
    say: &mut dyn FnMut(&str),
) -> Result<Reply, String> {
    let start = Instant::now();
    let mut said = None;
    loop {
        let limit = patience
            .each
            .min(patience.within.saturating_sub(start.elapsed()));
        let no = if limit.is_zero() {
            NoAnswer::Silent(limit)
        } else {
            match probe(target, limit).await {
                Ok(reply) => return Ok(reply),
                Err(no) => no,
            }
        };
        if let Some(line) = after(no, start.elapsed(), &mut said, &patience)? {
            say(&line);
        }
    }
}

/// Checks, before any load, that the outage can be caused and that the
/// target answers a request of each of the wires `wires` (each case's
/// clients'), waiting for a first answer as `patience` says. A gRPC
/// method the target does not serve (UNIMPLEMENTED) is refused, as the
/// client refuses it. Any failing is the user's to fix: exit 2. A signal
/// while it waits (`shutdown`) ends the storm with nothing done.
pub(super) async fn check(
    url: &str,
    wires: &Wires,
    outage: &Outage,
    patience: Patience,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Result<(), StormError> {
    outage
        .check()
        .map_err(|e| StormError::Target(format!("--outage {outage}: {e}")))?;
    let refuse = |e: String| StormError::Target(format!("--target {url}: {e}"));
    let mut say = |line: &str| eprintln!("--target {url}: {line}");
    // One request per wire: cases that speak alike are asked once.
    let distinct = wires.distinct();
    let default = ("", &Wire::default());
    let asked = if distinct.is_empty() {
        vec![default]
    } else {
        distinct
    };
    for (case, wire) in asked {
        let target = Target::resolve(url, wire).await.map_err(refuse)?;
        let answer = tokio::select! {
            answer = first_answer(&target, patience, &mut say) => answer,
            () = shutdown.as_mut() => return Err(StormError::InterruptedBeforeLoad),
        };
        let reply = answer.map_err(refuse)?;
        if let Some(call) = &wire.grpc
            && let Some(why) = preflight::refused(&target, &reply, &call.method)
        {
            return Err(refuse(format!("case {case}: {why}")));
        }
    }
    Ok(())
}

/// Waits, before the runs `names` begin, until the target is calm: it
/// has answered a request, as `wire` says (their clients'), every second
/// (a tenth of that with `--quick`, as the protocol's phases), each
/// within [`CALM_ANSWER`], for `calm_for` (the protocol's `calm`,
/// likewise scaled) in a row; and says in `commands.txt` how long that
/// took. A run before may have left it a backlog of work for clients
/// that have gone, or connections its clients gave up still arriving
/// (the kernel retransmits for them after they close), and a warm-up
/// against that would measure no baseline. Fails after [`CALM_WITHIN`].
pub(super) async fn calm(
    url: &str,
    wire: &Wire,
    calm_for: Duration,
    time_scale: f64,
    names: &[String],
    commands: &mut File,
) -> Result<(), StormError> {
    let names = names.join(", ");
    let target = Target::resolve(url, wire)
        .await
        .map_err(|e| StormError::Child(format!("the target {url} before {names}: {e}")))?;
    let every = compress(Duration::from_secs(1), time_scale);
    let needed = compress(calm_for, time_scale);
    let start = Instant::now();
    let mut since: Option<Instant> = None;
    loop {
        let sent = Instant::now();
        match probe(&target, CALM_ANSWER).await {
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
        "# {names}: the target calm after {:.1} s (a request answered within {} s every {} s \
         for {} s)",
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
