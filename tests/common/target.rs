//! Storms of a target: the project's own `server`, started by the test
//! with the flags the storm gives its own, stormed as a service the storm
//! did not start (`tests/target.rs`, `tests/outages.rs`).

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{ServerChild, children, command, fresh_path, signal};

pub const STORM: &str = env!("CARGO_BIN_EXE_storm");

/// Clients that never retry come back from a 6 s pause of the default
/// server, fixed retries do not (in virtual time 20 runs of 20 and 0 of
/// 20). The clients that never retry go first: fixed retries leave the
/// server thousands of requests it holds for up to a minute (compressed),
/// which a case after them against the same target would inherit.
pub const SCENARIO: &str = "seed = 2014\n\
    [protocol]\npause = \"6s\"\ntail = \"0s\"\n\
    [[case]]\nname = \"no-retry\"\nclient = \"--strategy fixed --max-attempts 1\"\n\
    [[case]]\nname = \"fixed\"\nclient = \"--strategy fixed\"\n";

/// The verdicts of [`SCENARIO`], against the storm's own server or a
/// target: (case, recovered).
pub fn expected() -> Vec<(String, bool)> {
    vec![("no-retry".to_string(), true), ("fixed".to_string(), false)]
}

/// The server flags the storm gives its own with `--quick`, beside
/// `--csv` and the status pipe.
pub const QUICK_SERVER: [&str; 4] = ["--listen", "127.0.0.1:0", "--time-scale", "10"];

