//! The storm's side of the outage's guardian ([`super::guardian`]): what
//! undoes the outage in force is held by the guardian from before the
//! outage begins until the storm undoes it itself, so that the outage is
//! undone however the storm ends. The storm starts a guardian process
//! before its first outage ([`guard_with`]); without one (the library's
//! tests), the first undo held starts a guardian on a thread of this
//! process, which the same requests reach, and which undoes at this
//! process's exit.
//!
//! At an exit (a second Ctrl-C ends the storm at once with
//! `std::process::exit`), a handler registered with `atexit` closes the
//! pipe and waits for the guardian, which undoes what is still held: the
//! storm exits with its outage undone. When the storm dies without an exit
//! (a signal that kills it, SIGKILL, the OOM killer), the kernel closes
//! the pipe, and the guardian undoes it all the same.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::thread::JoinHandle;

use super::exec::Ran;
use super::guardian::{self, Note, Reply, Request, Undo};

/// The guardian: a process of the storm's own, or a thread of this one.
enum Keeper {
    Process(Child),
    Thread(JoinHandle<()>),
}

/// The pipes to and from the guardian, and the guardian.
struct Link {
    to: Box<dyn Write + Send>,
    from: BufReader<Box<dyn Read + Send>>,
    keeper: Keeper,
}

impl Link {
    /// Sends `request`: an error if the guardian is gone.
    fn send(&mut self, request: &Request) -> std::io::Result<()> {
        let line = serde_json::to_string(request).expect("a request serialises");
        writeln!(self.to, "{line}")?;
        self.to.flush()
    }

    /// Sends `request` and reads the guardian's answer.
    fn ask(&mut self, request: &Request) -> std::io::Result<Reply> {
        self.send(request)?;
        let mut line = String::new();
        if self.from.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("the guardian is gone"));
        }
        serde_json::from_str(&line).map_err(std::io::Error::other)
    }

    /// Closes the pipe to the guardian and waits for it, which undoes
    /// whatever it still holds.
    fn close(self) {
        drop(self.to);
        match self.keeper {
            Keeper::Process(mut child) => {
                let _ = child.wait();
            }
            Keeper::Thread(thread) => {
                let _ = thread.join();
            }
        }
    }
}

/// The link to the guardian, once there is one.
static LINK: Mutex<Option<Link>> = Mutex::new(None);

/// Every undo held and not yet released, by its number: the storm's own
/// copy, which it undoes itself if its guardian is gone.
static HELD: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());

/// The next undo's number.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Registers the exit handler once.
static AT_EXIT: Once = Once::new();

/// Set once the exit has closed the link: no guardian is started after.
static CLOSED: AtomicBool = AtomicBool::new(false);

fn lock<T>(mutex: &'static Mutex<T>) -> MutexGuard<'static, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Closes the link as the program exits: the guardian undoes what is
/// still held, and the exit waits for it.
extern "C" fn close_at_exit() {
    CLOSED.store(true, Ordering::SeqCst);
    // The storm's copy first: an undo taken from it now is not done here.
    lock(&HELD).clear();
    let link = lock(&LINK).take();
    if let Some(link) = link {
        link.close();
    }
}

/// Connects `link` as the guardian, unless there is one.
fn connect(link: impl FnOnce() -> std::io::Result<Link>) -> std::io::Result<()> {
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function, which takes the link out
        // under a lock that every other user releases, and waits for the
        // guardian.
        unsafe {
            nix::libc::atexit(close_at_exit);
        }
    });
    let mut current = lock(&LINK);
    if current.is_none() && !CLOSED.load(Ordering::SeqCst) {
        *current = Some(link()?);
    }
    Ok(())
}

/// Starts the guardian as a process, `program guard`, in a session of its
/// own, unless there is a guardian already: before the first outage.
pub(crate) fn guard_with(program: &Path) -> Result<(), String> {
    connect(|| {
        let mut command = Command::new(program);
        command
            .arg("guard")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: setsid is async-signal-safe and allocates nothing.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                nix::unistd::setsid()?;
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let to = child.stdin.take().expect("piped");
        let from = child.stdout.take().expect("piped");
        Ok(Link {
            to: Box::new(to),
            from: BufReader::new(Box::new(from)),
            keeper: Keeper::Process(child),
        })
    })
    .map_err(|e| {
        format!(
            "cannot start the outage's guardian ({} guard): {e}",
            program.display()
        )
    })
}

/// A guardian on a thread of this process: the same requests, undone at
/// this process's exit (not at its SIGKILL).
fn in_thread() -> std::io::Result<Link> {
    let (from_storm, to) = std::io::pipe()?;
    let (from, to_storm) = std::io::pipe()?;
    let thread = std::thread::Builder::new()
        .name("outage guardian".into())
        .spawn(move || {
            guardian::serve(BufReader::new(from_storm), to_storm, |line| {
                eprintln!("{line}")
            })
        })?;
    Ok(Link {
        to: Box::new(to),
        from: BufReader::new(Box::new(from)),
        keeper: Keeper::Thread(thread),
    })
}

/// Sends `request` to the guardian, starting one on a thread if there is
/// none.
fn send(request: &Request) -> std::io::Result<()> {
    connect(in_thread)?;
    match lock(&LINK).as_mut() {
        Some(link) => link.send(request),
        None => Err(std::io::Error::other("the storm is exiting")),
    }
}

/// Asks the guardian, starting one on a thread if there is none. No
/// answer once the exit has closed the link: the guardian then does what
/// is left.
fn ask(request: &Request) -> std::io::Result<Option<Reply>> {
    connect(in_thread)?;
    match lock(&LINK).as_mut() {
        Some(link) => link.ask(request).map(Some),
        None => Ok(None),
    }
}

