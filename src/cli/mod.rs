//! The command line of every program, one file each: flags parsed with
//! clap, then checked together and turned into a validated configuration
//! for the layers below. A bad value gets a message naming the flag and
//! exit code 2 (clap's usage-error code).

mod burst;
mod calibrate;
mod client;
mod generate;
mod merge;
mod outage;
mod protocol;
mod proxy;
mod refusal;
mod report;
mod retry;
mod runtime;
mod server;
mod service;
mod serving;
mod storm;
mod sweep;
mod tier;
mod traffic;
pub(crate) mod values;
mod view;
mod wire;

use clap::{CommandFactory, Parser};

pub use calibrate::CalibrateArgs;
pub use client::{ClientArgs, ClientCli, ClientCommand, PlanArgs, PlanFormat};
pub use generate::{Generate, GenerateArgs};
pub use merge::MergeArgs;
pub use protocol::{OutputArgs, ProtocolArgs};
pub use proxy::ProxyArgs;
pub use report::ReportArgs;
pub use retry::{HedgingArgs, LimitArgs, StrategyArgs, ThrottleArgs};
pub use runtime::RuntimeArgs;
pub use server::{ServerArgs, ShedStatusArg};
pub use storm::{ExecArgs, RunArgs, StormArgs, StormCli, StormCommand};
pub use sweep::SweepArgs;
pub use traffic::{DEFAULT_MAX_OUTSTANDING, TrafficArgs};
pub use view::ViewArgs;
pub use wire::WireArgs;

use crate::experiment::Flags;
use crate::model::client::ClientConfig;
use crate::model::server::ServerConfig;

/// The first line of a clap error, without its `error: ` prefix.
fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

/// The `server` and `client` programs' own parsers, for the experiment
/// layer: a child's configuration exactly as the child will take it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgramFlags;

/// What a case's flags may not ask for: a program that does something
/// else than serve or load.
const NOT_A_RUN: &str = "runs no server or client (a case's flags run one)";

/// What a case's flags may not ask for: a storm's children draw on no
/// terminal.
const NO_VIEW: &str = "--tui is for a program run by hand; a storm's children have no terminal (storm --tui shows the storm)";

/// What a case's flags may not ask for: what the storm decides for every
/// run, or what runs side by side cannot share.
fn storm_owned(
    shard: bool,
    start_at: bool,
    metrics: Option<std::net::SocketAddr>,
) -> Result<(), String> {
    if shard {
        return Err(
            "--shard is the storm's to give (storm --shard shares out whole runs); \
                    a case runs its whole population"
                .to_string(),
        );
    }
    if start_at {
        return Err(
            "--start-at is the storm's to decide: it starts each run's children \
                    together itself"
                .to_string(),
        );
    }
    match metrics {
        Some(addr) if addr.port() != 0 => Err(format!(
            "--metrics-listen {addr}: a fixed port cannot serve runs side by side or one \
             after another; give port 0 (each run's address is on its start line)"
        )),
        _ => Ok(()),
    }
}

impl Flags for ProgramFlags {
    fn server(&self, argv: &[String]) -> Result<ServerConfig, String> {
        let argv = std::iter::once("server").chain(argv.iter().map(String::as_str));
        let args = ServerArgs::try_parse_from(argv).map_err(|e| first_line(&e))?;
        if args.generate.generate.is_some() {
            return Err(format!("--generate {NOT_A_RUN}"));
        }
        if args.view.tui {
            return Err(NO_VIEW.to_string());
        }
        storm_owned(false, false, args.report.metrics_listen)?;
        args.config().map_err(|e| first_line(&e))
    }

    fn client(&self, argv: &[String]) -> Result<ClientConfig, String> {
        let argv = std::iter::once("client").chain(argv.iter().map(String::as_str));
        let cli = ClientCli::try_parse_from(argv).map_err(|e| first_line(&e))?;
        if cli.generate.generate.is_some() {
            return Err(format!("--generate {NOT_A_RUN}"));
        }
        if cli.command.is_some() {
            return Err(format!("client plan {NOT_A_RUN}"));
        }
        if cli.run.view.tui {
            return Err(NO_VIEW.to_string());
        }
        let run = &cli.run;
        storm_owned(
            run.shard.is_some(),
            run.start_at.is_some(),
            run.report.metrics_listen,
        )?;
        cli.run.config().map_err(|e| first_line(&e))
    }
}

