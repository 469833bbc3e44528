//! A program run in a pseudo-terminal, its screen kept by a terminal
//! emulator (vt100), for the tests of the live view: what a user would
//! see, and keys as a user would type them. Needs nothing installed.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::pty::{Winsize, openpty};

/// How long anything may take on a loaded machine before a test fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// What the terminal has shown so far.
pub struct Shown {
    pub parser: vt100::Parser,
    /// Every byte written to the terminal.
    pub raw: Vec<u8>,
    /// The program closed the terminal (it and its children ended).
    pub ended: bool,
}

/// Makes `command`'s child the leader of a session of its own, its stdin's
/// terminal its controlling one, as a shell in a terminal window or an
/// SSH session is: the kernel sends it SIGHUP when that terminal hangs up.
pub fn lead_its_terminal(command: &mut Command) {
    // SAFETY: between fork and exec, only setsid and ioctl, both
    // async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()?;
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A program in a pseudo-terminal of its own (its controlling terminal).
pub struct Pty {
    pub child: Child,
    master: File,
    shown: Arc<(Mutex<Shown>, Condvar)>,
}

impl Pty {
    /// Runs `program args...` with `env` in a terminal of `cols` x `rows`.
    pub fn spawn(program: &str, args: &[&str], env: &[(&str, &str)], cols: u16, rows: u16) -> Pty {
        let size = Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(&size, None).expect("a pseudo-terminal");
        let slave: OwnedFd = pty.slave;
        let mut command = Command::new(program);
        command
            .args(args)
            .env_remove("NO_COLOR")
            .envs(env.iter().copied())
            .env("TERM", "xterm-256color")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        lead_its_terminal(&mut command);
        let child = command.spawn().expect("the program starts");
        // The parent's copies of the slave went with the command.
        drop(command);
        let master = File::from(pty.master);
        let shown = Arc::new((
            Mutex::new(Shown {
                parser: vt100::Parser::new(
                    std::num::NonZeroU16::new(rows).unwrap(),
                    std::num::NonZeroU16::new(cols).unwrap(),
                    0,
                ),
                raw: Vec::new(),
                ended: false,
            }),
            Condvar::new(),
        ));
        let mut reader = master.try_clone().unwrap();
        let feed = shown.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            loop {
                // EIO once every holder of the slave has gone.
                let n = reader.read(&mut buf).unwrap_or(0);
                let (lock, changed) = &*feed;
                let mut shown = lock.lock().unwrap();
                if n == 0 {
                    shown.ended = true;
                    changed.notify_all();
                    return;
                }
                shown.parser.process(&buf[..n]);
                shown.raw.extend_from_slice(&buf[..n]);
                changed.notify_all();
            }
        });
        Pty {
            child,
            master,
            shown,
        }
    }

    /// Types `keys`.
    pub fn keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits until `done` holds of what is shown, and returns its answer;
    /// fails with the screen if it does not within [`PATIENCE`] or the
    /// program ends first.
    pub fn wait_for<T>(&self, what: &str, mut done: impl FnMut(&Shown) -> Option<T>) -> T {
        let deadline = Instant::now() + PATIENCE;
        let (lock, changed) = &*self.shown;
        let mut shown: MutexGuard<Shown> = lock.lock().unwrap();
        loop {
            if let Some(answer) = done(&shown) {
                return answer;
            }
            let now = Instant::now();
            assert!(
                !shown.ended && now < deadline,
                "{} before {what}; the screen:\n{}",
                if shown.ended {
                    "the program ended"
                } else {
                    "timed out"
                },
                shown.parser.screen().contents()
            );
            shown = changed.wait_timeout(shown, deadline - now).unwrap().0;
        }
    }

    /// Waits until the screen holds every one of `texts`; returns it.
    pub fn wait_for_text(&self, texts: &[&str]) -> String {
        self.wait_for(&format!("{texts:?} on the screen"), |shown| {
            let screen = shown.parser.screen().contents();
            texts.iter().all(|t| screen.contains(t)).then_some(screen)
        })
    }

    /// Waits for the program to end (the terminal closed by it and its
    /// children); returns its status and the screen it left.
    pub fn wait_end(mut self) -> (ExitStatus, String, bool) {
        let (screen, alternate) = self.wait_for("the end", |shown| {
            shown.ended.then(|| {
                let screen = shown.parser.screen();
                (screen.contents(), screen.alternate_screen())
            })
        });
        (self.child.wait().unwrap(), screen, alternate)
    }

    /// Whether any character on the screen now has a colour of its own.
    pub fn coloured(&self) -> bool {
        let shown = self.shown.0.lock().unwrap();
        let screen = shown.parser.screen();
        let (rows, cols) = screen.size();
        (0..rows.get()).any(|r| {
            (0..cols.get()).any(|c| {
                screen
                    .cell(r, c)
                    .is_some_and(|cell| cell.fgcolor() != vt100::Color::Default)
            })
        })
    }

    /// The process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        // A test that failed leaves nothing running.
        if let Ok(None) = self.child.try_wait() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = self.child.wait();
        }
    }
}
