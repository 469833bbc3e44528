//! The conventions of command-line tools that docs/exit-codes.md
//! promises: `--version` on every program and subcommand, and every
//! long-running program stopping in order on SIGINT, whatever disposition
//! it inherited (a terminal's default, or the ignored one that `cargo test
//! &` in a script or nohup hands down). And one of the project's own: the
//! design is cited from pages the repository holds.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{CLIENT, Inherited, SERVER, fresh_path, signal};

const STORM: &str = env!("CARGO_BIN_EXE_storm");

#[test]
fn every_program_and_subcommand_says_its_version() {
    let version = env!("CARGO_PKG_VERSION");
    for (bin, args, name) in [
        (SERVER, &[][..], "server"),
        (CLIENT, &[][..], "client"),
        (CLIENT, &["plan"][..], "client-plan"),
        (STORM, &[][..], "storm"),
        (STORM, &["run"][..], "storm-run"),
        (STORM, &["sweep"][..], "storm-sweep"),
        (STORM, &["merge"][..], "storm-merge"),
        (STORM, &["proxy"][..], "storm-proxy"),
        (STORM, &["calibrate"][..], "storm-calibrate"),
    ] {
        for flag in ["--version", "-V"] {
            let out = Command::new(bin).args(args).arg(flag).output().unwrap();
            assert!(out.status.success(), "{name} {flag}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("{name} {version}"),
                "{name} {flag}"
            );
            assert!(out.stderr.is_empty(), "{name} {flag}");
        }
    }
}

/// How a program ended after SIGINT: its status, the rest of its stdout
/// and its stderr.
struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Starts `program` with `args`, SIGINT and SIGTERM inherited as `how`;
/// once its first line (which must start with `first`) is out, sends
/// SIGINT and waits at most 30 s for it to end.
fn interrupted(program: &str, args: &[&str], how: Inherited, first: &str) -> Ended {
    let mut cmd = Command::new(program);
    how.apply(&mut cmd);
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with(first), "{program} {args:?}: {line}");
    signal(child.id(), "INT");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = String::new();
        let _ = out.read_to_string(&mut stdout);
        let output = child.wait_with_output().unwrap();
        let _ = tx.send(Ended {
            status: output.status,
            stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            signal(pid, "KILL");
            panic!("{program} {args:?} ({how:?}) still ran 30 s after SIGINT")
        })
}

#[test]
fn server_client_and_proxy_stop_in_order_on_sigint_whatever_they_inherited() {
    for how in Inherited::BOTH {
        let server = interrupted(SERVER, &["--listen", "127.0.0.1:0"], how, "listening on");
        assert_eq!(server.status.code(), Some(0), "{how:?}: {}", server.stderr);
        assert!(server.stdout.contains("server stopped"), "{how:?}");
        // Nothing listens on the discard port: errors, then the summary.
        let client = interrupted(
            CLIENT,
            &["--url", "http://127.0.0.1:9/api", "--clients", "5"],
            how,
            "5 clients ->",
        );
        assert_eq!(client.status.code(), Some(0), "{how:?}: {}", client.stderr);
        assert!(client.stdout.contains("summary:"), "{how:?}");
        let proxy = interrupted(
            STORM,
            &[
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://127.0.0.1:9/api",
            ],
            how,
            "listening on",
        );
        assert_eq!(proxy.status.code(), Some(0), "{how:?}: {}", proxy.stderr);
        assert!(proxy.stdout.contains("proxy stopped"), "{how:?}");
    }
}

