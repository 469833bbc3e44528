//! Command-line flags of `server` and `client`, with validation.
//!
//! Every value is checked before anything starts; a bad one gets a message
//! naming the flag and exit code 2 (clap's usage-error code).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, ValueEnum};
use hyper::Uri;

use crate::arrivals::ThinkTime;
use crate::client::ClientConfig;
use crate::latency::LatencyModel;
use crate::policy::Strategy;
use crate::server::{OnDisconnect, ServerConfig, default_backlog};

/// Parses a duration written like `100ms`, `2s`, `1m 30s` or `5m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|_| format!("'{s}' is not a duration; write it like 100ms, 2s or 5m"))
}

/// Parses a duration that must be greater than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        Duration::ZERO => Err("must be greater than zero".to_string()),
        d => Ok(d),
    }
}

/// Parses a mean think time: plain seconds (`10`, `0.5`, as the original's
/// `-lambda`) or a duration (`500ms`). Must be greater than zero.
pub fn seconds_or_duration(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?
        }
        Ok(_) => return Err("must be a number of seconds greater than zero".to_string()),
        Err(_) => duration(s)?,
    };
    if d.is_zero() {
        return Err("must be greater than zero".to_string());
    }
    Ok(d)
}

fn finite(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("'{s}' is not a number")),
    }
}

/// A growth factor: a number of at least 1.
pub fn growth_factor(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 1.0 => Ok(x),
        _ => Err("must be at least 1 (delays grow, they never shrink)".to_string()),
    }
}

/// A backoff multiplier: a number greater than 1.
pub fn backoff_factor(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 1.0 => Ok(x),
        _ => Err("must be greater than 1 for the delay to grow".to_string()),
    }
}

/// A number greater than zero.
pub fn positive(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 0.0 => Ok(x),
        _ => Err("must be greater than zero".to_string()),
    }
}

/// A number of at least zero.
pub fn non_negative(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 0.0 => Ok(x),
        _ => Err("must be zero or more".to_string()),
    }
}

/// An `http://` URL.
pub fn http_url(s: &str) -> Result<Uri, String> {
    let uri: Uri = s.parse().map_err(|e| format!("'{s}' is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(format!("'{s}' is not an http://host:port/path URL"));
    }
    Ok(uri)
}

/// What the server does with a request whose client has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnDisconnectArg {
    /// Keep the work counting until its modelled completion (the original).
    Continue,
    /// Drop the work as soon as hyper notices the client has gone.
    Cancel,
}

/// `server`: an HTTP server whose latency grows exponentially with
/// concurrency. GET /api answers `OK` after the modelled delay.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None, allow_negative_numbers = true)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8070", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Concurrency above which latency starts to grow (requests).
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub limit: u64,
    /// Delay multiplier per SCALE requests above the limit (at least 1).
    #[arg(long, default_value = "1.05", value_parser = growth_factor, value_name = "X")]
    pub factor: f64,
    /// Latency at or below the limit.
    #[arg(long, alias = "baseDelay", default_value = "100ms", value_parser = positive_duration, value_name = "DURATION")]
    pub base_delay: Duration,
    /// Requests above the limit per FACTOR step of the delay.
    #[arg(long, default_value = "15", value_parser = positive, value_name = "N")]
    pub scale: f64,
    /// Saturation cap on the modelled delay.
    #[arg(long, default_value = "10m", value_parser = positive_duration, value_name = "DURATION")]
    pub max_delay: Duration,
    /// Listen backlog (connections the kernel queues while the server is
    /// stopped); the default is the kernel maximum, net.core.somaxconn.
    #[arg(long, default_value_t = default_backlog(), value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub backlog: u32,
    /// What happens to a request whose client has gone.
    #[arg(long, value_enum, default_value_t = OnDisconnectArg::Continue)]
    pub on_disconnect: OnDisconnectArg,
    /// How often to print a report line (and write a CSV row).
    #[arg(long, default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Write report rows to this CSV file.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
}

impl ServerArgs {
    /// Checks the flags together and builds the server's configuration.
    pub fn config(&self) -> Result<ServerConfig, clap::Error> {
        if self.base_delay > self.max_delay {
            return Err(Self::command().error(
                ErrorKind::ArgumentConflict,
                "--base-delay must not exceed --max-delay",
            ));
        }
        Ok(ServerConfig {
            listen: self.listen,
            model: LatencyModel {
                base: self.base_delay,
                limit: self.limit,
                factor: self.factor,
                scale: self.scale,
                max_delay: self.max_delay,
            },
            backlog: self.backlog,
            on_disconnect: match self.on_disconnect {
                OnDisconnectArg::Continue => OnDisconnect::Continue,
                OnDisconnectArg::Cancel => OnDisconnect::Cancel,
            },
            report_interval: self.report_interval,
            csv: self.csv.clone(),
            quiet: false,
        })
    }
}

