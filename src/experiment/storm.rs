//! A storm as it will run: a scenario, the engine that runs it, and where
//! its results go; and the flags and configurations of each case's
//! programs.

use std::path::PathBuf;
use std::time::Duration;

use super::error::StormError;
use super::folder::Existing;
use super::scenario::{Case, Engine, Protocol, Scenario, format_duration, join_flags};
use super::stop::Stop;
use crate::model::client::ClientConfig;
use crate::model::fault::Fault;
use crate::model::server::{DEFAULT_BACKLOG, ServerConfig};
use crate::model::shard::Shard;
use crate::model::timescale::compress;
use crate::model::wire::{Transport, Wire};
use crate::report::chain::TierRows;
use crate::report::output::read_rows;
use crate::report::verdict::{STREAK, Timeline};
use crate::sim::{Pause, SimConfig};
use crate::view::Watch;

/// The programs' own flag parsers: a server's or client's configuration
/// from its flags (without the program's name), exactly as the program
/// would take them, or the first line of the program's complaint. The
/// command-line layer provides them.
pub trait Flags: Sync {
    /// The server's configuration.
    fn server(&self, argv: &[String]) -> Result<ServerConfig, String>;
    /// The client's configuration.
    fn client(&self, argv: &[String]) -> Result<ClientConfig, String>;
}

/// Everything a storm run needs.
#[derive(Debug, Clone)]
pub struct Storm {
    /// The experiment: seed, protocol and cases.
    pub scenario: Scenario,
    /// The engine that runs it.
    pub engine: Engine,
    /// Time compression of a real run: 10 with `--quick`, else 1.
    pub time_scale: f64,
    /// Real runs side by side at most this many at a time (0: all at once).
    pub parallel: usize,
    /// Results folder.
    pub out: PathBuf,
    /// What to do if `out` already holds files.
    pub existing: Existing,
    /// Plots as PNG instead of SVG.
    pub png: bool,
    /// Show live progress on stdout.
    pub progress: bool,
    /// The live view (`--tui`), told of every batch, phase and row.
    pub watch: Option<Watch>,
    /// Say what the engine did.
    pub verbose: bool,
    /// The program to run as `PROGRAM server ...` and `PROGRAM client ...`.
    pub program: PathBuf,
    /// The share of the runs this process makes.
    pub shard: Shard,
    /// Set when the user asks the virtual engine to stop (the real engine
    /// is given a future instead); polled between runs.
    pub stop: Stop,
}

/// The status descriptor every child of a real run writes to.
pub(super) const STATUS_FD: i32 = 3;

/// The intervals after the observation window that confirm a recovery
/// whose first interval is the last one starting within it (full scale).
pub(super) fn confirmation(p: &Protocol) -> Duration {
    confirmation_after(p.report_interval)
}

/// The intervals that confirm a recovery, with this report interval.
pub(super) fn confirmation_after(report_interval: Duration) -> Duration {
    report_interval * (STREAK as u32 - 1)
}

impl Storm {
    /// How long each client runs (full scale): the protocol, the tail, and
    /// enough intervals to confirm a recovery whose first interval is the
    /// last one that starts within the window (or the tail).
    pub(super) fn client_duration(&self) -> Duration {
        let p = &self.scenario.protocol;
        p.warmup + p.pause + p.observe + p.tail + confirmation(p)
    }

    /// How many times every case runs.
    pub fn runs(&self) -> u32 {
        self.scenario.runs.unwrap_or(1).max(1)
    }

    /// The runs this process makes on the real engine, in their order:
    /// repetition after repetition, each case of one in the scenario's
    /// order.
    pub(super) fn units(&self) -> Vec<(&Case, u32)> {
        let cases = &self.scenario.cases;
        (0..self.runs())
            .flat_map(|rep| {
                cases
                    .iter()
                    .enumerate()
                    .map(move |(place, case)| (place, case, rep))
            })
            .filter(|&(place, _, rep)| self.makes(place, rep))
            .map(|(_, case, rep)| (case, rep))
            .collect()
    }

