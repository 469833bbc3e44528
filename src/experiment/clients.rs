//! Client shards put back together: the CSV rows and interval logs of
//! processes that each ran a share of one population (`client --shard`,
//! started together with `--start-at`) become the CSV, interval log and
//! summary one process would have written, and with the server's rows and
//! the protocol, its verdict and plot.
//!
//! Intervals line up by their start on the wall clock: the shards' logs
//! carry their start (`BaseTime`) and each interval's offset from it. A
//! merged row sums the shards' rates; its percentiles come from the
//! shards' histograms of that interval merged, so they are those of every
//! sample together, not an average of percentiles.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::error::{StormError, io_err};
use super::storm::confirmation_after;
use crate::plot::{self, RunChart};
use crate::report::histogram::{Percentiles, add_recorded, latency_histogram};
use crate::report::hlog::{Hlog, HlogWriter};
use crate::report::output::{CsvRow, CsvSink, read_rows};
use crate::report::rows::{ClientRow, ServerRow};
use crate::report::verdict::{Figures, Timeline, figures};

/// The storm's protocol as the shards ran it, from their common start.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    /// Warm-up before the server was stopped.
    pub warmup: Duration,
    /// How long it stayed stopped.
    pub pause: Duration,
    /// The observation window after the resume.
    pub observe: Duration,
}

/// What to merge, and where.
#[derive(Debug)]
pub struct MergeRequest<'a> {
    /// The shards' folders, each with `NAME.csv` and `NAME.hlog`.
    pub dirs: &'a [PathBuf],
    /// Where the merged files go.
    pub out: &'a Path,
    /// The server's CSV, for the verdict.
    pub server_csv: Option<&'a Path>,
    /// The protocol, for the verdict.
    pub protocol: Option<Protocol>,
    /// PNG plots instead of SVG.
    pub png: bool,
}

/// Latency percentiles and count of a whole run, for the summary.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Their percentiles.
    #[serde(flatten)]
    pub percentiles: Percentiles,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            count: h.len(),
            percentiles: Percentiles::of(h),
        }
    }
}

/// What `NAME.summary.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct MergedSummary {
    /// The run's name (its files' stem).
    pub name: String,
    /// Shards merged.
    pub shards: usize,
    /// Report rows.
    pub rows: usize,
    /// Intervals of the log (the last, a sliver too short for a row,
    /// counts to the totals only).
    pub intervals: usize,
    /// Successful attempts, from their start: every shard's samples.
    pub attempt_latency: Latency,
    /// Successful requests, from their first attempt's start.
    pub request_latency: Latency,
    /// The run's figures and verdict, with the server's rows and the
    /// protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<Figures>,
    /// When its phases happened, with the protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

/// One shard's files of one run.
struct Part {
    rows: Vec<ClientRow>,
    log: Hlog,
}

/// Every `NAME` with `NAME.csv` and `NAME.hlog` in every folder, and those
/// files, folder by folder.
fn runs(dirs: &[PathBuf]) -> Result<BTreeMap<String, Vec<(PathBuf, PathBuf)>>, StormError> {
    let mut runs: BTreeMap<String, Vec<(PathBuf, PathBuf)>> = BTreeMap::new();
    for dir in dirs {
        let entries = std::fs::read_dir(dir).map_err(io_err(format!("read {}", dir.display())))?;
        for entry in entries.flatten() {
            let csv = entry.path();
            let hlog = csv.with_extension("hlog");
            if csv.extension().is_some_and(|e| e == "csv") && hlog.exists() {
                let name = csv
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                runs.entry(name).or_default().push((csv, hlog));
            }
        }
    }
    if runs.is_empty() {
        return Err(StormError::Flags(
            "no client shards found: a shard folder holds NAME.csv with NAME.hlog beside it \
             (client --csv and --hlog), or a shard.json (storm or sweep --shard)"
                .to_string(),
        ));
    }
    for (name, files) in &runs {
        if files.len() != dirs.len() {
            return Err(StormError::Flags(format!(
                "{name}.csv and {name}.hlog are in {} of the {} folders given",
                files.len(),
                dirs.len()
            )));
        }
    }
    Ok(runs)
}

/// One merged interval: its start since the common start, its length,
/// its histograms and the shards' rows that report it.
struct Interval<'a> {
    start: Duration,
    length: Duration,
    attempts: Histogram<u64>,
    requests: Histogram<u64>,
    rows: Vec<&'a ClientRow>,
}

