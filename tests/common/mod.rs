//! Helpers for tests that run the binaries as child processes,
//! ([`running`]) for tests that run the server in their own process, and
//! ([`virtual_time`]) for runs in virtual time.
//! `proxied.rs`, beside them, is the fault proxy's harness, which
//! `tests/proxy.rs` alone includes.

#![allow(dead_code)]

pub mod calibration;
pub mod cgroup;
pub mod h2;
pub mod pty;
pub mod recorder;
pub mod running;
pub mod scrape;
pub mod target;
pub mod virtual_time;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SERVER: &str = env!("CARGO_BIN_EXE_server");
pub const CLIENT: &str = env!("CARGO_BIN_EXE_client");

/// How a child finds SIGINT, SIGTERM, SIGHUP and SIGQUIT when it starts.
/// A test that signals a child sets this itself: a child inherits the
/// test process's dispositions, and `cargo test &` in a script starts
/// everything with SIGINT and SIGQUIT ignored (nohup, SIGHUP), where a
/// terminal leaves them at default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inherited {
    /// The default action, as a program started from a terminal has them.
    Default,
    /// Ignored, as `program &` in a non-interactive shell leaves them.
    Ignored,
}

impl Inherited {
    /// Both ways a program may be started.
    pub const BOTH: [Inherited; 2] = [Inherited::Default, Inherited::Ignored];

    /// Makes `cmd`'s child start with the four signals this way, whatever
    /// this test process has.
    pub fn apply(self, cmd: &mut Command) -> &mut Command {
        use nix::sys::signal::{SigHandler, Signal, signal};
        use std::os::unix::process::CommandExt;
        let handler = match self {
            Inherited::Default => SigHandler::SigDfl,
            Inherited::Ignored => SigHandler::SigIgn,
        };
        // SAFETY: between fork and exec only sigaction runs, which is
        // async-signal-safe; no handler function is installed.
        unsafe {
            cmd.pre_exec(move || {
                for sig in [
                    Signal::SIGINT,
                    Signal::SIGTERM,
                    Signal::SIGHUP,
                    Signal::SIGQUIT,
                ] {
                    signal(sig, handler).map_err(std::io::Error::from)?;
                }
                Ok(())
            });
        }
        cmd
    }
}

/// A command for `program` that starts it with SIGINT, SIGTERM, SIGHUP
/// and SIGQUIT at their default actions, as from a terminal, however the
/// tests were run.
pub fn command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    Inherited::Default.apply(&mut cmd);
    cmd
}

/// Kills the child if the test ends early.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `signal` (a name such as "INT") to a process.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Reads lines until one contains `needle`, returning it. The processes
/// under test are bounded in time, so their output ends.
pub fn line_with(reader: &mut BufReader<ChildStdout>, needle: &str) -> String {
    read_until_line_with(reader, needle)
        .unwrap_or_else(|| panic!("output ended before a line with {needle:?}"))
}

/// Reads lines until one contains `needle`, returning it, or `None` if the
/// output ends first.
fn read_until_line_with(reader: &mut BufReader<ChildStdout>, needle: &str) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        if line.contains(needle) {
            return Some(line);
        }
    }
}

/// The ports [`unowned_port`] chooses from: the thousand below the
/// system's ephemeral range (`ip_local_port_range`), or below 21000 if that
/// range starts higher; never below 1024.
fn unowned_port_range() -> std::ops::Range<u16> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .expect("read /proc/sys/net/ipv4/ip_local_port_range");
    let low: u16 = text
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("ip_local_port_range: {text:?}"));
    let high = low.min(21_000);
    let start = high.saturating_sub(1_000).max(1_024);
    assert!(
        start < high,
        "no ports between 1024 and the ephemeral range {text:?}"
    );
    start..high
}

