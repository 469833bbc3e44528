//! `storm --target URL --outage sigstop=PID`: the storm against a service
//! it did not start. The stand-in is the project's own `server`, started
//! here as a child of the test, with the flags the storm gives its own:
//! the same verdicts as the storm's own server, server figures not
//! measured, nothing started when the target or its process cannot be
//! used, a target that takes connections in without answering waited
//! for, and the target left running whatever stops the storm.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use common::target::{
    Ending, HUP, INT, INT_TWICE, KILL, QUICK_FIXED, QUICK_SERVER, QUIT, STORM, TERM,
    end_during_the_pause, expected, scenario, state, storm, wait_stopped,
};
use common::{
    Guard, ServerChild, command, fresh_path, one_at_a_time, summary_json, unowned_port, verdicts,
};

#[test]
#[ignore = "tier 2, real storms (about 45 s): cargo test -- --ignored"]
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
    assert_eq!(verdicts(&own), expected(), "the storm's own server");
    assert_eq!(verdicts(&target), expected(), "the target");
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
                "status=700".into(),
            ],
            "from 200 to 599",
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

/// Ends a storm that stops the server, each of the `endings` ways, during
/// the pause: the server is left running each time.
fn end_sigstop(endings: &[Ending]) -> Vec<common::target::Ended> {
    end_during_the_pause(
        "target-end",
        endings,
        |pid, _| vec!["--outage".into(), format!("sigstop={pid}")],
        |pid, _, _| state(pid) == 'T',
    )
}

#[test]
fn ctrl_c_or_kill_9_during_the_pause_leaves_the_target_running() {
    let _serial = one_at_a_time();
    let ended = end_sigstop(&[INT, INT_TWICE, KILL]);
    assert!(
        ended[0].stderr.contains("the target left running"),
        "{}",
        ended[0].stderr
    );
    // Killed: the guardian continued it, and said so, on stderr and in
    // commands.txt.
    let killed = &ended[2];
    assert!(
        killed
            .stderr
            .contains("storm guard: the storm ended with its outage in force"),
        "{killed:?}"
    );
    assert!(
        killed
            .commands
            .contains("# fixed: storm guard: the storm ended during the outage: process ")
            && killed.commands.contains(" (server) continued"),
        "{killed:?}"
    );
}

#[test]
#[ignore = "tier 2, three storms (about 20 s): cargo test -- --ignored"]
fn sigterm_sighup_or_sigquit_during_the_pause_leaves_the_target_running() {
    let _serial = one_at_a_time();
    let ended = end_sigstop(&[TERM, HUP, QUIT]);
    assert!(ended[0].stderr.contains("the target left running"));
    for killed in &ended[1..] {
        assert!(killed.stderr.contains("(server) continued"), "{killed:?}");
    }
}

#[test]
fn a_target_that_takes_connections_in_without_answering_is_waited_for_until_ctrl_c() {
    // The kernel takes the connections in; nothing accepts them: as far
    // as a GET can tell, a target still working through a backlog.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let sleeping = sleeper();
    let outage = format!("sigstop={}", sleeping.0.id());
    let out = fresh_path("target-waits");
    let mut running = Guard(
        command(STORM)
            .args([
                "--target",
                &url,
                "--outage",
                &outage,
                "--strategies",
                "fixed",
            ])
            .args(["--quick", "--quiet", "--out", out.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Today's storm gave up here, exit 2, "no answer within 10 s".
    let mut stderr = BufReader::new(running.0.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim_end(),
        format!(
            "--target {url}: it accepted the connection but has not answered within 10 s: \
             still working through a backlog (a run before may have left it one), or \
             stopped? Waiting for it, at most 5 min (the limit of the wait for a calm target)"
        )
    );
    common::signal(running.0.id(), "INT");
    let status = running.0.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert_eq!(
        rest,
        "interrupted while waiting for the target's first answer, before any load: nothing \
         stopped, nothing written\n"
    );
    assert!(!out.exists(), "nothing written");
    assert_ne!(state(sleeping.0.id()), 'T', "nothing stopped");
    drop(listener);
}

#[test]
fn closing_the_storms_terminal_during_the_pause_leaves_the_target_running() {
    use std::os::unix::process::ExitStatusExt;
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let pid = server.pid();
    let out = fresh_path("target-hangup");
    let terminal = nix::pty::openpty(None, None).unwrap();
    // openpty's descriptors are inherited: the storm must not hold its
    // own terminal's near end open, or closing it here hangs nothing up.
    nix::fcntl::fcntl(
        &terminal.master,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .unwrap();
    let slave = terminal.slave;
    // SIGHUP at its default, as from a terminal, however the tests run.
    let mut command = common::command(STORM);
    command
        .args(QUICK_FIXED)
        .args([
            "--target",
            &server.url,
            "--outage",
            &format!("sigstop={pid}"),
        ])
        .arg("--out")
        .arg(&out)
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    common::pty::lead_its_terminal(&mut command);
    let storm = Guard(command.spawn().unwrap());
    // The parent's copies of the terminal's far end went with the command.
    drop(command);
    wait_stopped(pid);
    // The window closed: the kernel hangs the terminal up, and sends the
    // storm, its session's leader, SIGHUP.
    drop(terminal.master);
    let mut storm = storm;
    let status = storm.0.wait().unwrap();
    assert_eq!(status.signal(), Some(1), "killed by SIGHUP: {status:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state(pid) == 'T' {
        assert!(
            std::time::Instant::now() < deadline,
            "the target was left stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The guardian notes what it did after doing it: the line may follow
    // the target's resume by a moment.
    let line =
        format!("storm guard: the storm ended during the outage: process {pid} (server) continued");
    loop {
        let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
        if commands.contains(&line) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{commands}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::fs::remove_dir_all(&out).unwrap();
}
