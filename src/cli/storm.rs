//! The `storm` program's flags: the default storm (strategies compared
//! under one protocol, a shorthand for a scenario), `storm run FILE` (a
//! scenario file), and what both share; each turned into a [`Storm`].

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use super::calibrate::CalibrateArgs;
use super::client::ClientCli;
use super::generate::GenerateArgs;
use super::merge::MergeArgs;
use super::outage::OutageArgs;
use super::protocol::default_out;
use super::protocol::{OutputArgs, ProtocolArgs};
use super::proxy::ProxyArgs;
use super::server::ServerArgs;
use super::sweep::SweepArgs;
use super::values::{duration, http_url, positive_duration, resolve_shard, shard, time_scale};
use super::view::ViewArgs;
use crate::experiment::scenario::{Engine, MAX_RUNS, Scenario, ScenarioError};
use crate::experiment::{Stop, Storm};
use crate::model::shard::{Shard, ShardSource};
use crate::policy::StrategyKind;

impl ValueEnum for Engine {
    fn value_variants<'a>() -> &'a [Self] {
        &[Engine::Real, Engine::Sim]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Engine::Real => "Child processes over loopback, SIGSTOP and SIGCONT, in real time",
            Engine::Sim => "The same model in virtual time, in milliseconds",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

/// The whole retry-storm experiment in one command: for each case, a real
/// server and client; the server stopped with SIGSTOP after the warm-up
/// and resumed with SIGCONT after the pause; a verdict, a summary and
/// plots. `storm run FILE` runs the cases of a scenario file.
#[derive(Debug, Parser)]
#[command(
    name = "storm",
    version,
    propagate_version = true,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true
)]
pub struct StormCli {
    /// What to run (default: the strategies given by the flags below).
    #[command(subcommand)]
    pub command: Option<StormCommand>,
    /// The default storm's flags.
    #[command(flatten)]
    pub run: StormArgs,
}

/// What `storm` runs.
#[derive(Debug, Subcommand)]
pub enum StormCommand {
    /// Run the cases of a scenario file (TOML) through the storm.
    Run(Box<RunArgs>),
    /// Map where each policy breaks, in virtual time (or by real storms of
    /// a service of yours, --target): the share of runs that recover
    /// against the pause, T50 with its interval, phase maps.
    Sweep(Box<SweepArgs>),
    /// A virtual twin of a service of yours: probe it, fit the project's
    /// server shapes to it, and predict where each policy breaks.
    ///
    /// A closed-loop probe at rising concurrency (levels.csv), whether the
    /// service finishes work for clients that have gone, where it keeps
    /// requests it cannot start yet (a burst of connections), each shape and
    /// the Universal Scalability Law fitted (calibration.md, fit.svg), the
    /// best written as a scenario (twin.toml) and swept in virtual time:
    /// each policy's T50 with its interval (predict/). With --verify,
    /// storms against the service at pauses around each T50, P(recovered)
    /// measured beside the twin's (verify/, verify.csv).
    Calibrate(Box<CalibrateArgs>),
    /// Put shards' results back together (sweep, storm or client shards)
    /// as one process would have written them.
    ///
    /// Sweep and storm shards (folders with a shard.json) give the whole
    /// sweep's or storm's files: a sweep's critical.csv and phase.csv byte
    /// for byte one process's. Client shards (folders with NAME.csv and
    /// NAME.hlog, one per shard, started together with --start-at) give
    /// one run's NAME.csv (rates summed, latency percentiles from the
    /// merged histograms), NAME.hlog and NAME.summary.json, and with
    /// --server-csv and the protocol, its verdict and chart.
    Merge(Box<MergeArgs>),
    /// A fault proxy between clients and a service of yours: HTTP/1.1
    /// forwarded faithfully until SIGUSR1 turns its fault on, SIGUSR2 off.
    ///
    /// While the fault is on, the proxy stalls as a stopped process does
    /// (nothing accepted, read or written), goes dark (blackhole: a listen
    /// queue of one as well), resets connections, answers a status of its
    /// own, or forwards late; each to every request or to a fraction of
    /// them, drawn from --seed. The fault also turns with the live view's
    /// key (--tui) and at the control endpoint (--control). A line, a CSV
    /// row and a status line each --report-interval say what passed:
    /// connections, requests held and in flight, answers by status class,
    /// the fault's own answers and resets, latency through the proxy
    /// (docs/proxy.md).
    Proxy(Box<ProxyArgs>),
    /// Run the server (the same as the `server` program; the runner's
    /// children).
    #[command(hide = true)]
    Server(Box<ServerArgs>),
    /// Run the client (the same as the `client` program; the runner's
    /// children).
    #[command(hide = true)]
    Client(Box<ClientCli>),
    /// Keep a storm's outage: undo it when the storm's end of stdin
    /// closes, however the storm ended (the storm's own child).
    #[command(hide = true)]
    Guard,
}