/// A loopback port that nothing listens on now and that the system will
/// not hand to anyone by itself: it lies below the ephemeral range, where
/// neither a bind to port 0 nor an outgoing connection's source port ever
/// falls, so that it stays free between the moment it is chosen and a
/// child's bind, and while a test's server is down on purpose. (A port
/// from binding port 0 and dropping the listener may be taken at any
/// moment by another bind to port 0, or as a connection's source port.)
/// Only an explicit bind takes it: each call starts from a different
/// place, depending on the process id and on the calls before it, and
/// checks that the port binds, so that tests running side by side, in
/// this process or another, take different ones.
pub fn unowned_port() -> u16 {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let range = unowned_port_range();
    let span = usize::from(range.end - range.start);
    let first = std::process::id() as usize * 7 + CALLS.fetch_add(1, Ordering::Relaxed) * 31;
    for i in 0..span {
        let port = range.start + ((first + i) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {range:?}");
}

/// A server child process and its output.
pub struct ServerChild {
    pub guard: Guard,
    pub out: BufReader<ChildStdout>,
    pub url: String,
    /// What the server has written on stderr so far, read by a thread
    /// of its own until the server closes it.
    stderr: Arc<Mutex<Vec<u8>>>,
}

/// A linear curve's flags: 100 ms and 20 ms a request in flight, 10 ms
/// and 2 ms at [`ServerChild::quick`]'s ten times the speed.
pub const LINEAR_CURVE: [&str; 6] = [
    "--model",
    "linear",
    "--base-delay",
    "100ms",
    "--slope",
    "20ms",
];

impl ServerChild {
    /// Starts `server` on 127.0.0.1 port 0 at ten times its speed, its
    /// report lines rare, with `shape`'s flags.
    pub fn quick(shape: &[&str]) -> ServerChild {
        let common = [
            "--listen",
            "127.0.0.1:0",
            "--time-scale",
            "10",
            "--report-interval",
            "10m",
        ];
        ServerChild::start(&[], &[&common[..], shape].concat())
    }

    /// Starts `server` with `args` (after `prefix`, a wrapper command such
    /// as `prlimit --nofile=...`, if any) and waits for its address.
    pub fn start(prefix: &[&str], args: &[&str]) -> ServerChild {
        let mut cmd = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = command(program);
                c.args(rest).arg(SERVER);
                c
            }
            None => command(SERVER),
        };
        let mut child = cmd
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let stderr = Arc::new(Mutex::new(Vec::new()));
        // Drained as it comes, so that the server never blocks on a full
        // pipe, and kept, so that a failure can say what the server said.
        let reader = {
            let mut pipe = child.stderr.take().unwrap();
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buf) {
                    stderr.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        let mut guard = Guard(child);
        let Some(banner) = read_until_line_with(&mut out, "listening on") else {
            // It closed its output: it has ended, or is ending.
            let _ = guard.0.kill();
            let status = guard.0.wait().unwrap();
            reader.join().unwrap();
            let said = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
            panic!("server {args:?} did not start ({status}); its stderr: {said}");
        };
        let url = banner
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .unwrap()
            .trim_end_matches(':')
            .to_string();
        ServerChild {
            guard,
            out,
            url,
            stderr,
        }
    }

    /// What the server has written on stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    pub fn pid(&self) -> u32 {
        self.guard.0.id()
    }

    /// host:port of the server.
    pub fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/api")
            .to_string()
    }
}

/// User + system CPU of a process so far, in clock ticks (1/100 s).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A scratch folder for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("retry-storm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path for one test's results that does not exist yet (a program under
/// test creates it, or is checked not to).
pub fn fresh_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("retry-storm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Serialises the tests of one test binary that run real storms. A quick
/// real storm is ten times denser than a real one, and its verdicts need a
/// calm warm-up: with a virtual-time sweep or another storm beside it on
/// two cores, a stall once pushed its server over the limit before the
/// pause, and the storm began on its own (seen in CI).
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A storm's `summary.json` in `out`, parsed.
pub fn summary_json(out: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every run's verdict in a results folder, in the scenario's order:
/// (case, recovered).
pub fn verdicts(out: &std::path::Path) -> Vec<(String, bool)> {
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

/// The children of `pid`, each with its state (`R`, `S`, `T`, `Z`...).
pub fn children(pid: u32) -> Vec<(u32, char)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let mut fields = after.split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid: u32 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        if ppid == pid {
            let child: u32 = entry.file_name().to_string_lossy().parse().unwrap_or(0);
            found.push((child, state));
        }
    }
    found
}

/// Waits (bounded) until every thread of `pid` is stopped (SIGSTOP takes
/// a thread group down one thread at a time; a signal sent before the last
/// one stops may still be handled at once).
pub fn wait_until_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let states: Vec<char> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
            .filter_map(|stat| {
                let after = &stat[stat.rfind(')')? + 2..];
                after.chars().next()
            })
            .collect();
        if !states.is_empty() && states.iter().all(|&s| s == 'T') {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never stopped: {states:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits (bounded) until the children of `pid` satisfy `ready`.
pub fn wait_for_children(
    pid: u32,
    what: &str,
    ready: impl Fn(&[(u32, char)]) -> bool,
) -> Vec<(u32, char)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let kids = children(pid);
        if ready(&kids) {
            return kids;
        }
        assert!(Instant::now() < deadline, "{what} never happened: {kids:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The command line of `pid`, its words joined by spaces.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}
