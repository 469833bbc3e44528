//! The command line of every program, one file each: flags parsed with
//! clap, then checked together and turned into a validated configuration
//! for the layers below. A bad value gets a message naming the flag and
//! exit code 2 (clap's usage-error code).

mod client;
mod generate;
mod protocol;
mod retry;
mod server;
mod storm;
mod sweep;
pub(crate) mod values;

use std::path::PathBuf;

use clap::{Args, Parser};

pub use client::{ClientArgs, ClientCli, ClientCommand, PlanArgs, PlanFormat};
pub use generate::{Generate, GenerateArgs, reference};
pub use protocol::{OutputArgs, ProtocolArgs};
pub use retry::{LimitArgs, StrategyArgs, ThrottleArgs};
pub use server::{ServerArgs, ShedStatusArg};
pub use storm::{ExecArgs, RunArgs, StormArgs, StormCli, StormCommand};
pub use sweep::SweepArgs;

use crate::experiment::Flags;
use crate::model::client::ClientConfig;
use crate::model::server::ServerConfig;

/// The runtime flag `server` and `client` share.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// Worker threads of the async runtime. 1 runs everything on one
    /// thread: a quarter to a third less CPU per request at moderate load
    /// (no wake-ups between threads), about half with both programs on one
    /// thread on the same core (`taskset -c 0`), but one core is then the
    /// ceiling. [default: one per core]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
}

/// The message for a flag given that does not apply to the choice made:
/// `flag` does not apply to `option choice`, only to `applies`.
fn stray<'a>(
    flag: &str,
    option: &str,
    choice: &str,
    applies: impl IntoIterator<Item = &'a str>,
) -> String {
    let applies: Vec<&str> = applies.into_iter().collect();
    let to = if applies.is_empty() {
        "nothing".to_string()
    } else {
        applies.join(", ")
    };
    format!("{flag} does not apply to {option} {choice} (it applies to: {to})")
}

/// Refuses flags that were given but do not apply to the choice made:
/// `flags` lists (flag, given, the choices it applies to).
fn refuse_strays(
    flags: &[(&str, bool, &[&str])],
    choice: &str,
    option: &str,
) -> Result<(), String> {
    match flags
        .iter()
        .find(|(_, given, applies)| *given && !applies.contains(&choice))
    {
        Some((flag, _, applies)) => Err(stray(flag, option, choice, applies.iter().copied())),
        None => Ok(()),
    }
}

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

impl Flags for ProgramFlags {
    fn server(&self, argv: &[String]) -> Result<ServerConfig, String> {
        let argv = std::iter::once("server").chain(argv.iter().map(String::as_str));
        ServerArgs::try_parse_from(argv)
            .and_then(|a| a.config())
            .map_err(|e| first_line(&e))
    }

    fn client(&self, argv: &[String]) -> Result<ClientConfig, String> {
        let argv = std::iter::once("client").chain(argv.iter().map(String::as_str));
        ClientCli::try_parse_from(argv)
            .and_then(|c| c.run.config())
            .map_err(|e| first_line(&e))
    }
}

/// A folder name from the current time: `2026-11-22T01-02-03Z`.
fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-")
}

/// The default results folder: `results/<UTC timestamp>[-suffix]`.
fn default_out(suffix: Option<&str>) -> PathBuf {
    let name = match suffix {
        Some(suffix) => format!("{}-{suffix}", timestamp()),
        None => timestamp(),
    };
    PathBuf::from("results").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stray_flag_is_named_with_where_it_applies() {
        assert_eq!(
            refuse_strays(&[("--a", true, &["x"]), ("--b", true, &[])], "y", "--mode"),
            Err("--a does not apply to --mode y (it applies to: x)".to_string())
        );
        assert_eq!(
            refuse_strays(&[("--b", true, &[])], "y", "--mode"),
            Err("--b does not apply to --mode y (it applies to: nothing)".to_string())
        );
        assert_eq!(
            refuse_strays(&[("--a", true, &["y"])], "y", "--mode"),
            Ok(())
        );
        assert_eq!(
            refuse_strays(&[("--a", false, &["x"])], "y", "--mode"),
            Ok(())
        );
    }

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
    }
}
