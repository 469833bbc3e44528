//! Client shards put back together: the CSV rows and interval logs of
//! processes that each ran a share of one population (`client --shard`,
//! started together with `--start-at`) become the CSV, interval log and
//! summary one process would have written, and with the server's rows and
//! the protocol, its verdict and plot.
//!
//! Intervals line up by their place in the run: the shards started
//! together (their logs carry their start, `BaseTime`, checked to be
//! within half a report interval) and each wrote an interval for every
//! one of its schedule, so the k-th of each is the same stretch. A
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
use crate::model::shard::Shard;
use crate::plot::{self, RunChart};
use crate::report::histogram::{Percentiles, add_recorded, latency_histogram};
use crate::report::hlog::{Hlog, HlogWriter, LogRun};
use crate::report::output::{CsvSink, client_columns, read_rows};
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
    csv: PathBuf,
    hlog: PathBuf,
    rows: Vec<ClientRow>,
    log: Hlog,
}

/// Every `NAME` with `NAME.csv` and `NAME.hlog` in every folder, and those
/// files, folder by folder.
fn runs(dirs: &[PathBuf]) -> Result<BTreeMap<String, Vec<(PathBuf, PathBuf)>>, StormError> {
    let mut runs: BTreeMap<String, Vec<(PathBuf, PathBuf)>> = BTreeMap::new();
    let mut seen = Vec::new();
    for dir in dirs {
        let real = std::fs::canonicalize(dir).map_err(io_err(format!("read {}", dir.display())))?;
        if let Some(first) = seen.iter().position(|s| *s == real) {
            return Err(StormError::Flags(format!(
                "{} and {} are the same folder: each shard is given once",
                dirs[first].display(),
                dir.display()
            )));
        }
        seen.push(real);
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

/// Checks that `parts` are the shards of one run, all of them, each once,
/// whole; returns the run they name (none for logs that name none, which
/// are checked by their start and report interval only). Refuses
/// otherwise, naming what differs.
fn whole(name: &str, parts: &[Part]) -> Result<Option<LogRun>, StormError> {
    let refuse = |why: String| Err(StormError::Flags(format!("{name}: {why}")));
    let first = &parts[0];
    let named: Vec<&LogRun> = parts.iter().filter_map(|p| p.log.run.as_ref()).collect();
    let run = match (named.first(), named.len() == parts.len()) {
        (None, _) => None,
        (Some(_), false) => {
            let bare = parts.iter().find(|p| p.log.run.is_none()).expect("one");
            let named = parts.iter().find(|p| p.log.run.is_some()).expect("one");
            return refuse(format!(
                "{} names no run and {} does: logs of different versions or runs",
                bare.hlog.display(),
                named.hlog.display()
            ));
        }
        (Some(&run), true) => Some(run.clone()),
    };
    if let Some(run) = &run {
        for (part, other) in parts.iter().zip(&named).skip(1) {
            let differs = [
                ("seed", run.seed != other.seed),
                ("clients", run.clients != other.clients),
                ("open traffic", run.open != other.open),
                ("retry policy", run.policy != other.policy),
                (
                    "report interval",
                    run.report_interval_ms != other.report_interval_ms,
                ),
                ("start (--start-at)", run.start_at_ms != other.start_at_ms),
                ("number of shards", run.shard.count != other.shard.count),
            ];
            if let Some((what, _)) = differs.iter().find(|(_, d)| *d) {
                return refuse(format!(
                    "{} and {} are not shards of one run: their {what} differs \
                     ({} against {})",
                    first.hlog.display(),
                    part.hlog.display(),
                    describe_run(run),
                    describe_run(other)
                ));
            }
        }
        let mut indices: Vec<u32> = named.iter().map(|r| r.shard.index).collect();
        indices.sort_unstable();
        if let Some(twice) = indices.windows(2).find(|w| w[0] == w[1]) {
            return refuse(format!(
                "shard {}/{} is given twice",
                twice[0], run.shard.count
            ));
        }
        if indices.len() != run.shard.count as usize {
            let missing: Vec<String> = (0..run.shard.count)
                .filter(|i| !indices.contains(i))
                .map(|i| format!("{i}/{}", run.shard.count))
                .collect();
            return refuse(format!(
                "not every shard is given: missing {}",
                missing.join(", ")
            ));
        }
    }
    // Logs that name no run are checked by what they carry; those that
    // name one carry their report interval, and a first interval measured
    // a few milliseconds long on a loaded machine is not another run.
    let step = |p: &Part| p.log.intervals.first().map(|i| i.length);
    for part in &parts[1..] {
        if let (None, Some(a), Some(b)) = (&run, step(first), step(part))
            && a.abs_diff(b) > Duration::from_millis(1)
        {
            return refuse(format!(
                "{} and {} report every {} s and {} s: not shards of one run",
                first.hlog.display(),
                part.hlog.display(),
                a.as_secs_f64(),
                b.as_secs_f64()
            ));
        }
        let apart = first.log.base.abs_diff(part.log.base);
        if step(first).is_some_and(|s| apart * 2 >= s) {
            return refuse(format!(
                "{} and {} started {:.3} s apart, half a report interval or more: shards \
                 of one run start together (--start-at)",
                first.hlog.display(),
                part.hlog.display(),
                apart.as_secs_f64()
            ));
        }
        if part.rows.len() != first.rows.len() {
            return refuse(format!(
                "{} has {} rows and {} has {}: a shard's files are cut short, or the \
                 shards ran for different lengths",
                first.csv.display(),
                first.rows.len(),
                part.csv.display(),
                part.rows.len()
            ));
        }
    }
    Ok(run)
}

/// A run as a merge's message names it.
fn describe_run(run: &LogRun) -> String {
    let start = run
        .start_at_ms
        .map_or("no --start-at".to_string(), |ms| format!("start {ms} ms"));
    let population = run
        .open
        .clone()
        .unwrap_or_else(|| format!("{} clients", run.clients));
    format!(
        "shard {}/{}, seed {}, {population}, {}, every {} ms, {start}",
        run.shard.index, run.shard.count, run.seed, run.policy, run.report_interval_ms
    )
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

/// Lines up the shards' intervals by their place in the run, the k-th of
/// each shard with the k-th of every other, and merges each. The shards
/// started together and report alike (checked before), and a client
/// writes an interval for every one of its schedule however late its
/// timer fires, so the k-th interval of every shard is the same stretch
/// of the run. Lining them up by their measured start instead took a
/// tick half an interval late for the next interval's, and two intervals
/// of one shard were merged into one row (seen on a loaded machine).
fn line_up(parts: &[Part]) -> Result<(Duration, Vec<Interval<'_>>), StormError> {
    let base = parts.iter().map(|p| p.log.base).min().unwrap_or_default();
    let lengths = parts.iter().filter_map(|p| p.log.intervals.first());
    if lengths.map(|i| i.length).all(|d| d.is_zero()) {
        return Err(StormError::Flags(
            "the interval logs hold no interval".to_string(),
        ));
    }
    let mut merged: BTreeMap<usize, Interval> = BTreeMap::new();
    for part in parts {
        let mut rows = part.rows.iter().peekable();
        for (place, logged) in part.log.intervals.iter().enumerate() {
            let start = part.log.base + logged.start - base;
            let interval = merged.entry(place).or_insert_with(|| Interval {
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
                csv: csv.clone(),
                hlog: hlog.clone(),
                rows: read_rows(csv).map_err(io_err(format!("read {}", csv.display())))?,
                log: Hlog::read(hlog).map_err(io_err(format!("read {}", hlog.display())))?,
            });
        }
        let run = whole(&name, &parts)?;
        let summary = merge_run(request, &name, &parts, run, server.as_deref())?;
        said.push(describe(&summary));
    }
    Ok(said)
}

fn merge_run(
    request: &MergeRequest,
    name: &str,
    parts: &[Part],
    run: Option<LogRun>,
    server: Option<&[ServerRow]>,
) -> Result<MergedSummary, StormError> {
    let (base, intervals) = line_up(parts)?;
    let out = request.out;
    let rows: Vec<ClientRow> = intervals
        .iter()
        .filter(|i| !i.rows.is_empty())
        .map(|i| ClientRow::merged(&i.rows, &i.attempts))
        .collect();
    let header = client_columns(
        rows.iter().any(|r| r.cancelled_per_s.is_some()),
        rows.iter().any(|r| r.outstanding.is_some()),
        rows.iter().any(|r| r.gone_per_s.is_some()),
        rows.iter().any(|r| r.connections.is_some()),
    );
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
    // The merged log names the whole run, so that it is merged with no
    // other shard.
    if let Some(run) = run {
        log = log.with_run(LogRun {
            shard: Shard::WHOLE,
            ..run
        });
    }
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
                proxy: &[],
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::hlog::LoggedInterval;

    /// A shard's files as read back: `rows` rows of a run started at
    /// `base_ms`, reporting every `step_ms`, naming `run` (or none).
    fn part(name: &str, base_ms: u64, step_ms: u64, rows: usize, run: Option<LogRun>) -> Part {
        let step = Duration::from_millis(step_ms);
        Part {
            csv: PathBuf::from(format!("{name}/run.csv")),
            hlog: PathBuf::from(format!("{name}/run.hlog")),
            rows: (1..=rows)
                .map(|k| ClientRow {
                    elapsed_s: (step * k as u32).as_secs_f64(),
                    ..ClientRow::merged(&[], &latency_histogram())
                })
                .collect(),
            log: Hlog {
                base: Duration::from_millis(base_ms),
                run,
                intervals: (0..rows as u32)
                    .map(|k| LoggedInterval {
                        start: step * k,
                        length: step,
                        attempts: latency_histogram(),
                        requests: latency_histogram(),
                    })
                    .collect(),
            },
        }
    }

    fn refusal(parts: &[Part]) -> String {
        whole("run", parts).expect_err("refused").to_string()
    }

    #[test]
    fn logs_that_name_no_run_must_start_together_and_report_alike() {
        // Started 2.4 s apart at 5 s intervals: under half an interval.
        let together = [
            part("a", 10_000, 5_000, 4, None),
            part("b", 12_400, 5_000, 4, None),
        ];
        assert_eq!(whole("run", &together).unwrap(), None);
        let apart = [
            part("a", 10_000, 5_000, 4, None),
            part("b", 12_500, 5_000, 4, None),
        ];
        assert!(refusal(&apart).contains("started 2.500 s apart"));
        let steps = [
            part("a", 10_000, 5_000, 4, None),
            part("b", 10_000, 1_000, 4, None),
        ];
        assert!(refusal(&steps).contains("report every 5 s and 1 s"));
        let cut = [
            part("a", 10_000, 5_000, 4, None),
            part("b", 10_000, 5_000, 3, None),
        ];
        assert!(refusal(&cut).contains("a/run.csv has 4 rows and b/run.csv has 3"));
    }

    #[test]
    fn a_late_interval_is_merged_with_its_own_not_the_next() {
        // Shard b's second tick fired 0.6 of an interval late: its second
        // interval ran from 1 to 2.6 steps, its third from 2.6 to 3.
        let a = part("a", 10_000, 1_000, 4, None);
        let mut b = part("b", 10_000, 1_000, 4, None);
        let ms = Duration::from_millis;
        for (k, (start, length)) in [(0, 1_000), (1_000, 1_600), (2_600, 400), (3_000, 1_000)]
            .into_iter()
            .enumerate()
        {
            b.log.intervals[k].start = ms(start);
            b.log.intervals[k].length = ms(length);
            b.rows[k].elapsed_s = (ms(start) + ms(length)).as_secs_f64();
        }
        let parts = [a, b];
        let (base, intervals) = line_up(&parts).unwrap();
        assert_eq!(base, ms(10_000));
        let rows: Vec<usize> = intervals.iter().map(|i| i.rows.len()).collect();
        assert_eq!(rows, [2, 2, 2, 2], "each interval a row of each shard");
        let lengths: Vec<Duration> = intervals.iter().map(|i| i.length).collect();
        assert_eq!(lengths, [ms(1_000), ms(1_600), ms(1_000), ms(1_000)]);
    }

    #[test]
    fn named_shards_must_be_one_run_each_once_and_all() {
        let run = |index, seed| LogRun {
            shard: Shard { index, count: 3 },
            seed,
            clients: 900,
            policy: "fixed".to_string(),
            report_interval_ms: 5_000,
            start_at_ms: Some(10_000),
            open: None,
        };
        let shards = |runs: [LogRun; 3]| runs.map(|r| part("s", 10_000, 5_000, 4, Some(r)));
        let all = shards([run(2, 4), run(0, 4), run(1, 4)]);
        assert_eq!(whole("run", &all).unwrap(), Some(run(2, 4)));
        assert!(refusal(&shards([run(0, 4), run(1, 5), run(2, 4)])).contains("seed differs"));
        assert!(refusal(&shards([run(0, 4), run(1, 4), run(1, 4)])).contains("1/3 is given twice"));
        assert!(refusal(&all[..2]).contains("missing 1/3"));
        let open = |index| LogRun {
            open: Some("100 arrivals/s, sessions of 1 requests".to_string()),
            ..run(index, 4)
        };
        let err = refusal(&shards([open(0), run(1, 4), open(2)]));
        assert!(err.contains("open traffic differs"), "{err}");
        assert!(err.contains("100 arrivals/s"), "{err}");
        let mixed = [
            part("a", 10_000, 5_000, 4, None),
            part("b", 10_000, 5_000, 4, Some(run(0, 4))),
        ];
        assert!(refusal(&mixed).contains("a/run.hlog names no run and b/run.hlog does"));
    }
}
