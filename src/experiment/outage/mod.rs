//! The outage a storm causes in a service it did not start (`--outage`,
//! or a scenario's `outage`), against a target named by URL (`--target`).
//!
//! Two kinds: `sigstop=PID`, a real SIGSTOP to the process and to every
//! descendant it has at the pause, and SIGCONT to each of them at the
//! resume ([`freeze`]); and a fault of a fault proxy the storm starts in
//! front of the target (`stall`, `blackhole`, `reset`, `status=CODE`,
//! `delay=D`: [`Fault`]), switched on for the pause and off at the resume.
//! Commands of the user's own (`exec`) are known by name, and refused as
//! not yet supported.

mod at_exit;
mod freeze;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use freeze::{Frozen, check_process};

use crate::model::fault::{FAULT_FORMS, FAULT_KINDS, Fault};

/// How the outage is caused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Outage {
    /// SIGSTOP to `pid` and its descendants at the pause, SIGCONT to the
    /// same processes at the resume.
    Sigstop {
        /// The process at the root of the stopped tree.
        pid: i32,
    },
    /// A fault of the fault proxy in front of the target, on for the pause.
    Proxy(Fault),
}

/// The kinds planned but not yet supported, as `--outage` names them.
const PLANNED: [&str; 1] = ["exec"];

/// What `--outage` takes, for messages.
fn taken() -> String {
    format!(
        "sigstop=PID (a process and its descendants, stopped for the pause), or a fault of a \
         proxy in front of the target: {FAULT_FORMS}"
    )
}

impl FromStr for Outage {
    type Err = String;

    fn from_str(s: &str) -> Result<Outage, String> {
        let (_, value) = s.split_once('=').unwrap_or((s, ""));
        let kind = s.split([',', '=']).next().unwrap_or("").trim();
        match kind {
            "sigstop" => {
                let pid: i32 = value.parse().map_err(|_| {
                    format!("'{s}': sigstop= takes a process id, such as sigstop=1234")
                })?;
                if pid <= 1 {
                    return Err(format!(
                        "'{s}': process {pid} cannot be stopped (0 and negative ids name \
                         groups of processes, 1 is init)"
                    ));
                }
                Ok(Outage::Sigstop { pid })
            }
            kind if FAULT_KINDS.contains(&kind) => s.parse().map(Outage::Proxy),
            kind if PLANNED.contains(&kind) => Err(format!(
                "'{s}': the outage '{kind}' is not yet supported; for now the outage is {}",
                taken()
            )),
            _ => Err(format!("'{s}': unknown outage; the outage is {}", taken())),
        }
    }
}

impl fmt::Display for Outage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outage::Sigstop { pid } => write!(f, "sigstop={pid}"),
            Outage::Proxy(fault) => write!(f, "{fault}"),
        }
    }
}

impl TryFrom<String> for Outage {
    type Error = String;

    fn try_from(s: String) -> Result<Outage, String> {
        s.parse()
    }
}

impl From<Outage> for String {
    fn from(outage: Outage) -> String {
        outage.to_string()
    }
}

impl Outage {
    /// What the outage does, in a sentence's words.
    pub fn describe(&self) -> String {
        match self {
            Outage::Sigstop { pid } => format!(
                "SIGSTOP to process {pid} and its descendants at the pause, SIGCONT to the \
                 same processes at the resume"
            ),
            Outage::Proxy(fault) => fault.describe(),
        }
    }

    /// Checks, before any load, that the outage can be caused: the
    /// process exists and may be signalled by this one, is neither this
    /// process nor one of its ancestors, and is not stopped already.
    /// A fault proxy's fault needs no check: the storm starts the proxy.
    pub(super) fn check(&self) -> Result<(), String> {
        match *self {
            Outage::Sigstop { pid } => check_process(pid),
            Outage::Proxy(_) => Ok(()),
        }
    }

    /// The fault, when the outage is a fault proxy's: the runs then go
    /// through proxies of their own, which the runner switches.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Outage::Proxy(fault) => Some(fault),
            Outage::Sigstop { .. } => None,
        }
    }

    /// Causes the outage; it lasts until the value returned is ended or
    /// dropped. Nothing for a fault proxy's fault: the runner switches its
    /// runs' proxies.
    pub(super) fn begin(&self) -> Result<Option<Ongoing>, String> {
        match *self {
            Outage::Sigstop { pid } => Frozen::stop(pid).map(|f| Some(Ongoing::Stopped(f))),
            Outage::Proxy(_) => Ok(None),
        }
    }
}

/// An outage in progress: ended by [`Ongoing::end`], or when dropped (an
/// error or a stop on the way), so that nothing stays down.
#[derive(Debug)]
pub(super) enum Ongoing {
    /// The processes stopped, in the order they were.
    Stopped(Frozen),
}

impl Ongoing {
    /// What was done, for `commands.txt`.
    pub(super) fn report(&self) -> String {
        match self {
            Ongoing::Stopped(frozen) => frozen.report(),
        }
    }

    /// Ends the outage.
    pub(super) fn end(self) {
        match self {
            Ongoing::Stopped(frozen) => frozen.thaw(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigstop_takes_a_process_id_and_reads_back_as_written() {
        let outage: Outage = "sigstop=4321".parse().unwrap();
        assert_eq!(outage, Outage::Sigstop { pid: 4321 });
        assert_eq!(outage.to_string(), "sigstop=4321");
        assert!(
            outage
                .describe()
                .contains("process 4321 and its descendants")
        );
    }

    #[test]
    fn groups_init_and_nonsense_are_refused() {
        for (text, said) in [
            ("sigstop=0", "cannot be stopped"),
            ("sigstop=-5", "cannot be stopped"),
            ("sigstop=1", "1 is init"),
            ("sigstop=", "takes a process id"),
            ("sigstop=12ab", "takes a process id"),
            ("sigstop", "takes a process id"),
        ] {
            let err = text.parse::<Outage>().unwrap_err();
            assert!(err.contains(said), "{text}: {err}");
        }
    }

    #[test]
    fn a_proxy_fault_is_an_outage_and_exec_is_not_yet_supported() {
        for text in [
            "stall",
            "blackhole,fraction=0.5",
            "reset",
            "status=503,retry-after=2s",
            "delay=2s",
        ] {
            let outage: Outage = text.parse().unwrap();
            assert_eq!(outage.to_string(), text);
            assert_eq!(outage.fault().unwrap().to_string(), text);
        }
        let err = "status=700".parse::<Outage>().unwrap_err();
        assert!(err.contains("from 200 to 599"), "{err}");
        let err = "exec".parse::<Outage>().unwrap_err();
        assert!(err.contains("not yet supported"), "{err}");
        assert!(err.contains("sigstop=PID"), "{err}");
        let err = "sigkill=3".parse::<Outage>().unwrap_err();
        assert!(err.contains("unknown outage"), "{err}");
    }
}
