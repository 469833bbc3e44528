//! Command-line flags of `server` and `client`, with validation.
//!
//! Every value is checked before anything starts; a bad one gets a message
//! naming the flag and exit code 2 (clap's usage-error code).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use hyper::{StatusCode, Uri};

use crate::arrivals::ThinkTime;
use crate::client::ClientConfig;
use crate::latency::LatencyModel;
use crate::planner::PlanRequest;
use crate::policy::{RetryLimits, Strategy, ThrottleConfig};
use crate::server::{OnDisconnect, ServerConfig, Shedding, default_backlog};
use crate::storm::StormConfig;
use crate::sweep::SweepConfig;
use crate::timescale::compress;

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

/// Parses a timer resolution: from zero (each deadline exactly) to 10 ms.
pub fn timer_resolution(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d > Duration::from_millis(10) => {
            Err("must be at most 10ms (0s rings at each deadline exactly)".to_string())
        }
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

/// A time compression factor: at least 1.
pub fn time_scale(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 1.0 => Ok(x),
        _ => Err("must be at least 1 (1 is real time)".to_string()),
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

/// Status code of a shed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShedStatusArg {
    /// 503 Service Unavailable (overload).
    #[value(name = "503")]
    Unavailable,
    /// 429 Too Many Requests (rate limit).
    #[value(name = "429")]
    TooMany,
}

/// Refuses flags that were given but do not apply to the choice made:
/// `flags` lists (flag, given, the choices it applies to).
fn refuse_strays(
    flags: &[(&str, bool, &[&str])],
    choice: &str,
    option: &str,
) -> Result<(), String> {
    for (flag, given, applies) in flags {
        if *given && !applies.contains(&choice) {
            let to = if applies.is_empty() {
                "nothing".to_string()
            } else {
                applies.join(", ")
            };
            return Err(format!(
                "{flag} does not apply to {option} {choice} (it applies to: {to})"
            ));
        }
    }
    Ok(())
}

/// An HTTP server whose latency grows exponentially with concurrency:
/// GET /api answers OK after the modelled delay.
#[derive(Debug, Parser)]
#[command(name = "server", version, about, long_about = None, allow_negative_numbers = true)]
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
    /// Push-back: with N requests in flight, answer new ones at once with
    /// --shed-status and a Retry-After header, outside the latency model.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub shed_above: Option<u64>,
    /// Retry-After sent with shed requests (whole seconds are sent as an
    /// integer, anything finer as decimal seconds) [default: 1s].
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub retry_after: Option<Duration>,
    /// Status of shed requests [default: 503].
    #[arg(long, value_enum, value_name = "CODE")]
    pub shed_status: Option<ShedStatusArg>,
    /// How often to print a report line (and write a CSV row).
    #[arg(long, default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Close a connection whose next request head has not fully arrived
    /// this long after the connection opened or the last answer (a stalled
    /// or very slow sender; hyper counts idle keep-alive time too, so it
    /// also closes connections idle this long). nginx's default; not
    /// scaled by --time-scale.
    #[arg(long, default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub header_read_timeout: Duration,
    /// Step of the timer that ends each modelled delay (a completion comes
    /// at the first step at or after it): 0s is exact, and each step that
    /// rings costs a wake-up of the process (about 20 µs of CPU here), so a
    /// coarser step is cheaper. Not scaled by --time-scale.
    #[arg(long, default_value = "500us", value_parser = timer_resolution, value_name = "DURATION")]
    pub timer_resolution: Duration,
    /// The async runtime.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Write report rows to this CSV file.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Compress time: divide every duration given (delays, Retry-After,
    /// report interval) by K, for quick experiments.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale, value_name = "K")]
    pub time_scale: f64,
}

impl ServerArgs {
    /// Checks the flags together and builds the server's configuration.
    pub fn config(&self) -> Result<ServerConfig, clap::Error> {
        let conflict = |msg: &str| Self::command().error(ErrorKind::ArgumentConflict, msg);
        if self.base_delay > self.max_delay {
            return Err(conflict("--base-delay must not exceed --max-delay"));
        }
        let shedding = if self.shed_above.is_some() {
            "on"
        } else {
            "off"
        };
        refuse_strays(
            &[
                ("--retry-after", self.retry_after.is_some(), &["on"]),
                ("--shed-status", self.shed_status.is_some(), &["on"]),
            ],
            shedding,
            "shedding (--shed-above)",
        )
        .map_err(|msg| conflict(&msg))?;
        let k = self.time_scale;
        Ok(ServerConfig {
            listen: self.listen,
            model: LatencyModel {
                base: compress(self.base_delay, k),
                limit: self.limit,
                factor: self.factor,
                scale: self.scale,
                max_delay: compress(self.max_delay, k),
            },
            backlog: self.backlog,
            on_disconnect: match self.on_disconnect {
                OnDisconnectArg::Continue => OnDisconnect::Continue,
                OnDisconnectArg::Cancel => OnDisconnect::Cancel,
            },
            shed: self.shed_above.map(|above| Shedding {
                above,
                status: match self.shed_status {
                    Some(ShedStatusArg::TooMany) => StatusCode::TOO_MANY_REQUESTS,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                },
                retry_after: compress(self.retry_after.unwrap_or(Duration::from_secs(1)), k),
            }),
            report_interval: compress(self.report_interval, k),
            header_read_timeout: self.header_read_timeout,
            timer_resolution: self.timer_resolution,
            csv: self.csv.clone(),
            quiet: false,
        })
    }
}

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
    /// U(0, min(max, min * factor^n)).
    FullJitter,
    /// v/2 + U(0, v/2), v = min(max, min * factor^n).
    EqualJitter,
    /// min(max, U(min, factor * previous sleep)).
    DecorrelatedJitter,
    /// Ethernet: slot * (2^k - 1), k uniform in 0..=c, c growing per
    /// failure up to --ceiling.
    TruncatedBinary,
    /// Google Cloud: min(min * factor^(n-1) + U(0, 1 s), max): 1 s, 2 s,
    /// 4 s, ... plus up to 1000 ms, at most 32 s, at most 10 attempts.
    Google,
}

