//! The terminal while the view is up, and its restoration whatever
//! happens.
//!
//! The view draws on its own copy of the terminal (stdout as it was) in
//! raw mode on the alternate screen. Meanwhile the program's stdout and
//! stderr go into pipes, so that nothing it prints tears the picture; the
//! view shows the last line of stderr, and everything captured is written
//! where it was meant to go once the terminal is back. The restoration
//! happens once, whichever comes first: the view's end, a panic (hook),
//! or the process's exit (`atexit`: a second Ctrl-C exits at once).

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Mutex, Once, PoisonError};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::unistd::{dup2_stderr, dup2_stdout};
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::crossterm::{cursor, execute};

/// Why `--tui` cannot run here.
pub fn refusal() -> Option<&'static str> {
    (!io::stdout().is_terminal()).then_some(
        "--tui draws on a terminal, and stdout is not one; \
         without --tui the report lines print as usual",
    )
}

/// What is set aside while the view is up.
struct Session {
    /// The terminal, to write the restoring sequences to.
    tty: File,
    /// The program's stdout and stderr as they were.
    saved: [OwnedFd; 2],
    /// The read ends of the pipes that hold them meanwhile (non-blocking).
    pipes: [File; 2],
    /// What came through the pipes so far.
    captured: [Vec<u8>; 2],
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

fn session() -> std::sync::MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Puts the terminal in the view's hands: raw mode, the alternate screen,
/// no cursor, stdout and stderr captured. Returns the terminal to draw on.
pub fn enter() -> io::Result<File> {
    static HOOKS: Once = Once::new();
    HOOKS.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        // SAFETY: registers a plain function, safe to run at exit.
        unsafe { nix::libc::atexit(restore_at_exit) };
    });
    let _ = io::stdout().flush();
    let stdout = io::stdout();
    // Copies closed on exec: a storm's children must not hold them.
    let saved = [
        stdout.as_fd().try_clone_to_owned()?,
        io::stderr().as_fd().try_clone_to_owned()?,
    ];
    let mut tty = File::from(stdout.as_fd().try_clone_to_owned()?);
    let draw = tty.try_clone()?;
    enable_raw_mode()?;
    screen(&mut tty, true)?;
    let (out_read, out_write) = io::pipe()?;
    let (err_read, err_write) = io::pipe()?;
    for read in [&out_read, &err_read] {
        fcntl(read, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    }
    dup2_stdout(&out_write)?;
    dup2_stderr(&err_write)?;
    *session() = Some(Session {
        tty,
        saved,
        pipes: [
            File::from(OwnedFd::from(out_read)),
            File::from(OwnedFd::from(err_read)),
        ],
        captured: [Vec::new(), Vec::new()],
    });
    Ok(draw)
}

/// Switches to the view's screen (the alternate one, no cursor), or back.
fn screen<W: Write>(tty: &mut W, view: bool) -> io::Result<()> {
    if view {
        execute!(tty, EnterAlternateScreen, cursor::Hide)
    } else {
        execute!(tty, LeaveAlternateScreen, cursor::Show)
    }
}

/// Reads what the program printed since, and returns the last line it
/// wrote on stderr, if any.
pub fn drain() -> Option<String> {
    let mut guard = session();
    let session = guard.as_mut()?;
    let before = session.captured[1].len();
    for (pipe, captured) in session.pipes.iter_mut().zip(&mut session.captured) {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            captured.extend_from_slice(&chunk[..n]);
        }
    }
    if session.captured[1].len() == before {
        return None;
    }
    let text = String::from_utf8_lossy(&session.captured[1]);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string)
}

/// Gives the terminal back for a while (Ctrl-Z): the normal screen,
/// cooked mode, the cursor.
pub fn leave_for_now() {
    if let Some(session) = session().as_mut() {
        let _ = screen(&mut session.tty, false);
        let _ = disable_raw_mode();
    }
}

/// Takes the terminal again after [`leave_for_now`].
pub fn take_again() {
    if let Some(session) = session().as_mut() {
        let _ = enable_raw_mode();
        let _ = screen(&mut session.tty, true);
    }
}

/// Gives the terminal back for good and writes out what the program
/// printed meanwhile, stdout's to stdout and stderr's to stderr. Does
/// nothing the second time, or when the view was never up.
pub fn restore() {
    // The panic hook comes here too: nothing below may panic.
    let Some(mut session) = session().take() else {
        return;
    };
    let _ = screen(&mut session.tty, false);
    let _ = session.tty.flush();
    let _ = disable_raw_mode();
    let _ = dup2_stdout(&session.saved[0]);
    let _ = dup2_stderr(&session.saved[1]);
    // With the pipes' write ends gone, the rest can be read out.
    for (pipe, captured) in session.pipes.iter_mut().zip(&mut session.captured) {
        let _ = pipe.read_to_end(captured);
    }
    let [out, err] = &session.captured;
    let _ = write_all(session.saved[0].as_raw_fd(), out);
    let _ = write_all(session.saved[1].as_raw_fd(), err);
}

/// Writes to a raw descriptor, bypassing `std`'s stdout lock (which the
/// thread that exits may hold).
fn write_all(fd: i32, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice to a descriptor this session
        // holds open.
        let n = unsafe { nix::libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return Err(io::Error::last_os_error());
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

extern "C" fn restore_at_exit() {
    restore();
}

/// Whether the view is up.
pub fn is_up() -> bool {
    session().is_some()
}