    /// How many runs go side by side on the real engine: against a
    /// target, one at a time, as they share it.
    pub(super) fn batch_size(&self) -> usize {
        match self.parallel {
            _ if self.scenario.target.is_some() => 1,
            0 => self.scenario.cases.len().max(1),
            n => n,
        }
    }

    /// How many batches of runs side by side the real engine makes.
    pub fn batches(&self) -> usize {
        self.units().len().div_ceil(self.batch_size())
    }

    /// Whether this process makes repetition `rep` of the case at `place`
    /// in the scenario: runs are numbered case by case, repetitions in
    /// order, and shared among the shards by that number.
    pub fn makes(&self, place: usize, rep: u32) -> bool {
        let index = place as u64 * u64::from(self.runs()) + u64::from(rep);
        self.shard.owns(index)
    }

    /// The seed of repetition `rep` (from 0) of every case.
    pub fn seed(&self, rep: u32) -> u64 {
        self.scenario.seed.wrapping_add(u64::from(rep))
    }

    /// What a run's files are named after: its case, and with several
    /// runs its repetition, from 1 (`fixed.run07`).
    pub fn run_name(&self, case: &Case, rep: u32) -> String {
        let runs = self.runs();
        if runs == 1 {
            return case.name.clone();
        }
        let width = runs.to_string().len();
        format!("{}.run{:0width$}", case.name, rep + 1)
    }

    /// A file of repetition `rep` of `case` in the results folder, by
    /// suffix (`client.csv`).
    pub(super) fn file(&self, case: &Case, rep: u32, suffix: &str) -> PathBuf {
        self.out
            .join(format!("{}.{suffix}", self.run_name(case, rep)))
    }

    /// The rows of repetition `rep` of `case`'s tiers, from the client
    /// inward, read from `dir`: each one's server CSV and calls' CSV.
    pub(super) fn read_tiers(
        &self,
        dir: &std::path::Path,
        case: &Case,
        rep: u32,
    ) -> Result<Vec<TierRows>, StormError> {
        fn read<T: serde::de::DeserializeOwned>(path: PathBuf) -> Result<Vec<T>, StormError> {
            read_rows(&path).map_err(|e| StormError::Io(format!("read {}", path.display()), e))
        }
        let name = self.run_name(case, rep);
        (1..=case.tiers.len())
            .map(|tier| {
                Ok((
                    read(dir.join(format!("{name}.tier-{tier}.server.csv")))?,
                    read(dir.join(format!("{name}.tier-{tier}.calls.csv")))?,
                ))
            })
            .collect()
    }

    /// On the real engine, the status pipe every child writes to (the runner
    /// puts it at [`STATUS_FD`]).
    fn status_flag(&self, argv: &mut Vec<String>) {
        if self.engine == Engine::Real {
            argv.extend(["--status-fd".to_string(), STATUS_FD.to_string()]);
        }
    }

    /// The flags of repetition `rep` of `case`'s server, exactly as its
    /// process gets them.
    pub fn server_argv(&self, case: &Case, rep: u32) -> Vec<String> {
        let mut argv = vec![
            "--listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--csv".to_string(),
            self.file(case, rep, "server.csv").display().to_string(),
            "--time-scale".to_string(),
            self.time_scale.to_string(),
        ];
        argv.extend(case.server.iter().cloned());
        if server_draws(&case.server) {
            argv.extend(["--seed".to_string(), self.seed(rep).to_string()]);
        }
        self.status_flag(&mut argv);
        argv
    }

    /// The flags of the fault proxy of repetition `rep` of `case`, in
    /// front of the target `url` with `fault` (off until the pause),
    /// exactly as its process gets them. It speaks to the target as the
    /// case's clients (`wire`) do: HTTP/2 if they do, trusting whom they
    /// trust over https. Its rows come as often as the client's.
    pub fn proxy_argv(
        &self,
        (case, rep): (&Case, u32),
        url: &str,
        fault: &Fault,
        wire: &Wire,
    ) -> Vec<String> {
        let interval = compress(self.scenario.protocol.report_interval, self.time_scale);
        let mut argv: Vec<String> = [
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            url,
            "--fault",
            &fault.to_string(),
            "--report-interval",
            &format_duration(round_ms(interval)),
            "--seed",
            &self.seed(rep).to_string(),
            "--csv",
            &self.file(case, rep, "proxy.csv").display().to_string(),
        ]
        .map(String::from)
        .into();
        if wire.transport == Transport::Http2 {
            argv.push("--http2".to_string());
        }
        if url.starts_with("https://") {
            if let Some(file) = &wire.trust.ca_cert {
                argv.extend(["--ca-cert".to_string(), file.display().to_string()]);
            }
            if wire.trust.insecure {
                argv.push("--insecure".to_string());
            }
        }
        self.status_flag(&mut argv);
        argv
    }

