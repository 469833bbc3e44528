//! HDR interval logs: the HdrHistogram log format (V2 compressed
//! histograms, base64, one line per interval) that Java's
//! `HistogramLogWriter` writes and `HistogramLogProcessor` reads. A client
//! writes one beside its CSV, so that shards' latency percentiles merge
//! exactly: the log keeps every interval's whole histogram, where the CSV
//! keeps only its percentiles.
//!
//! Each report interval gives two histograms, in microseconds: the
//! latency of successful attempts (untagged, what readers show by default)
//! and of successful logical requests (tag `request`). The log's
//! `StartTime` and `BaseTime` are the run's start; interval timestamps are
//! seconds since it.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use flate2::{Compress, Compression, FlushCompress, Status};
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::{Counter, Histogram};

use serde::{Deserialize, Serialize};

use super::histogram::{add_recorded, latency_histogram};
use crate::model::shard::Shard;

/// The tag of the request-latency histograms.
pub const REQUEST_TAG: &str = "request";

/// The header comment that names a log's run: `#[Run: {JSON}]`.
const RUN_COMMENT: &str = "#[Run: ";

/// The run a client's log belongs to and its share of it, written in the
/// log's header (a comment, which readers of the format skip), so that a
/// merge can tell whether shards make one whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRun {
    /// Which share of the users this log's client ran.
    pub shard: Shard,
    /// The whole population's seed.
    pub seed: u64,
    /// The whole population's users.
    pub clients: u32,
    /// The client's retry policy, by name.
    pub policy: String,
    /// The report interval, in milliseconds.
    pub report_interval_ms: u64,
    /// The common start the shards were given (`--start-at`), in
    /// milliseconds since the Unix epoch.
    pub start_at_ms: Option<u64>,
    /// Open traffic's arrivals, in words (`100 arrivals/s, sessions of 5
    /// requests`); absent for a closed population.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<String>,
}

/// Writes a client's interval log.
pub struct HlogWriter {
    path: PathBuf,
    out: BufWriter<File>,
    serializer: Deflate,
    /// The header is written with the first interval, when the run's
    /// start on the wall clock is known.
    started: bool,
    /// The run named in the header, if any.
    run: Option<LogRun>,
}

impl std::fmt::Debug for HlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HlogWriter")
            .field("path", &self.path)
            .finish()
    }
}

fn io_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl HlogWriter {
    /// Creates the log file (and its folder).
    pub fn create(path: &Path) -> io::Result<HlogWriter> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        Ok(HlogWriter {
            path: path.to_path_buf(),
            out: BufWriter::new(File::create(path)?),
            serializer: Deflate::default(),
            started: false,
            run: None,
        })
    }

    /// Names the log's run in its header.
    pub fn with_run(mut self, run: LogRun) -> HlogWriter {
        self.run = Some(run);
        self
    }

    /// Where the log goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one interval: `since_start` after the run's start (`start`,
    /// since the Unix epoch), lasting `length`.
    pub fn interval(
        &mut self,
        start: Duration,
        since_start: Duration,
        length: Duration,
        attempts: &Histogram<u64>,
        requests: &Histogram<u64>,
    ) -> io::Result<()> {
        if !self.started {
            let at = std::time::UNIX_EPOCH + start;
            IntervalLogWriterBuilder::new()
                .add_comment(&format!(
                    "[Logged with retry-storm {}]",
                    env!("CARGO_PKG_VERSION")
                ))
                .add_comment("[Histogram log format version 1.3]")
                .add_comment(
                    "[Values in microseconds: untagged, successful attempts; \
                     Tag=request, successful requests]",
                )
                .with_start_time(at)
                .with_base_time(at)
                .begin_log_with(&mut self.out, &mut self.serializer)?;
            if let Some(run) = &self.run {
                let json = serde_json::to_string(run).map_err(io_error)?;
                writeln!(self.out, "{RUN_COMMENT}{json}]")?;
            }
            // The legend line Java's writer puts before the intervals.
            writeln!(
                self.out,
                "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
            )?;
            self.started = true;
        }
        let mut log =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut self.serializer)?;
        log.write_histogram(attempts, since_start, length, None)
            .map_err(io_error)?;
        log.write_histogram(requests, since_start, length, Tag::new(REQUEST_TAG))
            .map_err(io_error)?;
        self.out.flush()
    }
}

