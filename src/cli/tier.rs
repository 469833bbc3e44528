//! A server's flags as a tier of a chain: the call it makes inward after
//! its own work, with that call's client flags, and what passes down the
//! chain with it (deadlines, cancellation).

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches};

use super::client::ClientCli;
use super::retry::{HedgingArgs, LimitArgs, StrategyArgs, ThrottleArgs};
use super::values::http_url;
use crate::experiment::scenario::split_flags;
use crate::model::tier::TierCall;

/// The call's own stream of the server's seed, when its flags give none.
const CALL_STREAM: u64 = 0xA076_1D64_78BD_642F;

/// Flags of a tier: a server that calls the next tier after its own work.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Chain (as a tier)")]
pub struct TierArgs {
    /// As a tier of a chain: after its own work, each request calls URL
    /// (the next tier, or the backend) under the policy of --call-client,
    /// and is answered 200 when that call succeeds, 503 when it fails, 504
    /// when its last attempt timed out.
    #[arg(long, value_parser = http_url, value_name = "URL")]
    pub call: Option<String>,
    /// The call's client flags in one quoted string, as `client` takes
    /// them: strategy, limits, --timeout, throttle, hedging, --seed,
    /// --timer-resolution [default: the client's defaults, seeded from
    /// --seed].
    #[arg(
        long,
        value_name = "FLAGS",
        requires = "call",
        allow_hyphen_values = true
    )]
    pub call_client: Option<String>,
    /// Pass the caller's remaining time inward (gRPC's `grpc-timeout`
    /// header): the call ends by the caller's deadline, and a request
    /// whose deadline has passed is answered 504 at once, without work.
    #[arg(long, requires = "call")]
    pub propagate_deadline: bool,
    /// Write the calls' report rows here, one every --report-interval: the
    /// client's CSV columns, for the calls this tier makes.
    #[arg(long, requires = "call", value_name = "PATH")]
    pub call_csv: Option<std::path::PathBuf>,
    /// Cancel the call inward when the caller goes (its connection
    /// closes), so that work for a gone caller stops down the chain.
    #[arg(long, requires = "call")]
    pub propagate_cancel: bool,
    /// The tier's name in its metrics (--metrics-listen): every series it
    /// serves, its server's and its calls', carries the label
    /// tier="NAME" [default: the address it listens on, as bound].
    #[arg(long, requires = "call", value_parser = tier_name, value_name = "NAME")]
    pub tier_name: Option<String>,
}

/// A tier's name: not empty, and without control characters (it becomes
/// a label's value, and a line of the view).
fn tier_name(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("a tier's name cannot be empty".into());
    }
    if s.chars().any(char::is_control) {
        return Err("a tier's name cannot hold control characters".into());
    }
    Ok(s.to_string())
}

