//! Shards as a cluster runs them, merged with `storm merge`: a sweep in
//! four shards gives the files of one process byte for byte; a storm's
//! repeated runs in shards give its summaries; two client shards of 500
//! users against one server on loopback do the work of one client of
//! 1,000, and their merged percentiles are those of all their samples;
//! two shards of open traffic take the one stream's arrivals between them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use common::running::{Running, client_config, model, ms};
use retry_storm::experiment::clients::{self, MergeRequest};
use retry_storm::model::arrivals::ThinkTime;
use retry_storm::model::server::OnDisconnect;
use retry_storm::model::shard::Shard;
use retry_storm::net::client;
use retry_storm::report::histogram::{Percentiles, add_recorded, latency_histogram};
use retry_storm::report::output::read_rows;
use retry_storm::report::rows::ClientRow;

const STORM: &str = env!("CARGO_BIN_EXE_storm");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `storm ARGS`, with these environment variables, and checks it
/// succeeded.
fn storm(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(STORM);
    cmd.args(args);
    for var in retry_storm::model::shard::ENV_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "storm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Merges `shards` into `dir/merged` and checks that each of `files` is,
/// byte for byte, what one process wrote into `whole`; returns the
/// merged folder.
fn merged_like(dir: &Path, shards: &[PathBuf], whole: &Path, files: &[&str]) -> PathBuf {
    let merged = dir.join("merged");
    let mut args = vec!["merge", "--out", path(&merged)];
    args.extend(shards.iter().map(|s| path(s)));
    storm(&args, &[]);
    for file in files {
        assert!(
            read(whole.join(file)) == read(merged.join(file)),
            "{file} differs from one process's"
        );
    }
    merged
}

const SWEEP: &[&str] = &[
    "sweep",
    "--strategies",
    "fixed,exponential,exponential-2014",
    "--clients",
    "300,600",
    "--search",
    "grid",
    "--seeds",
    "3",
    "--max-pause",
    "30s",
    "--threads",
    "1",
    "--quiet",
];

#[test]
fn a_sweep_in_four_shards_merges_into_the_files_of_one_process() {
    let dir = temp_dir("sweep");
    let whole = dir.join("whole");
    let mut args = SWEEP.to_vec();
    args.extend(["--out", path(&whole)]);
    storm(&args, &[]);
    let shards: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("shard-{i}"))).collect();
    for (i, shard) in shards.iter().enumerate() {
        let mut args = SWEEP.to_vec();
        args.extend(["--out", path(shard)]);
        // Two shards named by the flag, two by a Slurm array counting from 1.
        let flag = format!("{i}/4");
        let id = (i + 1).to_string();
        let env: Vec<(&str, &str)> = if i % 2 == 0 {
            args.extend(["--shard", &flag]);
            vec![]
        } else {
            vec![
                ("SLURM_ARRAY_TASK_ID", &id),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
            ]
        };
        let out = storm(&args, &env);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(&format!("shard {i}/4")), "{said}");
    }
    // A shard's share is a part: fewer rows than the whole.
    assert!(read(shards[1].join("phase.csv")).len() < read(whole.join("phase.csv")).len());
    let merged = dir.join("merged");
    let mut merge = vec!["merge", "--out", path(&merged)];
    // In any order.
    merge.extend(shards.iter().rev().map(|s| path(s)));
    storm(&merge, &[]);
    for file in ["critical.csv", "phase.csv"] {
        assert!(
            read(whole.join(file)) == read(merged.join(file)),
            "{file} differs from one process's"
        );
    }
    assert!(merged.join("phase.svg").exists());

    // Three of four shards are not the whole sweep.
    let out = Command::new(STORM)
        .args(["merge", "--out", path(&dir.join("part"))])
        .args(shards[..3].iter().map(|s| path(s)))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing 3"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The adaptive search's shards take whole lines of a case's loads, each