impl StrategyArg {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StrategyArg::Fixed => "fixed",
            StrategyArg::Exponential => "exponential",
            StrategyArg::Exponential2014 => "exponential-2014",
            StrategyArg::FullJitter => "full-jitter",
            StrategyArg::EqualJitter => "equal-jitter",
            StrategyArg::DecorrelatedJitter => "decorrelated-jitter",
            StrategyArg::TruncatedBinary => "truncated-binary",
            StrategyArg::Google => "google",
        }
    }
}

/// Strategies that read --min-delay, --max-delay and --factor.
const GROWING: &[&str] = &[
    "exponential",
    "full-jitter",
    "equal-jitter",
    "decorrelated-jitter",
    "google",
];

/// Retry strategy flags. Flags that do not apply to the chosen strategy are
/// refused; defaults depend on the strategy.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Retry strategy")]
pub struct StrategyArgs {
    /// Retry strategy [default: fixed].
    #[arg(long, value_enum, value_name = "NAME")]
    pub strategy: Option<StrategyArg>,
    /// Same as --strategy exponential-2014 (the original client's flag).
    #[arg(long, conflicts_with = "strategy")]
    pub exponential_backoff: bool,
    /// fixed: delay before every retry [default: 100ms].
    #[arg(long, alias = "simple-backoff-delay", value_parser = duration, value_name = "DURATION")]
    pub fixed_delay: Option<Duration>,
    /// First delay or base [default: 100ms; google: 1s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub min_delay: Option<Duration>,
    /// Cap on a delay [default: 5m; google: 32s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub max_delay: Option<Duration>,
    /// Growth factor, greater than 1 [default: exponential 2.7;
    /// full-jitter, equal-jitter, google 2; decorrelated-jitter 3].
    #[arg(long, value_parser = backoff_factor, value_name = "X")]
    pub factor: Option<f64>,
    /// exponential: standard deviation of the normal jitter, as a fraction
    /// of the delay; 0 for the plain geometric schedule [default: 0.1].
    #[arg(long, value_parser = non_negative, value_name = "X")]
    pub jitter: Option<f64>,
    /// truncated-binary: slot time [default: 100ms].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub slot_time: Option<Duration>,
    /// truncated-binary: largest collision count, 1 to 32 [default: 10].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32), value_name = "N")]
    pub ceiling: Option<u32>,
    /// truncated-binary: stay at the ceiling instead of starting again at 1.
    #[arg(long)]
    pub stay_at_ceiling: bool,
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

    /// Builds the strategy, or says which flags are wrong for it.
    pub fn strategy(&self) -> Result<Strategy, String> {
        let kind = self.kind();
        refuse_strays(
            &[
                ("--fixed-delay", self.fixed_delay.is_some(), &["fixed"]),
                ("--min-delay", self.min_delay.is_some(), GROWING),
                ("--max-delay", self.max_delay.is_some(), GROWING),
                ("--factor", self.factor.is_some(), GROWING),
                ("--jitter", self.jitter.is_some(), &["exponential"]),
                (
                    "--slot-time",
                    self.slot_time.is_some(),
                    &["truncated-binary"],
                ),
                ("--ceiling", self.ceiling.is_some(), &["truncated-binary"]),
                (
                    "--stay-at-ceiling",
                    self.stay_at_ceiling,
                    &["truncated-binary"],
                ),
            ],
            kind.name(),
            "--strategy",
        )?;
        let (min_default, max_default, factor_default) = match kind {
            StrategyArg::Google => (Duration::from_secs(1), Duration::from_secs(32), 2.0),
            StrategyArg::Exponential => (Duration::from_millis(100), Duration::from_secs(300), 2.7),
            StrategyArg::DecorrelatedJitter => {
                (Duration::from_millis(100), Duration::from_secs(300), 3.0)
            }
            _ => (Duration::from_millis(100), Duration::from_secs(300), 2.0),
        };
        let min = self.min_delay.unwrap_or(min_default);
        let max = self.max_delay.unwrap_or(max_default);
        let factor = self.factor.unwrap_or(factor_default);
        if GROWING.contains(&kind.name()) && min > max {
            return Err("--min-delay must not exceed --max-delay".to_string());
        }
        Ok(match kind {
            StrategyArg::Fixed => Strategy::Fixed {
                delay: self.fixed_delay.unwrap_or(Duration::from_millis(100)),
            },
            StrategyArg::Exponential => Strategy::Exponential {
                min,
                max,
                factor,
                jitter: self.jitter.unwrap_or(0.1),
            },
            StrategyArg::Exponential2014 => Strategy::exponential_2014(),
            StrategyArg::FullJitter => Strategy::FullJitter {
                base: min,
                cap: max,
                factor,
            },
            StrategyArg::EqualJitter => Strategy::EqualJitter {
                base: min,
                cap: max,
                factor,
            },
            StrategyArg::DecorrelatedJitter => Strategy::DecorrelatedJitter {
                base: min,
                cap: max,
                factor,
            },
            StrategyArg::TruncatedBinary => Strategy::TruncatedBinary {
                slot: self.slot_time.unwrap_or(Duration::from_millis(100)),
                ceiling: self.ceiling.unwrap_or(10),
                stay_at_ceiling: self.stay_at_ceiling,
            },
            StrategyArg::Google => Strategy::Google {
                first: min,
                factor,
                max,
                random: Duration::from_millis(1000),
            },
        })
    }
}

