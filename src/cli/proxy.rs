//! `storm proxy`'s flags, turned into a validated configuration.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use clap::error::ErrorKind;
use hyper::Uri;

use super::generate::GenerateArgs;
use super::report::ReportArgs;
use super::values::positive_duration;
use super::view::ViewArgs;
use super::wire::TrustArgs;
use crate::model::fault::{FAULT_FORMS, Fault, FaultKind};
use crate::model::wire::Transport;
use crate::net::proxy::ProxyConfig;
use crate::net::server::default_backlog;

/// The flags of `storm proxy` (its help is [`super::StormCommand::Proxy`]'s).
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Address to listen on: clients use http://ADDR followed by the
    /// --upstream URL's path and query.
    #[arg(long, default_value = "127.0.0.1:8081", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The service to forward to, http://host:port[/path] or https://...
    /// (the proxy listens in clear and connects by TLS): requests go to
    /// its host and port with the path and query their client sent.
    #[arg(
        long,
        visible_alias = "target",
        value_name = "URL",
        value_parser = upstream_url,
        required_unless_present = "generate"
    )]
    pub upstream: Option<String>,
    /// Speak HTTP/2 to the service: by prior knowledge (h2c) to http://,
    /// by ALPN to https:// (a service that cannot fails). Clients may
    /// speak HTTP/1.1 or h2c to the proxy either way [default: HTTP/1.1
    /// to the service].
    #[arg(long)]
    pub http2: bool,
    /// Whom to trust over https://.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// The fault while it is on: stall (the proxy stops as a SIGSTOPped
    /// process: nothing accepted, read or written), blackhole (the same,
    /// with a listen queue of one), reset (connections reset),
    /// status=CODE[,retry-after=D] (the proxy answers CODE; a gRPC
    /// status's name, such as status=unavailable, answers gRPC requests
    /// Trailers-Only with grpc-retry-pushback-ms), delay=D
    /// (requests forwarded D late); each to a fraction of requests with
    /// ,fraction=F (docs/proxy.md) [default: stall, the outage of the
    /// original experiment: the proxy as a stopped server].
    #[arg(long, value_parser = fault, value_name = "SPEC")]
    pub fault: Option<Fault>,
    /// Start with the fault on [default: off until SIGUSR1, the live
    /// view's key or POST /fault/on].
    #[arg(long)]
    pub fault_on: bool,
    /// How often to print a report line (and write a CSV row).
    #[arg(long, default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub report_interval: Duration,
    /// Serve the fault's switch at http://ADDR/fault: POST /fault/on and
    /// /fault/off turn it, GET /fault says where it is, as JSON [default:
    /// off].
    #[arg(long, value_name = "ADDR")]
    pub control: Option<SocketAddr>,
    /// Listen backlog: the connections the kernel queues while the proxy
    /// stalls [default: the server's, the kernel maximum
    /// (net.core.somaxconn) or 4096 where it cannot be read, so that a
    /// stalled proxy queues what a stopped server does].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub backlog: Option<u32>,
    /// Seed of the draws that pick the requests a fraction's fault takes
    /// [default: random, printed at start].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Where report rows go.
    #[command(flatten)]
    pub report: ReportArgs,
    /// How the run is shown.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Print a man page or shell completions instead of running.
    #[command(flatten)]
    pub generate: GenerateArgs,
}

/// The service's URL, as `--upstream` takes it: http:// or https://,
/// with a host.
fn upstream_url(s: &str) -> Result<String, String> {
    let uri: Uri = s.parse().map_err(|e| format!("'{s}' is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!(
            "'{s}' is not an http://host:port/path or https://host:port/path URL"
        ));
    }
    Ok(s.to_string())
}

/// A fault, as `--fault` takes it.
fn fault(s: &str) -> Result<Fault, String> {
    s.parse()
        .map_err(|e: String| format!("{e} (a fault is {FAULT_FORMS})"))
}