/// load starting from its neighbour's T50 as in one process: three shards
/// of two lines (one idle) merge into the files of one process.
#[test]
fn an_adaptive_sweep_in_shards_merges_into_the_files_of_one_process() {
    let dir = temp_dir("adaptive");
    let sweep = |out: &Path, shard: Option<&str>| {
        let mut args = vec!["sweep", "--strategies", "fixed,exponential-2014"];
        args.extend(["--clients", "300,600,900", "--max-pause", "30s"]);
        args.extend(["--precision", "2s", "--max-runs", "30", "--threads", "2"]);
        args.extend(["--quiet", "--out", path(out)]);
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        storm(&args, &[]);
    };
    let whole = dir.join("whole");
    sweep(&whole, None);
    let shards: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("shard-{i}"))).collect();
    for (i, shard) in shards.iter().enumerate() {
        sweep(shard, Some(&format!("{i}/3")));
    }
    let rows = |p: &Path| {
        String::from_utf8(read(p.join("critical.csv")))
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!(
        shards.iter().map(|s| rows(s)).collect::<Vec<_>>(),
        vec![4, 4, 0],
        "a line of three loads each to the first two shards, nothing to the third"
    );
    merged_like(&dir, &shards, &whole, &["critical.csv", "phase.csv"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Case names that a spreadsheet would run as formulas are written to a
/// sweep's CSV files as text (behind an apostrophe), and read back as
/// the names they are: the shards merge into the files of one process,
/// and the merged summary names the cases as the scenario does.
#[test]
fn case_names_like_formulas_are_text_in_a_sweeps_csv_files_and_merge_back() {
    let dir = temp_dir("formulas");
    let scenario = dir.join("formulas.toml");
    std::fs::write(
        &scenario,
        "seed = 1\n\
         [protocol]\nwarmup = \"20s\"\npause = \"20s\"\nobserve = \"1m\"\n\
         report_interval = \"5s\"\n\
         [[case]]\nname = \"+1+1\"\nclient = \"--strategy fixed\"\n\
         [[case]]\nname = \"-2\"\nclient = \"--strategy exponential-2014\"\n",
    )
    .unwrap();
    let sweep = |out: &Path, shard: Option<&str>| {
        let mut args = vec!["sweep", path(&scenario), "--clients", "300"];
        args.extend([
            "--search",
            "grid",
            "--seeds",
            "2",
            "--max-pause",
            "20s",
            "--threads",
            "1",
        ]);
        args.extend(["--quiet", "--out", path(out)]);
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        storm(&args, &[]);
    };
    let whole = dir.join("whole");
    sweep(&whole, None);
    for file in ["critical.csv", "phase.csv"] {
        let text = String::from_utf8(read(whole.join(file))).unwrap();
        let cases: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|row| row.split(',').next().unwrap())
            .collect();
        assert!(cases.contains(&"'+1+1"), "{file}: {cases:?}");
        assert!(cases.contains(&"'-2"), "{file}: {cases:?}");
        assert!(
            cases.iter().all(|c| c.starts_with('\'')),
            "{file}: {cases:?}"
        );
    }
    let shards = [dir.join("a"), dir.join("b")];
    sweep(&shards[0], Some("0/2"));
    sweep(&shards[1], Some("1/2"));
    let merged = merged_like(&dir, &shards, &whole, &["critical.csv", "phase.csv"]);
    let summary = String::from_utf8(read(merged.join("summary.md"))).unwrap();
    assert!(summary.contains("| +1+1 |"), "{summary}");
    assert!(summary.contains("| -2 |"), "{summary}");
    assert!(
        !summary.contains("'+1+1") && !summary.contains("'-2"),
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A scenario of closed and open cases, swept at two numbers of clients
/// (the open case at its own rate), in shards: the rows of both kinds of
/// load read back and merge into the files of one process.
#[test]
fn closed_and_open_cases_swept_in_shards_merge_into_the_files_of_one_process() {
    let dir = temp_dir("open");
    let scenario = dir.join("mixed.toml");
    std::fs::write(
        &scenario,
        "seed = 1\n\
         [[case]]\nname = \"closed\"\nclient = \"--strategy fixed\"\n\
         [[case]]\nname = \"partly-open\"\n\
         client = \"--strategy fixed --arrival-rate 7.5 --session-requests 4\"\n",
    )
    .unwrap();
    let sweep = |out: &Path, shard: Option<&str>| {
        let mut args = vec!["sweep", path(&scenario), "--clients", "300,600"];
        args.extend([
            "--search",
            "grid",
            "--seeds",
            "2",
            "--max-pause",
            "20s",
            "--step",
            "10s",
        ]);
        args.extend(["--threads", "1", "--quiet", "--out", path(out)]);
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        storm(&args, &[]);
    };
    let whole = dir.join("whole");
    sweep(&whole, None);
    let critical = String::from_utf8(read(whole.join("critical.csv"))).unwrap();
    let rows: Vec<&str> = critical.lines().collect();
    assert_eq!(rows.len(), 4, "two closed settings, one open: {critical}");
    assert!(rows[3].starts_with("partly-open,,7.5,"), "{critical}");
    let shards = [dir.join("a"), dir.join("b")];
    sweep(&shards[0], Some("0/2"));
    sweep(&shards[1], Some("1/2"));
    merged_like(&dir, &shards, &whole, &["critical.csv", "phase.csv"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_storms_runs_in_shards_merge_into_its_summaries() {
    let dir = temp_dir("runs");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/storm-check.toml");
    let run = |out: &Path, shard: Option<&str>| {
        let mut args = vec![
            "run",
            path(&scenario),
            "--engine",
            "sim",
            "--runs",
            "3",
            "--quiet",
            "--out",
            path(out),
        ];
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        storm(&args, &[]);
    };
    let whole = dir.join("whole");
    run(&whole, None);
    let shards = [dir.join("a"), dir.join("b")];
    run(&shards[0], Some("0/2"));
    run(&shards[1], Some("1/2"));
    let merged = merged_like(&dir, &shards, &whole, &["summary.json", "summary.md"]);
    // Every run's files are there, interval logs too.
    assert!(merged.join("cancel.run3.client.hlog").exists());
    assert!(merged.join("fixed.run2.server.csv").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A storm shard that lacks one of its run's CSV files: the merge fails
/// naming that file in the shard, where it should have been.
#[test]
fn a_run_csv_missing_from_a_storm_shard_is_named_in_the_shard() {
    let dir = temp_dir("missing");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/storm-check.toml");
    let shards = [dir.join("a"), dir.join("b")];
    for (shard, part) in shards.iter().zip(["0/2", "1/2"]) {
        let mut args = vec!["run", path(&scenario), "--engine", "sim"];
        args.extend(["--runs", "1", "--quiet", "--shard", part]);
        args.extend(["--out", path(shard)]);
        storm(&args, &[]);
    }
    let mut csvs: Vec<PathBuf> = std::fs::read_dir(&shards[1])
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".client.csv"))
        .collect();
    csvs.sort();
    let lost = csvs.first().expect("shard 1/2 made a run");
    std::fs::remove_file(lost).unwrap();
    let merged = dir.join("merged");
    let out = Command::new(STORM)
        .args(["merge", "--out", path(&merged)])
        .args(shards.iter().map(|s| path(s)))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(path(lost)), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_client_shards_do_the_work_of_one_client_and_merge_exactly() {
    let dir = temp_dir("clients");
    let server = Running::start(model(ms(20)), OnDisconnect::Continue);
    let config = |shard: Shard, name: &str| retry_storm::model::client::ClientConfig {
        clients: 1000,
        shard,
        think: ThinkTime::new(Duration::from_secs(1)),
        report_interval: ms(500),
        duration: Some(Duration::from_secs(3)),
        csv: Some(dir.join(name).join("client.csv")),
        hlog: Some(dir.join(name).join("client.hlog")),
        ..client_config(server.url())
    };
    // The shards start together, as --start-at makes them.
    let start = SystemTime::now() + ms(300);
    let shard = |i: u32| retry_storm::model::client::ClientConfig {
        start_at: Some(start),
        ..config(Shard::new(i, 2).unwrap(), &format!("shard-{i}"))
    };
    let (a, b) = tokio::join!(
        client::run(shard(0), std::future::pending()),
        client::run(shard(1), std::future::pending())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.rows.len(), b.rows.len());
    let one = client::run(config(Shard::WHOLE, "one"), std::future::pending())
        .await
        .unwrap();
    server.stop().await;

    // The same work: OK attempts within noise (about 3,000, Poisson).
    let sharded = (a.totals.tally.ok + b.totals.tally.ok) as f64;
    let whole = one.totals.tally.ok as f64;
    assert!(
        (sharded / whole - 1.0).abs() < 0.15,
        "2 x 500 users: {sharded} OK, 1 x 1000: {whole}"
    );

    let merged = dir.join("merged");
    let said = clients::merge(&MergeRequest {
        dirs: &[dir.join("shard-0"), dir.join("shard-1")],
        out: &merged,
        server_csv: None,
        protocol: None,
        png: false,
    })
    .unwrap();
    assert_eq!(said.len(), 1, "{said:?}");

    // Percentiles of the union of every sample, from the processes'
    // own histograms, not from the files.
    let mut union = latency_histogram();
    add_recorded(&mut union, &a.totals.attempt_latency);
    add_recorded(&mut union, &b.totals.attempt_latency);
    let summary: serde_json::Value =
        serde_json::from_slice(&read(merged.join("client.summary.json"))).unwrap();
    let latency = &summary["attempt_latency"];
    assert_eq!(latency["count"], union.len());
    let expected = Percentiles::of(&union);
    assert_eq!(latency["p50_ms"].as_f64(), expected.p50_ms);
    assert_eq!(latency["p99_ms"].as_f64(), expected.p99_ms);
    assert_eq!(latency["max_ms"].as_f64(), expected.max_ms);

    // Row by row: rates summed, percentiles of the interval's union.
    let rows: Vec<ClientRow> = read_rows(&merged.join("client.csv")).unwrap();
    assert_eq!(rows.len(), a.rows.len());
    for (k, row) in rows.iter().enumerate() {
        let sum = a.rows[k].ok_per_s + b.rows[k].ok_per_s;
        assert!((row.ok_per_s - sum).abs() < 0.011, "row {k}: {row:?}");
        assert_eq!(row.in_flight, a.rows[k].in_flight + b.rows[k].in_flight);
    }

    // Folders that do not make one whole run are refused, naming why.
    let refused = |dirs: &[PathBuf], mention: &str| {
        let out = dir.join("refused");
        let err = clients::merge(&MergeRequest {
            dirs,
            out: &out,
            server_csv: None,
            protocol: None,
            png: false,
        })
        .expect_err(mention)
        .to_string();
        assert!(err.contains(mention), "{mention:?} not in {err}");
    };
    let (s0, s1) = (dir.join("shard-0"), dir.join("shard-1"));
    refused(&[s0.clone(), s0.join(".")], "are the same folder");
    refused(std::slice::from_ref(&s0), "missing 1/2");
    // A copy of a shard is the same shard twice.
    let copy = dir.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for file in ["client.csv", "client.hlog"] {
        std::fs::copy(s1.join(file), copy.join(file)).unwrap();
    }
    refused(
        &[s0.clone(), s1.clone(), copy.clone()],
        "shard 1/2 is given twice",
    );
    // Another run: the whole population in one process, no common start.
    refused(&[s0.clone(), dir.join("one")], "not shards of one run");
    refused(&[merged.clone(), s0.clone()], "number of shards differs");
    // A shard whose CSV lost its last rows.
    let text = std::fs::read_to_string(copy.join("client.csv")).unwrap();
    let kept: Vec<&str> = text.lines().take(text.lines().count() / 2).collect();
    std::fs::write(copy.join("client.csv"), kept.join("\n") + "\n").unwrap();
    refused(&[s0.clone(), copy.clone()], "cut short");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_of_open_traffic_take_the_one_streams_arrivals_and_merge() {
    use retry_storm::model::open::{OpenTraffic, SessionLength};
    let dir = temp_dir("open-clients");
    let server = Running::start(model(ms(20)), OnDisconnect::Continue);
    let url = server.url();
    let config = |shard: Shard, name: &str| retry_storm::model::client::ClientConfig {
        clients: 0,
        open: Some(OpenTraffic {
            rate: 400.0,
            session: SessionLength::new(2.0).unwrap(),
            max_outstanding: 1_000_000,
        }),
        shard,
        think: ThinkTime::new(ms(200)),
        report_interval: ms(500),
        duration: Some(Duration::from_secs(3)),
        csv: Some(dir.join(name).join("client.csv")),
        hlog: Some(dir.join(name).join("client.hlog")),
        ..client_config(url.clone())
    };
    let start = SystemTime::now() + ms(300);
    let shard = |i: u32| retry_storm::model::client::ClientConfig {
        start_at: Some(start),
        ..config(Shard::new(i, 2).unwrap(), &format!("shard-{i}"))
    };
    let (a, b) = tokio::join!(
        client::run(shard(0), std::future::pending()),
        client::run(shard(1), std::future::pending())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let one = client::run(config(Shard::WHOLE, "one"), std::future::pending())
        .await
        .unwrap();
    server.stop().await;

    // The arrivals are the one stream's instants before the run's end,
    // split by index: the shards admit exactly what one process admits,
    // however late each process's timer.
    let (ta, tb, whole) = (a.totals.tally, b.totals.tally, one.totals.tally);
    let sharded = ta.arrived + tb.arrived;
    assert_eq!(sharded, whole.arrived, "{ta:?} {tb:?} {whole:?}");
    assert!(
        ta.arrived.abs_diff(tb.arrived) < whole.arrived / 5,
        "{ta:?} {tb:?}"
    );
    assert!((1_000..1_400).contains(&whole.arrived), "{whole:?}");

    let merged = dir.join("merged");
    clients::merge(&MergeRequest {
        dirs: &[dir.join("shard-0"), dir.join("shard-1")],
        out: &merged,
        server_csv: None,
        protocol: None,
        png: false,
    })
    .unwrap();
    let rows: Vec<ClientRow> = read_rows(&merged.join("client.csv")).unwrap();
    assert_eq!(rows.len(), a.rows.len());
    for (k, row) in rows.iter().enumerate() {
        let held = a.rows[k].outstanding.unwrap() + b.rows[k].outstanding.unwrap();
        assert_eq!(row.outstanding, Some(held), "row {k}");
        assert_eq!(row.refused_per_s, Some(0.0));
    }
    // An open shard and a closed one are not one run (the server gone,
    // its attempts fail: only its log's header counts here).
    let closed = dir.join("closed");
    client::run(
        retry_storm::model::client::ClientConfig {
            clients: 10,
            open: None,
            start_at: Some(start),
            duration: Some(ms(600)),
            ..config(Shard::new(1, 2).unwrap(), "closed")
        },
        std::future::pending(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let err = clients::merge(&MergeRequest {
        dirs: &[dir.join("shard-0"), closed],
        out: &dir.join("refused"),
        server_csv: None,
        protocol: None,
        png: false,
    })
    .expect_err("open and closed")
    .to_string();
    assert!(err.contains("not shards of one run"), "{err}");
    assert!(
        err.contains("400 arrivals/s") && err.contains("10 clients"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A chain through the storm, its tier 1 stopped: the runs of its shards
/// merge into the summaries one process makes, every layer's figures and
/// files included.
#[test]
fn a_chains_runs_in_shards_merge_into_its_summaries() {
    let dir = temp_dir("chain-runs");
    let scenario = dir.join("chain.toml");
    std::fs::write(
        &scenario,
        r#"
seed = 5
[protocol]
warmup = "10s"
pause = "5s"
observe = "20s"
report_interval = "2s"
tail = "0s"

[[case]]
name = "chain"
client = "--strategy full-jitter --max-attempts 3 --clients 200"
pause = 1
[[case.tier]]
server = "--base-delay 5ms --propagate-deadline"
client = "--strategy full-jitter --max-attempts 2 --timeout 1s"
"#,
    )
    .unwrap();
    let run = |out: &Path, shard: Option<&str>| {
        let mut args = vec!["run", path(&scenario), "--engine", "sim", "--runs", "3"];
        args.extend(["--quiet", "--out", path(out)]);
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        storm(&args, &[]);
    };
    let whole = dir.join("whole");
    run(&whole, None);
    let shards = [dir.join("a"), dir.join("b")];
    run(&shards[0], Some("0/2"));
    run(&shards[1], Some("1/2"));
    let merged = merged_like(&dir, &shards, &whole, &["summary.json", "summary.md"]);
    assert!(merged.join("chain.run2.tier-1.calls.csv").exists());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("summary.json")).unwrap())
            .unwrap();
    let tiers = summary["cases"][0]["tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), 2, "tier 1 and the backend");
    std::fs::remove_dir_all(&dir).unwrap();
}