/// The retry strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// The same delay (--fixed-delay) before every retry.
    Fixed,
    /// Textbook backoff: --min-delay, times --factor per retry, capped at
    /// --max-delay, plus normal jitter of --jitter times the delay.
    Exponential,
    /// The 2014 original client exactly: e times the previous sleep
    /// (first: the think time), capped at 5m, plus N(0, 0.1 s) jitter.
    #[value(name = "exponential-2014")]
    Exponential2014,
}

/// Retry strategy flags.
#[derive(Debug, Clone, Args)]
pub struct StrategyArgs {
    /// Retry strategy [default: fixed].
    #[arg(long, value_enum, value_name = "NAME")]
    pub strategy: Option<StrategyArg>,
    /// Same as --strategy exponential-2014 (the original client's flag).
    #[arg(long, conflicts_with = "strategy")]
    pub exponential_backoff: bool,
    /// fixed: delay before every retry.
    #[arg(long, alias = "simple-backoff-delay", default_value = "100ms", value_parser = duration, value_name = "DURATION")]
    pub fixed_delay: Duration,
    /// exponential: first delay.
    #[arg(long, default_value = "100ms", value_parser = positive_duration, value_name = "DURATION")]
    pub min_delay: Duration,
    /// exponential: cap on a delay before jitter.
    #[arg(long, default_value = "5m", value_parser = positive_duration, value_name = "DURATION")]
    pub max_delay: Duration,
    /// exponential: delay multiplier per retry (greater than 1).
    #[arg(long, default_value = "2.7", value_parser = backoff_factor, value_name = "X")]
    pub factor: f64,
    /// exponential: standard deviation of the normal jitter, as a fraction
    /// of the delay (0 for none).
    #[arg(long, default_value = "0.1", value_parser = non_negative, value_name = "X")]
    pub jitter: f64,
}

impl StrategyArgs {
    /// The chosen strategy.
    pub fn kind(&self) -> StrategyArg {
        match (self.strategy, self.exponential_backoff) {
            (Some(s), _) => s,
            (None, true) => StrategyArg::Exponential2014,
            (None, false) => StrategyArg::Fixed,
        }
    }

    /// Builds the strategy, or says which flags disagree.
    pub fn strategy(&self) -> Result<Strategy, String> {
        Ok(match self.kind() {
            StrategyArg::Fixed => Strategy::Fixed {
                delay: self.fixed_delay,
            },
            StrategyArg::Exponential => {
                if self.min_delay > self.max_delay {
                    return Err("--min-delay must not exceed --max-delay".to_string());
                }
                Strategy::Exponential {
                    min: self.min_delay,
                    max: self.max_delay,
                    factor: self.factor,
                    jitter: self.jitter,
                }
            }
            StrategyArg::Exponential2014 => Strategy::Exponential2014,
        })
    }
}