/// An undo held by the guardian; released, or settled, once.
#[derive(Debug)]
#[must_use = "an undo left held is undone when the storm ends"]
pub(crate) struct Registered(u64);

/// Holds `undo` with the guardian, to be undone when the storm ends unless
/// released or settled before, and then said in `note`'s file: an error if the guardian cannot take it,
/// and the outage must then not be caused.
pub(crate) fn register(undo: Undo, note: Option<Note>) -> Result<Registered, String> {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&HELD).push((id, undo.clone()));
    let what = undo.describe();
    match send(&Request::Hold { id, undo, note }) {
        Ok(()) => Ok(Registered(id)),
        Err(e) => {
            lock(&HELD).retain(|(held, _)| *held != id);
            Err(format!(
                "the outage's guardian cannot hold {what} ({e}): the outage is not caused"
            ))
        }
    }
}

/// Runs `command` through the guardian, for at most the commands' limit.
/// Never twice: a guardian gone is said as the command's failure.
pub(crate) fn run(command: &str) -> Ran {
    let request = Request::Run {
        command: command.to_string(),
    };
    match ask(&request) {
        Ok(Some(Reply { ran: Some(ran), .. })) => ran,
        Ok(_) => Ran::unrun(command, "the storm is exiting".into()),
        Err(e) => Ran::unrun(command, format!("the outage's guardian is gone ({e})")),
    }
}

impl Registered {
    /// Takes its undo out of the storm's copy: `None` if the exit has taken
    /// it already (it is done there, not to be done twice).
    fn take(&self) -> Option<Undo> {
        let mut held = lock(&HELD);
        let at = held.iter().position(|(id, _)| *id == self.0)?;
        Some(held.remove(at).1)
    }

    /// Releases the undo, which the caller has done or does now: false if
    /// the exit has taken it already.
    pub(crate) fn withdraw(self) -> bool {
        if self.take().is_none() {
            return false;
        }
        // A guardian gone cannot undo it twice.
        let _ = send(&Request::Release { id: self.0 });
        true
    }

    /// Carries the undo out now, through the guardian (here, if the
    /// guardian is gone): the command's run, if it ran one; `None` if the
    /// exit has taken it already.
    pub(crate) fn settle(self) -> Option<Ran> {
        let undo = self.take()?;
        match ask(&Request::Settle { id: self.0 }) {
            Ok(Some(Reply { held: true, ran })) => ran,
            // Not held, or the exit closing the link: done at the
            // guardian's end, not to be done twice.
            Ok(_) => None,
            // A guardian killed: done here rather than not at all.
            Err(_) => undo.apply().1,
        }
    }
}

/// What the undos still registered do, for tests.
#[cfg(test)]
pub(crate) fn registered() -> Vec<String> {
    lock(&HELD)
        .iter()
        .map(|(_, undo)| undo.describe())
        .collect()
}

/// Tests of what the exit does: each runs itself again in a child
/// process, which does its part and exits with `std::process::exit`, as a
/// second Ctrl-C does.
#[cfg(test)]
pub(crate) mod exiting {
    use std::process::Command;

    const VAR: &str = "RETRY_STORM_EXITING_TEST";

    /// In the child, what the parent passed it.
    pub(crate) fn passed() -> Option<String> {
        std::env::var(VAR).ok()
    }

    /// Runs the test `path` (from `module_path!()`) in a child, passing
    /// it `value`; fails if the child does not exit 0.
    pub(crate) fn run_child(path: &str, value: &str) {
        let output = child_output(path, value);
        assert!(output.status.success(), "{path}: {output:?}");
    }

    /// Runs the test `path` in a child, passing it `value`: how it ended
    /// and what it printed (kept from the parent's: a child that fails on
    /// purpose must not read as a failing test).
    pub(crate) fn child_output(path: &str, value: &str) -> std::process::Output {
        let test = path.split_once("::").map_or(path, |(_, rest)| rest);
        Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads", "1"])
            .env(VAR, value)
            .output()
            .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_undoes_what_is_still_registered() {
        if let Some(marker) = exiting::passed() {
            let _left = register(
                Undo::Run {
                    command: format!("echo undone > {marker}"),
                },
                None,
            )
            .unwrap();
            std::process::exit(0);
        }
        let marker =
            std::env::temp_dir().join(format!("retry-storm-at-exit-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        exiting::run_child(
            concat!(module_path!(), "::the_exit_undoes_what_is_still_registered"),
            marker.to_str().unwrap(),
        );
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "undone\n");
        std::fs::remove_file(&marker).unwrap();
    }

    #[test]
    fn a_panic_undoes_what_is_still_registered() {
        if let Some(marker) = exiting::passed() {
            let _left = register(
                Undo::Run {
                    command: format!("echo undone > {marker}"),
                },
                None,
            )
            .unwrap();
            panic!("a test's panic with an undo held");
        }
        let marker =
            std::env::temp_dir().join(format!("retry-storm-at-panic-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let output = exiting::child_output(
            concat!(module_path!(), "::a_panic_undoes_what_is_still_registered"),
            marker.to_str().unwrap(),
        );
        assert!(!output.status.success(), "the child panicked: {output:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "undone\n");
        std::fs::remove_file(&marker).unwrap();
    }

    #[test]
    fn an_undo_is_registered_until_withdrawn_once() {
        let undo = Undo::Run {
            command: format!("exit {}", std::process::id() % 100),
        };
        let what = undo.describe();
        let registered = register(undo, None).unwrap();
        assert!(super::registered().contains(&what));
        assert!(registered.withdraw());
        assert!(!super::registered().contains(&what));
        assert!(!Registered(u64::MAX).withdraw(), "gone: not to be done");
    }
}