/// The cookie of a compressed V2 histogram (HdrHistogram's encoding).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// hdrhistogram's `V2DeflateSerializer`, byte for byte, keeping one zlib
/// compressor from histogram to histogram: the library's makes a new one
/// for each (a few hundred kilobytes to allocate and clear), twice per
/// interval, which was a twentieth of a virtual storm's time. The last
/// encodings are kept too: a histogram encoded as one of them (the empty
/// ones of a collapsed server's intervals, or an interval's request
/// latencies when every request took one attempt, the same as its
/// attempts') is written again without clearing and running the
/// compressor, which gives the same bytes. Clearing its tables was still
/// a sixth of a virtual storm's instructions.
struct Deflate {
    v2: V2Serializer,
    uncompressed: Vec<u8>,
    compress: Compress,
    /// The encodings of the last histograms, and what each compressed
    /// to, the latest last.
    recent: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Encodings kept: an interval's two histograms, and the two before.
const RECENT: usize = 4;

impl Default for Deflate {
    fn default() -> Self {
        Deflate {
            v2: V2Serializer::new(),
            uncompressed: Vec::new(),
            compress: Compress::new(Compression::default(), true),
            recent: Vec::with_capacity(RECENT),
        }
    }
}

impl Serializer for Deflate {
    type SerializeError = io::Error;

