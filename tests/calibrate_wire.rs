//! `storm calibrate` of a service its clients reach over https with
//! HTTP/2, or over gRPC: the project's own server at a shape the
//! calibration is not told (a pool of 20 workers at 100 ms, run ten times
//! faster), probed as its clients speak, fitted back, and written as a
//! twin whose cases speak as the probe did; and refused before any load,
//! exit 2, where no level could ever be measured: a certificate not
//! trusted, a gRPC method not served.

mod common;

use std::path::Path;
use std::process::Output;

use common::calibration::POOL;
use common::recorder::{Certificate, Recorder, Reply};
use common::{ServerChild, fresh_path, one_at_a_time};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// `storm calibrate --quick` of `target` into `out`, its levels doubling
/// to 128, each short (a warm-up of 0.2 s, a hold of 0.6 s, as
/// `tests/calibrate.rs`: fewer levels, and other shapes fitted as well),
/// the twin written and not swept, the client's wire flags `wire`.
fn calibrate(target: &str, out: &Path, wire: &[&str]) -> Output {
    let extra = [&["--no-predict", "--strategies", "fixed"][..], wire].concat();
    common::calibration::calibrate(STORM, target, out, &extra)
}

fn json(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap()
}

/// That the calibration measured every level without errors and fitted
/// the hidden pool back: at full scale (`--quick` multiplies the times
/// by ten), 20 workers at 100 ms give 200 answers a second from 20
/// clients on, so the fit's workers are near 20 and its service time
/// near 100 ms. Returns `twin.toml`.
fn fitted_the_pool(output: &Output, out: &Path) -> String {
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    let record = json(out);
    let levels = record["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 8, "{said}");
    for level in levels {
        assert_eq!(level["error_share"], 0.0, "{level}");
        let little = level["little_ratio"].as_f64().unwrap();
        assert!((0.8..1.2).contains(&little), "{level}");
    }
    // 128 clients on 20 workers of 10 ms (at the server's own scale):
    // 2,000 answers a second, each waiting 64 ms.
    let last = &levels[7];
    let throughput = last["throughput"].as_f64().unwrap();
    assert!((1_600.0..2_200.0).contains(&throughput), "{last}");
    let fits = &record["fits"];
    let best = &fits["shapes"][fits["best"].as_u64().unwrap() as usize]["twin"];
    assert_eq!(best["shape"], "pool", "{fits}");
    let workers = best["workers"].as_u64().unwrap();
    assert!((16..=24).contains(&workers), "{best}");
    let flags = record["twin_flags"].as_str().unwrap();
    assert!(flags.starts_with("--model pool --workers"), "{flags}");
    let twin = std::fs::read_to_string(out.join("twin.toml")).unwrap();
    assert!(twin.contains(flags), "{twin}");
    twin
}

#[test]
fn an_https_service_is_calibrated_over_http2_with_its_certificate_trusted() {
    let _serial = one_at_a_time();
    let dir = fresh_path("calibrate-wire-https");
    let certificate = Certificate::make(&dir.join("tls"));
    let (cert, key) = (
        certificate.cert.to_str().unwrap(),
        certificate.key.to_str().unwrap(),
    );
    let server = ServerChild::start(
        &[],
        &[&POOL[..], &["--tls-cert", cert, "--tls-key", key]].concat(),
    );
    // The certificate names localhost; the server says 127.0.0.1.
    let port = server.url.rsplit(':').next().unwrap().split('/').next();
    let url = format!("https://localhost:{}/api", port.unwrap());
    let out = dir.join("calibrated");
    let output = calibrate(&url, &out, &["--http2", "--ca-cert", cert, "--no-gone"]);
    let twin = fitted_the_pool(&output, &out);
    // The twin's clients speak as the probe did: --verify's storms and
    // `storm run --target` take these flags.
    assert!(
        twin.contains(&format!(
            "--clients 1000 --timeout 2s --http2 --ca-cert {cert}"
        )),
        "{twin}"
    );
    // Its server reads every stream at a resume, as the proxy's stall
    // does: no GOAWAY past h2's 20 resets (the probe cannot see one).
    assert!(twin.contains("--max-pending-resets 4294967295"), "{twin}");
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_grpc_service_is_calibrated_by_its_method_with_a_message() {
    let _serial = one_at_a_time();
    let dir = fresh_path("calibrate-wire-grpc");
    std::fs::create_dir_all(&dir).unwrap();
    // A message of one string field: tag 1, length 1, "x".
    let message = dir.join("message.bin");
    std::fs::write(&message, [0x0a, 0x01, b'x']).unwrap();
    let server = ServerChild::start(&[], &POOL);
    let out = dir.join("calibrated");
    let output = calibrate(
        &server.url,
        &out,
        &[
            "--grpc",
            "shop.Cart/Add",
            "--grpc-message-file",
            message.to_str().unwrap(),
            "--no-gone",
        ],
    );
    let twin = fitted_the_pool(&output, &out);
    assert!(
        twin.contains(&format!(
            "--grpc shop.Cart/Add --grpc-message-file {}",
            message.display()
        )),
        "{twin}"
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// That the calibration was refused before any load, saying `said`.
fn refused(output: &Output, out: &Path, said: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(said), "{said}: {stderr}");
    assert!(!out.join("levels.csv").exists(), "no level measured");
}

#[test]
fn a_certificate_not_trusted_is_refused_before_any_load() {
    let dir = fresh_path("calibrate-wire-untrusted");
    let certificate = Certificate::make(&dir.join("tls"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let target = runtime.block_on(Recorder::start(Some(&certificate), |_| Reply::Http(200)));
    let url = format!("https://localhost:{}/", target.addr.port());
    let out = dir.join("untrusted");
    let output = calibrate(&url, &out, &["--http2", "--no-gone"]);
    refused(&output, &out, "the TLS handshake failed");
    assert!(target.seen().is_empty(), "no request got through");
    drop(target);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_grpc_method_not_served_is_refused_before_any_load() {
    let dir = fresh_path("calibrate-wire-unimplemented");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let target = runtime.block_on(Recorder::unimplemented());
    let url = format!("http://{}/", target.addr);
    let out = dir.join("grpc");
    let output = calibrate(&url, &out, &["--grpc", "a.B/C", "--no-gone"]);
    refused(
        &output,
        &out,
        "does not serve a.B/C: it answered UNIMPLEMENTED",
    );
    target.saw_the_check_alone("/a.B/C");
    drop(target);
    std::fs::remove_dir_all(&dir).unwrap();
}
