//! The `server` program's protocol flags: HTTP/2's stream limit, TLS's
//! certificate and key, and how gRPC answers overload.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use crate::model::grpc_status::Overload;
use crate::model::server::TlsFiles;
use crate::model::wire::{DEFAULT_MAX_STREAMS, DEFAULT_PENDING_RESETS};

impl ValueEnum for Overload {
    fn value_variants<'a>() -> &'a [Self] {
        &[Overload::Unavailable, Overload::ResourceExhausted]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Overload::Unavailable => {
                "UNAVAILABLE (14): retried by gRPC's retry policy when it names no codes"
            }
            Overload::ResourceExhausted => {
                "RESOURCE_EXHAUSTED (8): retried only where the policy lists it"
            }
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

/// How the server speaks: HTTP/1.1 and HTTP/2 on one listener, https,
/// gRPC.
#[derive(Debug, Clone, Args)]
pub struct ServingArgs {
    /// HTTP/2: the streams one connection may carry at once
    /// (SETTINGS_MAX_CONCURRENT_STREAMS). The listener serves HTTP/1.1 and
    /// HTTP/2 alike, HTTP/2 in clear by prior knowledge (h2c) or over TLS
    /// by ALPN.
    #[arg(long, default_value_t = DEFAULT_MAX_STREAMS, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: u32,
    /// HTTP/2: the streams a client may reset on a connection before the
    /// server accepted them, past which the server closes the connection
    /// with GOAWAY ENHANCE_YOUR_CALM (h2's defence against rapid resets;
    /// its default). A server that was stopped meets it at its resume,
    /// when it reads the streams written and reset during the stop: the
    /// connection goes with that dead work unread, both engines alike.
    #[arg(long, default_value_t = DEFAULT_PENDING_RESETS, value_name = "N")]
    pub max_pending_resets: u32,
    /// Serve https with this certificate chain (PEM, the server's own
    /// first), offering h2 and http/1.1 by ALPN; needs --tls-key.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// gRPC: the code a refusal for overload (shedding, a full queue, the
    /// limiter, admission control, a queue timeout) is answered with,
    /// Trailers-Only with grpc-retry-pushback-ms where --pushback-ms
    /// sends one. A request with content-type application/grpc over
    /// HTTP/2 is answered as gRPC, whatever its method: every method is
    /// the same model behind it; grpc.health.v1.Health/Check answers
    /// SERVING, any other method an empty message. Over HTTP/1.1 it is
    /// answered 505 (gRPC needs HTTP/2's trailers).
    #[arg(long, value_enum, default_value_t = Overload::Unavailable, value_name = "CODE")]
    pub grpc_overload: Overload,
}

impl ServingArgs {
    /// The certificate and key to serve https with, if given.
    pub fn tls(&self) -> Option<TlsFiles> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Program {
        #[command(flatten)]
        serving: ServingArgs,
    }

    fn parse(args: &[&str]) -> Result<ServingArgs, clap::Error> {
        let mut argv = vec!["server"];
        argv.extend_from_slice(args);
        Program::try_parse_from(argv).map(|p| p.serving)
    }

    #[test]
    fn by_default_hypers_stream_limit_in_clear_and_overload_unavailable() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.max_streams, 200);
        assert_eq!(s.max_pending_resets, 20);
        assert_eq!(s.tls(), None);
        assert_eq!(s.grpc_overload, Overload::Unavailable);
    }

    #[test]
    fn the_flags_are_read() {
        let s = parse(&[
            "--max-streams",
            "7",
            "--max-pending-resets",
            "1000",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--grpc-overload",
            "resource-exhausted",
        ])
        .unwrap();
        assert_eq!(s.max_streams, 7);
        assert_eq!(s.max_pending_resets, 1000);
        assert_eq!(
            s.tls(),
            Some(TlsFiles {
                cert: "c.pem".into(),
                key: "k.pem".into()
            })
        );
        assert_eq!(s.grpc_overload.code().number(), 8);
    }

    #[test]
    fn a_certificate_needs_its_key_and_a_limit_a_stream() {
        for (args, flag) in [
            (&["--tls-cert", "c.pem"][..], "--tls-key"),
            (&["--tls-key", "k.pem"][..], "--tls-cert"),
            (&["--max-streams", "0"][..], "--max-streams"),
            (&["--grpc-overload", "busy"][..], "--grpc-overload"),
        ] {
            let err = parse(args).expect_err(&format!("{args:?}"));
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(flag), "{args:?}: {err}");
        }
    }
}