/// Limits on the retries of a logical request, whatever the strategy.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Retry limits")]
pub struct LimitArgs {
    /// Attempts per logical request, the first included; then it is given
    /// up [default: no limit; google: 10].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Give a logical request up once this long has passed since its first
    /// attempt's scheduled start; no attempt runs past it.
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub deadline: Option<Duration>,
    /// Wait at least what the server's Retry-After header asks for.
    #[arg(long)]
    pub respect_retry_after: bool,
}

impl LimitArgs {
    /// The limits for a strategy (google has an attempt limit by default).
    pub fn limits(&self, kind: StrategyArg) -> RetryLimits {
        let default_attempts = (kind == StrategyArg::Google).then_some(10);
        RetryLimits {
            max_attempts: self.max_attempts.or(default_attempts),
            deadline: self.deadline,
            respect_retry_after: self.respect_retry_after,
        }
    }
}

/// The retry throttles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThrottleArg {
    /// gRPC retry throttling: no retries while tokens <= max/2.
    TokenBucket,
    /// Finagle-style budget: retries <= percent of requests + a floor.
    Budget,
    /// SRE book client-side throttling: reject locally with probability
    /// max(0, (requests - K * accepts) / (requests + 1)).
    Adaptive,
    /// Closed, open for a cool-down, half-open probes.
    CircuitBreaker,
}

impl ThrottleArg {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ThrottleArg::TokenBucket => "token-bucket",
            ThrottleArg::Budget => "budget",
            ThrottleArg::Adaptive => "adaptive",
            ThrottleArg::CircuitBreaker => "circuit-breaker",
        }
    }
}

/// A throttle shared by all users of the process. Flags that do not apply
/// to the chosen throttle are refused.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Retry throttle")]
pub struct ThrottleArgs {
    /// Retry throttle shared by all clients [default: none].
    #[arg(long, value_enum, value_name = "NAME")]
    pub throttle: Option<ThrottleArg>,
    /// token-bucket: bucket size [default: 10].
    #[arg(long, value_parser = positive, value_name = "X")]
    pub max_tokens: Option<f64>,
    /// token-bucket: tokens a success returns [default: 0.1].
    #[arg(long, value_parser = positive, value_name = "X")]
    pub token_ratio: Option<f64>,
    /// budget: retries allowed as a percentage of requests [default: 20].
    #[arg(long, value_parser = non_negative, value_name = "PERCENT")]
    pub budget_percent: Option<f64>,
    /// budget: window [default: 10s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub budget_ttl: Option<Duration>,
    /// budget: retries per second allowed regardless [default: 10].
    #[arg(long, value_parser = non_negative, value_name = "X")]
    pub budget_min_per_sec: Option<f64>,
    /// adaptive: the multiplier K [default: 2].
    #[arg(long, value_parser = positive, value_name = "X")]
    pub adaptive_k: Option<f64>,
    /// adaptive: window [default: 2m].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub adaptive_window: Option<Duration>,
    /// circuit-breaker: failure share that opens it, in (0, 1] [default: 0.5].
    #[arg(long, value_parser = ratio, value_name = "X")]
    pub breaker_failure_ratio: Option<f64>,
    /// circuit-breaker: fewest attempts in the window before the ratio
    /// counts [default: 20].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub breaker_min_requests: Option<u64>,
    /// circuit-breaker: window of the ratio [default: 10s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub breaker_window: Option<Duration>,
    /// circuit-breaker: also open after this many consecutive failures.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub breaker_consecutive: Option<u64>,
    /// circuit-breaker: how long it stays open [default: 5s].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub breaker_cooldown: Option<Duration>,
    /// circuit-breaker: attempts let through while half-open [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub breaker_probes: Option<u32>,
}

/// A number in (0, 1].
pub fn ratio(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err("must be greater than 0 and at most 1".to_string()),
    }
}

