use std::fs::File;

use super::*;

#[test]
fn sigstop_takes_a_process_id_and_reads_back_as_written() {
    let outage: Outage = "sigstop=4321".parse().unwrap();
    assert_eq!(outage, Outage::Sigstop { pid: 4321 });
    assert_eq!(outage.to_string(), "sigstop=4321");
    assert!(
        outage
            .describe()
            .contains("process 4321 and its descendants")
    );
}

#[test]
fn groups_init_and_nonsense_are_refused() {
    for (text, said) in [
        ("sigstop=0", "cannot be stopped"),
        ("sigstop=-5", "cannot be stopped"),
        ("sigstop=1", "1 is init"),
        ("sigstop=", "takes a process id"),
        ("sigstop=12ab", "takes a process id"),
        ("sigstop", "takes a process id"),
    ] {
        let err = text.parse::<Outage>().unwrap_err();
        assert!(err.contains(said), "{text}: {err}");
    }
}

#[test]
fn freeze_takes_an_absolute_cgroup_directory() {
    let outage: Outage = "freeze=/sys/fs/cgroup/web".parse().unwrap();
    assert_eq!(
        outage,
        Outage::Freeze {
            cgroup: "/sys/fs/cgroup/web".into()
        }
    );
    assert_eq!(outage.to_string(), "freeze=/sys/fs/cgroup/web");
    assert!(outage.describe().contains("cgroup /sys/fs/cgroup/web"));
    for text in [
        "freeze=web",
        "freeze=./web",
        "freeze=",
        "freeze",
        "freeze,x=/a",
    ] {
        let err = text.parse::<Outage>().unwrap_err();
        assert!(
            err.contains("absolute path of a cgroup's directory"),
            "{text}: {err}"
        );
    }
}

#[test]
fn a_proxy_fault_is_an_outage_and_unknown_kinds_are_not() {
    for text in [
        "stall",
        "blackhole,fraction=0.5",
        "reset",
        "status=503,retry-after=2s",
        "delay=2s",
    ] {
        let outage: Outage = text.parse().unwrap();
        assert_eq!(outage.to_string(), text);
        assert_eq!(outage.fault().unwrap().to_string(), text);
    }
    let err = "status=700".parse::<Outage>().unwrap_err();
    assert!(err.contains("from 200 to 599"), "{err}");
    let err = "sigkill=3".parse::<Outage>().unwrap_err();
    assert!(err.contains("unknown outage"), "{err}");
    for kind in [
        "sigstop=PID",
        "freeze=CGROUP_DIR",
        "exec (commands of yours",
    ] {
        assert!(err.contains(kind), "{kind}: {err}");
    }
}

#[test]
fn exec_takes_both_commands_and_the_other_kinds_none() {
    let some = |s: &str| Some(s.to_string());
    let outage =
        Outage::with_commands("exec", some("docker pause web"), some("docker unpause web"))
            .unwrap();
    assert_eq!(outage.to_string(), "exec");
    assert_eq!(
        outage.commands(),
        Some(("docker pause web", "docker unpause web"))
    );
    let said = outage.describe();
    assert!(
        said.contains("sh -c 'docker pause web' at the pause")
            && said.contains("sh -c 'docker unpause web' at the resume")
            && said.contains("at most 60 s"),
        "{said}"
    );
    let sigstop = Outage::with_commands("sigstop=5", None, None).unwrap();
    assert_eq!(sigstop, Outage::Sigstop { pid: 5 });
    assert_eq!(sigstop.commands(), None);
    for (kind, start, end, said) in [
        (
            "exec",
            None,
            None,
            "--outage exec needs --outage-start (outage_start) and --outage-end (outage_end)",
        ),
        (
            "exec",
            some("true"),
            None,
            "needs --outage-end (outage_end): the commands",
        ),
        (
            "exec",
            None,
            some("true"),
            "needs --outage-start (outage_start): the commands",
        ),
        (
            "exec",
            some(" "),
            some("true"),
            "--outage-start (outage_start) is empty",
        ),
        (
            "exec",
            some("true"),
            some(""),
            "--outage-end (outage_end) is empty",
        ),
        (
            "sigstop=5",
            some("true"),
            None,
            "go with --outage exec, not with sigstop=5",
        ),
        (
            "stall",
            None,
            some("true"),
            "go with --outage exec, not with stall",
        ),
        (
            "exec=docker",
            some("true"),
            some("true"),
            "go with --outage exec",
        ),
    ] {
        let err = Outage::with_commands(kind, start.clone(), end.clone()).unwrap_err();
        assert!(err.contains(said), "{kind} {start:?} {end:?}: {err}");
    }
    let err = "exec".parse::<Outage>().unwrap_err();
    assert!(
        err.contains("needs its commands, --outage-start CMD"),
        "{err}"
    );
    let err = "exec=docker".parse::<Outage>().unwrap_err();
    assert!(err.contains("exec takes no value"), "{err}");
}

#[test]
fn exec_commands_are_checked_before_any_load() {
    let some = |s: &str| Some(s.to_string());
    let ok = Outage::with_commands("exec", some("kill -STOP 5"), some("kill -CONT 5")).unwrap();
    ok.check().unwrap();
    let missing =
        Outage::with_commands("exec", some("true"), some("retry-storm-absent x")).unwrap();
    let err = missing.check().unwrap_err();
    assert!(
        err.contains("--outage-end (outage_end) 'retry-storm-absent x'"),
        "{err}"
    );
    let err = Outage::Freeze {
        cgroup: "/nonexistent/cgroup".into(),
    }
    .check()
    .unwrap_err();
    assert!(err.contains("no such directory"), "{err}");
}

#[test]
fn an_end_command_that_fails_is_the_runs_error() {
    let path = std::env::temp_dir().join(format!("retry-storm-outage-end-{}", std::process::id()));
    let file = File::create(&path).unwrap();
    let outage = Outage::with_commands("exec", Some("true".into()), Some("exit 4".into())).unwrap();
    let ongoing = outage
        .begin(Log::new(&file, "fixed, no-retry").unwrap())
        .unwrap()
        .unwrap();
    let err = ongoing.end().unwrap_err().to_string();
    assert!(
        err.starts_with(
            "the outage of fixed, no-retry: its end command 'exit 4' exited with status 4"
        ),
        "{err}"
    );
    let said = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        said.starts_with(
            "# fixed, no-retry: the outage's start command 'true' exited with status 0"
        ),
        "{said}"
    );
    assert!(
        said.contains("# fixed, no-retry: the outage's end command 'exit 4'"),
        "{said}"
    );
    let stall: Outage = "stall".parse().unwrap();
    assert!(
        stall
            .begin(Log::new(&file, "x").unwrap())
            .unwrap()
            .is_none()
    );
}