/// How a storm runs, shared by `storm` and `storm run`.
#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// The engine that runs the cases [default: the scenario's engine,
    /// else real].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<Engine>,
    /// Divide every duration by ten (latencies, timeouts, think times,
    /// retry delays, phases): the same experiment in a tenth of the time
    /// (real engine; virtual time needs no compression).
    #[arg(long)]
    pub quick: bool,
    /// Divide every duration by K, as --quick does by ten: a gentler
    /// compression where ten is too much for the machine (the runs'
    /// processes share its cores, and their own work does not compress)
    /// (real engine).
    #[arg(long, value_parser = time_scale, value_name = "K", conflicts_with = "quick")]
    pub time_scale: Option<f64>,
    /// Run the cases one after the other (the same as --parallel 1).
    #[arg(long, conflicts_with = "parallel")]
    pub in_turn: bool,
    /// Run at most N runs side by side, each against its own server
    /// [default: every case of one repetition].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub parallel: Option<u32>,
    /// Run every case N times: seeds from the scenario's (or --seed) on in
    /// virtual time, repetitions on the real network; each case's figures
    /// are then given over its runs, as a probability with its 95 %
    /// interval [default: the scenario's runs, else 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_RUNS)))]
    pub runs: Option<u32>,
    /// Make only shard I of N of the runs (I counts from 0): run k, counted
    /// case by case and repetition by repetition from 0, when k is I
    /// modulo N; a shard.json beside them lets `storm merge` put the
    /// shards together as one process would have written them. [default:
    /// from SLURM_ARRAY_TASK_ID/COUNT, SLURM_PROCID/SLURM_NTASKS or
    /// JOB_COMPLETION_INDEX/JOB_COMPLETIONS; else every run]
    #[arg(long, value_parser = shard, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Storm a service of yours at URL instead of the project's server: no
    /// server is started, every case's client goes to URL, the cases one at
    /// a time; needs --outage. What only the project's server measures is
    /// not measured [default: the scenario's target].
    #[arg(long, value_name = "URL", value_parser = http_url)]
    pub target: Option<String>,
    /// How the --target's outage is caused.
    #[command(flatten)]
    pub outage: OutageArgs,
    /// How long the --target must answer promptly, without a break,
    /// before each run [default: the scenario's calm, else 30s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub calm: Option<Duration>,
    /// Say what the engine does: the real one, each child's command line
    /// as it starts; sim, each run's events and their rate.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the scenario these flags run, as a scenario file, and exit.
    #[arg(long)]
    pub dump_scenario: bool,
    /// Results and how they are shown.
    #[command(flatten)]
    pub output: OutputArgs,
    /// How the run is shown.
    #[command(flatten)]
    pub view: ViewArgs,
}

impl ExecArgs {
    /// The share of the runs to make and where it was named: the flag,
    /// else a cluster engine's environment, else every run.
    pub fn shard(&self) -> Result<(Shard, ShardSource), String> {
        resolve_shard(self.shard)
    }

