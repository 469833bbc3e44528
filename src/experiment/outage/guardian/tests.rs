use std::path::PathBuf;

use super::*;

/// A scratch file, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!(
            "retry-storm-guardian-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        Scratch(path)
    }

    /// A command that appends `word` to the file.
    fn append(&self, word: &str) -> Undo {
        Undo::Run {
            command: format!("echo {word} >> {}", self.0.display()),
        }
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The requests as the storm writes them, one JSON line each.
fn lines(requests: &[Request]) -> String {
    requests
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect()
}

/// Serves `input`: the answers, one per line, and what was said.
fn served(input: &str) -> (Vec<Reply>, Vec<String>) {
    let mut output = Vec::new();
    let mut said = Vec::new();
    serve(input.as_bytes(), &mut output, |line| {
        said.push(line.to_string())
    });
    let replies = String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (replies, said)
}

#[test]
fn what_is_still_held_when_the_storm_ends_is_undone_last_first() {
    let file = Scratch::new("order");
    let input = lines(&[
        Request::Hold {
            id: 1,
            undo: file.append("first"),
            note: None,
        },
        Request::Hold {
            id: 2,
            undo: file.append("released"),
            note: None,
        },
        Request::Hold {
            id: 3,
            undo: file.append("last"),
            note: None,
        },
        Request::Release { id: 2 },
    ]);
    let (replies, said) = served(&input);
    assert!(replies.is_empty(), "holds and releases are not answered");
    assert_eq!(file.read(), "last\nfirst\n");
    assert!(
        said[0].contains("ended with its outage in force; undoing 2 thing(s)"),
        "{said:?}"
    );
    assert!(
        said[1].contains("the outage's end command 'echo last"),
        "{said:?}"
    );
}

#[test]
fn a_settled_undo_runs_once_and_a_storm_that_ends_clean_leaves_nothing() {
    let file = Scratch::new("once");
    let input = lines(&[
        Request::Hold {
            id: 7,
            undo: file.append("end"),
            note: None,
        },
        Request::Settle { id: 7 },
        Request::Settle { id: 7 },
        Request::Run {
            command: "echo out; exit 3".into(),
        },
    ]);
    let (replies, said) = served(&input);
    assert_eq!(
        file.read(),
        "end\n",
        "run at the settle, not again at the end"
    );
    assert_eq!(replies.len(), 3);
    assert!(replies[0].held && replies[0].ran.as_ref().unwrap().ok());
    assert!(
        !replies[1].held && replies[1].ran.is_none(),
        "settled already"
    );
    let ran = replies[2].ran.as_ref().unwrap();
    assert!(!ran.ok());
    assert!(
        ran.report().contains("exited with status 3"),
        "{}",
        ran.report()
    );
    assert!(ran.report().contains("stdout:\nout"), "{}", ran.report());
    assert!(said.is_empty(), "nothing held at the end: {said:?}");
}

#[test]
fn a_line_it_cannot_read_is_said_and_passed_over() {
    let file = Scratch::new("garbled");
    let input = format!(
        "not json\n{}",
        lines(&[Request::Hold {
            id: 1,
            undo: file.append("kept"),
            note: None,
        }])
    );
    let (_, said) = served(&input);
    assert!(said[0].contains("a request it cannot read"), "{said:?}");
    assert_eq!(file.read(), "kept\n");
}

#[test]
fn a_continue_and_a_write_are_undone_for_real() {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id() as i32;
    // A child reads as its parent until its exec is done.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while name(pid) != "sleep" {
        assert!(std::time::Instant::now() < deadline, "sleep never started");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    let file = Scratch::new("write");
    std::fs::write(&file.0, "1").unwrap();
    let said = Scratch::new("commands");
    std::fs::write(&said.0, "# before\n").unwrap();
    let input = lines(&[
        Request::Hold {
            id: 1,
            undo: Undo::Continue { pid },
            note: None,
        },
        Request::Hold {
            id: 2,
            undo: Undo::Write {
                path: file.0.clone(),
                value: "0".into(),
            },
            note: Some(Note {
                path: said.0.clone(),
                names: "fixed".into(),
            }),
        },
    ]);
    let (_, lines) = served(&input);
    assert_eq!(file.read(), "0");
    assert!(
        lines[2].contains(&format!("process {pid} (sleep) continued")),
        "{lines:?}"
    );
    assert_eq!(
        said.read(),
        format!(
            "# before\n# fixed: storm guard: the storm ended during the outage: 0 to {}: \
             written\n",
            file.0.display()
        ),
        "the note in its file, for the undo that had one"
    );
    // Continued: a stopped process's state is T.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_ne!(state, 'T', "{stat}");
}
