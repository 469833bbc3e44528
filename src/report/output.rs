//! Output: terminal lines, and CSV files that survive interruption (the
//! header is written when the file is created, before any load starts, and
//! every row is flushed as written).

use std::fmt::Display;
use std::fs::File;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::rows::{ClientRow, ServerRow};
use crate::model::client::ClientConfig;
use crate::model::server::ServerConfig;
use crate::model::wire::Transport;

/// Prints a line on stdout. A closed stdout (`client | head`) is not worth
/// dying for in the middle of an experiment: the CSV carries on.
pub fn say(line: impl Display) {
    let _ = writeln!(io::stdout().lock(), "{line}");
}

/// A report row with a fixed CSV header.
pub trait CsvRow: Serialize {
    /// Column names, in field order.
    const HEADER: &'static [&'static str];
}

impl CsvRow for ClientRow {
    const HEADER: &'static [&'static str] = &[
        "unix_ms",
        "elapsed_s",
        "ok_per_s",
        "errors_per_s",
        "timeouts_per_s",
        "retries_per_s",
        "in_flight",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "gave_up_per_s",
        "throttled_per_s",
        "attempts_per_request",
        "requests_per_s",
        "sent_per_s",
    ];
}

impl CsvRow for ServerRow {
    const HEADER: &'static [&'static str] = &[
        "unix_ms",
        "elapsed_s",
        "concurrency",
        "last_delay_ms",
        "completed_per_s",
        "abandoned_per_s",
        "shed_per_s",
        "max_concurrency",
        "abandoned_held",
        "abandoned_held_s",
        "abandoned_time_per_s",
    ];
}

/// The header of `config`'s client CSV: a hedging client's adds the
/// cancelled hedges, open traffic's the sessions outstanding and the
/// arrivals refused at the source, HTTP/2's the connections held open.
pub fn client_header(config: &ClientConfig) -> Vec<&'static str> {
    client_columns(
        config.hedging.is_some(),
        config.open.is_some(),
        false,
        multiplexed(config),
    )
}

/// Whether `config`'s rows carry the connections held open: over HTTP/2,
/// where one connection carries many attempts.
fn multiplexed(config: &ClientConfig) -> bool {
    config.wire.transport == Transport::Http2
}

/// The client CSV's columns: the 2014 client's and ours, then a hedging
/// client's cancelled hedges, then open traffic's sessions outstanding and
/// arrivals refused at the source, then a tier's calls whose caller had
/// gone (a tier's calls are open traffic: each arrives when the tier's own
/// work for a request ends), then HTTP/2's connections held open
/// (`multiplexed`).
pub fn client_columns(
    hedging: bool,
    open: bool,
    calls: bool,
    multiplexed: bool,
) -> Vec<&'static str> {
    let mut header = ClientRow::HEADER.to_vec();
    if hedging {
        header.push("cancelled_per_s");
    }
    if open || calls {
        header.extend_from_slice(&["outstanding", "refused_per_s"]);
    }
    if calls {
        header.push("gone_per_s");
    }
    if multiplexed {
        header.push("connections");
    }
    header
}

/// The client's CSV file, if `config` names one, with its header; for a
/// tier's `calls`, with their columns.
pub fn client_csv(
    config: &ClientConfig,
    calls: bool,
) -> Result<Option<CsvSink<ClientRow>>, CsvError> {
    let header = client_columns(
        config.hedging.is_some(),
        config.open.is_some(),
        calls,
        multiplexed(config),
    );
    CsvSink::with_header_if(config.csv.as_deref(), &header)
}

/// The columns a pool or a server with defences adds to [`ServerRow`]'s,
/// in field order.
pub const DEFENCE_COLUMNS: &[&str] = &[
    "queue",
    "max_queue",
    "busy",
    "refused_per_s",
    "limited_per_s",
    "rejected_per_s",
    "dropped_per_s",
];

/// The header of `config`'s server CSV: the 2014 server's columns, then a
/// pool's and the defences' when it reports them, then the limit when it
/// has a limiter, then the failures when it is a failing backend.
pub fn server_header(config: &ServerConfig) -> Vec<&'static str> {
    let mut header = ServerRow::HEADER.to_vec();
    if config.reports_defences() {
        header.extend_from_slice(DEFENCE_COLUMNS);
    }
    if config.limiter.is_some() {
        header.push("limit");
    }
    if config.fail.is_some() {
        header.push("failed_per_s");
    }
    header
}

/// The server's CSV file, if `config` names one, with its header.
pub fn server_csv(config: &ServerConfig) -> Result<Option<CsvSink<ServerRow>>, CsvError> {
    CsvSink::with_header_if(config.csv.as_deref(), &server_header(config))
}

/// Every row of a CSV file with a header, as written by a [`CsvSink`].
pub fn read_rows<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Vec<T>> {
    let with_path = |e: csv::Error| io::Error::other(format!("{}: {e}", path.display()));
    csv::Reader::from_path(path)
        .map_err(with_path)?
        .deserialize()
        .collect::<Result<Vec<T>, _>>()
        .map_err(with_path)
}