/// The flag reference of every program and subcommand, as Markdown: each
/// one's long `--help`, exactly as clap renders it. `docs/cli.md` holds it
/// (a test checks that it is current).
pub fn reference() -> String {
    // Built first, so that the subcommands carry what they inherit
    // (`--version`).
    let sub = |mut program: clap::Command, name: &str| {
        program.build();
        program.find_subcommand(name).expect("a subcommand").clone()
    };
    let pages = [
        ("server", ServerArgs::command()),
        ("client", ClientCli::command()),
        ("client plan", sub(ClientCli::command(), "plan")),
        ("storm", StormCli::command()),
        ("storm run", sub(StormCli::command(), "run")),
        ("storm sweep", sub(StormCli::command(), "sweep")),
        ("storm calibrate", sub(StormCli::command(), "calibrate")),
        ("storm merge", sub(StormCli::command(), "merge")),
        ("storm proxy", sub(StormCli::command(), "proxy")),
    ];
    let mut out = String::from(
        "# Flag reference\n\n\
         Every program's and subcommand's `--help`, generated from the same definitions \
         as the flags (`cargo test --test docs` fails when this file is stale; \
         `UPDATE_DOCS=1 cargo test --test docs` writes it again). The man pages \
         (`--generate man`) hold the same text.\n\n",
    );
    for (name, _) in &pages {
        out.push_str(&format!("- [`{name}`](#{})\n", name.replace(' ', "-")));
    }
    for (name, command) in pages {
        let help = command.bin_name(name).render_long_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        out.push_str(&format!(
            "\n## {name}\n\n```text\n{}\n```\n",
            help.join("\n").trim_end()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_parsers_say_what_is_wrong_in_one_line() {
        let flags = ProgramFlags;
        let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(flags.server(&argv("--limit 40")).unwrap().model.limit, 40);
        assert_eq!(flags.client(&argv("--clients 7")).unwrap().clients, 7);
        let err = flags.client(&argv("--clients 0")).unwrap_err();
        assert!(err.contains("--clients") && !err.contains('\n'), "{err}");
        let err = flags.server(&argv("--bogus")).unwrap_err();
        assert!(
            err.contains("--bogus") && !err.starts_with("error:"),
            "{err}"
        );
        let err = flags.server(&argv("--generate man")).unwrap_err();
        assert!(err.contains("--generate runs no server"), "{err}");
        let err = flags.client(&argv("--generate complete-bash")).unwrap_err();
        assert!(err.contains("--generate"), "{err}");
        let err = flags.client(&argv("plan")).unwrap_err();
        assert!(err.contains("client plan runs no"), "{err}");
        let err = flags.client(&argv("--tui")).unwrap_err();
        assert!(err.contains("storm --tui"), "{err}");
        let err = flags.server(&argv("--tui")).unwrap_err();
        assert!(err.contains("storm --tui"), "{err}");
    }

    #[test]
    fn a_cases_flags_may_not_take_what_the_storm_decides() {
        let flags = ProgramFlags;
        let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let seeded = "--seed 1 --clients 10";
        let err = flags
            .client(&argv(&format!("{seeded} --shard 0/2")))
            .unwrap_err();
        assert!(err.contains("--shard is the storm's"), "{err}");
        let err = flags
            .client(&argv(&format!("{seeded} --start-at 1795000000")))
            .unwrap_err();
        assert!(err.contains("--start-at is the storm's"), "{err}");
        let fixed = argv("--metrics-listen 127.0.0.1:9464");
        let err = flags.client(&fixed).unwrap_err();
        assert!(err.contains("a fixed port"), "{err}");
        let err = flags.server(&fixed).unwrap_err();
        assert!(err.contains("a fixed port"), "{err}");
        // Port 0: each run its own.
        let any = argv("--metrics-listen 127.0.0.1:0");
        assert!(flags.client(&any).is_ok() && flags.server(&any).is_ok());
    }
}
