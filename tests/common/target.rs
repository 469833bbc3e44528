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

/// Interrupts a quick storm of fixed retries against a fresh server
/// during the pause, once, then twice on its heels (the second ends the
/// storm at once), `outage` giving the flags that cause the server's
/// outage from its pid. Each time the storm exits 130, the server is left
/// running (not `T` in `/proc/PID/stat`), and the storm's one child, its
/// client, goes. Returns the storm's stderr, once and twice.
pub fn interrupt_during_the_pause(name: &str, outage: impl Fn(u32) -> Vec<String>) -> Vec<String> {
    let mut said = Vec::new();
    for signals in [1, 2] {
        let server = ServerChild::start(&[], &QUICK_SERVER);
        let pid = server.pid();
        let out = fresh_path(&format!("{name}-{signals}"));
        let mut running = Running(Some(
            command(STORM)
                .args(["--quick", "--quiet", "--strategies", "fixed"])
                .args(["--target", &server.url])
                .args(outage(pid))
                .arg("--out")
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ));
        let storm_pid = running.0.as_ref().unwrap().id();
        wait_stopped(pid);
        // The storm's own children (`storm client`); an exec outage's start
        // command may not have been reaped yet.
        let clients: Vec<(u32, char)> = children(storm_pid)
            .into_iter()
            .filter(|(child, _)| {
                std::fs::read_to_string(format!("/proc/{child}/comm"))
                    .is_ok_and(|name| name.trim() == "storm")
            })
            .collect();
        assert_eq!(clients.len(), 1, "one client, no server: {clients:?}");
        for _ in 0..signals {
            signal(storm_pid, "INT");
        }
        let output = running.0.take().unwrap().wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(130), "{signals}: {stderr}");
        assert_ne!(
            state(pid),
            'T',
            "{signals}: the target was left stopped: {stderr}"
        );
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
        std::fs::remove_dir_all(&out).unwrap();
        said.push(stderr);
    }
    said
}
