//! `storm --target URL` with the outage caused by commands of the user's
//! (`--outage exec --outage-start CMD --outage-end CMD`) or by a cgroup's
//! freezer (`--outage freeze=CGROUP_DIR`). The target is the project's
//! own `server`, as in `tests/target.rs`: each kind reaches the verdicts
//! of SIGSTOP, refuses before any load what cannot work, and leaves the
//! target running whatever ends the storm.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{ExitStatus, Output};
use std::time::{Duration, Instant};

use common::cgroup::{TestCgroup, skip, writable_freezers};
use common::target::{
    Ending, HUP, INT, INT_TWICE, KILL, QUICK_SERVER, QUIT, STORM, TERM, end_during_the_pause,
    expected, scenario, state, storm, storm_children,
};
use common::{Guard, ServerChild, command, fresh_path, one_at_a_time, summary_json, verdicts};

/// `--outage exec` with `start` and `end`.
fn exec(start: &str, end: &str) -> Vec<String> {
    [
        "--outage",
        "exec",
        "--outage-start",
        start,
        "--outage-end",
        end,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A quick storm of fixed retries against `url` with `outage`, into
/// `out`, run to its end.
fn quick_storm(url: &str, outage: &[String], out: &Path) -> Output {
    let mut args = vec![
        "--quick",
        "--quiet",
        "--strategies",
        "fixed",
        "--calm",
        "1s",
        "--target",
        url,
    ];
    args.extend(outage.iter().map(String::as_str));
    args.extend(["--out", out.to_str().unwrap()]);
    storm(&args)
}

/// Runs the scenario of `tests/target.rs` against `server` with `outage`:
/// its results folder, its `commands.txt`.
fn scenario_storm(name: &str, server: &ServerChild, outage: &[String]) -> (String, String) {
    let (dir, file) = scenario(name);
    let out = dir.join("out");
    let mut args = vec!["run", &file, "--quick", "--quiet", "--target", &server.url];
    args.extend(outage.iter().map(String::as_str));
    args.extend(["--out", out.to_str().unwrap()]);
    let output = storm(&args);
    assert!(output.status.success(), "{name}: {output:?}");
    assert_eq!(verdicts(&out), expected(), "{name}: SIGSTOP's verdicts");
    let outage_said = summary_json(&out)["target"]["outage"].clone();
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (outage_said.as_str().unwrap().to_string(), commands)
}

#[test]
#[ignore = "tier 2, real storms (about 25 s): cargo test -- --ignored"]
fn exec_commands_that_stop_and_continue_the_target_reach_the_verdicts_of_sigstop() {
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let pid = server.pid();
    let (start, end) = (format!("kill -STOP {pid}"), format!("kill -CONT {pid}"));
    let (outage, commands) = scenario_storm("outage-exec", &server, &exec(&start, &end));
    assert_eq!(outage, "exec");
    assert_ne!(state(pid), 'T', "the target runs on");
    for said in [
        format!("# Outage: exec (sh -c '{start}' at the pause"),
        format!("# fixed: the outage's start command '{start}' exited with status 0 after 0."),
        format!("# fixed: the outage's end command '{end}' exited with status 0 after 0."),
        "# fixed: the target calm after".into(),
    ] {
        assert!(commands.contains(&said), "{said}: {commands}");
    }
    // The outage as the target saw it: the pause (0.6 s) and the commands.
    let lasted = commands
        .lines()
        .find_map(|l| l.strip_prefix("# no-retry: the outage's end command"))
        .and_then(|l| l.split("the outage lasted ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no length: {commands}"));
    assert!((0.6..5.0).contains(&lasted), "{lasted}: {commands}");
}

#[test]
fn a_start_command_that_fails_stops_the_storm_after_the_end_command_ran() {
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let dir = fresh_path("outage-exec-fails");
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("ended");
    let end = format!("touch {}", marker.display());
    let out = dir.join("out");
    let output = quick_storm(
        &server.url,
        &exec("echo half-applied >&2; exit 3", &end),
        &out,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    for said in [
        "the outage of fixed: its start command 'echo half-applied >&2; exit 3' exited with \
         status 3",
        "its stderr ends:\nhalf-applied",
        &format!(
            "the end command was run all the same, since the start may have half applied: it '{end}' exited with status 0"
        ),
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    assert!(marker.exists(), "the end command ran");
    let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap();
    assert!(
        commands.contains(&format!("# fixed: the outage's end command '{end}'")),
        "{commands}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn outages_that_cannot_be_caused_are_refused_before_any_load() {
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let out = fresh_path("outage-refused");
    let words = |args: &[&str]| -> Vec<String> { args.iter().map(|s| s.to_string()).collect() };
    let mut cases: Vec<(Vec<String>, String)> = vec![
        (
            exec("retry-storm-absent --pause web", "true"),
            "'retry-storm-absent' is neither a shell builtin nor a program in PATH".into(),
        ),
        (
            exec("true", "retry-storm-absent --unpause web"),
            "--outage-end (outage_end) 'retry-storm-absent --unpause web'".into(),
        ),
        (
            exec("true", ""),
            "--outage-end (outage_end) is empty".into(),
        ),
        (
            words(&["--outage", "exec", "--outage-start", "true"]),
            "needs --outage-end".into(),
        ),
        (
            words(&["--outage-start", "true", "--outage-end", "true"]),
            "go with --outage exec".into(),
        ),
        (
            words(&["--outage", "freeze=/nonexistent/cgroup"]),
            "/nonexistent/cgroup: no such directory".into(),
        ),
        (
            words(&["--outage", "freeze=sys/fs/cgroup"]),
            "absolute path of a cgroup's directory".into(),
        ),
        (
            words(&["--outage", "freeze=/proc"]),
            "/proc is not a cgroup".into(),
        ),
    ];
    let (freezers, reasons) = writable_freezers();
    // Kept until the storms have run: removed at the end.
    let mut cgroups = Vec::new();
    for hierarchy in &freezers {
        let empty = TestCgroup::new(hierarchy).unwrap();
        let mut frozen = TestCgroup::new(hierarchy).unwrap();
        frozen.sleeper();
        let value = if hierarchy.version == "v1" {
            "FROZEN"
        } else {
            "1"
        };
        std::fs::write(frozen.control(), value).unwrap();
        let freeze = |c: &TestCgroup| words(&["--outage", &format!("freeze={}", c.dir.display())]);
        cases.push((freeze(&empty), "holds no process".into()));
        cases.push((freeze(&frozen), "is frozen already".into()));
        if hierarchy.version == "v2" {
            let root = format!("freeze={}", hierarchy.root.display());
            cases.push((
                words(&["--outage", &root]),
                "a cgroup without a freezer".into(),
            ));
        }
        cgroups.extend([empty, frozen]);
    }
    if freezers.is_empty() {
        skip("the refusals of a real cgroup", &reasons);
    }
    for (outage, said) in cases {
        let output = quick_storm(&server.url, &outage, &out);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{outage:?}: {stderr}");
        assert!(stderr.contains(&said), "{outage:?}: {said}: {stderr}");
        assert!(!out.exists(), "{outage:?}: nothing written");
    }
    // A storm inside the cgroup it would freeze: it moves itself in, then
    // becomes the storm. Were it not refused, it would freeze itself: the
    // wait is bounded, and the cgroup, dropped first, is thawed before the
    // storm is killed.
    for hierarchy in &freezers {
        let stderr = fresh_path(&format!("outage-refused-inside-{}", hierarchy.version));
        let mut storm: Guard;
        let mut cgroup = TestCgroup::new(hierarchy).unwrap();
        cgroup.sleeper();
        let procs = cgroup.dir.join("cgroup.procs");
        storm = Guard(
            command("sh")
                .arg("-c")
                .arg(format!(
                    "echo $$ > {} && exec {STORM} --quick --target {} --outage freeze={} \
                     --out {}",
                    procs.display(),
                    server.url,
                    cgroup.dir.display(),
                    out.display()
                ))
                .stderr(File::create(&stderr).unwrap())
                .spawn()
                .unwrap(),
        );
        let status = exit_within(&mut storm, Duration::from_secs(60));
        let said = std::fs::read_to_string(&stderr).unwrap();
        std::fs::remove_file(&stderr).unwrap();
        assert_eq!(status.code(), Some(2), "{said}");
        assert!(
            said.contains(", this storm or one of its ancestors"),
            "{said}"
        );
        assert!(!out.exists());
    }
}

/// Waits for `child` to exit, at most `limit`.
fn exit_within(child: &mut Guard, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ends a storm whose commands stop and continue the server, each of the
/// `endings` ways, during the pause: the end command runs once each time.
fn end_exec(endings: &[Ending]) -> Vec<common::target::Ended> {
    let ended = end_during_the_pause(
        "outage-exec-end",
        endings,
        |pid, marker| {
            exec(
                &format!("kill -STOP {pid}"),
                &format!("kill -CONT {pid}; echo ended >> {}", marker.display()),
            )
        },
        |pid, _, _| state(pid) == 'T',
    );
    for (ending, ended) in endings.iter().zip(&ended) {
        assert_eq!(
            ended.marker, "ended\n",
            "{ending:?}: once: {}",
            ended.stderr
        );
    }
    ended
}

#[test]
fn ctrl_c_or_kill_9_during_an_exec_pause_runs_the_end_command_once() {
    let _serial = one_at_a_time();
    let ended = end_exec(&[INT, INT_TWICE, KILL]);
    assert!(
        ended[0].stderr.contains("the target left running"),
        "{}",
        ended[0].stderr
    );
    assert!(
        ended[2]
            .stderr
            .contains("the storm ended during the outage: the outage's end command 'kill -CONT"),
        "{}",
        ended[2].stderr
    );
}

#[test]
#[ignore = "tier 2, three storms (about 20 s): cargo test -- --ignored"]
fn sigterm_sighup_or_sigquit_during_an_exec_pause_runs_the_end_command_once() {
    let _serial = one_at_a_time();
    end_exec(&[TERM, HUP, QUIT]);
}

/// Ends a storm that freezes the server's cgroup, each of the `endings`
/// ways, during the pause: the cgroup is thawed each time. Skipped where
/// no freezer can be written.
fn end_freeze(test: &str, endings: &[Ending]) {
    let (freezers, reasons) = writable_freezers();
    let Some(hierarchy) = freezers.last() else {
        return skip(test, &reasons);
    };
    let _serial = one_at_a_time();
    // Kept to the test's end: each is removed once its server is gone.
    let cgroups = std::cell::RefCell::new(Vec::<TestCgroup>::new());
    end_during_the_pause(
        "outage-freeze-end",
        endings,
        |pid, _| {
            let cgroup = TestCgroup::new(hierarchy).unwrap();
            cgroup.add(pid);
            let outage = format!("freeze={}", cgroup.dir.display());
            cgroups.borrow_mut().push(cgroup);
            vec!["--outage".into(), outage]
        },
        |_, _, _| cgroups.borrow().last().is_some_and(TestCgroup::frozen),
    );
}

/// Ends a storm whose outage is its fault proxy's stall, each of the
/// `endings` ways, once its proxy has reported its fault on (the pause):
/// no proxy stays behind.
fn end_stall(endings: &[Ending]) {
    let _serial = one_at_a_time();
    end_during_the_pause(
        "outage-stall-end",
        endings,
        |_, _| vec!["--outage".into(), "stall".into()],
        |_, storm, out| {
            // Its report rows, each with the fault's state third.
            let rows = std::fs::read_to_string(out.join("fixed.proxy.csv")).unwrap_or_default();
            !storm_children(storm, b"proxy").is_empty()
                && rows
                    .lines()
                    .any(|row| row.split(',').nth(2) == Some("true"))
        },
    );
}

#[test]
fn kill_9_of_a_storm_leaves_no_fault_proxy_behind() {
    end_stall(&[KILL]);
}

/// The other ends take the two paths every kind shares, tested whole on
/// `sigstop` and `exec`: the storm's own undo (Ctrl-C), the kernel's
/// or the guardian's at a death (SIGHUP).
#[test]
#[ignore = "tier 2, two storms (about 15 s): cargo test -- --ignored"]
fn ctrl_c_or_sighup_of_a_storm_leaves_no_fault_proxy_behind() {
    end_stall(&[INT, HUP]);
}

#[test]
fn kill_9_during_a_freeze_thaws_the_cgroup() {
    end_freeze("kill_9_during_a_freeze_thaws_the_cgroup", &[KILL]);
}

/// Ctrl-C and SIGHUP: as for the proxy, the two paths every kind shares.
#[test]
#[ignore = "tier 2, two storms (about 15 s): cargo test -- --ignored"]
fn ctrl_c_or_sighup_during_a_freeze_thaws_the_cgroup() {
    end_freeze(
        "ctrl_c_or_sighup_during_a_freeze_thaws_the_cgroup",
        &[INT, HUP],
    );
}

#[test]
#[ignore = "tier 2, real storms (about 25 s): cargo test -- --ignored"]
fn a_frozen_cgroup_reaches_the_verdicts_of_sigstop() {
    let (freezers, reasons) = writable_freezers();
    // One freezer is enough for a storm; the unit tests freeze each.
    let Some(hierarchy) = freezers.last() else {
        return skip("a_frozen_cgroup_reaches_the_verdicts_of_sigstop", &reasons);
    };
    let _serial = one_at_a_time();
    let server = ServerChild::start(&[], &QUICK_SERVER);
    let pid = server.pid();
    let cgroup = TestCgroup::new(hierarchy).unwrap();
    cgroup.add(pid);
    let outage = format!("freeze={}", cgroup.dir.display());
    let (said, commands) = scenario_storm(
        "outage-freeze",
        &server,
        &["--outage".into(), outage.clone()],
    );
    assert_eq!(said, outage);
    assert!(!cgroup.frozen(), "thawed");
    let froze = format!(
        "# fixed: froze the cgroup {} (cgroup {}) in 0.",
        cgroup.dir.display(),
        hierarchy.version
    );
    assert!(commands.contains(&froze), "{froze}: {commands}");
    assert!(
        commands.contains(&format!("1 process(es): {pid} (server)")),
        "{commands}"
    );
}