/// The client flags a tier's call takes: its policy, its timeout, its
/// draws and its timer. A population, traffic, reporting or time scale of
/// its own would mean nothing (the tier's server sets the time scale).
fn call_flags() -> Vec<String> {
    let mut ids: Vec<String> = ["timeout", "seed", "timer_resolution"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let groups = [
        StrategyArgs::augment_args(clap::Command::new("x")),
        LimitArgs::augment_args(clap::Command::new("x")),
        HedgingArgs::augment_args(clap::Command::new("x")),
        ThrottleArgs::augment_args(clap::Command::new("x")),
    ];
    for group in groups {
        ids.extend(group.get_arguments().map(|a| a.get_id().to_string()));
    }
    ids
}

impl TierArgs {
    /// The tier's name in its metrics, once its server listens at `bound`:
    /// --tier-name, or that address; none for a server that is no tier.
    pub fn name(&self, bound: std::net::SocketAddr) -> Option<String> {
        self.call.as_ref()?;
        Some(self.tier_name.clone().unwrap_or_else(|| bound.to_string()))
    }

    /// The call this tier makes, if it is one; `seed` is the server's,
    /// which the call draws from when its flags give no --seed. Its report
    /// interval is the server's (set by the caller).
    pub fn call(&self, seed: u64) -> Result<Option<Box<TierCall>>, String> {
        let Some(url) = &self.call else {
            return Ok(None);
        };
        let flags = split_flags(self.call_client.as_deref().unwrap_or(""))
            .map_err(|e| format!("--call-client: {e}"))?;
        let argv = ["client".to_string(), "--url".to_string(), url.clone()]
            .into_iter()
            .chain(flags);
        let matches = ClientCli::command()
            .try_get_matches_from(argv)
            .map_err(|e| format!("--call-client: {}", first_line(&e)))?;
        let allowed = call_flags();
        let client = ClientCli::command();
        let is_flag = |id: &str| client.get_arguments().any(|a| a.get_id() == id);
        let stray = matches.ids().map(|id| id.as_str()).find(|id| {
            is_flag(id)
                && matches.value_source(id) == Some(ValueSource::CommandLine)
                && *id != "url"
                && !allowed.iter().any(|a| a == id)
        });
        if let Some(id) = stray {
            return Err(format!(
                "--call-client: --{} does not apply to a tier's call (it takes a client's \
                 policy, --timeout, --seed and --timer-resolution)",
                id.replace('_', "-")
            ));
        }
        let given_seed = matches.value_source("seed") == Some(ValueSource::CommandLine);
        let cli = ClientCli::from_arg_matches(&matches)
            .map_err(|e| format!("--call-client: {}", first_line(&e)))?;
        let mut client = cli
            .run
            .config()
            .map_err(|e| format!("--call-client: {}", first_line(&e)))?;
        if !given_seed {
            client.seed = seed ^ CALL_STREAM;
        }
        client.csv = self.call_csv.clone();
        client.quiet = true;
        Ok(Some(Box::new(TierCall {
            url: url.clone(),
            client,
            propagate_deadline: self.propagate_deadline,
            propagate_cancel: self.propagate_cancel,
        })))
    }
}

/// A clap error's message without its usage lines.
fn first_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::StrategyKind;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Debug, Parser)]
    struct Tier {
        #[command(flatten)]
        tier: TierArgs,
    }

    fn call(args: &[&str]) -> Result<Option<Box<TierCall>>, String> {
        let argv = std::iter::once("tier").chain(args.iter().copied());
        Tier::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .tier
            .call(7)
    }

    #[test]
    fn a_tier_reads_its_calls_client_flags() {
        let c = call(&[
            "--call",
            "http://127.0.0.1:9000/api",
            "--call-client",
            "--strategy fixed --max-attempts 3 --timeout 500ms",
            "--propagate-deadline",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.url, "http://127.0.0.1:9000/api");
        assert_eq!(c.client.url, c.url);
        assert_eq!(c.client.strategy.kind(), StrategyKind::Fixed);
        assert_eq!(c.client.limits.max_attempts, Some(3));
        assert_eq!(c.client.timeout, Duration::from_millis(500));
        assert!(c.propagate_deadline && !c.propagate_cancel);
        // No --seed: the server's, on a stream of its own.
        assert_eq!(c.client.seed, 7 ^ CALL_STREAM);
        let seeded = call(&["--call", "http://h:1/api", "--call-client", "--seed 5"]);
        assert_eq!(seeded.unwrap().unwrap().client.seed, 5);
        assert!(call(&[]).unwrap().is_none());
    }

    #[test]
    fn a_tier_refuses_what_its_call_cannot_take() {
        let err = call(&["--call", "http://h:1/api", "--call-client", "--clients 5"]).unwrap_err();
        assert!(err.contains("--clients does not apply"), "{err}");
        let err = call(&[
            "--call",
            "http://h:1/api",
            "--call-client",
            "--time-scale 10",
        ]);
        assert!(err.unwrap_err().contains("--time-scale"));
        let err = call(&[
            "--call",
            "http://h:1/api",
            "--call-client",
            "--strategy nope",
        ]);
        assert!(err.unwrap_err().starts_with("--call-client: "));
        let err = call(&["--call", "http://h:1/api", "--call-client", "'--strategy"]);
        assert!(err.unwrap_err().contains("unbalanced quotes"));
        // The chain's flags need --call.
        assert!(call(&["--propagate-cancel"]).is_err());
        assert!(call(&["--tier-name", "edge"]).is_err());
        assert!(call(&["--call", "ftp://h/api"]).is_err());
    }

    #[test]
    fn a_tier_is_named_by_its_flag_or_by_the_address_it_listens_on() {
        let args = |argv: &[&str]| {
            let argv = std::iter::once("tier").chain(argv.iter().copied());
            Tier::try_parse_from(argv).map(|t| t.tier)
        };
        let bound = "127.0.0.1:8071".parse().unwrap();
        let named = args(&["--call", "http://h:1/api", "--tier-name", "edge"]).unwrap();
        assert_eq!(named.name(bound).as_deref(), Some("edge"));
        let unnamed = args(&["--call", "http://h:1/api"]).unwrap();
        assert_eq!(unnamed.name(bound).as_deref(), Some("127.0.0.1:8071"));
        assert_eq!(args(&[]).unwrap().name(bound), None);
        for bad in ["", "a\nb"] {
            let err = args(&["--call", "http://h:1/api", "--tier-name", bad]).unwrap_err();
            assert!(err.to_string().contains("a tier's name cannot"), "{err}");
        }
    }
}
