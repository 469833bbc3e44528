//! How a program's requests go on the wire, as flags: method, headers and
//! body, TLS's trust, HTTP/2, and a gRPC call. The client, the storm's
//! clients and the probe take them; files are read when the flags are
//! turned into a configuration.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::model::grpc::{self, HEALTH_CHECK};
use crate::model::wire::{GrpcCall, RequestShape, Transport, Trust, Wire, parse_header};

/// The flags of how requests go on the wire.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Request")]
pub struct WireArgs {
    /// The request's method.
    #[arg(
        long,
        default_value = "GET",
        value_name = "METHOD",
        conflicts_with = "grpc"
    )]
    pub method: String,
    /// A header sent with every request, as 'Name: value' (repeatable).
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// The request's body.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["body_file", "grpc"])]
    pub body: Option<String>,
    /// The request's body, read from a file once at the start.
    #[arg(long, value_name = "PATH", conflicts_with = "grpc")]
    pub body_file: Option<PathBuf>,
    /// Speak HTTP/2: by prior knowledge over http:// (h2c), by ALPN over
    /// https://. Many requests share a connection, as streams up to the
    /// server's limit; a timed-out attempt resets its stream, and the
    /// connection stays.
    #[arg(long)]
    pub http2: bool,
    /// Whom to trust over https://.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Call a gRPC method instead of sending an HTTP request (over
    /// HTTP/2): package.Service/Method, with no value the standard health
    /// check. The outcome is the answer's grpc-status.
    #[arg(long, value_name = "SERVICE/METHOD", num_args = 0..=1, default_missing_value = HEALTH_CHECK, value_parser = grpc_method)]
    pub grpc: Option<String>,
    /// The gRPC request message: a file of its protobuf bytes (no .proto
    /// needed; `protoc --encode` makes one) [default: empty].
    #[arg(long, value_name = "PATH", requires = "grpc")]
    pub grpc_message_file: Option<PathBuf>,
}

/// Whom a program trusts over https://: the client's and the proxy's
/// flags alike.
#[derive(Debug, Clone, Default, Args)]
pub struct TrustArgs {
    /// Trust the certificates in this PEM file, instead of the system's,
    /// for an https:// URL.
    #[arg(long, value_name = "PATH")]
    pub ca_cert: Option<PathBuf>,
    /// Trust any certificate of an https:// URL (a test server's own).
    #[arg(long, conflicts_with = "ca_cert")]
    pub insecure: bool,
}

impl TrustArgs {
    /// The trust these flags ask for.
    pub fn trust(&self) -> Trust {
        Trust {
            ca_cert: self.ca_cert.clone(),
            insecure: self.insecure,
        }
    }
}

/// A gRPC method's name, checked.
fn grpc_method(s: &str) -> Result<String, String> {
    grpc::method_path(s).map(|_| s.trim_start_matches('/').to_string())
}