    /// The seed of tier `tier` (from 1) of repetition `rep`: its server's
    /// draws and, on a stream of its own, its call's.
    fn tier_seed(&self, rep: u32, tier: usize) -> u64 {
        self.seed(rep) ^ ((tier as u64) << 40)
    }

    /// The flags of tier `tier` (from 1 at the client's side) of
    /// repetition `rep` of `case`, calling `next` (the next tier's URL or
    /// the backend's), exactly as its process gets them.
    pub fn tier_argv(&self, case: &Case, rep: u32, tier: usize, next: &str) -> Vec<String> {
        let t = &case.tiers[tier - 1];
        let mut argv = vec![
            "--listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--csv".to_string(),
            self.file(case, rep, &format!("tier-{tier}.server.csv"))
                .display()
                .to_string(),
            "--time-scale".to_string(),
            self.time_scale.to_string(),
        ];
        argv.extend(t.server.iter().cloned());
        // Its metrics' `tier` label, unless its flags name it.
        let named = t.server.iter().any(|f| f.starts_with("--tier-name"));
        if !named {
            argv.extend(["--tier-name".to_string(), format!("tier-{tier}")]);
        }
        argv.extend([
            "--seed".to_string(),
            self.tier_seed(rep, tier).to_string(),
            "--call".to_string(),
            next.to_string(),
            "--call-client".to_string(),
            join_flags(&t.client),
            "--call-csv".to_string(),
            self.file(case, rep, &format!("tier-{tier}.calls.csv"))
                .display()
                .to_string(),
        ]);
        self.status_flag(&mut argv);
        argv
    }