impl ThrottleArgs {
    /// Builds the throttle, or says which flags are wrong for it.
    pub fn throttle(&self) -> Result<Option<ThrottleConfig>, String> {
        let name = self.throttle.map_or("none", ThrottleArg::name);
        let breaker: &[&str] = &["circuit-breaker"];
        refuse_strays(
            &[
                ("--max-tokens", self.max_tokens.is_some(), &["token-bucket"]),
                (
                    "--token-ratio",
                    self.token_ratio.is_some(),
                    &["token-bucket"],
                ),
                (
                    "--budget-percent",
                    self.budget_percent.is_some(),
                    &["budget"],
                ),
                ("--budget-ttl", self.budget_ttl.is_some(), &["budget"]),
                (
                    "--budget-min-per-sec",
                    self.budget_min_per_sec.is_some(),
                    &["budget"],
                ),
                ("--adaptive-k", self.adaptive_k.is_some(), &["adaptive"]),
                (
                    "--adaptive-window",
                    self.adaptive_window.is_some(),
                    &["adaptive"],
                ),
                (
                    "--breaker-failure-ratio",
                    self.breaker_failure_ratio.is_some(),
                    breaker,
                ),
                (
                    "--breaker-min-requests",
                    self.breaker_min_requests.is_some(),
                    breaker,
                ),
                ("--breaker-window", self.breaker_window.is_some(), breaker),
                (
                    "--breaker-consecutive",
                    self.breaker_consecutive.is_some(),
                    breaker,
                ),
                (
                    "--breaker-cooldown",
                    self.breaker_cooldown.is_some(),
                    breaker,
                ),
                ("--breaker-probes", self.breaker_probes.is_some(), breaker),
            ],
            name,
            "--throttle",
        )?;
        Ok(self.throttle.map(|kind| match kind {
            ThrottleArg::TokenBucket => ThrottleConfig::TokenBucket {
                max_tokens: self.max_tokens.unwrap_or(10.0),
                token_ratio: self.token_ratio.unwrap_or(0.1),
            },
            ThrottleArg::Budget => ThrottleConfig::Budget {
                percent: self.budget_percent.unwrap_or(20.0) / 100.0,
                ttl: self.budget_ttl.unwrap_or(Duration::from_secs(10)),
                min_per_sec: self.budget_min_per_sec.unwrap_or(10.0),
            },
            ThrottleArg::Adaptive => ThrottleConfig::Adaptive {
                k: self.adaptive_k.unwrap_or(2.0),
                window: self.adaptive_window.unwrap_or(Duration::from_secs(120)),
            },
            ThrottleArg::CircuitBreaker => ThrottleConfig::CircuitBreaker {
                failure_ratio: self.breaker_failure_ratio.unwrap_or(0.5),
                min_requests: self.breaker_min_requests.unwrap_or(20),
                window: self.breaker_window.unwrap_or(Duration::from_secs(10)),
                consecutive: self.breaker_consecutive,
                cooldown: self.breaker_cooldown.unwrap_or(Duration::from_secs(5)),
                probes: self.breaker_probes.unwrap_or(1),
            },
        }))
    }
}

/// N simulated users sending Poisson traffic and retrying failed and
/// timed-out requests under a chosen strategy; prints OK/error/timeout rates
/// every report interval. `client plan` prints a strategy's schedule without
/// sending anything.
#[derive(Debug, Parser)]
#[command(
    name = "client",
    version,
    about,
    long_about = None,
    allow_negative_numbers = true,
    args_conflicts_with_subcommands = true
)]
pub struct ClientCli {
    /// What to do (default: run the load).
    #[command(subcommand)]
    pub command: Option<ClientCommand>,
    /// The load's flags.
    #[command(flatten)]
    pub run: ClientArgs,
}

/// Subcommands of `client`.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Print a strategy's retry schedule: retry number, sleep before it and
    /// time elapsed since the first failure. No network.
    Plan(PlanArgs),
}

/// Flags of a client run.
#[derive(Debug, Args)]
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
    /// How often to print a report line (and write a CSV row).
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Stop after this long [default: run until Ctrl-C].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Start the users evenly over this time instead of all at once (a
    /// large population started at once opens every connection in the same
    /// second).
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    pub ramp_up: Duration,
    /// Step of the timer that starts attempts (an attempt starts at the
    /// first step at or after its instant): 0s is exact, and each step that
    /// rings costs a wake-up of the process (about 20 µs of CPU here), so a
    /// coarser step is cheaper. Not scaled by --time-scale.
    #[arg(long, default_value = "500us", value_parser = timer_resolution, value_name = "DURATION")]
    pub timer_resolution: Duration,
    /// The async runtime.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Seed of every random draw (think times, jitter) [default: random,
    /// printed at start].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write report rows to this CSV file.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Compress time: divide every duration given (think time, timeout,
    /// retry delays, windows, report interval, run length) by K and multiply
    /// rates by it, for quick experiments.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale, value_name = "K")]
    pub time_scale: f64,
    /// Retry strategy.
    #[command(flatten)]
    pub retry: StrategyArgs,
    /// Retry limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Retry throttle.
    #[command(flatten)]
    pub throttle: ThrottleArgs,
}

fn conflict(msg: String) -> clap::Error {
    ClientCli::command().error(ErrorKind::ArgumentConflict, msg)
}

impl ClientArgs {
    /// Checks the flags together and builds the client's configuration.
    pub fn config(&self) -> Result<ClientConfig, clap::Error> {
        let k = self.time_scale;
        let strategy = self.retry.strategy().map_err(conflict)?.scaled(k);
        let throttle = self
            .throttle
            .throttle()
            .map_err(conflict)?
            .map(|t| t.scaled(k));
        let mut limits = self.limits.limits(self.retry.kind());
        limits.deadline = limits.deadline.map(|d| compress(d, k));
        Ok(ClientConfig {
            url: self.url.clone(),
            clients: self.clients,
            think: ThinkTime::new(compress(self.lambda, k)),
            timeout: compress(self.timeout, k),
            strategy,
            limits,
            throttle,
            report_interval: compress(self.report_interval, k),
            duration: self.duration.map(|d| compress(d, k)),
            ramp_up: compress(self.ramp_up, k),
            timer_resolution: self.timer_resolution,
            seed: self.seed.unwrap_or_else(rand::random),
            csv: self.csv.clone(),
            quiet: false,
        })
    }
}

