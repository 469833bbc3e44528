//! Scenario files: the unit of an experiment. A scenario names the seed,
//! optionally the engine, the protocol's phases, and the cases compared,
//! each as the flags of its client and, optionally, of its server:
//!
//! ```toml
//! seed = 2014
//! engine = "sim"          # optional: "real" (the default) or "sim"
//! runs = 30               # optional: repetitions of every case, seeds
//!                         # 2014, 2015, ... (default 1)
//!
//! [protocol]              # optional, and so is each of its keys
//! warmup = "20s"
//! pause = "20s"
//! observe = "60s"
//! report_interval = "5s"
//! tail = "60s"            # clients run on after the window, for the
//!                         # recovery-time distribution
//!
//! [[case]]
//! name = "fixed"
//! client = "--strategy fixed"
//!
//! [[case]]
//! name = "shedding"
//! client = "--strategy fixed"
//! server = "--shed-above 200"
//!
//! [[case]]                # a chain: the client, its tiers from the
//! name = "chain"          # client inward, then the case's server, the
//! client = "--strategy fixed --max-attempts 3"     # backend
//! server = "--fail-rate 1"
//! pause = 1               # optional: stop tier 1, not the backend
//! [[case.tier]]
//! server = "--base-delay 10ms"
//! client = "--strategy fixed --max-attempts 3 --timeout 1s"
//! ```
//!
//! A scenario may storm a service of the user's instead of the project's
//! server: `target = "http://HOST:PORT/PATH"` and `outage = "sigstop=PID"`
//! at the top (or `freeze=CGROUP_DIR`, or `exec` with `outage_start` and
//! `outage_end`, its commands: see [`super::outage`]); its cases then have
//! client flags only.
//!
//! Every results folder holds the scenario that made it, and any storm
//! command line can print its own.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::outage::Outage;
use crate::model::units::parse_duration;
use crate::net::target::check_url;

/// Which engine runs an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Real processes over loopback, SIGSTOP and SIGCONT, in real time.
    Real,
    /// The discrete-event engine, in virtual time.
    Sim,
}

impl Engine {
    /// The name in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Real => "real",
            Engine::Sim => "sim",
        }
    }
}

/// The storm protocol's phases, at full scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocol {
    /// Warm-up before the server is stopped.
    pub warmup: Duration,
    /// How long the server stays stopped.
    pub pause: Duration,
    /// Observation after the resume: a recovery must start within it.
    pub observe: Duration,
    /// The client's report interval: the verdict's unit.
    pub report_interval: Duration,
    /// How long the clients run on after the observation window, so that a
    /// recovery that starts after it still shows in the recovery-time
    /// distribution. The verdict does not read it.
    pub tail: Duration,
    /// Against a target, how long it must answer promptly, without a
    /// break, before each run begins (a run before may have left it a
    /// backlog). The project's own server starts afresh for each run and
    /// needs none.
    pub calm: Duration,
}

/// How long a target must be calm before each run, unless told.
pub const DEFAULT_CALM: Duration = Duration::from_secs(30);

impl Default for Protocol {
    /// The classic experiment: 20 s, 20 s, 60 s, reports every 5 s.
    fn default() -> Self {
        Protocol {
            warmup: Duration::from_secs(20),
            pause: Duration::from_secs(20),
            observe: Duration::from_secs(60),
            report_interval: Duration::from_secs(5),
            tail: Duration::from_secs(60),
            calm: DEFAULT_CALM,
        }
    }
}

/// One compared configuration: a client, and the server it runs against,
/// directly or through a chain of tiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The case's name: its files in the results folder are named after it.
    pub name: String,
    /// The client's flags.
    pub client: Vec<String>,
    /// The server's flags: the backend's, behind any tiers.
    pub server: Vec<String>,
    /// The tiers between the client and the backend, from the client
    /// inward.
    pub tiers: Vec<Tier>,
    /// Which tier the outage stops, counting from 1 at the client's side
    /// (`None`: the backend).
    pub pause: Option<u32>,
}

/// A tier of a chain: a server whose handler calls the next tier inward
/// under a client policy of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    /// The tier's server flags (its own work and defences, and what it
    /// passes inward: `--propagate-deadline`, `--propagate-cancel`).
    pub server: Vec<String>,
    /// Its call's client flags (policy and timeout), as `--call-client`
    /// takes them.
    pub client: Vec<String>,
}

