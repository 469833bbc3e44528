//! The faults a fault proxy puts between clients and a service for an
//! outage (`--outage stall`, `status=503,retry-after=2s`, ...), and what it
//! does with each request while one is on. Pure: the proxy draws a number
//! per request and asks [`Fault::action`]; the network is the proxy's.
//!
//! A fault given to every request (the default) acts on connections too:
//! `stall` stops the proxy as SIGSTOP stops a process (nothing accepted,
//! read or written: the kernel completes handshakes into its listen queue
//! until it is full), `blackhole` does as much with a listen queue of one
//! (further connection attempts go unanswered), `reset` closes every
//! connection at once. A fault given to a fraction of requests acts on
//! those requests alone.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::model::grpc::Code;
use crate::model::units::parse_duration;

/// What the fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Requests held unforwarded until the fault ends, then forwarded.
    Stall,
    /// Requests swallowed: never forwarded, never answered.
    Blackhole,
    /// The request's connection reset, without an answer.
    Reset,
    /// The request answered with `code` by the proxy, unforwarded, with
    /// `Retry-After` (or gRPC's pushback) when given.
    Status {
        /// The status: HTTP's, or gRPC's.
        code: Status,
        /// The wait before a retry the answer asks for, if any.
        retry_after: Option<Duration>,
    },
    /// The request forwarded after this wait.
    Delay(Duration),
}

/// A fault and the share of requests it is given to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// The share of requests it is given to, in (0, 1]; 1 is every one.
    pub fraction: f64,
}

// A fraction is never NaN: parsing takes (0, 1] only.
impl Eq for Fault {}

/// What the proxy does with one request while the fault is on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Forward it as usual: the request is not among the fraction.
    Forward,
    /// Hold it unforwarded until the fault ends, then forward it.
    Hold,
    /// Never forward nor answer it; its connection stays silent.
    Swallow,
    /// Reset its connection without an answer.
    Reset,
    /// Answer it with `code` (and `Retry-After`, if given), unforwarded:
    /// as [`Status::reply`] says for the request.
    Answer {
        /// The status.
        code: Status,
        /// The wait before a retry the answer asks for, if any.
        retry_after: Option<Duration>,
    },
    /// Forward it after this wait.
    Delay(Duration),
}

/// The status a `status=` fault answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// An HTTP status, 200 to 599 (`status=503`).
    Http(u16),
    /// A gRPC status, by its name (`status=unavailable`).
    Grpc(Code),
}

/// The answer the proxy writes for a `status=` fault, by the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// An HTTP answer with this status (and `Retry-After`).
    Http(u16),
    /// gRPC's Trailers-Only answer: HTTP 200, `content-type:
    /// application/grpc`, this `grpc-status` (and
    /// `grpc-retry-pushback-ms`), no message.
    TrailersOnly(Code),
}

impl Status {
    /// The answer to a request, gRPC (`content-type: application/grpc`)
    /// or not. A gRPC status answers a gRPC request as a gRPC server
    /// does (Trailers-Only), and any other request with the HTTP status
    /// [`http_of`] gives it. An HTTP status answers every request as it
    /// is, a gRPC one too: it is what a hop that knows nothing of gRPC (a
    /// load balancer's 503) sends, and a gRPC client maps it to its code
    /// itself ([`Code::from_http`]: 503 is `UNAVAILABLE` either way).
    pub fn reply(self, grpc_request: bool) -> Reply {
        match self {
            Status::Http(code) => Reply::Http(code),
            Status::Grpc(code) if grpc_request => Reply::TrailersOnly(code),
            Status::Grpc(code) => Reply::Http(http_of(code)),
        }
    }
}

impl fmt::Display for Status {
    /// As `status=` takes it: `503`, `resource-exhausted`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Http(code) => write!(f, "{code}"),
            Status::Grpc(code) => f.write_str(&code.name().to_ascii_lowercase().replace('_', "-")),
        }
    }
}