/// Output format of `client plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// An aligned table for the terminal.
    Table,
    /// CSV, times in seconds with three decimals.
    Csv,
}

/// Flags of `client plan`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct PlanArgs {
    /// Retry strategy and its flags.
    #[command(flatten)]
    pub retry: StrategyArgs,
    /// Retries to show (attempts after the first).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000), value_name = "N")]
    pub attempts: u32,
    /// Stop the table where --max-attempts would give up.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Geometric schedule: pick r = 1 + X, so that each sleep is about X
    /// times the time already waited (sets --factor; --jitter defaults to 0).
    #[arg(long, value_parser = positive, value_name = "X", conflicts_with = "factor")]
    pub target_ratio: Option<f64>,
    /// Mean think time, seconds (exponential-2014 starts from it).
    #[arg(long, default_value = "10", value_parser = seconds_or_duration, value_name = "SECONDS")]
    pub lambda: Duration,
    /// Draws for random strategies (min/median/max over them).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000), value_name = "N")]
    pub samples: u32,
    /// Seed of the draws.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Table)]
    pub format: PlanFormat,
}

/// A usage error of `client plan`, with that subcommand's usage.
fn plan_conflict(msg: String) -> clap::Error {
    let mut client = ClientCli::command();
    match client.find_subcommand_mut("plan") {
        Some(plan) => plan
            .clone()
            .bin_name("client plan")
            .error(ErrorKind::ArgumentConflict, msg),
        None => client.error(ErrorKind::ArgumentConflict, msg),
    }
}

impl PlanArgs {
    /// Builds the planner's input, or says which flags are wrong.
    pub fn request(&self) -> Result<PlanRequest, clap::Error> {
        let mut retry = self.retry.clone();
        if let Some(x) = self.target_ratio {
            if retry.kind() != StrategyArg::Exponential {
                return Err(plan_conflict(
                    "--target-ratio applies to --strategy exponential (the geometric schedule)"
                        .to_string(),
                ));
            }
            retry.factor = Some(1.0 + x);
            retry.jitter.get_or_insert(0.0);
        }
        let strategy = retry.strategy().map_err(plan_conflict)?;
        let limit = LimitArgs {
            max_attempts: self.max_attempts,
            deadline: None,
            respect_retry_after: false,
        }
        .limits(retry.kind())
        .max_attempts
        .map(|attempts| attempts.saturating_sub(1));
        Ok(PlanRequest {
            strategy,
            think: ThinkTime::new(self.lambda),
            retries: limit.map_or(self.attempts, |l| l.min(self.attempts)),
            samples: self.samples,
            seed: self.seed,
        })
    }
}

/// The whole retry-storm experiment in one command: for each strategy, a
/// real server and client; the server stopped with SIGSTOP after the warm-up
/// and resumed with SIGCONT after the pause; a verdict, a summary and plots.
#[derive(Debug, Parser)]
#[command(
    name = "storm",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true
)]
pub struct StormCli {
    /// The runner's children (internal): `storm server ...` is `server ...`,
    /// `storm client ...` is `client ...`.
    #[command(subcommand)]
    pub command: Option<StormCommand>,
    /// The experiment's flags.
    #[command(flatten)]
    pub run: StormArgs,
}

/// What `storm` runs as a child of itself.
#[derive(Debug, Subcommand)]
pub enum StormCommand {
    /// Map where each policy breaks: critical pauses and a heat map, in
    /// virtual time.
    Sweep(Box<SweepArgs>),
    /// Run the server (the same as the `server` program).
    #[command(hide = true)]
    Server(Box<ServerArgs>),
    /// Run the client (the same as the `client` program).
    #[command(hide = true)]
    Client(Box<ClientCli>),
}

/// Flags of the experiment.
#[derive(Debug, Args)]
pub struct StormArgs {
    /// Strategies to compare, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fixed,exponential-2014,exponential",
        value_name = "NAMES"
    )]
    pub strategies: Vec<StrategyArg>,
    /// How long the server stays stopped.
    #[arg(long, default_value = "20s", value_parser = duration, value_name = "DURATION")]
    pub pause: Duration,
    /// Divide every duration by ten (latencies, timeouts, think times,
    /// retry delays, phases): the same experiment in a tenth of the time.
    #[arg(long)]
    pub quick: bool,
    /// Run the strategies one after the other, not side by side against
    /// separate servers.
    #[arg(long)]
    pub in_turn: bool,
    /// real: child processes over loopback, SIGSTOP and SIGCONT, in real
    /// time; sim: the same model in virtual time, in milliseconds.
    #[arg(long, value_enum, default_value_t = EngineArg::Real)]
    pub engine: EngineArg,
    /// Print what the engine did (with sim: events and their rate).
    #[arg(long, short)]
    pub verbose: bool,
    /// Flags shared with `storm sweep`.
    #[command(flatten)]
    pub common: ProtocolArgs,
}

