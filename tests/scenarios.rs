//! Scenario files as a user runs them: `storm run FILE` on both engines,
//! `--dump-scenario` and what it prints, a bad file refused, and the man
//! pages and completions the programs generate.

mod common;

use common::{
    Guard, cmdline, fresh_path, one_at_a_time, signal, summary_json, verdicts, wait_for_children,
};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const STORM: &str = env!("CARGO_BIN_EXE_storm");

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn storm(args: &[&str], out: &Path) -> Output {
    Command::new(STORM)
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

const DEFENCES: [(&str, bool); 4] = [
    ("fixed", false),
    ("fixed+budget", false),
    ("fixed+breaker", true),
    ("shedding", true),
];

fn expected() -> Vec<(String, bool)> {
    DEFENCES.iter().map(|&(n, r)| (n.to_string(), r)).collect()
}

#[test]
fn the_defences_scenario_in_virtual_time() {
    let _serial = one_at_a_time();
    let out = fresh_path("defences-sim");
    let file = repo("scenarios/defences.toml");
    let output = storm(
        &["run", file.to_str().unwrap(), "--engine", "sim", "--quiet"],
        &out,
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(verdicts(&out), expected());
    let s = summary_json(&out);
    assert_eq!(s["runs"][3]["strategy"], "fixed", "the case's strategy");
    assert_eq!(s["protocol"]["seed"], 2014);
    // The folder holds the scenario that made it, with its engine.
    let kept = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert!(kept.contains("engine = \"sim\""), "{kept}");
    assert!(kept.contains("name = \"fixed+breaker\""), "{kept}");
    for case in ["fixed", "fixed+budget", "fixed+breaker", "shedding"] {
        for file in ["client.csv", "server.csv", "svg"] {
            assert!(out.join(format!("{case}.{file}")).exists(), "{case}.{file}");
        }
    }
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("| shedding | ") && md.contains("## After the resume"));
    std::fs::remove_dir_all(&out).unwrap();
}

/// The real engine runs the whole protocol of a scenario, every case with
/// its pause. Its verdicts are not asserted: each is one draw of a process
/// that depends on how fast the host lets the server read its backlog at
/// the resume, and on this shared 2-core host a quick run's fixed retries
/// recovered in some runs and shedding missed its observation window in
/// others, before and after the same commit. The verdicts are checked in
/// virtual time above and at full scale by `scripts/storm-check.sh`.
#[test]
#[ignore = "tier 2, real storms (about 17 s): cargo test -- --ignored"]
fn the_defences_scenario_on_the_real_engine_quick() {
    let _serial = one_at_a_time();
    let out = fresh_path("defences-real");
    let file = repo("scenarios/defences.toml");
    let output = storm(&["run", file.to_str().unwrap(), "--quick", "--quiet"], &out);
    assert!(output.status.success(), "{output:?}");
    let got = verdicts(&out);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, DEFENCES.map(|(n, _)| n), "{got:?}");
    // Every case served its warm-up and saw its server stopped: OK rows
    // before the pause, then a row with none.
    for (name, _) in DEFENCES {
        let csv = std::fs::read_to_string(out.join(format!("{name}.client.csv"))).unwrap();
        let ok: Vec<f64> = csv
            .lines()
            .skip(1)
            .map(|line| line.split(',').nth(2).unwrap().parse().unwrap())
            .collect();
        let paused = ok.iter().position(|&ok| ok == 0.0);
        assert!(
            matches!(paused, Some(at) if at > 0 && ok[..at].iter().all(|&ok| ok > 0.0)),
            "{name}: OK/s by interval {ok:?}"
        );
    }
    assert_eq!(summary_json(&out)["protocol"]["time_scale"], 10.0);
    let kept = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert!(kept.contains("engine = \"real\""), "{kept}");
    // The children's command lines, each with the status pipe the runner
    // reads instead of their display text.
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    assert_eq!(commands.matches("--status-fd 3").count(), 8, "{commands}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_dumped_scenario_runs_the_same_experiment_as_its_command_line() {
    let _serial = one_at_a_time();
    let dir = fresh_path("dump");
    std::fs::create_dir_all(&dir).unwrap();
    let flags = [
        "--engine",
        "sim",
        "--strategies",
        "fixed,google",
        "--client-args",
        "--clients 300 --throttle budget",
        "--server-args",
        "--limit 40",
        "--pause",
        "15s",
        "--seed",
        "7",
    ];
    let mut dump = flags.to_vec();
    dump.push("--dump-scenario");
    let dumped = storm(&dump, &dir.join("dumped"));
    assert!(dumped.status.success(), "{dumped:?}");
    let text = String::from_utf8(dumped.stdout).unwrap();
    assert!(
        text.contains("seed = 7") && text.contains("pause = \"15s\""),
        "{text}"
    );
    assert!(!dir.join("dumped").exists(), "dumping runs nothing");
    let file = dir.join("dumped.toml");
    std::fs::write(&file, &text).unwrap();

    let mut by_flags = flags.to_vec();
    by_flags.push("--quiet");
    assert!(storm(&by_flags, &dir.join("by-flags")).status.success());
    let output = storm(
        &["run", file.to_str().unwrap(), "--quiet"],
        &dir.join("by-file"),
    );
    assert!(output.status.success(), "{output:?}");
    for case in ["fixed", "google"] {
        for csv in ["client.csv", "server.csv"] {
            let name = format!("{case}.{csv}");
            let a = std::fs::read(dir.join("by-flags").join(&name)).unwrap();
            let b = std::fs::read(dir.join("by-file").join(&name)).unwrap();
            assert!(a == b && a.len() > 500, "{name} differs");
        }
    }
    // `storm run FILE --dump-scenario` prints the file with what overrides it.
    let again = Command::new(STORM)
        .args([
            "run",
            file.to_str().unwrap(),
            "--seed",
            "8",
            "--dump-scenario",
        ])
        .output()
        .unwrap();
    let again = String::from_utf8(again.stdout).unwrap();
    assert_eq!(again, text.replace("seed = 7", "seed = 8"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_whose_client_could_not_keep_up_is_flagged() {
    let _serial = one_at_a_time();
    let out = fresh_path("storm-behind");
    std::fs::create_dir_all(&out).unwrap();
    // Quick, so the bound is the timer's 500 µs step and a millisecond,
    // 1.5 ms at p99. One client is stopped three times for 200 ms, as a
    // host short of CPU would stop it: the attempts due meanwhile, some
    // 7 % of them, start up to 200 ms late. Its twin, undisturbed, starts
    // its 100 attempts a second within a step.
    let file = out.join("behind.toml");
    std::fs::write(
        &file,
        "seed = 3\n[protocol]\nwarmup = \"40s\"\npause = \"10s\"\nobserve = \"30s\"\n\
         report_interval = \"5s\"\ntail = \"0s\"\n\
         [[case]]\nname = \"on-time\"\nclient = \"--clients 100\"\n\
         [[case]]\nname = \"late\"\nclient = \"--clients 100\"\n",
    )
    .unwrap();
    let results = out.join("results");
    let mut storm = Guard(
        Command::new(STORM)
            .args(["run", file.to_str().unwrap(), "--quick", "--quiet", "--out"])
            .arg(&results)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let named = |pid: u32| cmdline(pid).contains("late.client.csv");
    let kids = wait_for_children(storm.0.id(), "the late client's start", |kids| {
        kids.iter().any(|&(pid, _)| named(pid))
    });
    let (client, _) = *kids.iter().find(|&&(pid, _)| named(pid)).unwrap();
    for _ in 0..3 {
        signal(client, "STOP");
        std::thread::sleep(Duration::from_millis(200));
        signal(client, "CONT");
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut said = String::new();
    storm
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(storm.0.wait().unwrap().success(), "{said}");
    let summary = summary_json(&results);
    let runs = summary["runs"].as_array().unwrap();
    let behind = |case: &str| {
        let run = runs.iter().find(|r| r["case"] == case).unwrap();
        run.get("client_behind").cloned()
    };
    let late = behind("late").expect("the stopped client is flagged");
    let p99 = late["p99_ms"].as_f64().unwrap();
    assert!((1.5..=250.0).contains(&p99), "{late}");
    // The twin's p99 is its timer's step on a quiet host, and so not
    // flagged; on a host loaded by other tests it may pass the 1.5 ms
    // bound and be flagged too (rightly): either way, it is far less late
    // than the client that was stopped.
    if let Some(on_time) = behind("on-time") {
        let twin = on_time["p99_ms"].as_f64().unwrap();
        assert!(twin * 5.0 < p99, "twin {on_time}, stopped {late}");
    }
    let md = std::fs::read_to_string(results.join("summary.md")).unwrap();
    // The twin, when flagged too, is named first.
    for text in [&said, &md] {
        assert!(
            text.contains("fell behind its users' schedule in ")
                && text.contains("late (start lateness p99"),
            "{text}"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_bad_scenario_is_refused_with_its_mistake_and_nothing_is_written() {
    let _serial = one_at_a_time();
    let dir = fresh_path("bad-scenario");
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("seed = 1\n", "no cases"),
        (
            "seed = 1\n[[case]]\nname = \"a\"\nclient = \"--strategy nope\"\n",
            "case a",
        ),
        (
            "seed = 1\n[[case]]\nname = \"a\"\nserver = \"--limit x\"\n",
            "--limit",
        ),
        (
            "seed = 1\nwarmup = \"1s\"\n[[case]]\nname = \"a\"\n",
            "warmup",
        ),
        (
            "seed = 1\n[[case]]\nname = \"a\"\nserver = \"--generate man\"\n",
            "--generate",
        ),
        (
            "seed = 1\n[[case]]\nname = \"a\"\nclient = \"plan\"\n",
            "'plan'",
        ),
        // The runner gives every child its status pipe itself.
        (
            "seed = 1\n[[case]]\nname = \"a\"\nclient = \"--status-fd 5\"\n",
            "--status-fd",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let file = dir.join(format!("{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let out = dir.join(format!("out{i}"));
        // On the real engine: refused before any child starts.
        let output = storm(&["run", file.to_str().unwrap(), "--engine", "real"], &out);
        assert_eq!(output.status.code(), Some(2), "{text}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{text}: {stderr}");
        assert!(!out.exists(), "{text}: nothing is written");
    }
    let output = storm(&["run", "/nonexistent.toml"], &dir.join("none"));
    assert_eq!(output.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_programs_install_their_man_pages_and_completions() {
    let _serial = one_at_a_time();
    let prefix = fresh_path("install-docs");
    let bin = Path::new(STORM).parent().unwrap();
    let output = Command::new(repo("scripts/install-docs.sh"))
        .arg("--bin")
        .arg(bin)
        .arg("--prefix")
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let share = prefix.join("share");
    for page in [
        "server",
        "client",
        "client-plan",
        "storm",
        "storm-run",
        "storm-sweep",
        "storm-merge",
        "storm-proxy",
        "storm-calibrate",
    ] {
        let text = std::fs::read_to_string(share.join(format!("man/man1/{page}.1"))).unwrap();
        assert!(text.contains(&format!(".TH {page}")), "{page}.1");
    }
    for program in ["server", "client", "storm"] {
        let bash = share.join(format!("bash-completion/completions/{program}"));
        assert!(std::fs::read_to_string(bash).unwrap().contains(program));
        assert!(
            share
                .join(format!("zsh/site-functions/_{program}"))
                .exists()
        );
        assert!(
            share
                .join(format!("fish/vendor_completions.d/{program}.fish"))
                .exists()
        );
    }
    std::fs::remove_dir_all(&prefix).unwrap();
}
