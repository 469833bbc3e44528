//! `storm --target URL --outage sigstop=PID`: the storm against a service
//! it did not start. The stand-in is the project's own `server`, started
//! here as a child of the test, with the flags the storm gives its own:
//! the same verdicts as the storm's own server, server figures not
//! measured, nothing started when the target or its process cannot be
//! used, and the target left running whatever stops the storm.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Guard, ServerChild, command, fresh_path, one_at_a_time, summary_json, unowned_port};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// Clients that never retry come back from a 6 s pause of the default
/// server, fixed retries do not (in virtual time 20 runs of 20 and 0 of
/// 20). The clients that never retry go first: fixed retries leave the
/// server thousands of requests it holds for up to a minute (compressed),
/// which a case after them against the same target would inherit.
const SCENARIO: &str = "seed = 2014\n\
    [protocol]\npause = \"6s\"\ntail = \"0s\"\n\
    [[case]]\nname = \"no-retry\"\nclient = \"--strategy fixed --max-attempts 1\"\n\
    [[case]]\nname = \"fixed\"\nclient = \"--strategy fixed\"\n";

/// The server flags the storm gives its own with `--quick`, beside
/// `--csv` and the status pipe.
const QUICK_SERVER: [&str; 4] = ["--listen", "127.0.0.1:0", "--time-scale", "10"];