/// Flags of the protocol and its output, shared by `storm` and `storm sweep`.
#[derive(Debug, Clone, Args)]
pub struct ProtocolArgs {
    /// Warm-up before the server is stopped.
    #[arg(long, default_value = "20s", value_parser = positive_duration, value_name = "DURATION")]
    pub warmup: Duration,
    /// Observation after the server resumes: a recovery must start within it.
    #[arg(long, default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub observe: Duration,
    /// Client report interval: the unit of the recovery verdict.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Results folder [default: results/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Draw PNG plots instead of SVG.
    #[arg(long)]
    pub png: bool,
    /// Seed of every client.
    #[arg(long, default_value_t = 2014, value_name = "N")]
    pub seed: u64,
    /// Extra flags for every server, e.g. "--limit 40 --on-disconnect cancel".
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub server_args: Option<String>,
    /// Extra flags for every client, e.g. "--clients 2000 --throttle budget".
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub client_args: Option<String>,
    /// No live progress on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// `storm sweep`: where each policy breaks. For each strategy (and each
/// number of clients, timeout and server limit given), the critical pause:
/// the longest pause after which the system still recovers, by bisection in
/// virtual time; and a heat map of recovery time by pause.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Strategies to map, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "NAMES")]
    pub strategies: Vec<StrategyArg>,
    /// Numbers of clients, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000", value_name = "N,...",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub clients: Vec<u32>,
    /// Client timeouts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2s", value_parser = positive_duration,
          value_name = "DURATION,...")]
    pub timeout: Vec<Duration>,
    /// Server limits (concurrency where latency starts to grow), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "30",
        value_name = "N,..."
    )]
    pub limit: Vec<u64>,
    /// Seeds per point (from --seed on); a point recovers when most do.
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub seeds: u32,
    /// Longest pause tried.
    #[arg(long, default_value = "120s", value_parser = positive_duration, value_name = "DURATION")]
    pub max_pause: Duration,
    /// Precision of the critical pause.
    #[arg(long, default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub resolution: Duration,
    /// Pause step of the heat map.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub step: Duration,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Print the number of runs and events, and their rate.
    #[arg(long, short)]
    pub verbose: bool,
    /// Flags shared with `storm`.
    #[command(flatten)]
    pub common: ProtocolArgs,
}

impl SweepArgs {
    /// Builds the sweep's configuration.
    pub fn config(&self) -> SweepConfig {
        let strategies = if self.strategies.is_empty() {
            StrategyArg::value_variants().to_vec()
        } else {
            distinct(&self.strategies)
        };
        let threads = self.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |n| n as usize,
        );
        let mut storm = self
            .common
            .storm_config(strategies, Duration::ZERO, 1.0, PathBuf::new());
        storm.virtual_time = true;
        storm.verbose = self.verbose;
        if self.common.out.is_none() {
            storm.out = PathBuf::from("results").join(format!("{}-sweep", timestamp()));
        }
        SweepConfig {
            storm,
            clients: self.clients.clone(),
            timeouts: self.timeout.clone(),
            limits: self.limit.clone(),
            seeds: self.seeds,
            max_pause: self.max_pause,
            resolution: self.resolution,
            step: self.step,
            threads,
        }
    }
}