/// A process's state letter (`S`, `R`, `T` when stopped...).
pub fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Waits (bounded) until process `pid` is stopped.
pub fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while state(pid) != 'T' {
        assert!(Instant::now() < deadline, "{pid} was never stopped");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `storm` with `args` to its end.
pub fn storm(args: &[&str]) -> Output {
    Command::new(STORM).args(args).output().unwrap()
}

/// A scratch folder holding [`SCENARIO`]'s file, and the file's path.
pub fn scenario(name: &str) -> (PathBuf, String) {
    let dir = fresh_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("target.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let file = file.to_str().unwrap().to_string();
    (dir, file)
}

/// A quick storm of fixed retries, quiet, the target calm after 0.1 s: the
/// flags of a storm a test ends during its pause.
pub const QUICK_FIXED: [&str; 6] = [
    "--quick",
    "--quiet",
    "--strategies",
    "fixed",
    "--calm",
    "1s",
];

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

/// A way a test ends a storm during its pause: the signals it sends, one
/// on the heels of the other, and how the storm must end: exit 130 (it
/// undid the outage itself), or killed by the last signal (its guardian
/// undid it).
#[derive(Debug, Clone, Copy)]
pub struct Ending {
    /// The signals, by name (`kill -s NAME`).
    pub signals: &'static [&'static str],
    /// The storm's exit code, or `None` for a death by the last signal.
    pub exit: Option<i32>,
}

/// Ctrl-C: the storm ends its outage and exits 130.
pub const INT: Ending = Ending {
    signals: &["INT"],
    exit: Some(130),
};
/// Ctrl-C twice: the second ends the storm at once, 130.
pub const INT_TWICE: Ending = Ending {
    signals: &["INT", "INT"],
    exit: Some(130),
};
/// SIGTERM, as Ctrl-C.
pub const TERM: Ending = Ending {
    signals: &["TERM"],
    exit: Some(130),
};
/// The terminal closed: SIGHUP kills the storm.
pub const HUP: Ending = Ending {
    signals: &["HUP"],
    exit: None,
};
/// SIGQUIT kills the storm.
pub const QUIT: Ending = Ending {
    signals: &["QUIT"],
    exit: None,
};
/// `kill -9`, or the OOM killer.
pub const KILL: Ending = Ending {
    signals: &["KILL"],
    exit: None,
};

/// Waits, at most 10 s, until `done` holds, saying `what` if it never does.
fn within_10_s(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` is gone (or a zombie, dead and not yet reaped).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

/// The children of the storm `storm` that run as `storm ROLE` (`client`,
/// `guard`, `proxy`); an exec outage's command is none of them.
pub fn storm_children(storm: u32, role: &[u8]) -> Vec<u32> {
    children(storm)
        .into_iter()
        .map(|(child, _)| child)
        .filter(|child| {
            let line = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            line.split(|b| *b == 0).nth(1) == Some(role)
        })
        .collect()
}

/// What became of one storm ended during its pause.
#[derive(Debug)]
pub struct Ended {
    /// The storm's stderr (its guardian's lines among them).
    pub stderr: String,
    /// Its `commands.txt` (the guardian's lines among them).
    pub commands: String,
    /// What its outage's commands wrote to the marker file (an `exec`
    /// outage's end command appends to it), once its guardian is gone.
    pub marker: String,
}

/// Ends, each of the `endings` ways, a quick storm of fixed retries
/// against a fresh server during the pause. `outage` gives the storm's
/// flags that cause the server's outage from its pid and a marker file
/// its commands may write; `in_outage` says, from the server's pid, the
/// storm's and its results folder, whether the server is in it (for the
/// pause to be waited for, and its end). Each time the storm
/// ends as the ending says; within 10 s the server is out of its outage,
/// and the storm's children, its client and its guardian, are gone.
pub fn end_during_the_pause(
    name: &str,
    endings: &[Ending],
    outage: impl Fn(u32, &std::path::Path) -> Vec<String>,
    in_outage: impl Fn(u32, u32, &std::path::Path) -> bool,
) -> Vec<Ended> {
    let mut ended = Vec::new();
    for (n, ending) in endings.iter().enumerate() {
        let server = ServerChild::start(&[], &QUICK_SERVER);
        let pid = server.pid();
        let out = fresh_path(&format!("{name}-{n}"));
        let marker = fresh_path(&format!("{name}-{n}-marker"));
        let mut running = Running(Some(
            command(STORM)
                .args(QUICK_FIXED)
                .args(["--target", &server.url])
                .args(outage(pid, &marker))
                .arg("--out")
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ));
        let storm_pid = running.0.as_ref().unwrap().id();
        within_10_s(&format!("{ending:?}: {pid} never in its outage"), || {
            in_outage(pid, storm_pid, &out)
        });
        let [clients, guardians, proxies] =
            [&b"client"[..], b"guard", b"proxy"].map(|role| storm_children(storm_pid, role));
        assert_eq!(clients.len(), 1, "one client, no server: {clients:?}");
        // A fault proxy ends with the storm, by its parent-death signal;
        // the other kinds have a guardian.
        let guardian = usize::from(proxies.is_empty());
        assert_eq!(guardians.len(), guardian, "guardians: {guardians:?}");
        for signal_name in ending.signals {
            signal(storm_pid, signal_name);
        }
        let output = running.0.take().unwrap().wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        match ending.exit {
            Some(code) => assert_eq!(output.status.code(), Some(code), "{ending:?}: {stderr}"),
            None => {
                use std::os::unix::process::ExitStatusExt;
                assert!(output.status.signal().is_some(), "{ending:?}: {output:?}");
            }
        }
        within_10_s(
            &format!("{ending:?}: the target was left in its outage: {stderr}"),
            || !in_outage(pid, storm_pid, &out),
        );
        // A storm that exits at once leaves its client and its proxy to
        // the kernel's parent-death signal, which takes them down a moment
        // later; its guardian ends once it has undone what it held.
        for child in clients.into_iter().chain(guardians).chain(proxies) {
            within_10_s(&format!("{ending:?}: child {child} stays"), || gone(child));
        }
        let commands = std::fs::read_to_string(out.join("commands.txt")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&out);
        let marked = std::fs::read_to_string(&marker).unwrap_or_default();
        let _ = std::fs::remove_file(&marker);
        ended.push(Ended {
            stderr,
            commands,
            marker: marked,
        });
    }
    ended
}
