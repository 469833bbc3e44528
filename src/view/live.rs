//! The live view's thread. The program's threads only send it messages
//! (rows, a storm's batches and phases) on a channel; it owns the terminal,
//! reads the keys, and redraws four times a second and whenever something
//! arrives.
//!
//! `q` or Ctrl-C (raw mode turns Ctrl-C into a key) raise SIGINT in this
//! process: the program stops exactly as it does on Ctrl-C, through its
//! own signal handling, and closes the view when it is done, before it
//! prints its summary. A second `q` gives the terminal back first, then
//! raises SIGINT again, which ends the program at once, as a second Ctrl-C
//! does. Ctrl-Z gives the terminal back and stops the process, as Ctrl-Z
//! does without the view (the demo's pause); `fg` brings the view back.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, raise};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;

use super::draw::draw;
use super::feed::{Feed, Setup, Watch};
use super::forming::verdict;
use super::state::Board;
use super::style::Look;
use super::terminal;
use crate::report::rows::unix_ms;
use crate::report::status::Status;

/// How often the view redraws when nothing arrives.
const REDRAW: Duration = Duration::from_millis(250);
/// How long it waits for a key at a time.
const TICK: Duration = Duration::from_millis(100);

/// A key of the program's own: the key, what the footer says it does,
/// and what it does (called on the view's thread).
pub struct OwnKey {
    /// The key.
    pub key: char,
    /// What the footer says, as `f: fault on/off`.
    pub help: String,
    /// What it does.
    pub action: Box<dyn FnMut() + Send>,
}

/// The live view, drawing on its own thread until closed or dropped.
pub struct LiveView {
    watch: Watch,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LiveView {
    /// Takes the terminal and starts drawing. The program's SIGINT handling
    /// must be in place already: `q` raises SIGINT.
    pub fn open(setup: Setup) -> io::Result<LiveView> {
        LiveView::open_with(setup, None)
    }

    /// [`LiveView::open`], with a key of the program's own.
    pub fn open_with(setup: Setup, own: Option<OwnKey>) -> io::Result<LiveView> {
        let tty = terminal::enter()?;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("view".into())
            .spawn(move || run(setup, own, rx, tty, &flag));
        match thread {
            Ok(thread) => Ok(LiveView {
                watch: Watch::new(tx),
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                terminal::restore();
                Err(e)
            }
        }
    }

    /// Where to send what the view shows.
    pub fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// For a program's status sink: its rows, as run 0's.
    pub fn tap(&self) -> impl FnMut(&Status) + Send + 'static {
        let run = self.watch.run(0);
        move |status: &Status| run.status(status)
    }

    /// Stops drawing and gives the terminal back, with what the program
    /// printed meanwhile.
    pub fn close(self) {
        drop(self);
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        terminal::restore();
    }
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Stop,
    Suspend,
    Next,
    Previous,
    /// The program's own key.
    Own,
    Nothing,
}

fn ask(key: KeyEvent, own: Option<char>) -> Ask {
    if key.kind != KeyEventKind::Press {
        return Ask::Nothing;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('c') if ctrl => Ask::Stop,
        KeyCode::Char('z') if ctrl => Ask::Suspend,
        KeyCode::Char('q' | 'Q') => Ask::Stop,
        KeyCode::Char(c) if !ctrl && Some(c) == own => Ask::Own,
        KeyCode::Tab | KeyCode::Right | KeyCode::Down => Ask::Next,
        KeyCode::BackTab | KeyCode::Left | KeyCode::Up => Ask::Previous,
        _ => Ask::Nothing,
    }
}

/// Gives the terminal back when the thread ends, however it ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        terminal::restore();
    }
}

/// Clears the screen, so that the next frame is drawn whole. Not
/// `Terminal::clear`, which asks the terminal where its cursor is and,
/// without an answer in time, clears nothing.
fn whole(screen: &mut Terminal<CrosstermBackend<File>>) {
    if let Ok(size) = screen.size() {
        let _ = screen.resize(Rect::new(0, 0, size.width, size.height));
    }
}

