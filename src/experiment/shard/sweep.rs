//! Sweep shards put back together: every shard's `critical.csv` and
//! `phase.csv` rows, setting by setting, in the order one process writes
//! them, so that the merged files are the same, byte for byte.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::super::error::StormError;
use super::super::sweep::{Critical, LineRows, Point, SweepReport};
use super::manifest::Manifest;

fn read_rows<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, StormError> {
    crate::report::output::read_rows(path).map_err(|e| StormError::Io("read".to_string(), e))
}

/// One setting's rows.
type Line = (Option<Critical>, Vec<Point>);

/// The whole sweep from its shards' folders and manifests (as
/// [`super::manifest::whole`] checked them): their rows in the order
/// of the settings; the runs and events summed, the time the longest
/// shard's.
pub fn merge_sweep(parts: &[(PathBuf, Manifest)]) -> Result<SweepReport, StormError> {
    let settings = parts.first().map_or(0, |(_, m)| m.settings);
    let mut lines: Vec<Option<Line>> = vec![None; settings];
    for (dir, manifest) in parts {
        let critical_csv = dir.join("critical.csv");
        let mut critical = if manifest.lines.iter().any(|l| l.critical > 0) {
            read_rows::<Critical>(&critical_csv)?.into_iter()
        } else {
            Vec::new().into_iter()
        };
        let mut points = read_rows::<Point>(&dir.join("phase.csv"))?.into_iter();
        for line in &manifest.lines {
            let slot = lines.get_mut(line.setting).ok_or_else(|| {
                StormError::Flags(format!(
                    "{}: setting {} of {settings}",
                    dir.display(),
                    line.setting
                ))
            })?;
            let mine: Vec<Critical> = critical.by_ref().take(line.critical).collect();
            let pts: Vec<Point> = points.by_ref().take(line.points).collect();
            if mine.len() != line.critical || pts.len() != line.points {
                return Err(StormError::Flags(format!(
                    "{}: fewer rows than its {} says",
                    dir.display(),
                    super::manifest::MANIFEST
                )));
            }
            *slot = Some((mine.into_iter().next(), pts));
        }
    }
    let mut report = SweepReport {
        critical: Vec::new(),
        points: Vec::new(),
        lines: Vec::new(),
        runs: 0,
        events: 0,
        wall: Duration::ZERO,
    };
    for (_, m) in parts {
        report.runs += m.runs;
        report.events += m.events;
        report.wall = report.wall.max(Duration::from_secs_f64(m.wall_s));
    }
    for (setting, line) in lines.into_iter().enumerate() {
        let (critical, points) = line.ok_or_else(|| {
            StormError::Flags(format!("setting {setting} is in no shard's results"))
        })?;
        report.lines.push(LineRows {
            setting,
            critical: usize::from(critical.is_some()),
            points: points.len(),
        });
        report.critical.extend(critical);
        report.points.extend(points);
    }
    Ok(report)
}
