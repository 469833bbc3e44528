//! The storm's link to its outage's guardian ([`super::guardian`]): what
//! undoes the outage in force is held by the guardian from before the
//! outage is caused until the storm undoes it itself, so that the outage
//! is undone however the storm ends. The storm starts the guardian, a
//! process, before its first outage ([`guard_with`]); the library's own
//! tests get one on a thread instead, which the same requests reach and
//! which undoes at the test process's exit.
//!
//! At an exit (a second Ctrl-C ends the storm with `std::process::exit`),
//! a handler registered with `atexit` closes the pipe and waits for the
//! guardian, which undoes what is still held: the storm exits with its
//! outage undone. When the storm dies without an exit (a signal that
//! kills it, SIGKILL, the OOM killer), the kernel closes the pipe, and
//! the guardian undoes it all the same.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
#[cfg(test)]
use std::thread::JoinHandle;

use super::command::Ran;
use super::guardian::{Reply, Request, Undo};
use super::log::Note;

/// The guardian: a process of the storm's own, or, in the library's
/// tests, a thread of the test process.
enum Keeper {
    Process(Child),
    #[cfg(test)]
    Thread(JoinHandle<()>),
}

/// How a request to the guardian failed.
#[derive(Debug)]
enum Failed {
    /// It never reached the guardian, which is gone: nothing was done.
    Unsent(std::io::Error),
    /// It reached the guardian, whose answer never came: it may have
    /// been carried out.
    Unanswered(std::io::Error),
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
    fn ask(&mut self, request: &Request) -> Result<Reply, Failed> {
        self.send(request).map_err(Failed::Unsent)?;
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(0) => Err(Failed::Unanswered(std::io::Error::other(
                "the guardian ended before it answered",
            ))),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| Failed::Unanswered(std::io::Error::other(e))),
            Err(e) => Err(Failed::Unanswered(e)),
        }
    }

    /// Closes the pipe to the guardian and waits for it, which undoes
    /// whatever it still holds.
    fn close(self) {
        drop(self.to);
        match self.keeper {
            Keeper::Process(mut child) => {
                let _ = child.wait();
            }
            #[cfg(test)]
            Keeper::Thread(thread) => {
                let _ = thread.join();
            }
        }
    }
}

/// The link to the guardian, once there is one.
static LINK: Mutex<Option<Link>> = Mutex::new(None);

/// Every undo held and not yet released or settled, by its number: the
/// storm's own copy, which it settles itself if the guardian is gone.
static HELD: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());

/// Held from an undo's hold to the outage's cause ([`causing`]), and by
/// the exit before it closes the link: so an outage is caused either
/// before the guardian can see the end, or not at all.
static CAUSING: Mutex<()> = Mutex::new(());

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
    // An outage being caused on another thread (`storm calibrate`'s
    // second Ctrl-C exits from its signal thread) is caused first.
    let _causing = lock(&CAUSING);
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
        // under locks that every other user releases, and waits for the
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