    /// The cookie, the compressed length, then the V2 encoding in zlib.
    fn serialize<T: Counter, W: Write>(
        &mut self,
        h: &Histogram<T>,
        writer: &mut W,
    ) -> io::Result<usize> {
        self.uncompressed.clear();
        self.v2
            .serialize(h, &mut self.uncompressed)
            .map_err(io_error)?;
        if let Some((_, out)) = self.recent.iter().find(|(u, _)| *u == self.uncompressed) {
            writer.write_all(out)?;
            return Ok(out.len());
        }
        self.compress.reset();
        let mut out = Vec::with_capacity(8 + self.uncompressed.len() / 2 + 64);
        out.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        let mut input = &self.uncompressed[..];
        loop {
            out.reserve(input.len() / 2 + 64);
            let before = self.compress.total_in();
            let status = self
                .compress
                .compress_vec(input, &mut out, FlushCompress::Finish)
                .map_err(io_error)?;
            input = &input[(self.compress.total_in() - before) as usize..];
            if status == Status::StreamEnd {
                break;
            }
        }
        let length = u32::try_from(out.len() - 8).map_err(io_error)?;
        out[4..8].copy_from_slice(&length.to_be_bytes());
        writer.write_all(&out)?;
        let written = out.len();
        if self.recent.len() == RECENT {
            self.recent.remove(0);
        }
        self.recent.push((self.uncompressed.clone(), out));
        Ok(written)
    }
}

/// One interval read back from a log.
#[derive(Debug, Clone)]
pub struct LoggedInterval {
    /// Its start, since the log's base time.
    pub start: Duration,
    /// Its length.
    pub length: Duration,
    /// Latency of successful attempts (untagged).
    pub attempts: Histogram<u64>,
    /// Latency of successful requests (tag `request`).
    pub requests: Histogram<u64>,
}

/// An interval log read back.
#[derive(Debug, Clone)]
pub struct Hlog {
    /// The run's start, since the Unix epoch (the log's `BaseTime`).
    pub base: Duration,
    /// The run named in its header, if any (logs written before runs
    /// were named have none).
    pub run: Option<LogRun>,
    /// Its intervals, in order.
    pub intervals: Vec<LoggedInterval>,
}

impl Hlog {
    /// Reads a log written by [`HlogWriter`] (or any log with at most one
    /// histogram per tag and interval; other tags are skipped).
    pub fn read(path: &Path) -> io::Result<Hlog> {
        let text = std::fs::read(path)?;
        let run = text
            .split(|&b| b == b'\n')
            .take_while(|line| line.starts_with(b"#"))
            .find_map(|line| line.strip_prefix(RUN_COMMENT.as_bytes()))
            .map(|json| {
                let json = json.strip_suffix(b"]").unwrap_or(json);
                serde_json::from_slice::<LogRun>(json)
                    .map_err(|e| io_error(format!("{}: its run: {e}", path.display())))
            })
            .transpose()?;
        let mut base = None;
        let mut intervals: Vec<LoggedInterval> = Vec::new();
        let mut deserializer = Deserializer::new();
        for entry in IntervalLogIterator::new(&text) {
            let entry = entry
                .map_err(|e| io_error(format!("{}: not an HDR log: {e:?}", path.display())))?;
            let logged = match entry {
                LogEntry::BaseTime(t) => {
                    base = Some(t);
                    continue;
                }
                LogEntry::StartTime(t) => {
                    base.get_or_insert(t);
                    continue;
                }
                LogEntry::Interval(logged) => logged,
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(logged.encoded_histogram())
                .map_err(|e| io_error(format!("{}: {e}", path.display())))?;
            let decoded: Histogram<u64> = deserializer
                .deserialize(&mut bytes.as_slice())
                .map_err(|e| io_error(format!("{}: {e:?}", path.display())))?;
            let tag = logged.tag().map(|t| t.as_str().to_string());
            let same = intervals
                .last()
                .is_some_and(|i| i.start == logged.start_timestamp());
            if !same {
                intervals.push(LoggedInterval {
                    start: logged.start_timestamp(),
                    length: logged.duration(),
                    attempts: latency_histogram(),
                    requests: latency_histogram(),
                });
            }
            let interval = intervals.last_mut().expect("just pushed");
            match tag.as_deref() {
                None => add_recorded(&mut interval.attempts, &decoded),
                Some(REQUEST_TAG) => add_recorded(&mut interval.requests, &decoded),
                Some(_) => {}
            }
        }
        Ok(Hlog {
            base: base.unwrap_or_default(),
            run,
            intervals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::histogram::record_latency;

    fn histogram(us: &[u64]) -> Histogram<u64> {
        let mut h = latency_histogram();
        for &v in us {
            record_latency(&mut h, Duration::from_micros(v));
        }
        h
    }

    #[test]
    fn the_kept_compressor_writes_what_the_librarys_serializer_writes() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        let mut ours = Deflate::default();
        let mut theirs = V2DeflateSerializer::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let histograms: Vec<Histogram<u64>> = [0, 1, 2, 50, 1_000, 20_000]
            .into_iter()
            .map(|n| {
                let values: Vec<u64> = (0..n)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        1 + seed % [300, 2_000_000, 3_600_000_000][(seed >> 60) as usize % 3]
                    })
                    .collect();
                histogram(&values)
            })
            .collect();
        // Repeats too, of the last one and of older ones: a histogram
        // encoded as a recent one is written from the kept bytes.
        for i in [0, 0, 1, 2, 1, 3, 4, 5, 0, 3, 2, 5, 5] {
            let h = &histograms[i];
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let written = ours.serialize(h, &mut a).unwrap();
            theirs.serialize(h, &mut b).unwrap();
            assert_eq!(a, b, "histogram {i}");
            assert_eq!(written, a.len());
        }
    }

    #[test]
    fn a_log_reads_back_as_written() {
        let path = std::env::temp_dir()
            .join(format!("hlog-{}", std::process::id()))
            .join("run.hlog");
        let start = Duration::from_millis(1_795_000_000_250);
        let mut log = HlogWriter::create(&path).unwrap();
        let (a1, r1) = (histogram(&[100, 200, 300]), histogram(&[300]));
        let (a2, r2) = (histogram(&[]), histogram(&[5_000_000]));
        let s = Duration::from_secs;
        log.interval(start, s(0), s(5), &a1, &r1).unwrap();
        log.interval(start, s(5), Duration::from_millis(4_999), &a2, &r2)
            .unwrap();
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        // The header Java's reader looks for, once.
        assert_eq!(text.matches("#[StartTime: 1795000000.250").count(), 1);
        assert_eq!(text.matches("#[BaseTime: 1795000000.250").count(), 1);
        let tagged = text.lines().filter(|l| l.starts_with("Tag=request,"));
        assert_eq!(tagged.count(), 2);
        let back = Hlog::read(&path).unwrap();
        assert_eq!(back.run, None, "no run named");
        assert_eq!(back.base, start);
        assert_eq!(back.intervals.len(), 2);
        let second = &back.intervals[1];
        assert_eq!(second.start, s(5));
        assert_eq!(second.length, Duration::from_millis(4_999));
        assert_eq!(back.intervals[0].attempts, a1);
        assert_eq!(back.intervals[0].requests, r1);
        assert!(second.attempts.is_empty());
        assert_eq!(second.requests.max(), r2.max());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_logs_run_is_in_its_header_and_reads_back() {
        let path = std::env::temp_dir()
            .join(format!("hlog-run-{}", std::process::id()))
            .join("run.hlog");
        let run = LogRun {
            shard: Shard { index: 1, count: 3 },
            seed: 7,
            clients: 900,
            policy: "fixed 100ms".to_string(),
            report_interval_ms: 5000,
            start_at_ms: Some(1_795_000_000_000),
            open: Some("20 arrivals/s, sessions of 5 requests".to_string()),
        };
        let mut log = HlogWriter::create(&path).unwrap().with_run(run.clone());
        let h = histogram(&[100]);
        let start = Duration::from_secs(1_795_000_000);
        log.interval(start, Duration::ZERO, Duration::from_secs(5), &h, &h)
            .unwrap();
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(
            header
                .iter()
                .any(|l| l.starts_with("#[Run: {\"shard\":{\"index\":1")),
            "{text}"
        );
        let back = Hlog::read(&path).unwrap();
        assert_eq!(back.run, Some(run));
        assert_eq!(back.intervals.len(), 1, "the comment is not an interval");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