#[test]
fn ctrl_c_stops_a_long_storm_in_virtual_time_between_runs_whatever_it_inherited() {
    for how in Inherited::BOTH {
        let out = fresh_path(&format!("conventions-sim-sigint-{how:?}"));
        let path = out.to_str().unwrap();
        // Hours of runs: only the signal can end it within the test.
        let args = [
            "--engine",
            "sim",
            "--strategies",
            "fixed",
            "--runs",
            "100000",
        ];
        let ended = interrupted(
            STORM,
            &[&args[..], &["--out", path]].concat(),
            how,
            "storm: fixed",
        );
        assert_eq!(ended.status.code(), Some(130), "{how:?}: {}", ended.stderr);
        assert!(
            ended
                .stderr
                .contains("interrupted: the runs made so far written"),
            "{how:?}: {}",
            ended.stderr
        );
        // In order: the scenario and the runs it finished, no summary.
        assert!(out.join("scenario.toml").exists(), "{how:?}");
        assert!(!out.join("summary.md").exists(), "{how:?}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}

#[test]
fn ctrl_c_stops_a_long_sweep_whatever_it_inherited() {
    // The grid, and the adaptive search held to an interval the 2014
    // client's wide edge reaches only after tens of thousands of runs:
    // both run for hours.
    let grid = ["sweep", "--search", "grid", "--seeds", "100000"];
    let adaptive = ["sweep", "--precision", "0.3s", "--max-runs", "100000"];
    for (how, long) in Inherited::BOTH.into_iter().zip([&grid, &adaptive]) {
        let out = fresh_path(&format!("conventions-sweep-sigint-{how:?}"));
        let path = out.to_str().unwrap();
        let args = [&long[..], &["--out", path]].concat();
        let ended = interrupted(STORM, &args, how, "sweep: ");
        assert_eq!(ended.status.code(), Some(130), "{how:?}: {}", ended.stderr);
        assert!(
            ended.stderr.contains("interrupted: nothing written"),
            "{how:?}: {}",
            ended.stderr
        );
        assert!(!out.exists(), "{how:?}: a sweep writes only once done");
    }
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Whether `line` holds `word` as a word of its own: neither preceded nor
/// followed by a letter, a digit or `_`.
fn holds_word(line: &str, word: &str) -> bool {
    let in_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    line.match_indices(word).any(|(i, _)| {
        !in_word(line[..i].chars().next_back()) && !in_word(line[i + word.len()..].chars().next())
    })
}

/// The comment on a line of Rust, from its `//` (not a URL's `://`).
fn comment_of(line: &str) -> Option<&str> {
    let (i, _) = line
        .match_indices("//")
        .find(|&(i, _)| !line[..i].ends_with(':'))?;
    Some(&line[i..])
}

/// The `docs/NAME.md` paths `text` names.
fn doc_pages(text: &str) -> Vec<&str> {
    text.match_indices("docs/")
        .filter_map(|(i, _)| {
            let rest = &text[i + "docs/".len()..];
            let name = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(rest.len());
            let end = i + "docs/".len() + name + ".md".len();
            (name > 0 && rest[name..].starts_with(".md")).then(|| &text[i..end])
        })
        .collect()
}

/// The design is written in the project's own words, in pages a reader
/// has: no source, test, script, scenario, deployment file, page of
/// `docs/` or the README cites the design notes that stay outside the
/// repository (their name is built from parts here, so that this file
/// does not cite them), and every `docs/` page a source comment names
/// exists.
#[test]
fn the_design_is_cited_from_pages_the_repository_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let outside = ["DES", "IGN"].concat();
    let mut files = vec![root.join("README.md")];
    for dir in ["src", "tests", "scripts", "scenarios", "deploy", "docs"] {
        files_under(&root.join(dir), &mut files);
    }
    files.sort();
    let (mut citing, mut missing) = (Vec::new(), Vec::new());
    for path in &files {
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        let relative = path.strip_prefix(root).unwrap();
        let source = relative.starts_with("src") && path.extension().is_some_and(|e| e == "rs");
        for (n, line) in text.lines().enumerate() {
            let at = || format!("{}:{}", relative.display(), n + 1);
            if holds_word(line, &outside) {
                citing.push(at());
            }
            if source && let Some(comment) = comment_of(line) {
                for page in doc_pages(comment) {
                    if !root.join(page).is_file() {
                        missing.push(format!("{}: {page}", at()));
                    }
                }
            }
        }
    }
    assert!(
        citing.is_empty(),
        "these cite {outside}, which the repository does not hold; \
         point each at the docs/ page that states it: {citing:#?}"
    );
    assert!(
        missing.is_empty(),
        "these source comments name a docs/ page that does not exist: {missing:#?}"
    );
}