fn run(setup: Setup, mut own: Option<OwnKey>, rx: Receiver<Feed>, tty: File, stop: &AtomicBool) {
    let _restore = Restore;
    let look = Look::from_env();
    let mut screen = match Terminal::new(CrosstermBackend::new(tty)) {
        Ok(screen) => screen,
        Err(e) => {
            eprintln!("--tui: {e}; no live view");
            return;
        }
    };
    let mut board = Board::new(setup, unix_ms());
    board.own_key = own.as_ref().map(|k| k.help.clone());
    let own_char = own.as_ref().map(|k| k.key);
    let mut drawn: Option<Instant> = None;
    let mut turned = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut changed = false;
        while let Ok(feed) = rx.try_recv() {
            let now = unix_ms();
            board.apply(feed, |b, i| {
                verdict(b, i, now).map_or(String::new(), |v| v.headline)
            });
            changed = true;
        }
        if let Some(line) = terminal::drain() {
            board.message = Some(line);
            changed = true;
        }
        // A long turn: the process was stopped and continued (SIGSTOP
        // from elsewhere); whatever the screen holds now, draw it whole.
        if turned.elapsed() > Duration::from_secs(2) {
            whole(&mut screen);
            changed = true;
        }
        if changed || drawn.is_none_or(|at| at.elapsed() >= REDRAW) {
            let now = unix_ms();
            if let Err(e) = screen.draw(|frame| draw(frame, &board, look, now)) {
                eprintln!("--tui: {e}; the live view stops here");
                return;
            }
            drawn = Some(Instant::now());
        }
        turned = Instant::now();
        let key = match event::poll(TICK) {
            Ok(true) => match event::read() {
                Ok(Event::Key(key)) => ask(key, own_char),
                Ok(Event::Resize(..)) => {
                    drawn = None;
                    Ask::Nothing
                }
                _ => Ask::Nothing,
            },
            Ok(false) => Ask::Nothing,
            // No terminal to read keys from: draw on, without keys.
            Err(_) => {
                std::thread::sleep(TICK);
                Ask::Nothing
            }
        };
        match key {
            Ask::Stop if board.stopping => {
                // A second signal ends the program at once: give the
                // terminal back before it does.
                terminal::restore();
                let _ = raise(Signal::SIGINT);
                return;
            }
            Ask::Stop => {
                board.stopping = true;
                drawn = None;
                let _ = raise(Signal::SIGINT);
            }
            Ask::Suspend => {
                terminal::leave_for_now();
                let _ = raise(Signal::SIGTSTP);
                // Continued (`fg`): the view again, drawn whole.
                terminal::take_again();
                whole(&mut screen);
                drawn = None;
            }
            Ask::Next => {
                board.select(1);
                drawn = None;
            }
            Ask::Previous => {
                board.select(-1);
                drawn = None;
            }
            Ask::Own => {
                if let Some(own) = &mut own {
                    (own.action)();
                }
                drawn = None;
            }
            Ask::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    fn ask_of(key: KeyEvent) -> Ask {
        ask(key, None)
    }

    #[test]
    fn keys_map_to_what_they_ask() {
        let none = KeyModifiers::NONE;
        assert_eq!(ask_of(key(KeyCode::Char('q'), none)), Ask::Stop);
        assert_eq!(
            ask_of(key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Ask::Stop
        );
        assert_eq!(ask_of(key(KeyCode::Char('c'), none)), Ask::Nothing);
        assert_eq!(
            ask_of(key(KeyCode::Char('z'), KeyModifiers::CONTROL)),
            Ask::Suspend
        );
        assert_eq!(ask_of(key(KeyCode::Tab, none)), Ask::Next);
        assert_eq!(
            ask_of(key(KeyCode::BackTab, KeyModifiers::SHIFT)),
            Ask::Previous
        );
        let mut release = key(KeyCode::Char('q'), none);
        release.kind = KeyEventKind::Release;
        assert_eq!(ask_of(release), Ask::Nothing);
        // A program's own key, and only it.
        assert_eq!(ask(key(KeyCode::Char('f'), none), Some('f')), Ask::Own);
        assert_eq!(ask(key(KeyCode::Char('f'), none), None), Ask::Nothing);
        assert_eq!(ask(key(KeyCode::Char('q'), none), Some('q')), Ask::Stop);
    }
}
