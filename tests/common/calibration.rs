//! What the calibration tests share: the hidden service and the short
//! `storm calibrate` they run against it.

use std::path::Path;
use std::process::{Command, Output};

/// The hidden shape, ten times faster than the service it stands for.
pub const POOL: [&str; 14] = [
    "--listen",
    "127.0.0.1:0",
    "--model",
    "pool",
    "--workers",
    "20",
    "--service-time",
    "100ms",
    "--service-distribution",
    "constant",
    "--queue",
    "1000",
    "--time-scale",
    "10",
];

/// `storm calibrate --quick` (the program `storm`) of `target` into
/// `out`, its levels doubling to 128, each short (a warm-up of 0.2 s, a
/// hold of 0.6 s), with `extra` flags.
pub fn calibrate(storm: &str, target: &str, out: &Path, extra: &[&str]) -> Output {
    Command::new(storm)
        .args(["calibrate", "--target", target, "--quick", "--out"])
        .arg(out)
        .args(["--levels", "1,2,4,8,16,32,64,128"])
        .args(["--level-warmup", "200ms", "--hold", "600ms"])
        .args(extra)
        .output()
        .unwrap()
}