/// Starts the guardian as a process, `program guard`, in a process group
/// of its own (a Ctrl-C at the terminal, or the shell's SIGHUP to its
/// jobs, does not reach it; the commands it runs keep the terminal),
/// unless there is a guardian already: before the first outage.
pub(crate) fn guard_with(program: &Path) -> Result<(), String> {
    connect(|| {
        let mut command = Command::new(program);
        command
            .arg("guard")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
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

/// In the library's tests, a guardian on a thread: the same requests,
/// undone at the test process's exit.
#[cfg(test)]
fn first_guardian() -> std::io::Result<()> {
    connect(|| {
        let (from_storm, to) = std::io::pipe()?;
        let (from, to_storm) = std::io::pipe()?;
        let thread = std::thread::Builder::new()
            .name("outage guardian".into())
            .spawn(move || {
                super::guardian::serve(BufReader::new(from_storm), to_storm, |line| {
                    eprintln!("{line}")
                })
            })?;
        Ok(Link {
            to: Box::new(to),
            from: BufReader::new(Box::new(from)),
            keeper: Keeper::Thread(thread),
        })
    })
}

/// Outside tests, no outage is caused without the guardian the storm
/// starts first.
#[cfg(not(test))]
fn first_guardian() -> std::io::Result<()> {
    match lock(&LINK).is_some() || CLOSED.load(Ordering::SeqCst) {
        true => Ok(()),
        false => Err(std::io::Error::other(
            "no guardian: the storm starts one before its first outage",
        )),
    }
}

/// Sends `request` to the guardian.
fn send(request: &Request) -> std::io::Result<()> {
    first_guardian()?;
    match lock(&LINK).as_mut() {
        Some(link) => link.send(request),
        None => Err(std::io::Error::other("the storm is exiting")),
    }
}

/// Asks the guardian. No answer once the exit has closed the link: the
/// guardian then does what is left.
fn ask(request: &Request) -> Result<Option<Reply>, Failed> {
    first_guardian().map_err(Failed::Unsent)?;
    match lock(&LINK).as_mut() {
        Some(link) => link.ask(request).map(Some),
        None => Ok(None),
    }
}

/// Held across an outage's cause, from the hold of its undo: the exit
/// waits for it before it closes the link.
pub(crate) fn causing() -> MutexGuard<'static, ()> {
    lock(&CAUSING)
}

/// An undo held by the guardian; released, or settled, once.
#[derive(Debug)]
#[must_use = "an undo left held is undone when the storm ends"]
pub(crate) struct Held(u64);

/// Holds `undo` with the guardian, to be undone when the storm ends unless
/// released or settled before, and then said in `note`'s file: an error if
/// the guardian cannot take it, and the outage must then not be caused.
pub(crate) fn hold(undo: Undo, note: Option<Note>) -> Result<Held, String> {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&HELD).push((id, undo.clone()));
    let what = undo.describe();
    match send(&Request::Hold { id, undo, note }) {
        Ok(()) => Ok(Held(id)),
        Err(e) => {
            lock(&HELD).retain(|(held, _)| *held != id);
            Err(format!(
                "the outage's guardian cannot hold {what} ({e}): the outage is not caused"
            ))
        }
    }
}

/// Runs `command` through the guardian, for at most the commands' limit.
/// Never twice, nor at all once the storm is exiting.
pub(crate) fn run(command: &str) -> Ran {
    let request = Request::Run {
        command: command.to_string(),
    };
    match ask(&request) {
        Ok(Some(Reply { ran: Some(ran), .. })) => ran,
        Ok(_) => Ran::unrun(command, "the storm is exiting".into()),
        Err(Failed::Unsent(e)) => {
            Ran::unrun(command, format!("the outage's guardian is gone ({e})"))
        }
        Err(Failed::Unanswered(e)) => Ran::unrun(
            command,
            format!("the outage's guardian died while it ran it ({e}): how it went is unknown"),
        ),
    }
}

impl Held {
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

    /// Carries the undo out now, through the guardian: the command's run,
    /// if it ran one; `None` if the exit has taken it already, or if the
    /// guardian died after it had the request (it may have run it: not
    /// run twice). A guardian gone before has it done here.
    pub(crate) fn settle(self) -> Option<Ran> {
        let undo = self.take()?;
        match ask(&Request::Settle { id: self.0 }) {
            Ok(Some(Reply { held: true, ran })) => ran,
            // Not held, or the exit closing the link: done at the
            // guardian's end, not to be done twice.
            Ok(_) => None,
            Err(Failed::Unsent(_)) => undo.apply().1,
            Err(Failed::Unanswered(e)) => {
                eprintln!(
                    "warning: the outage's guardian died while it undid {} ({e}): it is not \
                     done again",
                    undo.describe()
                );
                None
            }
        }
    }
}

/// What the undos still held do, for tests.
#[cfg(test)]
pub(crate) fn held() -> Vec<String> {
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

    /// An undo that writes "undone" to `marker`.
    fn marking(marker: &str) -> Undo {
        Undo::Run {
            command: format!("echo undone > {marker}"),
        }
    }

    #[test]
    fn the_exit_undoes_what_is_still_held() {
        if let Some(marker) = exiting::passed() {
            let _left = hold(marking(&marker), None).unwrap();
            std::process::exit(0);
        }
        let marker =
            std::env::temp_dir().join(format!("retry-storm-at-exit-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        exiting::run_child(
            concat!(module_path!(), "::the_exit_undoes_what_is_still_held"),
            marker.to_str().unwrap(),
        );
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "undone\n");
        std::fs::remove_file(&marker).unwrap();
    }

    #[test]
    fn a_panic_undoes_what_is_still_held() {
        if let Some(marker) = exiting::passed() {
            let _left = hold(marking(&marker), None).unwrap();
            panic!("a test's panic with an undo held");
        }
        let marker =
            std::env::temp_dir().join(format!("retry-storm-at-panic-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let output = exiting::child_output(
            concat!(module_path!(), "::a_panic_undoes_what_is_still_held"),
            marker.to_str().unwrap(),
        );
        assert!(!output.status.success(), "the child panicked: {output:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "undone\n");
        std::fs::remove_file(&marker).unwrap();
    }

    #[test]
    fn an_undo_is_held_until_withdrawn_once_and_then_not_done() {
        if let Some(marker) = exiting::passed() {
            let undo = marking(&marker);
            let what = undo.describe();
            let held = hold(undo, None).unwrap();
            assert!(super::held().contains(&what));
            assert!(held.withdraw());
            assert!(!super::held().contains(&what));
            assert!(!Held(u64::MAX).withdraw(), "gone: not to be done");
            std::process::exit(0);
        }
        let marker =
            std::env::temp_dir().join(format!("retry-storm-withdrawn-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        exiting::run_child(
            concat!(
                module_path!(),
                "::an_undo_is_held_until_withdrawn_once_and_then_not_done"
            ),
            marker.to_str().unwrap(),
        );
        assert!(!marker.exists(), "released: the exit did not run it");
    }
}