/// An output file (a CSV file, an interval log) that could not be
/// created.
#[derive(Debug)]
pub struct CsvError {
    /// The flag that named it.
    pub flag: &'static str,
    /// The path asked for.
    pub path: PathBuf,
    /// What the system said.
    pub source: io::Error,
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: cannot create file: {}",
            self.flag,
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for CsvError {}

/// A CSV file of report rows, flushed after every row.
pub struct CsvSink<T> {
    path: PathBuf,
    writer: csv::Writer<File>,
    _rows: PhantomData<fn(&T)>,
}

impl<T: CsvRow> CsvSink<T> {
    /// Creates (or truncates) the file and writes the header.
    pub fn create(path: &Path) -> Result<Self, CsvError> {
        Self::with_header(path, T::HEADER)
    }

    /// Creates the file with `header` if a path is given.
    pub fn with_header_if(path: Option<&Path>, header: &[&str]) -> Result<Option<Self>, CsvError> {
        path.map(|path| Self::with_header(path, header)).transpose()
    }
}

impl<T: Serialize> CsvSink<T> {
    /// Creates (or truncates) the file, and its folder, and writes
    /// `header`, which must name the fields every row serializes.
    pub fn with_header(path: &Path, header: &[&str]) -> Result<Self, CsvError> {
        let open = || -> io::Result<csv::Writer<File>> {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let mut writer = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(File::create(path)?);
            writer.write_record(header)?;
            writer.flush()?;
            Ok(writer)
        };
        let writer = open().map_err(|source| CsvError {
            flag: "--csv",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(CsvSink {
            path: path.to_path_buf(),
            writer,
            _rows: PhantomData,
        })
    }

    /// Appends one row and flushes it to the file.
    pub fn write(&mut self, row: &T) -> io::Result<()> {
        self.writer.serialize(row).map_err(io::Error::other)?;
        self.writer.flush()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes a row to an optional sink; on a write error says so on stderr and
/// stops writing, so a full disk does not stop the experiment.
pub fn write_row<T: CsvRow>(sink: &mut Option<CsvSink<T>>, row: &T) {
    if let Some(csv) = sink
        && let Err(e) = csv.write(row)
    {
        eprintln!("{}: {e}; CSV output stopped", csv.path().display());
        *sink = None;
    }
}

/// A text cell of a CSV file that a spreadsheet shows as text, never
/// runs as a formula (CSV injection): a text that starts with `=`, `+`,
/// `-`, `@`, a tab or a carriage return is written behind an apostrophe,
/// as OWASP advises, and so is one that starts with an apostrophe, so
/// that reading takes exactly one off and gives back the text written. For
/// text fields only (`#[serde(with = "crate::report::output::csv_text")]`
/// on a `String`): numbers are written as they are, a negative one stays
/// a number.
pub mod csv_text {
    use std::borrow::Cow;

    use serde::{Deserialize, Deserializer, Serializer};

    /// What a spreadsheet takes as the start of a formula.
    const FORMULA_START: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

    /// The cell that holds `text`.
    pub fn cell(text: &str) -> Cow<'_, str> {
        if text.starts_with(FORMULA_START) || text.starts_with('\'') {
            Cow::Owned(format!("'{text}"))
        } else {
            Cow::Borrowed(text)
        }
    }

    /// The text a cell holds: [`cell`] undone.
    pub fn text(cell: &str) -> &str {
        cell.strip_prefix('\'').unwrap_or(cell)
    }

    /// Serde: writes `text` as its cell.
    pub fn serialize<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&cell(text))
    }

    /// Serde: reads a cell's text.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
        let cell = String::deserialize(deserializer)?;
        Ok(text(&cell).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::server::{PoolModel, Shape};
    use crate::model::service::Gauges;
    use crate::policy::defence::{LimiterConfig, LimiterKind};
    use crate::report::counts::{ClientCounts, Held, ServerCounts};
    use crate::report::rows::ServerState;
    use std::time::Duration;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Named {
        #[serde(with = "csv_text")]
        name: String,
        value: f64,
    }

    #[test]
    fn text_that_starts_like_a_formula_is_written_behind_an_apostrophe() {
        let cases = [
            ("+1+1", "'+1+1"),
            ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
            ("-2", "'-2"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("'quoted", "''quoted"),
            ("exponential-2014", "exponential-2014"),
            ("", ""),
        ];
        for (text, cell) in cases {
            assert_eq!(csv_text::cell(text), cell, "{text:?}");
            assert_eq!(csv_text::text(cell), text, "{cell:?}");
        }
        // Through a CSV file and back: only the text field changes, a
        // negative number stays one.
        let rows = vec![
            Named {
                name: "=cmd".into(),
                value: -1.5,
            },
            Named {
                name: "'+1".into(),
                value: 2.0,
            },
        ];
        let mut w = csv::Writer::from_writer(Vec::new());
        for row in &rows {
            w.serialize(row).unwrap();
        }
        let written = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(written, "name,value\n'=cmd,-1.5\n''+1,2.0\n");
        let back: Vec<Named> = csv::Reader::from_reader(written.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, rows);
    }

    /// The header constant must name the serialized fields, in order.
    fn serde_header<T: Serialize>(row: &T) -> Vec<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let first = text.lines().next().unwrap();
        first.split(',').map(str::to_string).collect()
    }

    #[test]
    fn client_header_matches_fields() {
        let row = ClientRow::new(
            &ClientCounts::default(),
            Duration::from_secs(1),
            0,
            0,
            Duration::ZERO,
        );
        assert_eq!(serde_header(&row), ClientRow::HEADER);
        // A hedging client's rows carry the cancelled hedges, last.
        let mut counts = ClientCounts::default();
        counts.tally.cancelled = 3;
        let row = row.with_cancelled(&counts.tally, Duration::from_secs(2));
        assert_eq!(row.cancelled_per_s, Some(1.5));
        let hedging = ClientConfig {
            hedging: Some(crate::policy::Hedging::new(Duration::ZERO, 2)),
            ..ClientConfig::with_policy(
                String::new(),
                Duration::from_secs(1),
                crate::policy::Strategy::Fixed {
                    delay: Duration::ZERO,
                },
                crate::policy::RetryLimits::default(),
            )
        };
        assert_eq!(
            client_header(&ClientConfig {
                hedging: None,
                ..hedging.clone()
            }),
            ClientRow::HEADER
        );
        assert_eq!(serde_header(&row), client_header(&hedging));
        assert!(row.to_string().ends_with(", cancelled: 1.50 req/sec"));
        // Over HTTP/2 they carry the connections held open, after all.
        let mut h2 = hedging.clone();
        h2.wire.transport = Transport::Http2;
        let row = row.with_connections(4);
        assert_eq!(serde_header(&row), client_header(&h2));
        assert_eq!(client_header(&h2).last(), Some(&"connections"));
        assert!(row.to_string().contains(", connections: 4, gave up"));
    }

    #[test]
    fn server_header_matches_fields() {
        let row = ServerRow::new(
            ServerCounts::default(),
            Duration::from_secs(1),
            ServerState::default(),
            0,
            Duration::ZERO,
        );
        assert_eq!(serde_header(&row), ServerRow::HEADER);
        assert_eq!(server_header(&ServerConfig::default()), ServerRow::HEADER);
        // A pool's rows carry its columns, and a limiter's its limit.
        let pool = ServerConfig {
            shape: Shape::Pool(PoolModel::default()),
            limiter: Some(LimiterConfig::new(LimiterKind::Aimd)),
            ..ServerConfig::default()
        };
        let state = ServerState {
            defences: Some(Gauges {
                queue: 0,
                busy: 0,
                limit: Some(20),
            }),
            ..ServerState::default()
        };
        let row = ServerRow::new(
            ServerCounts::default(),
            Duration::from_secs(1),
            state,
            0,
            Duration::ZERO,
        );
        assert_eq!(serde_header(&row), server_header(&pool));
        assert_eq!(server_header(&pool).last(), Some(&"limit"));
        // A failing backend's rows carry its failures, last.
        let failing = ServerConfig {
            fail: Some(crate::model::server::Failing {
                rate: 0.5,
                status: 500,
            }),
            ..pool
        };
        let row = ServerRow::new(
            ServerCounts {
                failed: 3,
                ..ServerCounts::default()
            },
            Duration::from_secs(2),
            ServerState {
                failing: true,
                ..state
            },
            0,
            Duration::ZERO,
        );
        assert_eq!(row.failed_per_s, Some(1.5));
        assert_eq!(serde_header(&row), server_header(&failing));
        assert_eq!(server_header(&failing).last(), Some(&"failed_per_s"));
        assert!(row.to_string().contains(", failed: 1.50 req/sec"), "{row}");
    }

    #[test]
    fn rows_are_on_disk_as_soon_as_written() {
        let dir = std::env::temp_dir().join(format!("retry-storm-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.csv");
        let mut sink = CsvSink::<ServerRow>::create(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim_end(), ServerRow::HEADER.join(","));
        // Two abandoned after 0.5 and 1 s in the model; 5 in flight at
        // most; 2 held for gone clients, for 3.25 s together.
        let row = ServerRow::new(
            ServerCounts {
                completed: 10,
                abandoned: 2,
                shed: 2,
                abandoned_time: Duration::from_millis(1500),
                max_concurrency: 5,
                ..ServerCounts::default()
            },
            Duration::from_secs(2),
            ServerState {
                concurrency: 3,
                delay: Duration::from_millis(100),
                held: Held {
                    count: 2,
                    time: Duration::from_millis(3250),
                },
                defences: None,
                failing: false,
            },
            1,
            Duration::from_secs(2),
        );
        sink.write(&row).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().nth(1),
            Some("1,2.0,3,100.0,5.0,1.0,1.0,5,2,3.25,0.75")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
