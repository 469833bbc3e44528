//! The status line protocol: what a supervised program tells its
//! supervisor (storm's runner), one JSON object per line on an inherited
//! pipe: where the server listens, then every report row as it is written.
//!
//! The display lines on stdout are for people and may change; these lines
//! are the contract between processes.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, RawFd};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};
use serde::{Deserialize, Serialize};

use super::rows::{ClientRow, ServerRow};

/// One status line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The server accepts connections; its API is at `url`.
    Listening {
        /// `http://host:port/path` of the API.
        url: String,
    },
    /// A server report row, as written to its CSV file.
    ServerRow(ServerRow),
    /// A client report row, as written to its CSV file.
    ClientRow(ClientRow),
}

impl Status {
    /// The line, without its newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("status lines serialize")
    }

    /// Reads a line written by [`Status::to_line`].
    pub fn parse(line: &str) -> Result<Status, serde_json::Error> {
        serde_json::from_str(line)
    }
}

/// Writes status lines to a file descriptor the program inherited. When
/// the reader has gone it stops writing, without a word: a supervisor that
/// has gone reads nothing. A tap, if any, gets every line too, in process
/// (the live view).
pub struct StatusSink {
    file: Option<File>,
    tap: Option<Tap>,
}

/// What a sink's tap is: called with every line.
type Tap = Box<dyn FnMut(&Status) + Send>;

impl std::fmt::Debug for StatusSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusSink")
            .field("file", &self.file)
            .field("tap", &self.tap.is_some())
            .finish()
    }
}

impl StatusSink {
    /// Takes the inherited descriptor `fd`: it must be open, past the
    /// standard streams, and a pipe, socket, file or character device. It
    /// is then closed on exec, so that the program's own children do not
    /// hold the supervisor's pipe open.
    ///
    /// # Safety
    ///
    /// `fd` must be owned by nothing else in this process: call this at
    /// start-up, before the program opens descriptors of its own (its
    /// runtime, sockets, files), so that an open `fd` can only be one it
    /// inherited.
    pub unsafe fn from_fd(fd: RawFd) -> io::Result<StatusSink> {
        if fd < 3 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not one of the standard streams (0, 1, 2)",
            ));
        }
        // SAFETY: F_GETFD on any number only reads flags, or fails with
        // EBADF if nothing is open there.
        if unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) } == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open (checked above); only borrowed for the two calls.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let stat = fstat(borrowed).map_err(io::Error::from)?;
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        if ![
            SFlag::S_IFIFO,
            SFlag::S_IFSOCK,
            SFlag::S_IFREG,
            SFlag::S_IFCHR,
        ]
        .contains(&kind)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a pipe, socket, file or character device",
            ));
        }
        fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(io::Error::from)?;
        // SAFETY: open, and, as the caller promises, owned by nothing else
        // here: the file becomes its owner.
        let file = unsafe { File::from_raw_fd(fd) };
        Ok(StatusSink {
            file: Some(file),
            tap: None,
        })
    }

    /// `sink` (or none) with `tap` given every line as well.
    pub fn tapped(sink: Option<StatusSink>, tap: impl FnMut(&Status) + Send + 'static) -> Self {
        StatusSink {
            tap: Some(Box::new(tap)),
            ..sink.unwrap_or(StatusSink {
                file: None,
                tap: None,
            })
        }
    }

    /// A sink on an open file.
    #[cfg(test)]
    fn from_file(file: File) -> StatusSink {
        StatusSink {
            file: Some(file),
            tap: None,
        }
    }

    /// Writes one line. A write error stops the sink: a broken pipe
    /// silently, anything else with a word on stderr.
    pub fn send(&mut self, status: &Status) {
        if let Some(tap) = &mut self.tap {
            tap(status);
        }
        let Some(file) = &mut self.file else {
            return;
        };
        let mut line = status.to_line();
        line.push('\n');
        if let Err(e) = file.write_all(line.as_bytes()) {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("status output: {e}; status output stopped");
            }
            self.file = None;
        }
    }

    /// Writes a line to an optional sink.
    pub fn send_to(sink: &mut Option<StatusSink>, status: &Status) {
        if let Some(sink) = sink {
            sink.send(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::counts::{ClientCounts, ServerCounts};
    use crate::report::rows::ServerState;
    use std::io::Read;
    use std::time::Duration;

    #[test]
    fn lines_round_trip_and_say_what_they_are() {
        let listening = Status::Listening {
            url: "http://127.0.0.1:4000/api".into(),
        };
        assert_eq!(
            listening.to_line(),
            r#"{"listening":{"url":"http://127.0.0.1:4000/api"}}"#
        );
        let server = Status::ServerRow(ServerRow::new(
            ServerCounts {
                completed: 10,
                ..ServerCounts::default()
            },
            Duration::from_secs(1),
            ServerState {
                concurrency: 7,
                delay: Duration::from_millis(100),
                ..ServerState::default()
            },
            1_000,
            Duration::from_secs(1),
        ));
        let client = Status::ClientRow(ClientRow::new(
            &ClientCounts::default(),
            Duration::from_secs(5),
            3,
            5_000,
            Duration::from_secs(5),
        ));
        for status in [listening, server, client] {
            let line = status.to_line();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(Status::parse(&line).unwrap(), status);
        }
        assert!(Status::parse("OK: 98.00 req/sec").is_err());
    }

    #[test]
    fn a_sink_writes_whole_lines_and_stops_when_the_reader_goes() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let mut sink = StatusSink::from_file(File::from(std::os::fd::OwnedFd::from(writer)));
        let status = Status::Listening {
            url: "http://127.0.0.1:1/api".into(),
        };
        sink.send(&status);
        let mut buf = [0u8; 256];
        let n = reader.read(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        assert_eq!(text, format!("{}\n", status.to_line()));
        drop(reader);
        sink.send(&status);
        assert!(sink.file.is_none(), "a broken pipe stops the sink");
        sink.send(&status);
    }

    #[test]
    fn a_tap_gets_every_line_with_or_without_a_descriptor() {
        let (tx, rx) = std::sync::mpsc::channel();
        let status = Status::Listening {
            url: "http://127.0.0.1:1/api".into(),
        };
        let mut alone = StatusSink::tapped(None, move |s: &Status| tx.send(s.clone()).unwrap());
        alone.send(&status);
        alone.send(&status);
        assert_eq!(rx.try_iter().count(), 2);
        let (mut reader, writer) = std::io::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let file = StatusSink::from_file(File::from(std::os::fd::OwnedFd::from(writer)));
        let mut both =
            StatusSink::tapped(Some(file), move |s: &Status| tx.send(s.clone()).unwrap());
        both.send(&status);
        let mut buf = [0u8; 256];
        let n = reader.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], format!("{}\n", status.to_line()).as_bytes());
        assert_eq!(rx.try_recv().unwrap(), status);
    }

    #[test]
    fn a_descriptor_that_is_not_open_standard_or_a_stream_is_refused() {
        // SAFETY: none of these is taken: each is refused before.
        unsafe {
            assert!(StatusSink::from_fd(1).is_err());
            assert!(StatusSink::from_fd(1_000_000).is_err());
        }
        // A directory is open but no place for lines.
        let dir = File::open("/").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
        // SAFETY: refused before it is taken; `dir` keeps it.
        let err = unsafe { StatusSink::from_fd(fd) }.unwrap_err();
        assert!(err.to_string().contains("not a pipe"), "{err}");
    }
}