/// The bytes of `path`, or an error naming `flag`.
fn read(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

impl WireArgs {
    /// The configuration these flags ask for, files read.
    pub fn wire(&self) -> Result<Wire, String> {
        let body = match (&self.body, &self.body_file) {
            (Some(text), _) => text.clone().into_bytes(),
            (None, Some(path)) => read("--body-file", path)?,
            (None, None) => Vec::new(),
        };
        let grpc = match &self.grpc {
            Some(method) => Some(GrpcCall {
                method: method.clone(),
                message: match &self.grpc_message_file {
                    Some(path) => read("--grpc-message-file", path)?,
                    None => Vec::new(),
                },
            }),
            None => None,
        };
        Ok(Wire {
            // gRPC is HTTP/2's.
            transport: if self.http2 || grpc.is_some() {
                Transport::Http2
            } else {
                Transport::Http1
            },
            request: RequestShape {
                method: self.method.clone(),
                headers: self.headers.clone(),
                body,
            },
            trust: self.trust.trust(),
            grpc,
        })
    }

    /// These flags as a client's command line gives them (the default
    /// method left out), for the clients of storms run with them.
    pub fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        let mut flag = |name: &str, value: Option<String>| {
            argv.push(name.to_string());
            argv.extend(value);
        };
        if self.method != "GET" {
            flag("--method", Some(self.method.clone()));
        }
        for (name, value) in &self.headers {
            flag("--header", Some(format!("{name}: {value}")));
        }
        let path = |p: &PathBuf| Some(p.display().to_string());
        if let Some(body) = &self.body {
            flag("--body", Some(body.clone()));
        }
        if let Some(file) = &self.body_file {
            flag("--body-file", path(file));
        }
        if self.http2 {
            flag("--http2", None);
        }
        if let Some(file) = &self.trust.ca_cert {
            flag("--ca-cert", path(file));
        }
        if self.trust.insecure {
            flag("--insecure", None);
        }
        if let Some(method) = &self.grpc {
            flag("--grpc", Some(method.clone()));
        }
        if let Some(file) = &self.grpc_message_file {
            flag("--grpc-message-file", path(file));
        }
        argv
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        wire: WireArgs,
    }

    fn wire(args: &[&str]) -> Result<Wire, String> {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.wire.wire()
    }

    #[test]
    fn a_post_with_headers_and_a_body() {
        let w = wire(&[
            "--method", "POST", "-H", "A: 1", "--header", "B: 2", "--body", "{}",
        ])
        .unwrap();
        assert_eq!(w.request.method, "POST");
        assert_eq!(
            w.request.headers,
            vec![("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        assert_eq!(w.request.body, b"{}");
        assert_eq!(w.transport, Transport::Http1);
    }

    #[test]
    fn grpc_defaults_to_the_health_check_over_http2() {
        let w = wire(&["--grpc"]).unwrap();
        assert_eq!(w.transport, Transport::Http2);
        assert_eq!(w.grpc.unwrap().method, HEALTH_CHECK);
        let w = wire(&["--grpc", "/a.B/C"]).unwrap();
        assert_eq!(w.grpc.unwrap().method, "a.B/C");
    }

    #[test]
    fn bad_input_is_refused_with_its_flag_named() {
        for (args, says) in [
            (&["--header", "nocolon"][..], "not a header"),
            (&["--grpc", "Check"][..], "not a gRPC method"),
            (&["--grpc", "--method", "PUT"][..], "cannot be used with"),
            (
                &["--body", "x", "--body-file", "f"][..],
                "cannot be used with",
            ),
            (&["--grpc-message-file", "m"][..], "--grpc"),
            (
                &["--body-file", "/nonexistent/body"][..],
                "--body-file /nonexistent/body",
            ),
            (
                &["--grpc", "--grpc-message-file", "/nonexistent/m"][..],
                "/nonexistent/m",
            ),
        ] {
            let e = wire(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_flags_given_back_make_the_same_wire() {
        for args in [
            &[][..],
            &[
                "--method", "PUT", "-H", "A: 1 2", "-H", "b:3", "--body", "{} x",
            ][..],
            &["--http2", "--ca-cert", "/c.pem", "--body-file", "/dev/null"][..],
            &["--grpc", "a.B/C", "--insecure"][..],
            &["--grpc", "--grpc-message-file", "/dev/null"][..],
        ] {
            let argv = |args: &[&str]| {
                let cli =
                    Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap();
                cli.wire.argv()
            };
            let again = argv(args);
            let words: Vec<&str> = again.iter().map(String::as_str).collect();
            assert_eq!(wire(&words), wire(args), "{args:?} gave {again:?}");
            assert_eq!(argv(&words), again, "{args:?}");
        }
        let cli = Cli::try_parse_from(["t", "-H", "A: 1 2", "--http2"]).unwrap();
        assert_eq!(cli.wire.argv(), ["--header", "A: 1 2", "--http2"]);
    }

    #[test]
    fn a_body_and_a_message_come_from_their_files() {
        let dir = std::env::temp_dir().join(format!("rs-wire-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (body, message) = (dir.join("body.json"), dir.join("m.bin"));
        std::fs::write(&body, b"{\"a\":1}").unwrap();
        std::fs::write(&message, [0x0a, 0x01, 0x78]).unwrap();
        let w = wire(&["--body-file", body.to_str().unwrap()]).unwrap();
        assert_eq!(w.request.body, b"{\"a\":1}");
        let w = wire(&["--grpc", "--grpc-message-file", message.to_str().unwrap()]).unwrap();
        assert_eq!(w.grpc.unwrap().message, vec![0x0a, 0x01, 0x78]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