    /// The flags of repetition `rep` of `case`'s client, against `url`,
    /// exactly as its process gets them.
    pub fn client_argv(&self, case: &Case, rep: u32, url: &str) -> Vec<String> {
        let mut argv: Vec<String> = [
            "--url",
            url,
            "--duration",
            &format_duration(round_ms(self.client_duration())),
            "--report-interval",
            &format_duration(round_ms(self.scenario.protocol.report_interval)),
            "--seed",
            &self.seed(rep).to_string(),
            "--time-scale",
            &self.time_scale.to_string(),
            "--csv",
            &self.file(case, rep, "client.csv").display().to_string(),
            "--hlog",
            &self.file(case, rep, "client.hlog").display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(case.client.iter().cloned());
        self.status_flag(&mut argv);
        argv
    }

    /// The server's and client's configurations for `case`, exactly as the
    /// children parse their flags.
    pub fn configs(
        &self,
        case: &Case,
        flags: &dyn Flags,
    ) -> Result<(ServerConfig, ClientConfig), StormError> {
        let server = flags.server(&self.server_argv(case, 0));
        self.tier_configs(case, 0, flags, false)?;
        Ok((
            refused(case, "server", server)?,
            self.client_config(case, 0, flags)?,
        ))
    }

    /// The tiers' configurations for repetition `rep` of `case`, from the
    /// client inward, as their processes parse their flags (their calls'
    /// URLs stand in for the next tier's); for virtual time, with the
    /// backlog fixed as [`Storm::sim_server_argv`] fixes the backend's.
    pub fn tier_configs(
        &self,
        case: &Case,
        rep: u32,
        flags: &dyn Flags,
        sim: bool,
    ) -> Result<Vec<ServerConfig>, StormError> {
        (1..=case.tiers.len())
            .map(|tier| {
                let mut argv = self.tier_argv(case, rep, tier, "http://127.0.0.1:1/api");
                if sim {
                    fixed_backlog(&mut argv);
                }
                refused(case, &format!("tier {tier}"), flags.server(&argv))
            })
            .collect()
    }

    /// The client's configuration for repetition `rep` of `case`, as the
    /// child parses it.
    pub fn client_config(
        &self,
        case: &Case,
        rep: u32,
        flags: &dyn Flags,
    ) -> Result<ClientConfig, StormError> {
        let client = flags.client(&self.client_argv(case, rep, "http://127.0.0.1:1/api"));
        refused(case, "client", client)
    }

    /// Checks the scenario and every child's flags before anything starts.
    pub fn validate(&self, flags: &dyn Flags) -> Result<(), StormError> {
        self.scenario
            .check()
            .map_err(|e| StormError::Flags(e.to_string()))?;
        self.validate_target()?;
        let target = self.scenario.target.is_some();
        for case in &self.scenario.cases {
            match self.engine {
                // Against a target only the clients run.
                Engine::Real if target => self.client_config(case, 0, flags).map(drop)?,
                Engine::Real => self.configs(case, flags).map(drop)?,
                Engine::Sim => self.sim_config(case, 0, flags).map(drop)?,
            }
        }
        Ok(())
    }

    /// A target and its outage come together, on the real engine, with
    /// the runs one at a time in one process: they share the target.
    fn validate_target(&self) -> Result<(), StormError> {
        let refuse = |msg: String| Err(StormError::Flags(msg));
        let url = match (&self.scenario.target, &self.scenario.outage) {
            (None, None) => return Ok(()),
            (None, Some(outage)) => {
                return refuse(format!(
                    "--outage {outage}: an outage is caused in a target; name it with \
                     --target URL (or the scenario's target)"
                ));
            }
            (Some(url), None) => {
                return refuse(format!(
                    "--target {url}: say how to cause its outage with --outage (or the \
                     scenario's outage): sigstop=PID (the target's process and its \
                     descendants), freeze=CGROUP_DIR (a cgroup's freezer), exec with \
                     --outage-start and --outage-end (commands of yours), or a fault of a \
                     proxy in front of it, such as stall or status=503"
                ));
            }
            (Some(url), Some(_)) => url,
        };
        if self.engine == Engine::Sim {
            return refuse(format!(
                "--engine sim: virtual time runs the project's model, not a target ({url}); \
                 storm a target on the real engine"
            ));
        }
        if self.parallel > 1 {
            return refuse(format!(
                "--parallel {}: against a target the cases share it and run one at a \
                 time; leave --parallel out",
                self.parallel
            ));
        }
        if !self.shard.is_whole() {
            return refuse(format!(
                "shard {} (--shard or a cluster's variables): against a target the runs \
                 share it and run one at a time in one process",
                self.shard
            ));
        }
        Ok(())
    }

    /// The protocol's phases as planned from `start_ms`, at full scale:
    /// the timeline of a virtual-time run.
    pub fn timeline(&self, start_ms: u64) -> Timeline {
        let p = &self.scenario.protocol;
        Timeline::planned(start_ms, p.warmup, p.pause, p.observe, confirmation(p))
    }

    /// The server flags of a virtual run: the real ones, with the backlog
    /// fixed at [`DEFAULT_BACKLOG`] unless given, so that results do not
    /// depend on the host's `somaxconn`.
    pub fn sim_server_argv(&self, case: &Case, rep: u32) -> Vec<String> {
        let mut argv = self.server_argv(case, rep);
        fixed_backlog(&mut argv);
        argv
    }

    /// The virtual-time experiment of repetition `rep` of `case`.
    pub fn sim_config(
        &self,
        case: &Case,
        rep: u32,
        flags: &dyn Flags,
    ) -> Result<SimConfig, StormError> {
        let mut client = self.client_config(case, rep, flags)?;
        let server = flags.server(&self.sim_server_argv(case, rep));
        let mut server = refused(case, "server", server)?;
        server.quiet = true;
        client.quiet = true;
        Ok(SimConfig {
            server,
            client,
            tiers: self
                .tier_configs(case, rep, flags, true)?
                .into_iter()
                .map(|tier| ServerConfig {
                    quiet: true,
                    ..tier
                })
                .collect(),
            paused: case.pause.map(|tier| tier as usize - 1),
            pauses: self.sim_pauses(),
        })
    }

    /// `run`, which [`Storm::sim_config`] gave for the same case and
    /// repetition of a storm that differs from this one only in its pause,
    /// with this storm's pause and run length: what `sim_config` gives
    /// here, without parsing the flags again (a sweep runs each seed at
    /// some thirty pauses, and parsing was a twentieth of its time). A
    /// server that draws nothing keeps `run`'s seed, where parsing would
    /// draw it a new one it never uses. Nothing checks the premise in a
    /// release build: the sweep checks it in debug builds.
    pub fn repaused(&self, run: &SimConfig) -> SimConfig {
        let mut run = run.clone();
        run.pauses = self.sim_pauses();
        // `--duration` as the client parses and scales it.
        run.client.duration = Some(compress(round_ms(self.client_duration()), self.time_scale));
        run
    }

    /// A virtual run's one pause.
    fn sim_pauses(&self) -> Vec<Pause> {
        let p = &self.scenario.protocol;
        vec![Pause {
            at: p.warmup,
            length: p.pause,
        }]
    }

    /// The scenario as this storm runs it: with its engine.
    pub fn scenario_as_run(&self) -> Scenario {
        Scenario {
            engine: Some(self.engine),
            ..self.scenario.clone()
        }
    }
}

/// A program's configuration, or why `case`'s flags for it (`role`) are
/// refused.
/// Fixes a virtual server's backlog at [`DEFAULT_BACKLOG`] unless its
/// flags give one.
fn fixed_backlog(argv: &mut Vec<String>) {
    if !argv
        .iter()
        .any(|a| a == "--backlog" || a.starts_with("--backlog="))
    {
        argv.extend(["--backlog".to_string(), DEFAULT_BACKLOG.to_string()]);
    }
}

fn refused<T>(case: &Case, role: &str, parsed: Result<T, String>) -> Result<T, StormError> {
    parsed.map_err(|e| StormError::Flags(format!("case {}: {role} flags: {e}", case.name)))
}

/// Whether a server with these flags draws random numbers (a pool's
/// service times, admission control, Vegas' probes, a failing backend's
/// failures) and takes no seed of its own: it then gets the run's seed,
/// so that repetitions differ and each can be made again. Servers that
/// draw nothing get no `--seed`, and their command lines stay as they
/// were.
fn server_draws(flags: &[String]) -> bool {
    let value = |name: &str| flag_value(flags, name);
    let given = |name: &str| value(name).is_some() || flags.iter().any(|f| f == name);
    !given("--seed")
        && (value("--model") == Some("pool")
            || value("--limiter") == Some("vegas")
            || given("--admission-control")
            || given("--fail-rate"))
}

/// The value of flag `name` among `flags` (`--name value` or
/// `--name=value`), if given.
pub(super) fn flag_value<'a>(flags: &'a [String], name: &str) -> Option<&'a str> {
    flags.iter().enumerate().find_map(|(i, f)| {
        if f == name {
            flags.get(i + 1).map(String::as_str)
        } else {
            f.strip_prefix(name)?.strip_prefix('=')
        }
    })
}

/// A duration to whole milliseconds, as the children's flags carry it.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn only_servers_that_draw_and_have_no_seed_get_the_runs() {
        for (argv, draws) in [
            ("", false),
            ("--shed-above 200 --on-disconnect cancel", false),
            ("--model linear --limiter aimd", false),
            ("--model pool", true),
            ("--model=pool --queue 5", true),
            ("--limiter vegas", true),
            ("--limiter=vegas", true),
            ("--admission-control", true),
            ("--model pool --seed 3", false),
            ("--admission-control --seed=3", false),
            // A failing backend's failures: unseeded, the server drew
            // them from a seed of its own, new every run (the virtual
            // engine's too).
            ("--fail-rate 0.5 --fail-status 503", true),
            ("--fail-rate=1", true),
            ("--fail-rate 0.5 --seed 3", false),
        ] {
            assert_eq!(server_draws(&flags(argv)), draws, "{argv:?}");
        }
    }
}