/// The HTTP status that stands for gRPC's `code` to a client that does
/// not speak gRPC: the mapping of `google/rpc/code.proto` (which
/// grpc-gateway answers by): `UNAVAILABLE` 503, `RESOURCE_EXHAUSTED`
/// 429, `DEADLINE_EXCEEDED` 504, `CANCELLED` 499, ...
pub fn http_of(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::Cancelled => 499,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::DeadlineExceeded => 504,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::PermissionDenied => 403,
        Code::Unauthenticated => 401,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
    }
}

/// The fault kinds, as `--outage` names them.
pub const FAULT_KINDS: [&str; 5] = ["stall", "blackhole", "reset", "status", "delay"];

/// What a fault is written as, for messages.
pub const FAULT_FORMS: &str = "stall, blackhole, reset, status=CODE[,retry-after=D] (CODE an HTTP \
                               status or a gRPC status's name, such as unavailable) or delay=D, \
                               each optionally followed by ,fraction=F";

impl Fault {
    /// The fault is given to every request, and so acts on connections as
    /// well (see the module's documentation).
    pub fn whole(&self) -> bool {
        self.fraction >= 1.0
    }

    /// While on, nothing is accepted, read or written: `stall` or
    /// `blackhole` given to every request.
    pub fn stops_connections(&self) -> bool {
        self.whole() && matches!(self.kind, FaultKind::Stall | FaultKind::Blackhole)
    }

    /// While on, the listen queue holds one connection: `blackhole` given
    /// to every request.
    pub fn shuts_listen_queue(&self) -> bool {
        self.whole() && self.kind == FaultKind::Blackhole
    }

    /// While on, every connection is reset: `reset` given to every request.
    pub fn resets_connections(&self) -> bool {
        self.whole() && self.kind == FaultKind::Reset
    }

    /// What to do with a request while the fault is on, given `draw`, a
    /// number drawn uniformly from [0, 1) for it: it is among the fraction
    /// when `draw` is below the fraction.
    pub fn action(&self, draw: f64) -> Action {
        if draw >= self.fraction {
            return Action::Forward;
        }
        match self.kind {
            FaultKind::Stall => Action::Hold,
            FaultKind::Blackhole => Action::Swallow,
            FaultKind::Reset => Action::Reset,
            FaultKind::Status { code, retry_after } => Action::Answer { code, retry_after },
            FaultKind::Delay(d) => Action::Delay(d),
        }
    }

    /// What the fault does, in a sentence's words.
    pub fn describe(&self) -> String {
        let what = match self.kind {
            FaultKind::Stall if self.whole() => {
                "the proxy stalls: nothing accepted, read or written (connections wait in its \
                 listen queue), requests it had read answered once it ends"
                    .to_string()
            }
            FaultKind::Stall => "held unforwarded until the outage ends".to_string(),
            FaultKind::Blackhole if self.whole() => {
                "the proxy goes dark: connection attempts unanswered, nothing read or written on \
                 open connections"
                    .to_string()
            }
            FaultKind::Blackhole => "swallowed, never forwarded nor answered".to_string(),
            FaultKind::Reset if self.whole() => {
                "every connection reset at once, new ones as they come".to_string()
            }
            FaultKind::Reset => "their connections reset without an answer".to_string(),
            FaultKind::Status {
                code: Status::Http(code),
                retry_after,
            } => {
                let hint = retry_after.map_or(String::new(), |d| {
                    format!(" and Retry-After {}", crate::policy::format_retry_after(d))
                });
                format!("answered {code}{hint} by the proxy, unforwarded")
            }
            FaultKind::Status {
                code: Status::Grpc(code),
                retry_after,
            } => {
                let hint = retry_after.map_or(String::new(), |d| {
                    format!(" and a pushback of {} ms", d.as_millis())
                });
                format!(
                    "answered {code}{hint} by the proxy, unforwarded (gRPC requests Trailers-Only, \
                     others HTTP {})",
                    http_of(code)
                )
            }
            FaultKind::Delay(d) => format!("forwarded {} late", humantime::format_duration(d)),
        };
        if self.whole() {
            format!("every request through the fault proxy: {what}")
        } else {
            format!(
                "{} % of requests through the fault proxy, drawn one by one: {what}",
                self.fraction * 100.0
            )
        }
    }
}

