//! The `server` program's flags, turned into a validated configuration.

use std::net::SocketAddr;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, ValueEnum};

use super::generate::GenerateArgs;
use super::refusal::refuse_strays;
use super::report::ReportArgs;
use super::runtime::RuntimeArgs;
use super::service::{Service, ServiceArgs};
use super::serving::ServingArgs;
use super::tier::TierArgs;
use super::values::{
    duration, growth_factor, positive, positive_duration, probability, time_scale, timer_resolution,
};
use super::view::ViewArgs;
use crate::model::latency::LatencyModel;
use crate::model::server::{
    Failing, OnDisconnect, PoolModel, QueueKind, ServerConfig, Shape, Shedding,
};
use crate::net::server::default_backlog;

impl ValueEnum for OnDisconnect {
    fn value_variants<'a>() -> &'a [Self] {
        &[OnDisconnect::Continue, OnDisconnect::Cancel]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            OnDisconnect::Continue => {
                "Keep the work counting until its modelled completion (the original)"
            }
            OnDisconnect::Cancel => {
                "Drop the work as soon as the server notices the client has gone"
            }
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
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

/// An HTTP server whose latency grows exponentially with concurrency:
/// GET /api answers OK after the modelled delay, and so does a gRPC call
/// to any method over HTTP/2.
#[derive(Debug, Parser)]
#[command(name = "server", version, about, long_about = None, allow_negative_numbers = true,
         args_override_self = true)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8070", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Exponential: concurrency above which latency starts to grow
    /// (requests) [default: 30].
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Exponential: delay multiplier per SCALE requests above the limit (at
    /// least 1) [default: 1.05].
    #[arg(long, value_parser = growth_factor, value_name = "X")]
    pub factor: Option<f64>,
    /// Latency at or below the limit (exponential), or with nothing else in
    /// flight (linear) [default: 100ms].
    #[arg(long, alias = "baseDelay", value_parser = positive_duration, value_name = "DURATION")]
    pub base_delay: Option<Duration>,
    /// Exponential: requests above the limit per FACTOR step of the delay
    /// [default: 15].
    #[arg(long, value_parser = positive, value_name = "N")]
    pub scale: Option<f64>,
    /// Saturation cap on the modelled delay (exponential and linear)
    /// [default: 10m].
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub max_delay: Option<Duration>,
    /// The server's shape and defences.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// As a tier of a chain.
    #[command(flatten)]
    pub tier: TierArgs,
    /// HTTP/2, TLS and gRPC.
    #[command(flatten)]
    pub serving: ServingArgs,
    /// Seed of the server's draws (a pool's service times, admission
    /// control's rejections, Vegas' probes, --fail-rate's failures)
    /// [default: random, printed at start].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Listen backlog (connections the kernel queues while the server is
    /// stopped) [default: the kernel maximum, net.core.somaxconn, or 4096
    /// where it cannot be read].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub backlog: Option<u32>,
    /// What happens to a request whose client has gone.
    #[arg(long, value_enum, default_value_t = OnDisconnect::Continue)]
    pub on_disconnect: OnDisconnect,
    /// Push-back: with N requests in flight, answer new ones at once with
    /// --shed-status and a Retry-After header, outside the latency model.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub shed_above: Option<u64>,
    /// Retry-After sent with shed requests (whole seconds are sent as an
    /// integer, anything finer as decimal seconds) [default: 1s].
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub retry_after: Option<Duration>,
    /// gRPC's pushback: send `grpc-retry-pushback-ms: N` with every
    /// refusal (shed, full queue, limiter, admission control, queue
    /// timeout); a gRPC client (`--strategy grpc`) retries after exactly N
    /// ms, or not at all when N is negative.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub pushback_ms: Option<i64>,
    /// Status of shed requests [default: 503].
    #[arg(long, value_enum, value_name = "CODE")]
    pub shed_status: Option<ShedStatusArg>,
    /// A failing backend: answer each request with probability P (0 to 1,
    /// drawn from --seed) at once with --fail-status, before any defence
    /// and without any work, Retry-After or pushback. 1 fails every
    /// request: a chain's amplification can then be checked against its
    /// closed form.
    #[arg(long, value_parser = probability, value_name = "P")]
    pub fail_rate: Option<f64>,
    /// Status of --fail-rate's failures, 400 to 599 (429 is a throttling
    /// answer; gRPC clients retry 429, 502, 503 and 504 only) [default:
    /// 500].
    #[arg(long, value_parser = clap::value_parser!(u16).range(400..=599), value_name = "CODE")]
    pub fail_status: Option<u16>,
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
    /// Where report rows go.
    #[command(flatten)]
    pub report: ReportArgs,
    /// How the run is shown.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Compress time: divide every duration given (delays, Retry-After,
    /// report interval) by K, for quick experiments.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale, value_name = "K")]
    pub time_scale: f64,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

impl ServerArgs {
    /// Refuses what a pool waiting in the listen backlog does not model: a
    /// server that sees a request only when a worker accepts its
    /// connection has no door in front of the queue for a defence to
    /// stand at, and a sync worker neither checks the connection before
    /// it works nor calls anything inward while it holds no worker.
    fn refuse_with_backlog(&self, service: &Service) -> Result<(), String> {
        let given = [
            ("--shed-above", self.shed_above.is_some()),
            ("--limiter", service.limiter.is_some()),
            ("--admission-control", service.admission.is_some()),
            ("--fail-rate", self.fail_rate.is_some()),
            ("--call", self.tier.call.is_some()),
            (
                "--on-disconnect cancel",
                self.on_disconnect == OnDisconnect::Cancel,
            ),
        ];
        match given.iter().find(|(_, on)| *on) {
            Some((flag, _)) => Err(format!(
                "{flag} is not modelled with --queue backlog: its workers take each \
                 connection from the kernel's accept queue and serve its request whatever \
                 became of the client (use an application queue, --queue K)"
            )),
            None => Ok(()),
        }
    }

    /// Checks the flags together and builds the server's configuration.
    pub fn config(&self) -> Result<ServerConfig, clap::Error> {
        let conflict = |msg: &str| Self::command().error(ErrorKind::ArgumentConflict, msg);
        let service = self.service.service().map_err(|msg| conflict(&msg))?;
        let curves: &[&str] = &["exponential", "linear"];
        refuse_strays(
            &[
                ("--limit", self.limit.is_some(), &["exponential"]),
                ("--factor", self.factor.is_some(), &["exponential"]),
                ("--scale", self.scale.is_some(), &["exponential"]),
                ("--base-delay", self.base_delay.is_some(), curves),
                ("--max-delay", self.max_delay.is_some(), curves),
            ],
            service.shape.name(),
            "--model",
        )
        .map_err(|msg| conflict(&msg))?;
        let defaults = LatencyModel::default();
        let model = LatencyModel {
            base: self.base_delay.unwrap_or(defaults.base),
            limit: self.limit.unwrap_or(defaults.limit),
            factor: self.factor.unwrap_or(defaults.factor),
            scale: self.scale.unwrap_or(defaults.scale),
            max_delay: self.max_delay.unwrap_or(defaults.max_delay),
        };
        if model.base > model.max_delay {
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
        let failing = if self.fail_rate.is_some() {
            "on"
        } else {
            "off"
        };
        refuse_strays(
            &[("--fail-status", self.fail_status.is_some(), &["on"])],
            failing,
            "a failing backend (--fail-rate)",
        )
        .map_err(|msg| conflict(&msg))?;
        if matches!(
            service.shape,
            Shape::Pool(PoolModel {
                kind: QueueKind::Backlog,
                ..
            })
        ) {
            self.refuse_with_backlog(&service)
                .map_err(|msg| conflict(&msg))?;
        }
        let seed = self.seed.unwrap_or_else(rand::random);
        let mut call = self.tier.call(seed).map_err(|msg| conflict(&msg))?;
        if let Some(call) = &mut call {
            call.client.report_interval = self.report_interval;
        }
        let config = ServerConfig {
            listen: self.listen,
            model,
            shape: service.shape,
            limiter: service.limiter,
            admission: service.admission,
            call,
            seed,
            backlog: self.backlog.unwrap_or_else(default_backlog),
            on_disconnect: self.on_disconnect,
            pushback_ms: self.pushback_ms,
            fail: self.fail_rate.map(|rate| Failing {
                rate,
                status: self.fail_status.unwrap_or(500),
            }),
            shed: self.shed_above.map(|above| Shedding {
                above,
                status: match self.shed_status {
                    Some(ShedStatusArg::TooMany) => 429,
                    _ => 503,
                },
                retry_after: self.retry_after.unwrap_or(Duration::from_secs(1)),
            }),
            report_interval: self.report_interval,
            header_read_timeout: self.header_read_timeout,
            timer_resolution: self.timer_resolution,
            threads: self.runtime.threads,
            csv: self.report.csv.clone(),
            quiet: false,
            max_streams: self.serving.max_streams,
            pending_resets: self.serving.max_pending_resets,
            grpc_overload: self.serving.grpc_overload,
            tls: self.serving.tls(),
        };
        Ok(config.scaled(self.time_scale))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::server::{PoolModel, ServiceDistribution, Shape};
    use crate::policy::defence::{CoDel, LimiterKind};

    fn server(args: &[&str]) -> Result<ServerConfig, clap::Error> {
        let mut argv = vec!["server"];
        argv.extend_from_slice(args);
        ServerArgs::try_parse_from(argv)?.config()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn server_defaults_match_the_original() {
        let s = server(&[]).unwrap();
        assert_eq!(s.model, LatencyModel::default());
        assert_eq!(s.shape, Shape::Exponential);
        assert!(!s.draws() && !s.reports_defences());
        assert_eq!(s.listen, "127.0.0.1:8070".parse().unwrap());
        assert_eq!(s.on_disconnect, OnDisconnect::Continue);
        assert_eq!(s.backlog, default_backlog());
        assert_eq!(s.shed, None);
        let s = server(&["--baseDelay", "20ms"]).unwrap();
        assert_eq!(s.model.base, ms(20));
    }

    #[test]
    fn a_flag_given_twice_takes_its_last_value() {
        // So that flags added after a twin's (`storm calibrate
        // --server-args`) replace the twin's own.
        let s = server(&[
            "--max-pending-resets",
            "4294967295",
            "--max-pending-resets",
            "20",
        ]);
        assert_eq!(s.unwrap().pending_resets, 20);
        let s = server(&["--workers", "4", "--model", "pool", "--workers", "9"]).unwrap();
        assert!(
            matches!(s.shape, Shape::Pool(PoolModel { workers: 9, .. })),
            "{:?}",
            s.shape
        );
    }

    #[test]
    fn shedding_reads_its_flags() {
        let s = server(&["--shed-above", "200"]).unwrap();
        assert_eq!(
            s.shed,
            Some(Shedding {
                above: 200,
                status: 503,
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
        assert_eq!(s.shed.unwrap().status, 429);
        assert_eq!(s.shed.unwrap().retry_after, ms(250));
    }

    #[test]
    fn a_failing_backend_reads_its_fraction_and_status() {
        assert_eq!(server(&[]).unwrap().fail, None);
        let s = server(&["--fail-rate", "0.5", "--seed", "3"]).unwrap();
        assert_eq!(
            s.fail,
            Some(Failing {
                rate: 0.5,
                status: 500
            })
        );
        assert!(s.draws(), "its failures are drawn from the seed");
        let s = server(&["--fail-rate", "1", "--fail-status", "429"]).unwrap();
        assert_eq!(s.fail.map(|f| (f.rate, f.status)), Some((1.0, 429)));
        let s = server(&["--fail-rate", "0", "--time-scale", "10"]).unwrap();
        assert_eq!(s.fail.map(|f| f.rate), Some(0.0), "not scaled");
        let err = server(&["--fail-status", "503"]).unwrap_err();
        assert!(err.to_string().contains("--fail-rate"), "{err}");
    }

    #[test]
    fn a_pool_and_its_defences_read_their_flags_with_the_sources_defaults() {
        let s = server(&["--model", "pool", "--seed", "7"]).unwrap();
        assert_eq!(
            s.shape,
            Shape::Pool(PoolModel {
                workers: 20,
                service_time: ms(100),
                distribution: ServiceDistribution::Exponential,
                queue: 1000,
                kind: QueueKind::Application,
                codel: None,
                lifo: None,
            })
        );
        assert_eq!((s.seed, s.limiter, s.admission), (7, None, None));
        let s = server(&[
            "--model",
            "pool",
            "--workers",
            "4",
            "--service-time",
            "20ms",
            "--service-distribution",
            "constant",
            "--queue",
            "0",
            "--queue-timeout",
            "codel",
            "--lifo",
            "adaptive",
            "--codel-interval",
            "50ms",
            "--limiter",
            "gradient2",
            "--admission-control",
            "--admission-success-rate",
            "0.9",
        ])
        .unwrap();
        let Shape::Pool(p) = s.shape else {
            panic!("a pool");
        };
        assert_eq!((p.workers, p.service_time, p.queue), (4, ms(20), 0));
        assert_eq!(p.distribution, ServiceDistribution::Constant);
        assert_eq!(
            p.codel,
            Some(CoDel {
                target: ms(5),
                interval: ms(50)
            })
        );
        assert_eq!(p.lifo, Some(ms(50)), "adaptive LIFO's window is CoDel's N");
        assert_eq!(s.limiter.unwrap().kind, LimiterKind::Gradient2);
        let a = s.admission.unwrap();
        assert_eq!(
            (a.window, a.success_rate, a.aggression, a.max_rejection),
            (Duration::from_secs(30), 0.9, 1.0, 0.8)
        );
        let s = server(&["--model", "linear"]).unwrap();
        assert_eq!(s.shape, Shape::Linear { slope: ms(5) });
        // LIFO alone takes the interval flag too.
        assert!(
            server(&[
                "--model",
                "pool",
                "--lifo",
                "adaptive",
                "--codel-interval",
                "1s"
            ])
            .is_ok()
        );
    }

    #[test]
    fn a_pool_may_wait_in_the_listen_backlog_and_then_takes_no_defence() {
        let s = server(&["--model", "pool", "--queue", "backlog", "--backlog", "1000"]).unwrap();
        let Shape::Pool(p) = s.shape else {
            panic!("a pool: {:?}", s.shape);
        };
        assert_eq!(
            (p.kind, p.workers, s.backlog),
            (QueueKind::Backlog, 20, 1000)
        );
        assert!(s.waits_in_backlog());
        let s = server(&["--model", "pool", "--queue", "7"]).unwrap();
        assert!(!s.waits_in_backlog());
        assert!(matches!(s.shape, Shape::Pool(p) if p.queue == 7));
        for flag in [
            &["--queue-timeout", "codel"][..],
            &["--lifo", "adaptive"],
            &["--limiter", "aimd"],
            &["--admission-control"],
            &["--shed-above", "5"],
            &["--fail-rate", "0.5"],
            &["--call", "http://127.0.0.1:1/api"],
            &["--on-disconnect", "cancel"],
        ] {
            let mut args = vec!["--model", "pool", "--queue", "backlog"];
            args.extend_from_slice(flag);
            let err = server(&args).expect_err("refused with --queue backlog");
            assert!(
                err.to_string().contains(flag[0]) && err.to_string().contains("backlog"),
                "{flag:?}: {err}"
            );
        }
        let err = server(&["--model", "pool", "--queue", "many"]).unwrap_err();
        assert!(err.to_string().contains("backlog"), "{err}");
    }

    #[test]
    fn time_scale_compresses_the_servers_durations() {
        let s = server(&["--time-scale", "10", "--shed-above", "5"]).unwrap();
        assert_eq!(s.model.base, ms(10));
        assert_eq!(s.model.max_delay, Duration::from_secs(60));
        assert_eq!(s.report_interval, ms(100));
        assert_eq!(s.shed.unwrap().retry_after, ms(100));
        assert!(server(&["--time-scale", "0.5"]).is_err());
    }

    #[test]
    fn bad_input_names_the_flag() {
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
            (&["--status-fd", "1"][..], "--status-fd"),
            (&["--fail-rate", "1.5"][..], "--fail-rate"),
            (&["--fail-rate", "-0.1"][..], "--fail-rate"),
            (&["--fail-rate", "NaN"][..], "--fail-rate"),
            (&["--fail-status", "500"][..], "--fail-status"),
            (
                &["--fail-rate", "1", "--fail-status", "200"][..],
                "--fail-status",
            ),
            (
                &["--fail-rate", "1", "--fail-status", "600"][..],
                "--fail-status",
            ),
            (&["--workers", "4"][..], "--workers"),
            (&["--model", "pool", "--limit", "40"][..], "--limit"),
            (&["--model", "pool", "--max-delay", "1s"][..], "--max-delay"),
            (&["--model", "linear", "--factor", "2"][..], "--factor"),
            (&["--slope", "1ms"][..], "--slope"),
            (&["--model", "pool", "--workers", "0"][..], "--workers"),
            (&["--queue-timeout", "codel"][..], "--queue-timeout"),
            (
                &["--model", "pool", "--codel-target", "1ms"][..],
                "--codel-target",
            ),
            (&["--model", "pool", "--lifo", "fifo"][..], "--lifo"),
            (&["--limiter", "gradient"][..], "--limiter"),
            (&["--admission-window", "10s"][..], "--admission-window"),
            (
                &["--admission-control", "--admission-aggression", "0.5"][..],
                "--admission-aggression",
            ),
            (
                &["--admission-control", "--admission-max-rejection", "1.5"][..],
                "--admission-max-rejection",
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
}
