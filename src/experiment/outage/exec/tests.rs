use std::fs::File;
use std::path::PathBuf;

use super::*;

/// A scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("retry-storm-exec-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A path in it, as a shell word.
    fn at(&self, file: &str) -> String {
        self.0.join(file).to_str().unwrap().to_string()
    }

    /// A log into its `commands.txt`.
    fn log(&self) -> Log {
        let file = File::create(self.0.join("commands.txt")).unwrap();
        Log::new(&file, "fixed").unwrap()
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.0.join(file)).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_word_looked_up_is_past_assignments_and_parentheses() {
    assert_eq!(first_word("docker pause web").unwrap(), "docker");
    assert_eq!(first_word("A=1 B='x y' kill -STOP 5").unwrap(), "kill");
    assert_eq!(first_word("(cd /tmp && ls)").unwrap(), "cd");
    assert!(first_word("A=1").unwrap_err().contains("no command"));
    assert!(first_word("echo 'open").unwrap_err().contains("unbalanced"));
}

#[test]
fn commands_are_checked_for_a_first_word_the_shell_finds() {
    for command in [
        "kill -STOP 5",
        "exit 3",
        "false",
        "sleep 1",
        "DOCKER_HOST=x true",
    ] {
        check(Which::Start, command).unwrap();
    }
    for (command, said) in [
        ("", "--outage-start (outage_start) is empty"),
        ("  ", "is empty"),
        (
            "retry-storm-no-such-command --now",
            "'retry-storm-no-such-command' is neither a shell builtin nor a program in PATH",
        ),
        ("echo 'open", "unbalanced quotes"),
    ] {
        let err = check(Which::Start, command).unwrap_err();
        assert!(err.contains(said), "{command:?}: {err}");
    }
    let err = check(Which::End, "").unwrap_err();
    assert!(err.contains("--outage-end (outage_end)"), "{err}");
}

#[test]
fn a_command_is_run_timed_and_its_output_kept() {
    let ran = run("echo out; echo err >&2; exit 3", LIMIT);
    assert!(!ran.ok());
    let summary = ran.summary();
    assert!(
        summary.starts_with("'echo out; echo err >&2; exit 3' exited with status 3 after 0."),
        "{summary}"
    );
    assert_eq!(
        ran.report(),
        format!("{summary}\nstdout:\nout\nstderr:\nerr")
    );
    assert_eq!(ran.stderr_tail(), "; its stderr ends:\nerr");
    let ran = run("true", LIMIT);
    assert!(ran.ok() && ran.stderr_tail().is_empty(), "{}", ran.report());
    assert_eq!(ran.report(), ran.summary());
    // A long output keeps its last lines.
    let ran = run("seq 1 1000 >&2", LIMIT);
    let tail: Vec<String> = (981..=1000).map(|n| n.to_string()).collect();
    assert_eq!(ran.stderr, format!("...\n{}", tail.join("\n")));
    let ran = run("kill -9 $$", LIMIT);
    assert!(
        ran.summary().contains("was killed by signal 9"),
        "{}",
        ran.summary()
    );
}

#[test]
fn a_command_past_its_limit_is_killed_with_its_group() {
    let scratch = Scratch::new("limit");
    let pids = scratch.at("pids");
    // A child in the background, and the shell waiting past the limit.
    let command = format!("sleep 30 & echo $! > {pids}; wait");
    let started = Instant::now();
    let ran = run(&command, Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!ran.ok());
    assert!(
        ran.summary()
            .contains("at its time limit of 0.3 s, and was killed"),
        "{}",
        ran.summary()
    );
    let child: i32 = scratch.read("pids").trim().parse().unwrap();
    // Gone, or a zombie until whoever adopted it reaps it. SIGKILL is
    // delivered at once but a process dies in its own time: seen still
    // running (state R, adopted by init) right after the run returned
    // on a loaded machine, so its death is waited for, within 5 s; a
    // child left out of the kill would sleep on for 30 s.
    let dead = |stat: &str| stat.is_empty() || stat.contains(") Z ");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
    while !dead(&stat) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
    }
    assert!(dead(&stat), "{stat}");
}

#[test]
fn a_start_that_fails_still_runs_the_end_and_says_both() {
    let scratch = Scratch::new("start-fails");
    let end = format!("touch {}", scratch.at("ended"));
    for (start, status) in [("false", 1), ("echo half >&2; exit 3", 3)] {
        let _ = std::fs::remove_file(scratch.0.join("ended"));
        let err = Started::start(start, &end, scratch.log()).unwrap_err();
        assert!(
            err.contains(&format!(
                "its start command '{start}' exited with status {status}"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!("it '{end}' exited with status 0")),
            "{err}"
        );
        assert!(scratch.0.join("ended").exists(), "{start}: the end ran");
        let said = scratch.read("commands.txt");
        assert!(
            said.contains("# fixed: the outage's start command"),
            "{said}"
        );
        assert!(said.contains("# fixed: the outage's end command"), "{said}");
        assert!(!at_exit::registered().contains(&format!("the end command {end}")));
    }
    let err = Started::start("echo half >&2; exit 3", &end, scratch.log()).unwrap_err();
    assert!(err.contains("its stderr ends:\nhalf"), "{err}");
}

#[test]
fn the_end_runs_once_at_the_end_or_when_dropped() {
    let scratch = Scratch::new("once");
    let end = format!("echo x >> {}", scratch.at("ends"));
    let registered = format!("the end command {end}");
    let started = Started::start("true", &end, scratch.log()).unwrap();
    assert_eq!(started.names(), "fixed");
    assert!(at_exit::registered().contains(&registered));
    assert_eq!(scratch.read("ends"), "", "not before the end");
    started.end().unwrap();
    assert_eq!(scratch.read("ends"), "x\n");
    assert!(!at_exit::registered().contains(&registered));
    drop(Started::start("true", &end, scratch.log()).unwrap());
    assert_eq!(scratch.read("ends"), "x\nx\n", "dropped: ended once");
    let said = scratch.read("commands.txt");
    assert!(
        said.contains("the outage lasted 0.") && said.contains("from the start command's start"),
        "{said}"
    );
    let failing = Started::start("true", "echo gone >&2; exit 4", scratch.log()).unwrap();
    let err = failing.end().unwrap_err();
    assert!(
        err.contains("its end command 'echo gone >&2; exit 4' exited with status 4"),
        "{err}"
    );
    assert!(
        err.contains("may be left in its outage; its stderr ends:\ngone"),
        "{err}"
    );
}

#[test]
fn an_exit_during_the_outage_runs_the_end_command() {
    if let Some(dir) = at_exit::exiting::passed() {
        let end = format!("touch {dir}/ended");
        let file = File::create(format!("{dir}/commands.txt")).unwrap();
        let _started = Started::start("true", &end, Log::new(&file, "fixed").unwrap()).unwrap();
        std::process::exit(0);
    }
    let scratch = Scratch::new("exit");
    at_exit::exiting::run_child(
        concat!(
            module_path!(),
            "::an_exit_during_the_outage_runs_the_end_command"
        ),
        &scratch.at(""),
    );
    assert!(
        scratch.0.join("ended").exists(),
        "the exit ran the end command"
    );
}