/// `client`: N simulated users sending Poisson traffic and retrying failed
/// and timed-out requests under a chosen strategy. Prints OK/error/timeout
/// rates every report interval.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None, allow_negative_numbers = true)]
pub struct ClientArgs {
    /// URL every attempt requests (plain http).
    #[arg(long, default_value = "http://127.0.0.1:8070/api", value_parser = http_url)]
    pub url: Uri,
    /// Number of simulated users, each with at most one request in flight.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub clients: u32,
    /// Mean think time between a user's requests, in seconds (or a duration
    /// such as 500ms); total demand is about CLIENTS / LAMBDA req/s.
    #[arg(long, default_value = "10", value_parser = seconds_or_duration, value_name = "SECONDS")]
    pub lambda: Duration,
    /// Time an attempt may take before it counts as timed out and its
    /// connection is closed.
    #[arg(long, default_value = "2s", value_parser = positive_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Retry strategy.
    #[command(flatten)]
    pub retry: StrategyArgs,
    /// How often to print a report line (and write a CSV row).
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Stop after this long [default: run until Ctrl-C].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Seed of every random draw (think times, jitter) [default: random,
    /// printed at start].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write report rows to this CSV file.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
}

impl ClientArgs {
    /// Checks the flags together and builds the client's configuration.
    pub fn config(&self) -> Result<ClientConfig, clap::Error> {
        let strategy = self
            .retry
            .strategy()
            .map_err(|msg| Self::command().error(ErrorKind::ArgumentConflict, msg))?;
        Ok(ClientConfig {
            url: self.url.clone(),
            clients: self.clients,
            think: ThinkTime::new(self.lambda),
            timeout: self.timeout,
            strategy,
            report_interval: self.report_interval,
            duration: self.duration,
            seed: self.seed.unwrap_or_else(rand::random),
            csv: self.csv.clone(),
            quiet: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(args: &[&str]) -> Result<ClientConfig, clap::Error> {
        let mut argv = vec!["client"];
        argv.extend_from_slice(args);
        ClientArgs::try_parse_from(argv)?.config()
    }

    fn server(args: &[&str]) -> Result<ServerConfig, clap::Error> {
        let mut argv = vec!["server"];
        argv.extend_from_slice(args);
        ServerArgs::try_parse_from(argv)?.config()
    }

    fn message(e: clap::Error) -> String {
        e.to_string()
    }

    #[test]
    fn client_defaults_match_the_original() {
        let c = client(&["--seed", "1"]).unwrap();
        assert_eq!(c.clients, 1000);
        assert_eq!(c.think.mean(), Duration::from_secs(10));
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(
            c.strategy,
            Strategy::Fixed {
                delay: Duration::from_millis(100)
            }
        );
        assert_eq!(c.report_interval, Duration::from_secs(5));
        assert_eq!(c.url, "http://127.0.0.1:8070/api");
    }

    #[test]
    fn original_flag_names_are_accepted() {
        let c = client(&["--exponential-backoff"]).unwrap();
        assert_eq!(c.strategy, Strategy::Exponential2014);
        let c = client(&["--simple-backoff-delay", "250ms"]).unwrap();
        assert_eq!(
            c.strategy,
            Strategy::Fixed {
                delay: Duration::from_millis(250)
            }
        );
        let s = server(&["--baseDelay", "20ms"]).unwrap();
        assert_eq!(s.model.base, Duration::from_millis(20));
    }

    #[test]
    fn lambda_takes_seconds_or_a_duration() {
        assert_eq!(
            client(&["--lambda", "0.5"]).unwrap().think.mean(),
            Duration::from_millis(500)
        );
        assert_eq!(
            client(&["--lambda", "250ms"]).unwrap().think.mean(),
            Duration::from_millis(250)
        );
        assert!(client(&["--lambda", "0"]).is_err());
    }

    #[test]
    fn textbook_exponential_reads_its_flags() {
        let c = client(&[
            "--strategy",
            "exponential",
            "--min-delay",
            "1s",
            "--factor",
            "2",
            "--jitter",
            "0",
            "--max-delay",
            "1m",
        ])
        .unwrap();
        assert_eq!(
            c.strategy,
            Strategy::Exponential {
                min: Duration::from_secs(1),
                max: Duration::from_secs(60),
                factor: 2.0,
                jitter: 0.0
            }
        );
    }

    #[test]
    fn bad_input_names_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--clients", "0"], "--clients"),
            (&["--factor", "-1"], "--factor"),
            (&["--factor", "1"], "--factor"),
            (&["--timeout", "abc"], "--timeout"),
            (&["--timeout", "0s"], "--timeout"),
            (&["--jitter", "-0.1"], "--jitter"),
            (&["--url", "https://127.0.0.1/api"], "--url"),
            (&["--strategy", "nope"], "--strategy"),
            (
                &["--strategy", "fixed", "--exponential-backoff"],
                "--exponential-backoff",
            ),
            (
                &[
                    "--strategy",
                    "exponential",
                    "--min-delay",
                    "10s",
                    "--max-delay",
                    "1s",
                ],
                "--min-delay",
            ),
        ];
        for (args, flag) in cases {
            let err = client(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(message(err).contains(flag), "{args:?} should name {flag}");
        }
        for (args, flag) in [
            (&["--factor", "-1"][..], "--factor"),
            (&["--factor", "0.5"][..], "--factor"),
            (&["--scale", "0"][..], "--scale"),
            (&["--backlog", "0"][..], "--backlog"),
            (
                &["--base-delay", "1s", "--max-delay", "10ms"][..],
                "--base-delay",
            ),
            (&["--listen", "nowhere"][..], "--listen"),
        ] {
            let err = server(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2);
            assert!(message(err).contains(flag), "{args:?} should name {flag}");
        }
    }

    #[test]
    fn unknown_strategy_lists_the_valid_ones() {
        let msg = message(client(&["--strategy", "nope"]).unwrap_err());
        for name in ["fixed", "exponential", "exponential-2014"] {
            assert!(msg.contains(name), "{msg}");
        }
    }

    #[test]
    fn server_defaults_match_the_original() {
        let s = server(&[]).unwrap();
        assert_eq!(s.model, LatencyModel::default());
        assert_eq!(s.listen, "127.0.0.1:8070".parse().unwrap());
        assert_eq!(s.on_disconnect, OnDisconnect::Continue);
        assert_eq!(s.backlog, default_backlog());
    }
}
