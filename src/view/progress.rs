//! The progress bar of long work (a storm's repeated runs, a sweep's
//! settings): runs done and time left, on stderr, only where stderr is a
//! terminal and progress is wanted, so that nothing changes in what a
//! program prints on stdout, nor in a log or a test's captured output.

use std::fmt::Display;
use std::io::{self, IsTerminal};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::output::say;

/// A progress bar, or nothing where none is shown.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    /// When the work should be done, where that is known in advance (real
    /// runs); otherwise the bar estimates from the rate so far.
    deadline: Mutex<Option<Instant>>,
}

/// How the time left reads: `45s`, `3m 20s`, `1h 5m`.
pub fn left(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

impl Progress {
    /// A bar over `total` `unit`s (`runs`, `settings`), on stderr when
    /// `wanted` (not `--quiet`), stderr is a terminal and there is more
    /// than one to do; `timed` when the caller knows the time left and
    /// gives it by [`Progress::deadline`].
    pub fn new(total: u64, unit: &str, wanted: bool, timed: bool) -> Progress {
        let shown = wanted && total > 1 && io::stderr().is_terminal();
        let bar = shown.then(|| {
            // No colour in the template: nothing for NO_COLOR to turn off.
            let template = if timed {
                format!("[{{bar:30}}] {{pos}}/{{len}} {unit} · {{wide_msg}}")
            } else {
                format!("[{{bar:30}}] {{pos}}/{{len}} {unit} · {{eta}} left · {{wide_msg}}")
            };
            let style = ProgressStyle::with_template(&template)
                .expect("a valid template")
                .progress_chars("=> ");
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                .with_style(style);
            bar.enable_steady_tick(Duration::from_secs(1));
            bar
        });
        Progress {
            bar,
            deadline: Mutex::new(None),
        }
    }

    /// No bar at all.
    pub fn hidden() -> Progress {
        Progress::new(0, "", false, false)
    }

    /// Whether a bar is shown.
    pub fn is_shown(&self) -> bool {
        self.bar.is_some()
    }

    /// `n` more done.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// The work should be done by `at`.
    pub fn deadline(&self, at: Instant) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
    }

    /// The text after the bar (with the time left first, when known).
    pub fn message(&self, text: impl Display) {
        let Some(bar) = &self.bar else {
            return;
        };
        let deadline = *self.deadline.lock().unwrap_or_else(|e| e.into_inner());
        bar.set_message(match deadline {
            Some(at) => format!(
                "{} left · {text}",
                left(at.saturating_duration_since(Instant::now()))
            ),
            None => text.to_string(),
        });
    }

    /// Runs `f`, which may print, with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Prints a line on stdout without tearing the bar.
    pub fn say(&self, line: impl Display) {
        match &self.bar {
            Some(bar) => bar.suspend(|| say(line)),
            None => say(line),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_reads_in_the_largest_units() {
        assert_eq!(left(Duration::from_secs(45)), "45s");
        assert_eq!(left(Duration::from_secs(200)), "3m 20s");
        assert_eq!(left(Duration::from_secs(3900)), "1h 05m");
    }

    #[test]
    fn no_bar_for_one_thing_or_when_unwanted() {
        assert!(!Progress::new(1, "runs", true, false).is_shown());
        assert!(!Progress::new(100, "runs", false, false).is_shown());
        // Under `cargo test` stderr is captured: never a terminal there.
        if !io::stderr().is_terminal() {
            assert!(!Progress::new(100, "runs", true, true).is_shown());
        }
        Progress::hidden().message("nothing to show");
    }
}