impl Case {
    /// A case of a client against a server, with no tiers between.
    pub fn direct(name: String, client: Vec<String>, server: Vec<String>) -> Case {
        Case {
            name,
            client,
            server,
            tiers: Vec::new(),
            pause: None,
        }
    }
}

/// A whole experiment: the cases compared, under one protocol and seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// Seed of every client (each case gets the same); repetition `i` of a
    /// case uses `seed + i`.
    pub seed: u64,
    /// The engine, if the scenario names one.
    pub engine: Option<Engine>,
    /// Repetitions of every case, if the scenario names them (else one).
    pub runs: Option<u32>,
    /// A service of the user's that every case's client goes to, in place
    /// of the project's server (`--target`).
    pub target: Option<String>,
    /// How the outage is caused in the target (`--outage`).
    pub outage: Option<Outage>,
    /// The protocol.
    pub protocol: Protocol,
    /// The cases, in order.
    pub cases: Vec<Case>,
}

/// Why a scenario cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

/// The file's form, before its values are checked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    engine: Option<Engine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outage_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outage_end: Option<String>,
    #[serde(default)]
    protocol: ProtocolFile,
    #[serde(rename = "case", default)]
    cases: Vec<CaseFile>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProtocolFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    warmup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    observe: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    report_interval: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    calm: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    name: String,
    #[serde(default)]
    client: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pause: Option<u32>,
    #[serde(rename = "tier", default, skip_serializing_if = "Vec::is_empty")]
    tiers: Vec<TierFile>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierFile {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    server: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    client: String,
}

/// Splits a flags string as a shell would (quotes group words).
pub fn split_flags(flags: &str) -> Result<Vec<String>, String> {
    shlex::split(flags).ok_or_else(|| format!("unbalanced quotes in '{flags}'"))
}

/// Joins flags into one string that [`split_flags`] gives back.
pub fn join_flags(flags: &[String]) -> String {
    shlex::try_join(flags.iter().map(String::as_str)).unwrap_or_else(|_| flags.join(" "))
}

/// Writes a duration the way scenario files and flags take it.
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A protocol duration from the file, or `default`; only the pause may be
/// zero.
fn duration(key: &str, value: Option<&str>, default: Duration) -> Result<Duration, ScenarioError> {
    let Some(text) = value else {
        return Ok(default);
    };
    match parse_duration(text) {
        Ok(d) if d.is_zero() && key != "pause" && key != "tail" => Err(ScenarioError(format!(
            "protocol.{key}: must be longer than 0"
        ))),
        Ok(d) => Ok(d),
        Err(e) => Err(ScenarioError(format!("protocol.{key}: {e}"))),
    }
}

/// The longest phase of the protocol: a day. A virtual run of such phases
/// takes seconds to a minute, a real one the day.
pub const MAX_PHASE: Duration = Duration::from_secs(86_400);

/// The most repetitions of a case, from the flag (`--runs`) or the file.
pub const MAX_RUNS: u32 = 100_000;

/// The most report intervals in one run: each is a row of every file.
pub const MAX_INTERVALS: u64 = 100_000;

impl Protocol {
    /// Checks that runs of this protocol end in reasonable time and can
    /// give a verdict, whether it came from flags or a file: each phase
    /// at most [`MAX_PHASE`], at most [`MAX_INTERVALS`] report intervals,
    /// a warm-up of at least two intervals (the baseline leaves the first
    /// out), and an observation window of at least one.
    pub fn check(&self) -> Result<(), ScenarioError> {
        let phases = [
            ("warmup", self.warmup),
            ("pause", self.pause),
            ("observe", self.observe),
            ("report_interval", self.report_interval),
            ("tail", self.tail),
            ("calm", self.calm),
        ];
        for (key, d) in phases {
            if d > MAX_PHASE {
                return Err(ScenarioError(format!(
                    "{key} (--{}, protocol.{key}): {} is longer than a day, the longest \
                     phase taken",
                    key.replace('_', "-"),
                    format_duration(d)
                )));
            }
        }
        let r = self.report_interval;
        let run = self.warmup + self.pause + self.observe + self.tail + r * 2;
        if run.as_nanos() / r.as_nanos().max(1) > u128::from(MAX_INTERVALS) {
            return Err(ScenarioError(format!(
                "report_interval (--report-interval): {} makes over {MAX_INTERVALS} \
                 intervals of a {} run; report less often",
                format_duration(r),
                format_duration(run)
            )));
        }
        if self.warmup < r * 2 {
            return Err(ScenarioError(format!(
                "warmup (--warmup): {} is shorter than two report intervals ({}): the \
                 baseline, the warm-up's mean OK/s without its first interval, would \
                 have no interval",
                format_duration(self.warmup),
                format_duration(r * 2)
            )));
        }
        if self.observe < r {
            return Err(ScenarioError(format!(
                "observe (--observe): {} is shorter than a report interval ({}): no \
                 recovery could be seen within it",
                format_duration(self.observe),
                format_duration(r)
            )));
        }
        Ok(())
    }
}