/// The proxy's draws, one a request read while the fault is on, from a
/// seeded stream: the same seed and the same requests in the same order
/// give the same actions.
#[derive(Debug, Clone)]
pub struct Draws(Xoshiro256PlusPlus);

impl Draws {
    /// The draws of `seed`.
    pub fn new(seed: u64) -> Draws {
        Draws(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// What `fault` does with the next request: [`Fault::action`] of the
    /// next number drawn.
    pub fn action(&mut self, fault: &Fault) -> Action {
        fault.action(self.0.random::<f64>())
    }
}

/// Parses a retry-after wait: a duration (`2s`) or plain seconds (`2`).
fn wait(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => {
            Duration::try_from_secs_f64(s).map_err(|e| e.to_string())
        }
        Ok(_) => Err(format!("'{text}' is not a wait")),
        Err(_) => parse_duration(text),
    }
}

/// Parses the status of `status=`: an HTTP status from 200 to 599, or a
/// gRPC status's name (not its number, which would read as HTTP's).
fn status(text: &str) -> Result<Status, String> {
    let why = "status= takes an HTTP status from 200 to 599, such as status=503, or a gRPC \
               status's name, such as status=unavailable";
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u16>() {
            Ok(code @ 200..=599) => Ok(Status::Http(code)),
            _ => Err(why.to_string()),
        };
    }
    text.parse::<Code>()
        .map(Status::Grpc)
        .map_err(|_| why.to_string())
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let mut parts = s.split(',').map(str::trim);
        let head = parts.next().unwrap_or("");
        let (name, value) = head.split_once('=').unwrap_or((head, ""));
        let mut kind = match (name, value) {
            ("stall", "") => FaultKind::Stall,
            ("blackhole", "") => FaultKind::Blackhole,
            ("reset", "") => FaultKind::Reset,
            ("stall" | "blackhole" | "reset", _) => {
                return Err(format!("'{s}': {name} takes no value"));
            }
            ("status", code) => FaultKind::Status {
                code: status(code).map_err(|e| format!("'{s}': {e}"))?,
                retry_after: None,
            },
            ("delay", d) => FaultKind::Delay(
                parse_duration(d).map_err(|e| format!("'{s}': delay= takes a duration: {e}"))?,
            ),
            _ => return Err(format!("'{s}': unknown fault; a fault is {FAULT_FORMS}")),
        };
        let mut fraction = None;
        for part in parts {
            match part.split_once('=') {
                Some(("fraction", f)) if fraction.is_none() => match f.parse::<f64>() {
                    Ok(f) if f > 0.0 && f <= 1.0 => fraction = Some(f),
                    _ => {
                        return Err(format!(
                            "'{s}': fraction= takes a share of requests above 0 and at most 1, \
                             such as fraction=0.3"
                        ));
                    }
                },
                Some(("retry-after", d)) => match &mut kind {
                    FaultKind::Status { retry_after, .. } if retry_after.is_none() => {
                        *retry_after = Some(wait(d).map_err(|e| {
                            format!("'{s}': retry-after= takes a duration or seconds: {e}")
                        })?);
                    }
                    FaultKind::Status { .. } => {
                        return Err(format!("'{s}': retry-after is given twice"));
                    }
                    _ => {
                        return Err(format!(
                            "'{s}': retry-after applies to status=CODE only (the proxy's own \
                             answers)"
                        ));
                    }
                },
                Some(("fraction", _)) => return Err(format!("'{s}': fraction is given twice")),
                _ => {
                    return Err(format!(
                        "'{s}': '{part}' is not an option of a fault (fraction=F, and \
                         retry-after=D for status=CODE)"
                    ));
                }
            }
        }
        Ok(Fault {
            kind,
            fraction: fraction.unwrap_or(1.0),
        })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            FaultKind::Stall => write!(f, "stall")?,
            FaultKind::Blackhole => write!(f, "blackhole")?,
            FaultKind::Reset => write!(f, "reset")?,
            FaultKind::Status { code, retry_after } => {
                write!(f, "status={code}")?;
                if let Some(d) = retry_after {
                    write!(f, ",retry-after={}", humantime::format_duration(d))?;
                }
            }
            FaultKind::Delay(d) => write!(f, "delay={}", humantime::format_duration(d))?,
        }
        if !self.whole() {
            write!(f, ",fraction={}", self.fraction)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(s: &str) -> Fault {
        s.parse().unwrap()
    }

    #[test]
    fn each_kind_reads_back_as_written() {
        for text in [
            "stall",
            "blackhole",
            "reset",
            "status=503",
            "status=429,retry-after=2s",
            "status=503,retry-after=500ms,fraction=0.25",
            "delay=2s",
            "delay=150ms,fraction=0.5",
            "stall,fraction=0.3",
            "status=unavailable",
            "status=resource-exhausted,retry-after=2s,fraction=0.5",
        ] {
            assert_eq!(fault(text).to_string(), text);
        }
        assert_eq!(
            fault("status=503, fraction=0.3 ,retry-after=2"),
            Fault {
                kind: FaultKind::Status {
                    code: Status::Http(503),
                    retry_after: Some(Duration::from_secs(2)),
                },
                fraction: 0.3,
            }
        );
        assert_eq!(fault("delay=2s,fraction=1").to_string(), "delay=2s");
    }

    #[test]
    fn bad_faults_say_what_is_wrong() {
        for (text, said) in [
            ("status=99", "from 200 to 599"),
            ("status=600", "from 200 to 599"),
            ("status", "from 200 to 599"),
            ("status=14", "gRPC status's name"),
            ("status=busy", "gRPC status's name"),
            ("status=unavailable,retry-after=x", "duration or seconds"),
            ("delay=soon", "takes a duration"),
            ("stall=2s", "takes no value"),
            ("stall,fraction=0", "above 0 and at most 1"),
            ("stall,fraction=1.5", "above 0 and at most 1"),
            ("stall,fraction=0.2,fraction=0.3", "given twice"),
            ("delay=1s,retry-after=2s", "status=CODE only"),
            ("status=503,retry-after=1s,retry-after=2s", "given twice"),
            ("status=503,retry-after=-1", "duration or seconds"),
            ("reset,often", "not an option"),
            ("drop", "unknown fault"),
        ] {
            let err = text.parse::<Fault>().unwrap_err();
            assert!(err.contains(said), "{text}: {err}");
        }
    }

    #[test]
    fn a_request_is_among_the_fraction_when_its_draw_is_below_it() {
        let f = fault("status=503,retry-after=1s,fraction=0.3");
        let answer = Action::Answer {
            code: Status::Http(503),
            retry_after: Some(Duration::from_secs(1)),
        };
        assert_eq!(f.action(0.0), answer);
        assert_eq!(f.action(0.299), answer);
        assert_eq!(f.action(0.3), Action::Forward);
        assert_eq!(f.action(0.999), Action::Forward);
        // Given to every request, none escapes it.
        assert_eq!(fault("stall").action(0.999_999), Action::Hold);
        assert_eq!(fault("blackhole").action(0.5), Action::Swallow);
        assert_eq!(fault("reset").action(0.5), Action::Reset);
        assert_eq!(
            fault("delay=2s").action(0.5),
            Action::Delay(Duration::from_secs(2))
        );
    }

    #[test]
    fn draws_give_a_fraction_its_share_the_same_for_the_same_seed() {
        let f = fault("status=503,fraction=0.5");
        let answered = |seed: u64| {
            let mut draws = Draws::new(seed);
            (0..10_000)
                .map(|_| draws.action(&f))
                .filter(|a| *a != Action::Forward)
                .count()
        };
        let share = answered(7);
        assert!((4_800..5_200).contains(&share), "{share}");
        assert_eq!(answered(7), share);
        assert_ne!(answered(8), share);
        let mut draws = Draws::new(1);
        assert!((0..100).all(|_| draws.action(&fault("reset")) == Action::Reset));
    }

    #[test]
    fn only_whole_faults_act_on_connections() {
        let acts = |s: &str| {
            let f = fault(s);
            (
                f.stops_connections(),
                f.shuts_listen_queue(),
                f.resets_connections(),
            )
        };
        assert_eq!(acts("stall"), (true, false, false));
        assert_eq!(acts("blackhole"), (true, true, false));
        assert_eq!(acts("reset"), (false, false, true));
        assert_eq!(acts("status=503"), (false, false, false));
        assert_eq!(acts("delay=1s"), (false, false, false));
        assert_eq!(acts("stall,fraction=0.5"), (false, false, false));
        assert_eq!(acts("blackhole,fraction=0.5"), (false, false, false));
        assert_eq!(acts("reset,fraction=0.5"), (false, false, false));
    }

    #[test]
    fn grpc_statuses_are_read_by_name_in_any_case_with_hyphens_or_underscores() {
        for (text, code) in [
            ("status=unavailable", Code::Unavailable),
            ("status=UNAVAILABLE", Code::Unavailable),
            ("status=resource-exhausted", Code::ResourceExhausted),
            ("status=resource_exhausted", Code::ResourceExhausted),
            ("status=deadline-exceeded", Code::DeadlineExceeded),
        ] {
            assert_eq!(
                fault(text).kind,
                FaultKind::Status {
                    code: Status::Grpc(code),
                    retry_after: None
                },
                "{text}"
            );
        }
        // Today's meaning of a number is kept: an HTTP status.
        assert_eq!(
            fault("status=503,retry-after=1500ms").action(0.0),
            Action::Answer {
                code: Status::Http(503),
                retry_after: Some(Duration::from_millis(1_500)),
            }
        );
    }

    #[test]
    fn a_grpc_status_answers_grpc_trailers_only_and_others_by_its_http_status() {
        let unavailable = Status::Grpc(Code::Unavailable);
        assert_eq!(
            unavailable.reply(true),
            Reply::TrailersOnly(Code::Unavailable)
        );
        assert_eq!(unavailable.reply(false), Reply::Http(503));
        let exhausted = Status::Grpc(Code::ResourceExhausted);
        assert_eq!(
            exhausted.reply(true),
            Reply::TrailersOnly(Code::ResourceExhausted)
        );
        assert_eq!(exhausted.reply(false), Reply::Http(429));
        // An HTTP status goes as it is, to gRPC requests too; their
        // clients map it (503 is UNAVAILABLE, 500 UNKNOWN).
        assert_eq!(Status::Http(503).reply(true), Reply::Http(503));
        assert_eq!(Status::Http(500).reply(false), Reply::Http(500));
    }

    #[test]
    fn grpc_codes_map_to_http_as_google_rpc_code_says() {
        for (code, http) in [
            (Code::Ok, 200),
            (Code::Cancelled, 499),
            (Code::Unknown, 500),
            (Code::InvalidArgument, 400),
            (Code::DeadlineExceeded, 504),
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::PermissionDenied, 403),
            (Code::ResourceExhausted, 429),
            (Code::FailedPrecondition, 400),
            (Code::Aborted, 409),
            (Code::OutOfRange, 400),
            (Code::Unimplemented, 501),
            (Code::Internal, 500),
            (Code::Unavailable, 503),
            (Code::DataLoss, 500),
            (Code::Unauthenticated, 401),
        ] {
            assert_eq!(http_of(code), http, "{code}");
        }
        // Where both directions are defined for the statuses a storm
        // sees, they meet: 503 and UNAVAILABLE, 401 and UNAUTHENTICATED.
        for code in [
            Code::Unavailable,
            Code::Unauthenticated,
            Code::PermissionDenied,
        ] {
            assert_eq!(Code::from_http(http_of(code)), code);
        }
    }

    #[test]
    fn descriptions_name_the_share_and_the_answer() {
        let grpc = fault("status=unavailable,retry-after=250ms").describe();
        assert!(
            grpc.contains("answered UNAVAILABLE and a pushback of 250 ms")
                && grpc.contains("others HTTP 503"),
            "{grpc}"
        );
        assert!(
            fault("status=503,retry-after=2s,fraction=0.3")
                .describe()
                .starts_with("30 % of requests")
        );
        assert!(
            fault("status=503,retry-after=2s")
                .describe()
                .contains("answered 503 and Retry-After 2 by the proxy")
        );
        assert!(fault("stall").describe().contains("listen queue"));
    }
}