impl ProxyArgs {
    /// Checks the flags together and builds the proxy's configuration.
    pub fn config(&self) -> Result<ProxyConfig, clap::Error> {
        let error = |kind, msg: String| {
            ProxyArgs::augment_args(clap::Command::new("storm proxy")).error(kind, msg)
        };
        let url = self.upstream.as_deref().ok_or_else(|| {
            error(
                ErrorKind::MissingRequiredArgument,
                "--upstream URL is needed".into(),
            )
        })?;
        let upstream: Uri = url
            .parse()
            .map_err(|e| error(ErrorKind::ValueValidation, format!("--upstream {url}: {e}")))?;
        let trust = self.trust.trust();
        let https = upstream.scheme_str() == Some("https");
        if !https && (trust.ca_cert.is_some() || trust.insecure) {
            return Err(error(
                ErrorKind::ArgumentConflict,
                format!("--ca-cert and --insecure are for an https:// --upstream, not {url}"),
            ));
        }
        let transport = if self.http2 {
            Transport::Http2
        } else {
            Transport::Http1
        };
        if https {
            // A CA file that cannot be read is bad input: said now.
            crate::net::tls::client_config(&trust, transport)
                .map_err(|e| error(ErrorKind::ValueValidation, e))?;
        }
        if let (Some(control), Some(metrics)) = (self.control, self.report.metrics_listen)
            && control == metrics
            && control.port() != 0
        {
            return Err(error(
                ErrorKind::ArgumentConflict,
                format!("--control {control} and --metrics-listen {metrics} are one address"),
            ));
        }
        Ok(ProxyConfig {
            listen: self.listen,
            upstream,
            transport,
            trust,
            fault: self.fault.unwrap_or(Fault {
                kind: FaultKind::Stall,
                fraction: 1.0,
            }),
            fault_on: self.fault_on,
            report_interval: self.report_interval,
            csv: self.report.csv.clone(),
            backlog: self.backlog.unwrap_or_else(default_backlog),
            seed: self.seed.unwrap_or_else(rand::random),
            control: self.control,
            quiet: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{StormCli, StormCommand};
    use crate::model::wire::Trust;
    use clap::Parser;

    fn proxy(args: &[&str]) -> Result<ProxyConfig, clap::Error> {
        let mut argv = vec!["storm", "proxy"];
        argv.extend_from_slice(args);
        match StormCli::try_parse_from(argv)?.command {
            Some(StormCommand::Proxy(args)) => args.config(),
            other => panic!("not the proxy: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_stall_a_loopback_proxy_with_the_servers_backlog() {
        let c = proxy(&["--upstream", "http://127.0.0.1:8000/api?x=1", "--seed", "3"]).unwrap();
        assert_eq!(c.listen, "127.0.0.1:8081".parse().unwrap());
        assert_eq!(c.upstream.path_and_query().unwrap().as_str(), "/api?x=1");
        assert_eq!(c.fault, "stall".parse().unwrap());
        assert!(!c.fault_on && !c.quiet);
        assert_eq!(c.backlog, default_backlog());
        assert_eq!((c.seed, c.control, c.csv), (3, None, None));
        assert_eq!(c.report_interval, Duration::from_secs(1));
        assert_eq!(
            (c.transport, c.trust.clone()),
            (Transport::Http1, Trust::default())
        );
        let c = proxy(&[
            "--upstream",
            "http://localhost:1",
            "--fault",
            "status=503,retry-after=2s,fraction=0.5",
            "--fault-on",
            "--backlog",
            "10",
            "--report-interval",
            "100ms",
            "--control",
            "127.0.0.1:0",
        ])
        .unwrap();
        assert_eq!(
            c.fault.to_string(),
            "status=503,retry-after=2s,fraction=0.5"
        );
        assert!(c.fault_on);
        assert_eq!(
            (c.backlog, c.control),
            (10, Some("127.0.0.1:0".parse().unwrap()))
        );
    }

    #[test]
    fn an_https_target_takes_its_trust_and_http2() {
        let c = proxy(&[
            "--target",
            "https://127.0.0.1:8443/api",
            "--insecure",
            "--http2",
        ])
        .unwrap();
        assert_eq!(c.upstream.scheme_str(), Some("https"));
        assert_eq!(c.transport, Transport::Http2);
        assert!(c.trust.insecure && c.trust.ca_cert.is_none());
        let c = proxy(&["--upstream", "http://127.0.0.1:8000/", "--http2"]).unwrap();
        assert_eq!((c.transport, c.trust), (Transport::Http2, Trust::default()));
    }

    #[test]
    fn bad_input_names_the_flag() {
        for (args, said) in [
            (&[][..], "--upstream"),
            (&["--upstream", "ftp://x/"][..], "--upstream"),
            (
                &["--upstream", "http://x/", "--fault", "drop"][..],
                "a fault is",
            ),
            (
                &["--upstream", "http://x/", "--fault", "status=99"][..],
                "--fault",
            ),
            (
                &["--upstream", "http://x/", "--backlog", "0"][..],
                "--backlog",
            ),
            (&["--upstream", "http://x/", "--insecure"][..], "https://"),
            (
                &[
                    "--upstream",
                    "https://x/",
                    "--ca-cert",
                    "/nonexistent/ca.pem",
                ][..],
                "--ca-cert /nonexistent/ca.pem",
            ),
            (
                &[
                    "--upstream",
                    "https://x/",
                    "--ca-cert",
                    "a.pem",
                    "--insecure",
                ][..],
                "--insecure",
            ),
            (
                &["--upstream", "http://x/", "--report-interval", "0s"][..],
                "--report-interval",
            ),
            (
                &["--upstream", "http://x/", "--status-fd", "1"][..],
                "--status-fd",
            ),
            (
                &[
                    "--upstream",
                    "http://x/",
                    "--control",
                    "127.0.0.1:9",
                    "--metrics-listen",
                    "127.0.0.1:9",
                ][..],
                "one address",
            ),
        ] {
            let err = proxy(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(
                err.to_string().contains(said),
                "{args:?} should say {said}: {err}"
            );
        }
    }
}
