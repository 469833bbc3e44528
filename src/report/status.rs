//! The status line protocol: what a supervised program tells its
//! supervisor (storm's runner), one JSON object per line on an inherited
//! pipe: where the server listens, then every report row as it is written
//! (a tier's calls' rows too).
//!
//! The display lines on stdout are for people and may change; these lines
//! are the contract between processes.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};
use serde::{Deserialize, Serialize};

use super::counts::Tally;
use super::histogram::Percentiles;
use super::proxy::ProxyRow;
use super::rows::{ClientRow, ServerRow};

/// One status line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The server (or the fault proxy) accepts connections; its API is at
    /// `url`.
    Listening {
        /// `http://host:port/path` of the API.
        url: String,
    },
    /// A server report row, as written to its CSV file.
    ServerRow(ServerRow),
    /// A client report row, as written to its CSV file.
    ClientRow(ClientRow),
    /// A tier's report row of its calls inward, as written to its
    /// `--call-csv` file (a server's line, beside its `ServerRow`s).
    CallRow(ClientRow),
    /// A client's totals over its whole run: its last line.
    ClientTotals(ClientTotals),
    /// A fault proxy's report row, as written to its CSV file.
    ProxyRow(ProxyRow),
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

/// A whole client run's totals as data: the last line of the status
/// protocol ([`Status::ClientTotals`]), for a supervisor that judges the
/// run as a whole rather than row by row (storm's runner: did the client
/// keep up?), or a script that needs a figure the summary prints. Made
/// by [`super::summary::ClientSummary::to_totals`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientTotals {
    /// How long the load ran, seconds.
    pub elapsed_s: f64,
    /// The counts over the whole run.
    pub tally: Tally,
    /// Latency of successful attempts, from their intended start.
    pub attempt_latency: Percentiles,
    /// Latency of successful requests, from their first attempt's
    /// intended start.
    pub request_latency: Percentiles,
    /// How late attempts started against their intended instants.
    pub start_lateness: Percentiles,
    /// The step of the timer that started them, milliseconds (zero:
    /// exact): up to a step late is the timer's design.
    pub timer_step_ms: f64,
}

/// How late, at the 99th percentile and in the model's time, a client may
/// start its attempts before its run is flagged as one whose client fell
/// behind: a tenth of the server's default base latency (100 ms). Such a
/// run put a lighter and later load on the server than its users asked.
pub const BEHIND_P99: Duration = Duration::from_millis(10);

/// How much later than one step of its timer a client may start its
/// attempts (99th percentile, real time), however compressed its time,
/// before it counts as behind: up to a step late is the timer's design
/// (500 µs steps by default), and a millisecond more the wake-ups of a
/// busy host, not a client that could not keep up.
pub const BEHIND_MARGIN: Duration = Duration::from_millis(1);

impl ClientTotals {
    /// Whether the client fell behind its users' schedule in a run with
    /// time compressed `time_scale` times: its start lateness (99th
    /// percentile, real time) above [`BEHIND_P99`] of the model's time and
    /// above its timer's step plus [`BEHIND_MARGIN`].
    pub fn fell_behind(&self, time_scale: f64) -> bool {
        let model = BEHIND_P99.as_secs_f64() * 1000.0 / time_scale;
        let timer = self.timer_step_ms + BEHIND_MARGIN.as_secs_f64() * 1000.0;
        let bound_ms = model.max(timer);
        self.start_lateness.p99_ms.is_some_and(|ms| ms > bound_ms)
    }
}

/// Writes status lines to a file descriptor the program inherited. When
/// the reader has gone it stops writing, without a word: a supervisor that
/// has gone reads nothing. A tap, if any, gets every line too, in process
/// (the live view). Clones are handles on the same sink, for the tasks of
/// one program that report apart (a tier's server and its calls): each
/// line goes out whole.
#[derive(Clone)]
pub struct StatusSink {
    outlets: Arc<Mutex<Outlets>>,
}

/// Where a sink's lines go.
struct Outlets {
    file: Option<File>,
    tap: Option<Tap>,
}

/// What a sink's tap is: called with every line.
type Tap = Box<dyn FnMut(&Status) + Send>;