    /// The storm that runs `scenario` (the engine given here overriding its
    /// own); results in `--out`, else `results/<timestamp>[-suffix]`.
    pub fn storm(&self, mut scenario: Scenario, program: PathBuf, suffix: Option<&str>) -> Storm {
        scenario.runs = self.runs.or(scenario.runs);
        scenario.target = self.target.clone().or(scenario.target);
        scenario.protocol.calm = self.calm.unwrap_or(scenario.protocol.calm);
        let engine = self.engine.or(scenario.engine).unwrap_or(Engine::Real);
        Storm {
            engine,
            // Virtual time needs no compression.
            time_scale: match (engine, self.quick, self.time_scale) {
                (Engine::Real, true, _) => 10.0,
                (Engine::Real, false, Some(k)) => k,
                _ => 1.0,
            },
            parallel: if self.in_turn {
                1
            } else {
                self.parallel.map_or(0, |n| n as usize)
            },
            out: self
                .output
                .out
                .clone()
                .unwrap_or_else(|| default_out(suffix)),
            existing: self.output.existing(),
            png: self.output.png,
            progress: !self.output.quiet,
            watch: None,
            verbose: self.verbose,
            program,
            // The environment is read by the program, not here: a merge
            // rebuilds a shard's storm from its flags.
            shard: self.shard.unwrap_or_default(),
            stop: Stop::new(),
            scenario,
        }
    }
}

/// Flags of the default storm: the strategies compared.
#[derive(Debug, Args)]
pub struct StormArgs {
    /// Strategies to compare, comma-separated: one case each.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fixed,exponential-2014,exponential",
        value_name = "NAMES"
    )]
    pub strategies: Vec<StrategyKind>,
    /// How long the server stays stopped.
    #[arg(long, default_value = "20s", value_parser = duration, value_name = "DURATION")]
    pub pause: Duration,
    /// How long the clients run on after the observation window, so that
    /// recoveries after it show in the recovery-time distribution
    /// (recovery.svg, back_s); the verdict and the other figures do not
    /// read it. 0 ends the run with the window.
    #[arg(long, default_value = "1m", value_parser = duration, value_name = "DURATION")]
    pub tail: Duration,
    /// The protocol and the flags of every case.
    #[command(flatten)]
    pub protocol: ProtocolArgs,
    /// How it runs.
    #[command(flatten)]
    pub exec: ExecArgs,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

impl StormArgs {
    /// The scenario these flags describe.
    pub fn scenario(&self) -> Result<Scenario, ScenarioError> {
        self.protocol
            .refuse_server_args_with(self.exec.target.as_deref())?;
        let mut scenario = self.protocol.scenario(&self.strategies, self.pause)?;
        scenario.protocol.tail = self.tail;
        scenario.engine = self.exec.engine;
        scenario.outage = self.exec.outage.over(None)?;
        Ok(scenario)
    }
}

/// `storm run FILE`: the cases of a scenario file through the storm.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scenario file (TOML: seed, optional engine, [protocol], one
    /// [[case]] per configuration compared).
    #[arg(value_name = "FILE", required_unless_present = "generate")]
    pub file: Option<PathBuf>,
    /// Seed of every client [default: the scenario's].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// How it runs.
    #[command(flatten)]
    pub exec: ExecArgs,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

impl RunArgs {
    /// The scenario file, with the seed and engine given here.
    pub fn scenario(&self) -> Result<Scenario, ScenarioError> {
        let file = self
            .file
            .as_deref()
            .ok_or_else(|| ScenarioError("a scenario file is needed".into()))?;
        let mut scenario = Scenario::load(file)?;
        if let Some(seed) = self.seed {
            scenario.seed = seed;
        }
        scenario.engine = self.exec.engine.or(scenario.engine);
        scenario.outage = self.exec.outage.over(scenario.outage.take())?;
        Ok(scenario)
    }