/// Names a case may not take: the stems of the results folder's own
/// files (`goodput.svg`, the chart of every case's goodput, and
/// `recovery.svg` beside each case's `NAME.svg`; the summaries, the
/// scenario, the commands, a shard's manifest, a sweep's tables and maps).
const RESERVED: [&str; 9] = [
    "goodput", "recovery", "summary", "scenario", "commands", "shard", "critical", "phase",
    "heatmap",
];

/// The longest case name: with its run's number and a file's suffix it
/// must still name a file (255 bytes on most file systems).
const MAX_NAME: usize = 100;

/// Whether a case name can name its files: letters, digits, `.`, `_`,
/// `+` and `-`, not starting with a dot.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
}

impl Scenario {
    /// Reads a scenario from TOML text.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let file: File = toml::from_str(text).map_err(|e| ScenarioError(e.to_string()))?;
        let defaults = Protocol::default();
        let p = &file.protocol;
        let protocol = Protocol {
            warmup: duration("warmup", p.warmup.as_deref(), defaults.warmup)?,
            pause: duration("pause", p.pause.as_deref(), defaults.pause)?,
            observe: duration("observe", p.observe.as_deref(), defaults.observe)?,
            report_interval: duration(
                "report_interval",
                p.report_interval.as_deref(),
                defaults.report_interval,
            )?,
            tail: duration("tail", p.tail.as_deref(), defaults.tail)?,
            calm: duration("calm", p.calm.as_deref(), defaults.calm)?,
        };
        let cases = file
            .cases
            .into_iter()
            .map(|c| {
                let flags = |what: &str, text: &str| {
                    split_flags(text)
                        .map_err(|e| ScenarioError(format!("case {}: {what}: {e}", c.name)))
                };
                let tiers = c
                    .tiers
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        Ok(Tier {
                            server: flags(&format!("tier {}: server", i + 1), &t.server)?,
                            client: flags(&format!("tier {}: client", i + 1), &t.client)?,
                        })
                    })
                    .collect::<Result<Vec<Tier>, ScenarioError>>()?;
                Ok(Case {
                    client: flags("client", &c.client)?,
                    server: flags("server", &c.server)?,
                    tiers,
                    pause: c.pause,
                    name: c.name,
                })
            })
            .collect::<Result<Vec<Case>, ScenarioError>>()?;
        let outage = match file.outage {
            Some(kind) => Some(
                Outage::with_commands(&kind, file.outage_start, file.outage_end)
                    .map_err(|e| ScenarioError(format!("outage: {e}")))?,
            ),
            None if file.outage_start.is_some() || file.outage_end.is_some() => {
                return Err(ScenarioError(
                    "outage_start and outage_end go with outage = \"exec\"".into(),
                ));
            }
            None => None,
        };
        let scenario = Scenario {
            seed: file.seed,
            engine: file.engine,
            runs: file.runs,
            target: file.target,
            outage,
            protocol,
            cases,
        };
        scenario.check()?;
        Ok(scenario)
    }

    /// Reads a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError(format!("{}: {e}", path.display())))?;
        Scenario::from_toml(&text).map_err(|e| ScenarioError(format!("{}: {e}", path.display())))
    }

    /// Checks what the file's syntax cannot, and what flags may have set
    /// since: the runs and the protocol within their bounds, at least one
    /// case, names that are distinct and can name files, and against a
    /// target, cases of client flags only.
    pub fn check(&self) -> Result<(), ScenarioError> {
        self.check_target()?;
        match self.runs {
            Some(0) => return Err(ScenarioError("runs: must be at least 1".into())),
            Some(n) if n > MAX_RUNS => {
                return Err(ScenarioError(format!(
                    "runs (--runs): {n} is more than {MAX_RUNS}, the most taken"
                )));
            }
            _ => {}
        }
        self.protocol.check()?;
        if self.cases.is_empty() {
            return Err(ScenarioError(
                "no cases: add at least one [[case]] with a name and client flags".into(),
            ));
        }
        for (i, case) in self.cases.iter().enumerate() {
            if !is_file_name(&case.name) {
                return Err(ScenarioError(format!(
                    "case name '{}': use letters, digits, '.', '_', '+' and '-' \
                     (it names the case's files)",
                    case.name
                )));
            }
            if case.name.len() > MAX_NAME {
                return Err(ScenarioError(format!(
                    "case name '{}...': {} characters, more than the {MAX_NAME} a name may have \
                     (it names the case's files)",
                    &case.name[..20],
                    case.name.len()
                )));
            }
            if RESERVED.contains(&case.name.as_str()) {
                return Err(ScenarioError(format!(
                    "case name '{}' is taken by a file of the results folder ({})",
                    case.name,
                    RESERVED.join(", ")
                )));
            }
            match case.pause {
                Some(0) => {
                    return Err(ScenarioError(format!(
                        "case {}: pause = 0: tiers count from 1 at the client's side (leave \
                         pause out to stop the backend)",
                        case.name
                    )));
                }
                Some(n) if n as usize > case.tiers.len() => {
                    return Err(ScenarioError(format!(
                        "case {}: pause = {n}, but the case has {} tier(s)",
                        case.name,
                        case.tiers.len()
                    )));
                }
                _ => {}
            }
            if self.cases[..i].iter().any(|c| c.name == case.name) {
                return Err(ScenarioError(format!(
                    "case name '{}' is used twice",
                    case.name
                )));
            }
        }
        Ok(())
    }

    /// Against a target: a URL the client can take, and cases that need
    /// no project server (no server flags, tiers or tier to stop).
    fn check_target(&self) -> Result<(), ScenarioError> {
        let Some(url) = &self.target else {
            return Ok(());
        };
        check_url(url).map_err(|e| ScenarioError(format!("target (--target): {e}")))?;
        for case in &self.cases {
            let refused = if !case.server.is_empty() {
                "server flags (the case's server, or --server-args)"
            } else if !case.tiers.is_empty() {
                "tiers"
            } else if case.pause.is_some() {
                "pause = N (a tier to stop)"
            } else {
                continue;
            };
            return Err(ScenarioError(format!(
                "case {}: {refused} with a target ({url}): no project server runs, the \
                 clients go to the target and the outage is its own; set the target's \
                 flags where you start it",
                case.name
            )));
        }
        Ok(())
    }

    /// The scenario as TOML, in the form [`Scenario::from_toml`] reads.
    pub fn to_toml(&self) -> String {
        let p = &self.protocol;
        let commands = self.outage.as_ref().and_then(Outage::commands);
        let file = File {
            seed: self.seed,
            engine: self.engine,
            runs: self.runs,
            target: self.target.clone(),
            outage: self.outage.as_ref().map(Outage::to_string),
            outage_start: commands.map(|(start, _)| start.to_string()),
            outage_end: commands.map(|(_, end)| end.to_string()),
            protocol: ProtocolFile {
                warmup: Some(format_duration(p.warmup)),
                pause: Some(format_duration(p.pause)),
                observe: Some(format_duration(p.observe)),
                report_interval: Some(format_duration(p.report_interval)),
                tail: Some(format_duration(p.tail)),
                // Written where it is not the default, so that files of
                // storms without a target read as they did.
                calm: (p.calm != DEFAULT_CALM).then(|| format_duration(p.calm)),
            },
            cases: self
                .cases
                .iter()
                .map(|c| CaseFile {
                    name: c.name.clone(),
                    client: join_flags(&c.client),
                    server: join_flags(&c.server),
                    pause: c.pause,
                    tiers: c
                        .tiers
                        .iter()
                        .map(|t| TierFile {
                            server: join_flags(&t.server),
                            client: join_flags(&t.client),
                        })
                        .collect(),
                })
                .collect(),
        };
        toml::to_string(&file).expect("a scenario serializes")
    }
}

#[cfg(test)]
mod tests;