impl std::fmt::Debug for StatusSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let outlets = self.outlets.lock().expect("status sink lock poisoned");
        f.debug_struct("StatusSink")
            .field("file", &outlets.file)
            .field("tap", &outlets.tap.is_some())
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
        Ok(StatusSink::to(Some(file), None))
    }

    fn to(file: Option<File>, tap: Option<Tap>) -> StatusSink {
        StatusSink {
            outlets: Arc::new(Mutex::new(Outlets { file, tap })),
        }
    }

    /// `sink` (or none) with `tap` given every line as well.
    pub fn tapped(sink: Option<StatusSink>, tap: impl FnMut(&Status) + Send + 'static) -> Self {
        let sink = sink.unwrap_or_else(|| StatusSink::to(None, None));
        sink.outlets.lock().expect("status sink lock poisoned").tap = Some(Box::new(tap));
        sink
    }

    /// A sink on an open file.
    #[cfg(test)]
    fn from_file(file: File) -> StatusSink {
        StatusSink::to(Some(file), None)
    }

    /// Writes one line. A write error stops the sink: a broken pipe
    /// silently, anything else with a word on stderr.
    pub fn send(&mut self, status: &Status) {
        let mut outlets = self.outlets.lock().expect("status sink lock poisoned");
        if let Some(tap) = &mut outlets.tap {
            tap(status);
        }
        let Some(file) = &mut outlets.file else {
            return;
        };
        let mut line = status.to_line();
        line.push('\n');
        if let Err(e) = file.write_all(line.as_bytes()) {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("status output: {e}; status output stopped");
            }
            outlets.file = None;
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
        let totals = Status::ClientTotals(ClientTotals {
            elapsed_s: 60.0,
            tally: Tally {
                ok: 5,
                timeouts: 1,
                started: 6,
                attempts_per_request: [5, 1, 0, 0, 0, 0, 0],
                ..Default::default()
            },
            attempt_latency: Default::default(),
            request_latency: Default::default(),
            start_lateness: Percentiles {
                p50_ms: Some(0.25),
                p99_ms: Some(0.5),
                max_ms: Some(7.0),
            },
            timer_step_ms: 0.5,
        });
        let call = Status::CallRow(ClientRow::new(
            &ClientCounts::default(),
            Duration::from_secs(1),
            2,
            6_000,
            Duration::from_secs(6),
        ));
        assert!(call.to_line().starts_with(r#"{"call_row":{"#));
        for status in [listening, server, client, totals, call] {
            let line = status.to_line();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(Status::parse(&line).unwrap(), status);
        }
        assert!(Status::parse("OK: 98.00 req/sec").is_err());
    }

    fn late(p99_ms: Option<f64>, timer_step_ms: f64) -> ClientTotals {
        ClientTotals {
            elapsed_s: 60.0,
            tally: Tally::default(),
            attempt_latency: Percentiles::default(),
            request_latency: Percentiles::default(),
            start_lateness: Percentiles {
                p50_ms: p99_ms.map(|ms| ms / 2.0),
                p99_ms,
                max_ms: p99_ms.map(|ms| ms * 2.0),
            },
            timer_step_ms,
        }
    }

    #[test]
    fn a_client_is_behind_past_a_tenth_of_the_base_latency_and_its_timer_step_and_a_millisecond() {
        let behind = |p99: f64, step: f64, k: f64| late(Some(p99), step).fell_behind(k);
        // Full time, 500 µs steps: max(10 ms, 1.5 ms) = 10 ms.
        assert!(!behind(9.9, 0.5, 1.0));
        assert!(behind(10.1, 0.5, 1.0));
        // Four times compressed: max(2.5 ms, 1.5 ms) = 2.5 ms.
        assert!(!behind(2.4, 0.5, 4.0));
        assert!(behind(2.6, 0.5, 4.0));
        // Ten times: 10 ms of the model's time is 1 ms, under the step
        // and its margin, 1.5 ms.
        assert!(!behind(1.4, 0.5, 10.0));
        assert!(behind(1.6, 0.5, 10.0));
        // A hundred times: still 1.5 ms.
        assert!(!behind(1.4, 0.5, 100.0));
        assert!(behind(1.6, 0.5, 100.0));
        // Coarse steps are the timer's, not a client behind: 10 ms steps
        // ten times compressed, max(1 ms, 11 ms) = 11 ms.
        assert!(!behind(10.5, 10.0, 10.0));
        assert!(behind(11.5, 10.0, 10.0));
        // An exact timer, ten times compressed: max(1 ms, 1 ms).
        assert!(!behind(0.9, 0.0, 10.0));
        assert!(behind(1.1, 0.0, 10.0));
        // Nothing started, nothing late.
        assert!(!late(None, 0.5).fell_behind(1.0));
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
        let stopped = sink.outlets.lock().unwrap().file.is_none();
        assert!(stopped, "a broken pipe stops the sink");
        sink.send(&status);
    }

    #[test]
    fn clones_of_a_sink_write_whole_lines_to_the_same_place() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let file = StatusSink::from_file(File::from(std::os::fd::OwnedFd::from(writer)));
        let mut one = StatusSink::tapped(Some(file), move |s: &Status| tx.send(s.clone()).unwrap());
        let mut other = one.clone();
        let first = Status::Listening {
            url: "http://127.0.0.1:1/api".into(),
        };
        let second = Status::Listening {
            url: "http://127.0.0.1:2/api".into(),
        };
        one.send(&first);
        other.send(&second);
        drop(one);
        drop(other);
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, format!("{}\n{}\n", first.to_line(), second.to_line()));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [first, second]);
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