/// Lines up the shards' intervals by their start since the earliest
/// shard's, to the nearest report interval, and merges each.
fn line_up(parts: &[Part]) -> Result<(Duration, Vec<Interval<'_>>), StormError> {
    let base = parts.iter().map(|p| p.log.base).min().unwrap_or_default();
    // The report interval: the length of the first interval of any shard.
    let step = parts
        .iter()
        .filter_map(|p| p.log.intervals.first())
        .map(|i| i.length)
        .max()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| StormError::Flags("the interval logs hold no interval".to_string()))?;
    let mut merged: BTreeMap<u64, Interval> = BTreeMap::new();
    for part in parts {
        let mut rows = part.rows.iter().peekable();
        for logged in &part.log.intervals {
            let start = part.log.base + logged.start - base;
            let key = (start.as_secs_f64() / step.as_secs_f64()).round() as u64;
            let interval = merged.entry(key).or_insert_with(|| Interval {
                start,
                length: logged.length,
                attempts: latency_histogram(),
                requests: latency_histogram(),
                rows: Vec::new(),
            });
            interval.start = interval.start.min(start);
            interval.length = interval.length.max(logged.length);
            add_recorded(&mut interval.attempts, &logged.attempts);
            add_recorded(&mut interval.requests, &logged.requests);
            // A row reports the interval that ends when it does (a sliver
            // at the end of a run has none). Both are to the millisecond.
            let end = (logged.start + logged.length).as_secs_f64();
            if let Some(row) = rows.next_if(|r| (r.elapsed_s - end).abs() < 0.0025) {
                interval.rows.push(row);
            }
        }
        if rows.peek().is_some() {
            return Err(StormError::Flags(
                "a shard's CSV has rows its interval log does not (files of different runs?)"
                    .to_string(),
            ));
        }
    }
    Ok((base, merged.into_values().collect()))
}

/// Merges every run found in the folders; returns a line about each.
pub fn merge(request: &MergeRequest) -> Result<Vec<String>, StormError> {
    std::fs::create_dir_all(request.out)
        .map_err(io_err(format!("create {}", request.out.display())))?;
    let server: Option<Vec<ServerRow>> = request
        .server_csv
        .map(|path| read_rows(path).map_err(io_err("read --server-csv")))
        .transpose()?;
    let mut said = Vec::new();
    for (name, files) in runs(request.dirs)? {
        let mut parts = Vec::new();
        for (csv, hlog) in &files {
            parts.push(Part {
                rows: read_rows(csv).map_err(io_err("read"))?,
                log: Hlog::read(hlog).map_err(io_err("read"))?,
            });
        }
        let summary = merge_run(request, &name, &parts, server.as_deref())?;
        said.push(describe(&summary));
    }
    Ok(said)
}

fn merge_run(
    request: &MergeRequest,
    name: &str,
    parts: &[Part],
    server: Option<&[ServerRow]>,
) -> Result<MergedSummary, StormError> {
    let (base, intervals) = line_up(parts)?;
    let out = request.out;
    let rows: Vec<ClientRow> = intervals
        .iter()
        .filter(|i| !i.rows.is_empty())
        .map(|i| ClientRow::merged(&i.rows, &i.attempts))
        .collect();
    let hedging = rows.iter().any(|r| r.cancelled_per_s.is_some());
    let mut header = ClientRow::HEADER.to_vec();
    if hedging {
        header.push("cancelled_per_s");
    }
    let csv_path = out.join(format!("{name}.csv"));
    let mut csv = CsvSink::with_header(&csv_path, &header)
        .map_err(|e| StormError::Io(e.path.display().to_string(), e.source))?;
    for row in &rows {
        csv.write(row)
            .map_err(io_err(format!("write {}", csv_path.display())))?;
    }
    let hlog_path = out.join(format!("{name}.hlog"));
    let mut log = HlogWriter::create(&hlog_path)
        .map_err(io_err(format!("create {}", hlog_path.display())))?;
    let (mut attempts, mut requests) = (latency_histogram(), latency_histogram());
    for i in &intervals {
        log.interval(base, i.start, i.length, &i.attempts, &i.requests)
            .map_err(io_err(format!("write {}", hlog_path.display())))?;
        add_recorded(&mut attempts, &i.attempts);
        add_recorded(&mut requests, &i.requests);
    }
    let mut summary = MergedSummary {
        name: name.to_string(),
        shards: parts.len(),
        rows: rows.len(),
        intervals: intervals.len(),
        attempt_latency: Latency::of(&attempts),
        request_latency: Latency::of(&requests),
        figures: None,
        timeline: None,
    };
    if let (Some(p), Some(server)) = (request.protocol, server) {
        let step = intervals.first().map_or(Duration::ZERO, |i| i.length);
        let timeline = Timeline::planned(
            base.as_millis() as u64,
            p.warmup,
            p.pause,
            p.observe,
            confirmation_after(step),
        );
        let found = figures(&rows, server, &timeline);
        plot::storm_charts(
            out,
            &[RunChart {
                name,
                recovery_s: found.recovery_s,
                timeline,
                client: &rows,
                server,
            }],
            request.png,
        )
        .map_err(|e| StormError::Child(format!("plots: {e}")))?;
        summary.figures = Some(found);
        summary.timeline = Some(timeline);
    }
    let json = serde_json::to_string_pretty(&summary).expect("a summary serializes");
    let path = out.join(format!("{name}.summary.json"));
    std::fs::write(&path, json + "\n").map_err(io_err(format!("write {}", path.display())))?;
    Ok(summary)
}

/// One line about a merged run.
fn describe(s: &MergedSummary) -> String {
    let verdict = match &s.figures {
        Some(f) if f.recovered => format!(
            "; recovered {:.1} s after resume",
            f.recovery_s.unwrap_or_default()
        ),
        Some(_) => "; did not recover".to_string(),
        None => String::new(),
    };
    format!(
        "{}: {} shard(s), {} row(s); {} OK attempts, {}{verdict}",
        s.name, s.shards, s.rows, s.attempt_latency.count, s.attempt_latency.percentiles
    )
}
