//! The children of a real run: each case's server and client as child
//! processes, and what they say on their status pipes.
//!
//! Children run in their own process group (so a Ctrl-C reaches only the
//! runner, which then resumes and stops them in order) and are killed by
//! the kernel if the runner dies (`PR_SET_PDEATHSIG`), so no stopped or
//! orphaned server is ever left behind. Their display lines go straight to
//! log files; the runner reads only their status lines.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::storm::STATUS_FD;
use crate::report::proxy::ProxyRow;
use crate::report::rows::{ClientRow, ServerRow};
use crate::report::status::{ClientTotals, Status};
use crate::view::RunWatch;

/// The latest of what a case's children reported.
#[derive(Debug, Default)]
pub(super) struct Live {
    /// The client's latest report row.
    pub client: Option<ClientRow>,
    /// The server's latest report row.
    pub server: Option<ServerRow>,
    /// A tier's latest report row of its calls inward.
    pub calls: Option<ClientRow>,
    /// The client's totals, once it has finished.
    pub totals: Option<ClientTotals>,
    /// The fault proxy's latest report row, against a target through one.
    pub proxy: Option<ProxyRow>,
    /// The live view's watch of this run, if any: every row goes there too.
    pub watch: Option<RunWatch>,
}

/// A child process and what it reports.
pub(super) struct Supervised {
    pub child: Child,
    /// Says where the server listens, once (servers and fault proxies only).
    pub listening: Option<oneshot::Receiver<String>>,
    /// The reader of its status lines, which ends once the child has
    /// ended and every line it wrote has been read.
    pub status: JoinHandle<()>,
}

/// Starts `program role args...` with its stdout and stderr in files, and
/// its status lines read into `live`.
pub(super) fn spawn(
    program: &Path,
    role: &str,
    args: &[String],
    stdout: File,
    stderr: File,
    live: Arc<Mutex<Live>>,
) -> io::Result<Supervised> {
    let (reader, writer) = std::io::pipe()?;
    let writer = OwnedFd::from(writer);
    let raw = writer.as_raw_fd();
    let mut cmd = Command::new(program);
    // A storm's children are whole programs, even when the storm itself
    // runs as a shard of a cluster job: they must not read its shard.
    for var in crate::model::shard::ENV_VARS {
        cmd.env_remove(var);
    }
    cmd.arg(role)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true);
    let runner = nix::unistd::getpid();
    // SAFETY: between fork and exec this touches only descriptors (dup2,
    // fcntl), prctl and getppid, all async-signal-safe, and allocates
    // nothing.
    unsafe {
        cmd.pre_exec(move || {
            if raw == STATUS_FD {
                // Already in place: only keep it open across exec.
                // SAFETY: `raw` is the pipe's write end, open in the parent
                // until after the spawn, so open in this child too.
                let writer = BorrowedFd::borrow_raw(raw);
                fcntl(writer, FcntlArg::F_SETFD(FdFlag::empty()))?;
            } else if nix::libc::dup2(raw, STATUS_FD) == -1 {
                // The copy dup2 makes is not closed on exec.
                return Err(io::Error::last_os_error());
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // A runner that died before the line above sent no signal:
            // the child is an orphan already, and must not run.
            if nix::unistd::getppid() != runner {
                return Err(io::Error::other("the storm ended as its child started"));
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    // The child holds the write end now; with the parent's closed, the
    // pipe ends when the child does.
    drop(writer);
    let status = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    let (tell, listening) = oneshot::channel();
    let status = tokio::spawn(follow(status, live, tell));
    Ok(Supervised {
        child,
        listening: (role == "server" || role == "proxy").then_some(listening),
        status,
    })
}

/// Reads a child's status lines until it ends.
async fn follow(
    status: pipe::Receiver,
    live: Arc<Mutex<Live>>,
    listening: oneshot::Sender<String>,
) {
    let mut listening = Some(listening);
    let mut lines = BufReader::new(status).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match Status::parse(&line) {
            Ok(Status::Listening { url }) => {
                if let Some(tell) = listening.take() {
                    let _ = tell.send(url);
                }
            }
            Ok(status) => {
                let mut live = live.lock().expect("live lock poisoned");
                if let Some(watch) = &live.watch {
                    watch.status(&status);
                }
                match status {
                    Status::ServerRow(row) => live.server = Some(row),
                    Status::ClientRow(row) => live.client = Some(row),
                    Status::CallRow(row) => live.calls = Some(row),
                    Status::ClientTotals(totals) => live.totals = Some(totals),
                    Status::ProxyRow(row) => live.proxy = Some(row),
                    Status::Listening { .. } => {}
                }
            }
            // A line this runner does not know: a newer child, say.
            Err(_) => {}
        }
    }
}

/// Sends `signal` to a child, if it is still there.
pub(super) fn signal(child: &Child, signal: Signal) {
    if let Some(pid) = child.id() {
        let _ = kill(Pid::from_raw(pid as i32), signal);
    }
}

/// Waits for a child, killing it after `grace`.
pub(super) async fn reap(child: &mut Child, grace: Duration) {
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// The last lines a child wrote on stderr (`role`: `server` or
/// `client`), for the storm's own error: why it failed, and where the
/// rest is.
pub(super) fn stderr_tail(out: &Path, name: &str, role: &str) -> String {
    const LINES: usize = 5;
    let path = out.join(format!("{name}.{role}.err"));
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => return format!("; its stderr ({}) could not be read: {e}", path.display()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(LINES)..];
    if tail.is_empty() {
        return format!("; it wrote nothing on stderr ({})", path.display());
    }
    format!(
        "; its stderr ({}) ends:\n  {}",
        path.display(),
        tail.join("\n  ")
    )
}