    /// The file's name without its extension, for the results folder.
    pub fn stem(&self) -> Option<String> {
        self.file
            .as_deref()
            .and_then(|f| f.file_stem())
            .map(|s| s.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::ProgramFlags;
    use crate::experiment::outage::COMMAND_LIMIT;
    use crate::experiment::outage::Outage;

    fn storm(args: &[&str]) -> StormCli {
        let mut argv = vec!["storm"];
        argv.extend_from_slice(args);
        StormCli::try_parse_from(argv).unwrap()
    }

    /// The storm the default command line `args` runs.
    fn run_of(args: &[&str]) -> Storm {
        let cli = storm(args);
        cli.run
            .exec
            .storm(cli.run.scenario().unwrap(), "storm".into(), None)
    }

    #[test]
    fn the_default_storm_is_a_scenario_of_three_strategies() {
        let cli = storm(&["--client-args", "--clients 200", "--pause", "10s"]);
        let s = cli.run.scenario().unwrap();
        assert_eq!(s.seed, 2014);
        assert_eq!(s.engine, None);
        assert_eq!(s.protocol.pause, Duration::from_secs(10));
        let names: Vec<&str> = s.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fixed", "exponential-2014", "exponential"]);
        assert_eq!(
            s.cases[1].client,
            ["--strategy", "exponential-2014", "--clients", "200"]
        );
        let run = cli.run.exec.storm(s, "storm".into(), None);
        assert_eq!(run.engine, Engine::Real);
        assert_eq!((run.time_scale, run.parallel), (1.0, 0));
        assert!(run.out.starts_with("results"));
    }

    #[test]
    fn strategies_named_twice_are_one_case() {
        let s = storm(&["--strategies", "fixed,google,fixed"])
            .run
            .scenario()
            .unwrap();
        assert_eq!(s.cases.len(), 2);
    }

    #[test]
    fn quick_compresses_real_runs_only_and_in_turn_is_one_at_a_time() {
        let run = run_of(&["--quick", "--in-turn"]);
        assert_eq!((run.time_scale, run.parallel), (10.0, 1));
        let run = run_of(&["--quick", "--engine", "sim", "--parallel", "2"]);
        assert_eq!(
            (run.engine, run.time_scale, run.parallel),
            (Engine::Sim, 1.0, 2)
        );
        assert!(StormCli::try_parse_from(["storm", "--in-turn", "--parallel", "2"]).is_err());
        assert_eq!(run_of(&["--time-scale", "4"]).time_scale, 4.0);
        assert_eq!(
            run_of(&["--time-scale", "4", "--engine", "sim"]).time_scale,
            1.0
        );
        for bad in [
            &["--time-scale", "0.5"][..],
            &["--time-scale", "4", "--quick"],
        ] {
            let args = ["storm"].iter().chain(bad).copied();
            assert!(StormCli::try_parse_from(args).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_scenario_file_takes_the_seed_and_engine_given() {
        let dir = std::env::temp_dir().join(format!("retry-storm-cli-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("defences.toml");
        std::fs::write(
            &file,
            "seed = 1\nengine = \"sim\"\n[[case]]\nname = \"a\"\nclient = \"--strategy google\"\n",
        )
        .unwrap();
        let cli = storm(&[
            "run",
            file.to_str().unwrap(),
            "--seed",
            "9",
            "--engine",
            "real",
        ]);
        let Some(StormCommand::Run(args)) = cli.command else {
            panic!("run is a subcommand");
        };
        let s = args.scenario().unwrap();
        assert_eq!((s.seed, s.engine), (9, Some(Engine::Real)));
        assert_eq!(args.stem().as_deref(), Some("defences"));
        let run = args.exec.storm(s, "storm".into(), args.stem().as_deref());
        assert!(
            run.out.to_string_lossy().ends_with("-defences"),
            "{}",
            run.out.display()
        );
        run.validate(&ProgramFlags).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            StormCli::try_parse_from(["storm", "run"]).is_err(),
            "FILE is needed"
        );
    }

    #[test]
    fn bad_case_flags_are_refused_before_anything_runs() {
        let run = run_of(&["--client-args", "--clients 0", "--engine", "sim"]);
        let err = run.validate(&ProgramFlags).unwrap_err().to_string();
        assert!(
            err.contains("case fixed") && err.contains("--clients"),
            "{err}"
        );
        let run = run_of(&["--server-args", "--shed-above 5 --shed-status 500"]);
        let err = run.validate(&ProgramFlags).unwrap_err().to_string();
        assert!(
            err.contains("server flags") && err.contains("--shed-status"),
            "{err}"
        );
    }

    #[test]
    fn a_target_needs_its_outage_the_real_engine_and_its_runs_one_at_a_time() {
        let target = [
            "--target",
            "http://127.0.0.1:1/",
            "--outage",
            "sigstop=4321",
        ];
        let run = run_of(&target);
        run.validate(&ProgramFlags).unwrap();
        assert_eq!(run.batches(), 3, "one case at a time");
        assert_eq!(run.scenario.outage, Some(Outage::Sigstop { pid: 4321 }));
        let text = run.scenario.to_toml();
        assert!(text.contains("target = \"http://127.0.0.1:1/\""), "{text}");
        let refused = [
            (&["--target", "http://127.0.0.1:1/"][..], "--outage"),
            (&["--outage", "sigstop=4321"][..], "--target"),
        ];
        for (args, said) in refused {
            let err = run_of(args).validate(&ProgramFlags).unwrap_err();
            assert!(err.to_string().contains(said), "{args:?}: {err}");
        }
        for (extra, said) in [
            (&["--engine", "sim"][..], "--engine sim"),
            (&["--parallel", "2"][..], "--parallel 2"),
        ] {
            let err = run_of(&[&target[..], extra].concat())
                .validate(&ProgramFlags)
                .unwrap_err();
            assert!(err.to_string().contains(said), "{extra:?}: {err}");
        }
        run_of(&[&target[..], &["--in-turn"]].concat())
            .validate(&ProgramFlags)
            .unwrap();
        let server_args = storm(&[&target[..], &["--server-args", "--limit 40"]].concat());
        let err = server_args.run.scenario().unwrap_err().to_string();
        assert!(err.contains("--server-args with --target"), "{err}");
        assert!(StormCli::try_parse_from(["storm", "--target", "ftp://x/"]).is_err());
        assert!(StormCli::try_parse_from(["storm", "--outage", "blackout"]).is_err());
    }

    #[test]
    fn exec_takes_its_commands_from_flags_over_the_scenarios() {
        let exec = [
            "--target",
            "http://127.0.0.1:1/",
            "--outage",
            "exec",
            "--outage-start",
            "docker pause web",
            "--outage-end",
            "docker unpause web",
        ];
        let s = storm(&exec).run.scenario().unwrap();
        let outage = s.outage.as_ref().unwrap();
        assert_eq!(
            outage.commands(),
            Some(("docker pause web", "docker unpause web"))
        );
        for (args, said) in [
            (&exec[..6], "needs --outage-end (outage_end)"),
            (&exec[4..6], "go with --outage exec"),
            (
                &["--outage", "sigstop=5", "--outage-end", "true"][..],
                "not with sigstop=5",
            ),
            (
                &[
                    "--outage",
                    "exec",
                    "--outage-start",
                    "",
                    "--outage-end",
                    "x",
                ][..],
                "is empty",
            ),
        ] {
            let err = storm(args).run.scenario().unwrap_err().to_string();
            assert!(err.contains(said), "{args:?}: {err}");
        }
        // The help gives the commands' time limit as it is.
        let help = <StormCli as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        let limit = format!("runs past {} s", COMMAND_LIMIT.as_secs());
        assert_eq!(help.matches(&limit).count(), 2, "{help}");
        assert!(StormCli::try_parse_from(["storm", "--outage", "freeze=rel/dir"]).is_err());
        assert!(StormCli::try_parse_from(["storm", "--outage", "exec=x"]).is_err());

        let dir = std::env::temp_dir().join(format!("retry-storm-cli-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("exec.toml");
        std::fs::write(
            &file,
            "seed = 1\ntarget = \"http://127.0.0.1:1/\"\noutage = \"exec\"\n\
             outage_start = \"a\"\noutage_end = \"b\"\n\
             [[case]]\nname = \"a\"\nclient = \"--strategy fixed\"\n",
        )
        .unwrap();
        let of = |extra: &[&str]| {
            let mut args = vec!["run", file.to_str().unwrap()];
            args.extend_from_slice(extra);
            let Some(StormCommand::Run(run)) = storm(&args).command else {
                panic!("run is a subcommand");
            };
            run.scenario().map(|s| s.outage)
        };
        let commands = |outage: Option<Outage>| {
            let (start, end) = outage.as_ref().and_then(Outage::commands).unwrap();
            (start.to_string(), end.to_string())
        };
        assert_eq!(commands(of(&[]).unwrap()), ("a".into(), "b".into()));
        let end_over = of(&["--outage-end", "c"]).unwrap();
        assert_eq!(commands(end_over), ("a".into(), "c".into()));
        let start_over = of(&["--outage", "exec", "--outage-start", "d"]).unwrap();
        assert_eq!(commands(start_over), ("d".into(), "b".into()));
        // Another kind leaves the file's commands behind.
        let other = of(&["--outage", "sigstop=7"]).unwrap();
        assert_eq!(other, Some(Outage::Sigstop { pid: 7 }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