impl ProtocolArgs {
    /// A storm configuration with these flags.
    fn storm_config(
        &self,
        strategies: Vec<StrategyArg>,
        pause: Duration,
        time_scale: f64,
        program: PathBuf,
    ) -> StormConfig {
        let split = |flags: &Option<String>| -> Vec<String> {
            flags
                .as_deref()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        StormConfig {
            strategies,
            warmup: self.warmup,
            pause,
            observe: self.observe,
            report_interval: self.report_interval,
            time_scale,
            in_turn: false,
            out: self
                .out
                .clone()
                .unwrap_or_else(|| PathBuf::from("results").join(timestamp())),
            png: self.png,
            seed: self.seed,
            server_args: split(&self.server_args),
            client_args: split(&self.client_args),
            program,
            progress: !self.quiet,
            virtual_time: false,
            verbose: false,
        }
    }
}

/// The strategies named, each once, in the order first named.
fn distinct(strategies: &[StrategyArg]) -> Vec<StrategyArg> {
    let mut out: Vec<StrategyArg> = Vec::new();
    for &s in strategies {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Which engine runs an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// Real processes over loopback, in real time.
    Real,
    /// The discrete-event engine, in virtual time.
    Sim,
}

/// A folder name from the current time: `2026-11-22T01-02-03Z`.
pub fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-")
}

impl StormArgs {
    /// Builds the experiment's configuration; `program` is what runs the
    /// children (`program server ...`, `program client ...`).
    pub fn config(&self, program: PathBuf) -> StormConfig {
        let strategies = distinct(&self.strategies);
        let sim = self.engine == EngineArg::Sim;
        // Virtual time needs no compression.
        let time_scale = if self.quick && !sim { 10.0 } else { 1.0 };
        let mut config = self
            .common
            .storm_config(strategies, self.pause, time_scale, program);
        config.in_turn = self.in_turn;
        config.virtual_time = sim;
        config.verbose = self.verbose;
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(args: &[&str]) -> Result<ClientConfig, clap::Error> {
        let mut argv = vec!["client"];
        argv.extend_from_slice(args);
        ClientCli::try_parse_from(argv)?.run.config()
    }

    fn server(args: &[&str]) -> Result<ServerConfig, clap::Error> {
        let mut argv = vec!["server"];
        argv.extend_from_slice(args);
        ServerArgs::try_parse_from(argv)?.config()
    }

    fn plan(args: &[&str]) -> Result<PlanRequest, clap::Error> {
        let mut argv = vec!["client", "plan"];
        argv.extend_from_slice(args);
        match ClientCli::try_parse_from(argv)?.command {
            Some(ClientCommand::Plan(p)) => p.request(),
            None => panic!("plan is a subcommand"),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn client_defaults_match_the_original() {
        let c = client(&["--seed", "1"]).unwrap();
        assert_eq!(c.clients, 1000);
        assert_eq!(c.think.mean(), Duration::from_secs(10));
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(c.strategy, Strategy::Fixed { delay: ms(100) });
        assert_eq!(c.report_interval, Duration::from_secs(5));
        assert_eq!(c.url, "http://127.0.0.1:8070/api");
        assert_eq!(c.limits, RetryLimits::default());
        assert_eq!(c.throttle, None);
    }

    #[test]
    fn original_flag_names_are_accepted() {
        let c = client(&["--exponential-backoff"]).unwrap();
        assert_eq!(c.strategy, Strategy::exponential_2014());
        let c = client(&["--simple-backoff-delay", "250ms"]).unwrap();
        assert_eq!(c.strategy, Strategy::Fixed { delay: ms(250) });
        let s = server(&["--baseDelay", "20ms"]).unwrap();
        assert_eq!(s.model.base, ms(20));
    }

    #[test]
    fn lambda_takes_seconds_or_a_duration() {
        assert_eq!(client(&["--lambda", "0.5"]).unwrap().think.mean(), ms(500));
        assert_eq!(
            client(&["--lambda", "250ms"]).unwrap().think.mean(),
            ms(250)
        );
        assert!(client(&["--lambda", "0"]).is_err());
    }

    #[test]
    fn every_strategy_reads_its_flags_with_its_defaults() {
        let s = |args: &[&str]| client(args).unwrap().strategy;
        assert_eq!(
            s(&["--strategy", "exponential"]),
            Strategy::Exponential {
                min: ms(100),
                max: Duration::from_secs(300),
                factor: 2.7,
                jitter: 0.1
            }
        );
        assert_eq!(
            s(&[
                "--strategy",
                "exponential",
                "--min-delay",
                "1s",
                "--factor",
                "2",
                "--jitter",
                "0"
            ]),
            Strategy::Exponential {
                min: Duration::from_secs(1),
                max: Duration::from_secs(300),
                factor: 2.0,
                jitter: 0.0
            }
        );
        assert_eq!(
            s(&["--strategy", "full-jitter", "--max-delay", "10s"]),
            Strategy::FullJitter {
                base: ms(100),
                cap: Duration::from_secs(10),
                factor: 2.0
            }
        );
        assert_eq!(
            s(&["--strategy", "equal-jitter"]),
            Strategy::EqualJitter {
                base: ms(100),
                cap: Duration::from_secs(300),
                factor: 2.0
            }
        );
        assert_eq!(
            s(&["--strategy", "decorrelated-jitter"]),
            Strategy::DecorrelatedJitter {
                base: ms(100),
                cap: Duration::from_secs(300),
                factor: 3.0
            }
        );
        assert_eq!(
            s(&[
                "--strategy",
                "truncated-binary",
                "--ceiling",
                "4",
                "--stay-at-ceiling"
            ]),
            Strategy::TruncatedBinary {
                slot: ms(100),
                ceiling: 4,
                stay_at_ceiling: true
            }
        );
        let google = client(&["--strategy", "google"]).unwrap();
        assert_eq!(
            google.strategy,
            Strategy::Google {
                first: Duration::from_secs(1),
                factor: 2.0,
                max: Duration::from_secs(32),
                random: ms(1000)
            }
        );
        assert_eq!(google.limits.max_attempts, Some(10));
        let google = client(&[
            "--strategy",
            "google",
            "--max-attempts",
            "3",
            "--max-delay",
            "64s",
        ])
        .unwrap();
        assert_eq!(google.limits.max_attempts, Some(3));
    }

    #[test]
    fn limits_and_throttles_read_their_flags() {
        let c = client(&[
            "--max-attempts",
            "4",
            "--deadline",
            "30s",
            "--respect-retry-after",
        ])
        .unwrap();
        assert_eq!(
            c.limits,
            RetryLimits {
                max_attempts: Some(4),
                deadline: Some(Duration::from_secs(30)),
                respect_retry_after: true
            }
        );
        let t = |args: &[&str]| client(args).unwrap().throttle.unwrap();
        assert_eq!(
            t(&["--throttle", "token-bucket"]),
            ThrottleConfig::TokenBucket {
                max_tokens: 10.0,
                token_ratio: 0.1
            }
        );
        assert_eq!(
            t(&["--throttle", "budget", "--budget-percent", "50"]),
            ThrottleConfig::Budget {
                percent: 0.5,
                ttl: Duration::from_secs(10),
                min_per_sec: 10.0
            }
        );
        assert_eq!(
            t(&["--throttle", "adaptive"]),
            ThrottleConfig::Adaptive {
                k: 2.0,
                window: Duration::from_secs(120)
            }
        );
        assert_eq!(
            t(&[
                "--throttle",
                "circuit-breaker",
                "--breaker-consecutive",
                "5"
            ]),
            ThrottleConfig::CircuitBreaker {
                failure_ratio: 0.5,
                min_requests: 20,
                window: Duration::from_secs(10),
                consecutive: Some(5),
                cooldown: Duration::from_secs(5),
                probes: 1
            }
        );
    }

    #[test]
    fn flags_of_another_strategy_or_throttle_are_refused() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--jitter", "0.2"],
                "--jitter does not apply to --strategy fixed",
            ),
            (
                &["--strategy", "exponential", "--fixed-delay", "1s"],
                "--fixed-delay",
            ),
            (&["--exponential-backoff", "--factor", "3"], "--factor"),
            (&["--strategy", "full-jitter", "--jitter", "0"], "--jitter"),
            (&["--strategy", "google", "--ceiling", "3"], "--ceiling"),
            (
                &["--max-tokens", "5"],
                "--max-tokens does not apply to --throttle none",
            ),
            (
                &["--throttle", "budget", "--adaptive-k", "3"],
                "--adaptive-k",
            ),
        ];
        for (args, needle) in cases {
            let err = client(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn bad_input_names_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--clients", "0"], "--clients"),
            (&["--strategy", "exponential", "--factor", "-1"], "--factor"),
            (&["--strategy", "exponential", "--factor", "1"], "--factor"),
            (&["--timeout", "abc"], "--timeout"),
            (&["--timeout", "0s"], "--timeout"),
            (
                &["--strategy", "exponential", "--jitter", "-0.1"],
                "--jitter",
            ),
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
            (&["--max-attempts", "0"], "--max-attempts"),
            (
                &[
                    "--throttle",
                    "circuit-breaker",
                    "--breaker-failure-ratio",
                    "1.5",
                ],
                "--breaker-failure-ratio",
            ),
        ];
        for (args, flag) in cases {
            let err = client(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(
                err.to_string().contains(flag),
                "{args:?} should name {flag}: {err}"
            );
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
            (&["--retry-after", "2s"][..], "--retry-after"),
            (&["--shed-above", "0"][..], "--shed-above"),
            (
                &["--shed-above", "5", "--shed-status", "500"][..],
                "--shed-status",
            ),
        ] {
            let err = server(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2);
            assert!(
                err.to_string().contains(flag),
                "{args:?} should name {flag}: {err}"
            );
        }
    }

    #[test]
    fn unknown_strategy_lists_the_valid_ones() {
        let msg = client(&["--strategy", "nope"]).unwrap_err().to_string();
        for name in [
            "fixed",
            "exponential",
            "exponential-2014",
            "full-jitter",
            "equal-jitter",
            "decorrelated-jitter",
            "truncated-binary",
            "google",
        ] {
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
        assert_eq!(s.shed, None);
    }

    #[test]
    fn shedding_reads_its_flags() {
        let s = server(&["--shed-above", "200"]).unwrap();
        assert_eq!(
            s.shed,
            Some(Shedding {
                above: 200,
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: Duration::from_secs(1)
            })
        );
        let s = server(&[
            "--shed-above",
            "5",
            "--shed-status",
            "429",
            "--retry-after",
            "250ms",
        ])
        .unwrap();
        assert_eq!(s.shed.unwrap().status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(s.shed.unwrap().retry_after, ms(250));
    }

    #[test]
    fn time_scale_compresses_every_duration() {
        let c = client(&[
            "--time-scale",
            "10",
            "--duration",
            "100s",
            "--strategy",
            "google",
            "--deadline",
            "1m",
            "--throttle",
            "budget",
        ])
        .unwrap();
        assert_eq!(c.think.mean(), Duration::from_secs(1));
        assert_eq!(c.timeout, ms(200));
        assert_eq!(c.report_interval, ms(500));
        assert_eq!(c.duration, Some(Duration::from_secs(10)));
        assert_eq!(c.limits.deadline, Some(Duration::from_secs(6)));
        assert_eq!(
            c.strategy,
            Strategy::Google {
                first: ms(100),
                factor: 2.0,
                max: Duration::from_millis(3200),
                random: ms(100)
            }
        );
        assert_eq!(
            c.throttle,
            Some(ThrottleConfig::Budget {
                percent: 0.2,
                ttl: Duration::from_secs(1),
                min_per_sec: 100.0
            })
        );
        let s = server(&["--time-scale", "10", "--shed-above", "5"]).unwrap();
        assert_eq!(s.model.base, ms(10));
        assert_eq!(s.model.max_delay, Duration::from_secs(60));
        assert_eq!(s.report_interval, ms(100));
        assert_eq!(s.shed.unwrap().retry_after, ms(100));
        assert!(client(&["--time-scale", "0.5"]).is_err());
    }

    #[test]
    fn plan_target_ratio_picks_the_geometric_factor() {
        let p = plan(&[
            "--strategy",
            "exponential",
            "--min-delay",
            "1s",
            "--target-ratio",
            "0.1",
        ])
        .unwrap();
        match p.strategy {
            Strategy::Exponential { factor, jitter, .. } => {
                assert!((factor - 1.1).abs() < 1e-12);
                assert_eq!(jitter, 0.0);
            }
            other => panic!("{other:?}"),
        }
        assert!(plan(&["--target-ratio", "0.1"]).is_err());
        assert!(
            plan(&[
                "--strategy",
                "exponential",
                "--target-ratio",
                "0.1",
                "--factor",
                "2"
            ])
            .is_err()
        );
        let p = plan(&["--strategy", "google"]).unwrap();
        assert_eq!(p.retries, 9, "google gives up after 10 attempts");
        let p = plan(&["--attempts", "4", "--max-attempts", "10"]).unwrap();
        assert_eq!(p.retries, 4);
    }
}
