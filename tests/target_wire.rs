//! `storm --target` of a service its clients reach over https, HTTP/2 or
//! gRPC: the storm's own requests to the target (its check before any
//! load and its wait for calm before each run) speak the wire its
//! clients' flags give, so the storm runs where they can, and is refused
//! before any load, exit 2, where they cannot: a certificate not trusted,
//! a server of HTTP/2 only asked in HTTP/1.1, a gRPC method not served.
//! The fault proxy in front of such a target speaks its clients' wire.
//! Each storm is a short protocol (`--quick`, phases of a second or less).

mod common;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Output;

use bytes::Bytes;
use common::recorder::{Certificate, Recorder};
use common::target::{QUICK_SERVER, storm};
use common::{ServerChild, fresh_path, summary_json};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// One case, `fixed`, of a hundred users given `client` too, its
/// protocol short: a warm-up of 1 s, a pause of 0.2 s, an observation of
/// 1 s, with `--quick`.
fn scenario_text(client: &str) -> String {
    format!(
        "seed = 2014\n\
         [protocol]\nwarmup = \"10s\"\npause = \"2s\"\nobserve = \"10s\"\n\
         report_interval = \"2s\"\ntail = \"0s\"\n\
         [[case]]\nname = \"fixed\"\nclient = \"--clients 100 {client}\"\n"
    )
}

/// A scratch folder for a test's storms.
fn scenario(name: &str) -> PathBuf {
    let dir = fresh_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A short storm (`scenario_text`) against `url`, its outage `outage`
/// (flags), its clients given `client` too, into `out`, its scenario
/// file beside it.
fn short_storm(url: &str, outage: &[&str], client: &str, out: &Path) -> Output {
    let file = out.with_extension("toml");
    std::fs::write(&file, scenario_text(client)).unwrap();
    let mut args = vec![
        "run",
        file.to_str().unwrap(),
        "--quick",
        "--quiet",
        "--calm",
        "1s",
        "--target",
        url,
    ];
    args.extend(outage);
    args.extend(["--out", out.to_str().unwrap()]);
    storm(&args)
}

/// An outage that does nothing: for targets that run in the test's own
/// process, which no signal may stop.
const NO_OUTAGE: [&str; 6] = [
    "--outage",
    "exec",
    "--outage-start",
    "true",
    "--outage-end",
    "true",
];

/// That the storm ran and its clients were answered: a baseline.
fn answered(output: &Output, out: &Path) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary = summary_json(out);
    let run = &summary["runs"][0];
    assert!(run["baseline_ok_per_s"].as_f64().unwrap() > 50.0, "{run}");
}

/// That the storm was refused before any load, saying `said`.
fn refused(output: &Output, out: &Path, said: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(said), "{said}: {stderr}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn an_https_target_is_stormed_with_its_certificate_trusted_and_refused_without() {
    let dir = scenario("target-wire-https");
    let certificate = Certificate::make(&dir.join("tls"));
    let (cert, key) = (
        certificate.cert.to_str().unwrap(),
        certificate.key.to_str().unwrap(),
    );
    let server = ServerChild::start(
        &[],
        &[&QUICK_SERVER[..], &["--tls-cert", cert, "--tls-key", key]].concat(),
    );
    let port = server.url.rsplit(':').next().unwrap().split('/').next();
    let url = format!("https://localhost:{}/api", port.unwrap());
    let outage = format!("sigstop={}", server.pid());
    let sigstop = ["--outage", outage.as_str()];
    // The system's roots do not hold the test's certificate: refused at
    // once, not waited on.
    let out = dir.join("untrusted");
    let started = std::time::Instant::now();
    let output = short_storm(&url, &sigstop, "--strategy fixed", &out);
    refused(&output, &out, "the TLS handshake failed");
    assert!(started.elapsed().as_secs() < 10, "at once");
    let out = dir.join("trusted");
    let output = short_storm(
        &url,
        &sigstop,
        &format!("--strategy fixed --ca-cert {cert}"),
        &out,
    );
    answered(&output, &out);
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    assert!(
        commands.contains("# fixed: the target calm after"),
        "{commands}"
    );
    // Through the fault proxy, which trusts what the clients trust and
    // speaks HTTP/2 to the target by ALPN, as they do.
    let out = dir.join("stall");
    let client = format!("--strategy fixed --http2 --ca-cert {cert}");
    let output = short_storm(&url, &["--outage", "stall"], &client, &out);
    answered(&output, &out);
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    let proxy = commands
        .lines()
        .find(|l| l.contains(" proxy --listen "))
        .unwrap();
    assert!(
        proxy.contains(&format!(" --http2 --ca-cert {cert}")),
        "{proxy}"
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A server of HTTP/2 only, in clear (h2c), answering 200 to anything, on
/// a runtime of its own; its address.
fn h2c_only() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let ok = service_fn(|_: Request<hyper::body::Incoming>| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), ok)
                        .await;
                });
            }
        });
    });
    addr
}

#[test]
fn a_server_of_http2_only_is_stormed_with_http2_and_refused_without() {
    let dir = scenario("target-wire-h2c");
    let url = format!("http://{}/", h2c_only());
    let out = dir.join("http1");
    let output = short_storm(&url, &NO_OUTAGE, "--strategy fixed", &out);
    refused(&output, &out, "give its clients --http2");
    let out = dir.join("http2");
    let output = short_storm(&url, &NO_OUTAGE, "--strategy fixed --http2", &out);
    answered(&output, &out);
    // The fault proxy speaks to the target as the clients do.
    let out = dir.join("stall");
    let stall = ["--outage", "stall"];
    let output = short_storm(&url, &stall, "--strategy fixed --http2", &out);
    answered(&output, &out);
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    let proxy = commands.lines().find(|l| l.contains(" proxy --listen "));
    assert!(proxy.unwrap().contains(" --http2 "), "{commands}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_grpc_storm_of_the_projects_server_runs_with_grpcs_own_policy() {
    let dir = scenario("target-wire-grpc");
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let outage = format!("sigstop={}", server.pid());
    let out = dir.join("grpc");
    let output = short_storm(
        &server.url,
        &["--outage", &outage],
        "--grpc --strategy grpc",
        &out,
    );
    answered(&output, &out);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_grpc_method_the_target_does_not_serve_is_refused_before_any_load() {
    let dir = scenario("target-wire-unimplemented");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let target = runtime.block_on(Recorder::unimplemented());
    let url = format!("http://{}/", target.addr);
    let out = dir.join("grpc");
    let output = short_storm(&url, &NO_OUTAGE, "--grpc a.B/C", &out);
    refused(&output, &out, "case fixed: 127.0.0.1:");
    refused(
        &output,
        &out,
        "does not serve a.B/C: it answered UNIMPLEMENTED",
    );
    target.saw_the_check_alone("/a.B/C");
    drop(target);
    std::fs::remove_dir_all(&dir).unwrap();
}
