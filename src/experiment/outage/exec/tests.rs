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
        assert!(!link::held().contains(&format!("the end command {end}")));
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
    assert!(link::held().contains(&registered));
    assert_eq!(scratch.read("ends"), "", "not before the end");
    started.end().unwrap();
    assert_eq!(scratch.read("ends"), "x\n");
    assert!(!link::held().contains(&registered));
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
    if let Some(dir) = link::exiting::passed() {
        let end = format!("touch {dir}/ended");
        let file = File::create(format!("{dir}/commands.txt")).unwrap();
        let _started = Started::start("true", &end, Log::new(&file, "fixed").unwrap()).unwrap();
        std::process::exit(0);
    }
    let scratch = Scratch::new("exit");
    link::exiting::run_child(
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
