//! Nothing lost to `--out`: a merge never writes into a folder it reads,
//! and no command writes into a folder that already holds files unless
//! told to replace them (`--replace`), and then only an earlier run's.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::temp_dir;

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// Runs `storm ARGS` outside any cluster engine's shard.
fn storm(args: &[&str]) -> Output {
    let mut cmd = Command::new(STORM);
    for var in retry_storm::model::shard::ENV_VARS {
        cmd.env_remove(var);
    }
    cmd.args(args).output().unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file below `dir` with its bytes, sorted.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

fn refused(out: &Output, mention: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(mention), "{mention:?} not in {stderr}");
}

const SIM: &[&str] = &[
    "--engine",
    "sim",
    "--strategies",
    "fixed",
    "--runs",
    "2",
    "--quiet",
];

#[test]
fn a_storm_into_a_folder_with_files_is_refused_unless_replacing_results() {
    let dir = temp_dir("out-storm");
    let out = dir.join("results");
    let ok = storm(&[SIM, &["--out", path(&out)]].concat());
    assert!(ok.status.success(), "{ok:?}");
    let before = snapshot(&out);
    // Again into the same folder: refused, nothing touched.
    let again = storm(&[SIM, &["--seed", "9", "--out", path(&out)]].concat());
    refused(&again, "already holds");
    assert!(
        snapshot(&out) == before,
        "the earlier results are untouched"
    );
    // Told to replace: the earlier run's files are gone, the new ones there.
    std::fs::write(out.join("stale.client.csv"), "old").unwrap();
    let replaced = storm(&[SIM, &["--seed", "9", "--replace", "--out", path(&out)]].concat());
    assert!(replaced.status.success(), "{replaced:?}");
    assert!(!out.join("stale.client.csv").exists());
    let scenario = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert!(scenario.contains("seed = 9"), "{scenario}");
    // A folder of other files is never removed.
    let mine = dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let foreign = storm(&[SIM, &["--replace", "--out", path(&mine)]].concat());
    refused(&foreign, "not results of this tool");
    assert!(mine.join("notes.txt").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_into_a_folder_with_files_is_refused() {
    let dir = temp_dir("out-sweep");
    std::fs::write(dir.join("phase.csv"), "old").unwrap();
    let args = [
        "sweep",
        "--strategies",
        "fixed",
        "--clients",
        "300",
        "--search",
        "grid",
        "--seeds",
        "1",
    ];
    let out = storm(
        &[
            &args[..],
            &["--max-pause", "10s", "--quiet", "--out", path(&dir)],
        ]
        .concat(),
    );
    refused(&out, "already holds");
    assert_eq!(
        std::fs::read_to_string(dir.join("phase.csv")).unwrap(),
        "old"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_merge_into_one_of_its_inputs_is_refused_with_the_inputs_untouched() {
    let dir = temp_dir("out-merge");
    // Storm shards, sweep shards and client shards, each merged into its
    // first shard's folder (under another name for it, too).
    let storm_shards: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("storm-{i}"))).collect();
    for (i, shard) in storm_shards.iter().enumerate() {
        let flag = format!("{i}/2");
        let out = storm(&[SIM, &["--shard", &flag, "--out", path(shard)]].concat());
        assert!(out.status.success(), "{out:?}");
    }
    let sweep_shards: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("sweep-{i}"))).collect();
    for (i, shard) in sweep_shards.iter().enumerate() {
        let flag = format!("{i}/2");
        let args = ["sweep", "--strategies", "fixed", "--clients", "300,600"];
        let rest = [
            "--search",
            "grid",
            "--seeds",
            "1",
            "--max-pause",
            "10s",
            "--quiet",
            "--shard",
            &flag,
        ];
        let out = storm(&[&args[..], &rest, &["--out", path(shard)]].concat());
        assert!(out.status.success(), "{out:?}");
    }
    let client_shards: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("client-{i}"))).collect();
    for shard in &client_shards {
        std::fs::create_dir_all(shard).unwrap();
        std::fs::write(shard.join("run.csv"), "unix_ms\n").unwrap();
        std::fs::write(shard.join("run.hlog"), "#[BaseTime: 0]\n").unwrap();
    }
    for shards in [&storm_shards, &sweep_shards, &client_shards] {
        let before: Vec<_> = shards.iter().map(|s| snapshot(s)).collect();
        let into = shards[0].join(".");
        for replace in [&[][..], &["--replace"][..]] {
            let mut args = vec!["merge", "--out", path(&into)];
            args.extend(replace);
            args.extend(shards.iter().map(|s| path(s)));
            refused(&storm(&args), "is one of the folders read");
        }
        let after: Vec<_> = shards.iter().map(|s| snapshot(s)).collect();
        assert!(before == after, "{shards:?}: the inputs were changed");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