/// A process's state letter (`S`, `R`, `T` when stopped...).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Waits (bounded) until process `pid` is stopped.
fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while state(pid) != 'T' {
        assert!(Instant::now() < deadline, "{pid} was never stopped");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `storm` with `args` to its end.
fn storm(args: &[&str]) -> Output {
    Command::new(STORM).args(args).output().unwrap()
}

/// Every run's verdict in a results folder: (case, recovered).
fn verdicts(out: &Path) -> Vec<(String, bool)> {
    summary_json(out)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["case"].as_str().unwrap().to_string(),
                r["recovered"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// A scratch folder holding the scenario file.
fn scenario(name: &str) -> (PathBuf, String) {
    let dir = fresh_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("target.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let file = file.to_str().unwrap().to_string();
    (dir, file)
}

#[test]
fn a_target_gets_the_verdicts_of_the_storms_own_server_and_no_server_figures() {
    let _serial = one_at_a_time();
    let (dir, file) = scenario("target-verdicts");
    let own = dir.join("own");
    let run = ["run", &file, "--quick", "--quiet", "--out"];
    let output = storm(&[&run[..], &[own.to_str().unwrap(), "--in-turn"]].concat());
    assert!(output.status.success(), "{output:?}");

    let server = ServerChild::start(&[], &QUICK_SERVER);
    let pid = server.pid();
    let outage = format!("sigstop={pid}");
    let target = dir.join("target");
    let output = storm(
        &[
            &run[..],
            &[
                target.to_str().unwrap(),
                "--target",
                &server.url,
                "--outage",
                &outage,
            ],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{output:?}");
    let expected = [("no-retry".to_string(), true), ("fixed".to_string(), false)];
    assert_eq!(verdicts(&own), expected, "the storm's own server");
    assert_eq!(verdicts(&target), expected, "the target");
    assert_ne!(state(pid), 'T', "the target runs on");

    let summary = summary_json(&target);
    assert_eq!(summary["target"]["url"], server.url.as_str());
    assert_eq!(summary["target"]["outage"], outage.as_str());
    let not_measured = [
        "peak_concurrency",
        "wasted",
        "wasted_s",
        "calm_s",
        "end_concurrency",
    ];
    for r in summary["runs"].as_array().unwrap() {
        for key in not_measured {
            assert!(r[key].is_null(), "{key}: {r}");
        }
        assert!(r["server_csv"].is_null(), "{r}");
        assert!(r["baseline_ok_per_s"].as_f64().unwrap() > 500.0, "{r}");
        assert!(r["amplification"].is_number(), "{r}");
    }
    for c in summary["cases"].as_array().unwrap() {
        assert!(
            c["peak_concurrency"].is_null() && c["wasted"].is_null(),
            "{c}"
        );
    }
    let md = std::fs::read_to_string(target.join("summary.md")).unwrap();
    assert!(
        md.contains("| fixed | ") && md.contains("| not measured | not measured |"),
        "{md}"
    );
    let files: Vec<String> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!files.iter().any(|f| f.contains(".server.")), "{files:?}");
    let commands = std::fs::read_to_string(target.join("commands.txt")).unwrap();
    for said in [
        format!("# Target: {}", server.url),
        format!("# Outage: {outage}"),
        format!("# fixed: SIGSTOP to 1 process(es): {pid} (server)"),
        "# no-retry: the target calm after".to_string(),
        "# fixed: the target calm after".to_string(),
    ] {
        assert!(commands.contains(&said), "{said}: {commands}");
    }
    assert!(
        !commands.contains("storm server"),
        "no project server: {commands}"
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A process to name in `--outage` that is neither the storm's nor ours.
fn sleeper() -> Guard {
    Guard(Command::new("sleep").arg("60").spawn().unwrap())
}

#[test]
fn a_target_or_process_that_cannot_be_used_stops_the_storm_before_any_load() {
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let sleeping = sleeper();
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stopped = sleeper();
    common::signal(stopped.0.id(), "STOP");
    wait_stopped(stopped.0.id());
    let nowhere = format!("http://127.0.0.1:{}/", unowned_port());
    let url = server.url.as_str();
    let out = fresh_path("target-refused");
    let sigstop = |pid: u32| format!("sigstop={pid}");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--target".into(),
                nowhere.clone(),
                "--outage".into(),
                sigstop(sleeping.0.id()),
            ],
            "cannot connect",
        ),
        (
            vec![
                "--target".into(),
                url.into(),
                "--outage".into(),
                sigstop(pid_max + 1),
            ],
            "no such process",
        ),
        (
            vec![
                "--target".into(),
                url.into(),
                "--outage".into(),
                sigstop(stopped.0.id()),
            ],
            "stopped already",
        ),
        (
            vec![
                "--target".into(),
                url.into(),
                "--outage".into(),
                sigstop(std::process::id()),
            ],
            "ancestors",
        ),
        (vec!["--target".into(), url.into()], "--outage"),
        (
            vec![
                "--target".into(),
                url.into(),
                "--outage".into(),
                "stall".into(),
            ],
            "not yet part of the storm",
        ),
        (vec!["--outage".into(), sigstop(server.pid())], "--target"),
    ];
    let with_outage = |extra: &[&str]| -> Vec<String> {
        let mut argv: Vec<String> = ["--target", url, "--outage"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        argv.push(sigstop(server.pid()));
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    };
    let refusals = [
        (with_outage(&["--engine", "sim"]), "--engine sim"),
        (with_outage(&["--parallel", "2"]), "--parallel 2"),
        (
            with_outage(&["--server-args", "--limit 40"]),
            "--server-args",
        ),
        (with_outage(&["--shard", "0/2"]), "shard 0/2"),
    ];
    for (argv, said) in cases.into_iter().chain(refusals) {
        let mut args: Vec<&str> = argv.iter().map(String::as_str).collect();
        args.extend(["--quick", "--quiet", "--out", out.to_str().unwrap()]);
        let output = storm(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {said}: {stderr}");
        assert!(!out.exists(), "{args:?}: nothing written");
    }
    // A scenario's cases may not run a server of their own beside it.
    let dir = fresh_path("target-refused-file");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("server.toml");
    std::fs::write(
        &file,
        "seed = 1\n[[case]]\nname = \"a\"\nserver = \"--limit 40\"\n",
    )
    .unwrap();
    let mut args = vec!["run", file.to_str().unwrap()];
    let outage = sigstop(server.pid());
    args.extend([
        "--target",
        url,
        "--outage",
        &outage,
        "--out",
        out.to_str().unwrap(),
    ]);
    let output = storm(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("case a: server flags"), "{stderr}");
    assert!(!out.exists());
    // scripts/gunicorn-check.sh's scenario passes every check but the
    // target's answer.
    let gunicorn = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/gunicorn.toml");
    let sleeping_outage = sigstop(sleeping.0.id());
    let output = storm(&[
        "run",
        gunicorn.to_str().unwrap(),
        "--target",
        &nowhere,
        "--outage",
        &sleeping_outage,
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(!out.exists());
    common::signal(stopped.0.id(), "CONT");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A storm that is killed if the test ends before it does.
struct Running(Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts a quick storm of fixed retries against `server`, writing into
/// `out`.
fn target_storm(server: &ServerChild, out: &Path) -> Child {
    command(STORM)
        .args(["--quick", "--quiet", "--strategies", "fixed"])
        .args(["--target", &server.url, "--outage"])
        .arg(format!("sigstop={}", server.pid()))
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn ctrl_c_during_the_pause_leaves_the_target_running() {
    let _serial = one_at_a_time();
    // Once, then twice on its heels (the second ends the storm at once).
    for signals in [1, 2] {
        let server = ServerChild::start(&[], &QUICK_SERVER);
        let pid = server.pid();
        let out = fresh_path(&format!("target-interrupt-{signals}"));
        let mut storm = Running(Some(target_storm(&server, &out)));
        let storm_pid = storm.0.as_ref().unwrap().id();
        wait_stopped(pid);
        let clients = common::children(storm_pid);
        assert_eq!(clients.len(), 1, "one client, no server: {clients:?}");
        for _ in 0..signals {
            common::signal(storm_pid, "INT");
        }
        let output = storm.0.take().unwrap().wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{signals}: {stderr}");
        assert_ne!(state(pid), 'T', "{signals}: the target was left stopped");
        // A storm that exits at once leaves its client to the kernel's
        // parent-death signal, which takes it down a moment later.
        for (client, _) in clients {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::fs::read_to_string(format!("/proc/{client}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
            {
                assert!(
                    Instant::now() < deadline,
                    "{signals}: client {client} stays"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if signals == 1 {
            assert!(stderr.contains("the target left running"), "{stderr}");
        }
        std::fs::remove_dir_all(&out).unwrap();
    }
}
