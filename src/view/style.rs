//! How the view tells its series apart: every series has its own marker,
//! with colour besides where colour is wanted. `NO_COLOR` (set and not
//! empty, as <https://no-color.org> asks) leaves the markers alone.

use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;

/// Whether colour is wanted: not when `NO_COLOR` is set to anything but
/// the empty string.
pub fn colour_wanted() -> bool {
    colour_from(std::env::var_os("NO_COLOR").as_deref())
}

/// [`colour_wanted`] for a given `NO_COLOR`.
fn colour_from(no_color: Option<&std::ffi::OsStr>) -> bool {
    no_color.is_none_or(|v| v.is_empty())
}

/// A series the view draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Successful attempts per second.
    Ok,
    /// Failed attempts per second.
    Errors,
    /// Timed-out attempts per second.
    Timeouts,
    /// The client's attempts in flight.
    InFlight,
    /// Requests in the server's model.
    Concurrency,
    /// Requests waiting in a pool's queue.
    Queue,
    /// Requests answered per second.
    Completed,
    /// Requests finished for a client that had gone, per second.
    Abandoned,
    /// Requests turned away at once (shed, refused, limited, rejected,
    /// dropped, failed) per second.
    Refused,
    /// Requests read by a fault proxy per second.
    Requests,
    /// The target's answers a fault proxy passed back per second, 2xx.
    Passed,
    /// A fault proxy's own answers and resets per second, by its fault.
    Injected,
    /// A fault proxy's client connections open.
    Connections,
    /// Requests a fault proxy's fault holds.
    Held,
}

impl Line {
    /// The series' name in a legend, after its marker.
    pub fn name(self) -> &'static str {
        match self {
            Line::Ok => "OK",
            Line::Errors => "errors",
            Line::Timeouts => "timeouts",
            Line::InFlight => "in flight",
            Line::Concurrency => "concurrency",
            Line::Queue => "queue",
            Line::Completed => "completed",
            Line::Abandoned => "abandoned",
            Line::Refused => "turned away",
            Line::Requests => "requests",
            Line::Passed => "2xx passed back",
            Line::Injected => "injected and reset",
            Line::Connections => "connections",
            Line::Held => "held",
        }
    }

    /// Its marker: the main series in fine Braille dots, the others in
    /// a character of their own, so that they differ without colour.
    pub fn marker(self) -> Marker {
        match self {
            Line::Ok
            | Line::InFlight
            | Line::Concurrency
            | Line::Completed
            | Line::Requests
            | Line::Connections => Marker::Braille,
            Line::Errors | Line::Abandoned | Line::Passed | Line::Held => Marker::Custom('x'),
            Line::Timeouts | Line::Queue | Line::Refused | Line::Injected => Marker::Custom('+'),
        }
    }

    /// What the legend shows for the marker.
    pub fn glyph(self) -> char {
        match self.marker() {
            Marker::Custom(c) => c,
            _ => '⠒',
        }
    }

    fn colour(self) -> Color {
        match self {
            Line::Ok | Line::Completed | Line::Passed => Color::Green,
            Line::Errors | Line::Abandoned | Line::Held => Color::Red,
            Line::Timeouts | Line::Refused | Line::Injected => Color::Yellow,
            Line::InFlight | Line::Concurrency | Line::Requests | Line::Connections => Color::Cyan,
            Line::Queue => Color::Magenta,
        }
    }
}

/// The shading of a time span: the pause, a stopped server, intervals
/// without an answer.
pub const SHADE: char = '░';

/// The view's styles, with or without colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// Colour wanted.
    pub colour: bool,
}

impl Look {
    /// The look the environment asks for.
    pub fn from_env() -> Look {
        Look {
            colour: colour_wanted(),
        }
    }

    /// A series' style.
    pub fn line(self, line: Line) -> Style {
        self.fg(line.colour())
    }

    /// The shading's style.
    pub fn shade(self) -> Style {
        self.fg(Color::DarkGray)
    }

    /// A title or a verdict's headline: bold, whatever the colour.
    pub fn strong(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    /// A good verdict.
    pub fn good(self) -> Style {
        self.strong().patch(self.fg(Color::Green))
    }

    /// A bad one.
    pub fn bad(self) -> Style {
        self.strong().patch(self.fg(Color::Red))
    }

    /// Less important text: hints, axes.
    pub fn dim(self) -> Style {
        if self.colour {
            Style::new().fg(Color::Gray)
        } else {
            Style::new()
        }
    }

    /// The selected row of a table.
    pub fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    fn fg(self, colour: Color) -> Style {
        if self.colour {
            Style::new().fg(colour)
        } else {
            Style::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn no_color_set_and_not_empty_turns_colour_off() {
        assert!(colour_from(None));
        assert!(colour_from(Some(OsStr::new(""))));
        assert!(!colour_from(Some(OsStr::new("1"))));
        let plain = Look { colour: false };
        assert_eq!(plain.line(Line::Ok), Style::new());
        assert_eq!(plain.shade(), Style::new());
        assert_ne!(Look { colour: true }.line(Line::Ok), Style::new());
    }

    #[test]
    fn series_drawn_together_differ_by_marker() {
        for together in [
            [Line::Ok, Line::Errors, Line::Timeouts],
            [Line::Completed, Line::Abandoned, Line::Refused],
        ] {
            let glyphs: Vec<char> = together.iter().map(|l| l.glyph()).collect();
            assert!(
                glyphs
                    .iter()
                    .enumerate()
                    .all(|(i, g)| !glyphs[..i].contains(g)),
                "{glyphs:?}"
            );
        }
        assert_ne!(Line::Concurrency.glyph(), Line::Queue.glyph());
        assert!(![Line::Ok, Line::Queue].iter().any(|l| l.glyph() == SHADE));
    }
}
