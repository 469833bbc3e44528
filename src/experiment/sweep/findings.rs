//! What a sweep found: every pause tried, and each setting's edge.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One pause of one setting, judged over the seeds: a row of `phase.csv`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    /// The case's name (a CSV cell safe from spreadsheets).
    #[serde(with = "crate::report::output::csv_text")]
    pub case: String,
    /// Number of clients (empty: open traffic).
    pub clients: Option<u32>,
    /// Sessions arriving a second (empty: a closed population; absent
    /// from files written before the sweep had open traffic).
    #[serde(default)]
    pub arrival_rate: Option<f64>,
    /// Mean think time, seconds (empty: the case's own).
    pub lambda_s: Option<f64>,
    /// Client timeout, seconds.
    pub timeout_s: f64,
    /// Server limit.
    pub server_limit: u64,
    /// Pause, seconds.
    pub pause_s: f64,
    /// Runs made (one per seed).
    pub runs: u32,
    /// Runs that recovered.
    pub recovered_runs: u32,
    /// `recovered_runs / runs`.
    pub p_recovered: f64,
    /// Its 95 % Wilson interval, low end.
    pub p_low: f64,
    /// Its 95 % Wilson interval, high end.
    pub p_high: f64,
    /// Median recovery time over the runs (a run that never recovers
    /// counting as the slowest), seconds; empty when most never recover.
    pub recovery_s: Option<f64>,
}

impl Point {
    /// Whether most runs recovered.
    pub fn recovered(&self) -> bool {
        self.recovery_s.is_some()
    }
}

/// A setting's edge: a row of `critical.csv`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Critical {
    /// The case's name (a CSV cell safe from spreadsheets).
    #[serde(with = "crate::report::output::csv_text")]
    pub case: String,
    /// Number of clients (empty: open traffic).
    pub clients: Option<u32>,
    /// Sessions arriving a second (empty: a closed population; absent
    /// from files written before the sweep had open traffic).
    #[serde(default)]
    pub arrival_rate: Option<f64>,
    /// Mean think time, seconds (empty: the case's own).
    pub lambda_s: Option<f64>,
    /// Client timeout, seconds.
    pub timeout_s: f64,
    /// Server limit.
    pub server_limit: u64,
    /// Seeds per pause.
    pub seeds: u32,
    /// The longest pause after which most runs still recover, by
    /// bisection, seconds (to the sweep's resolution).
    pub critical_pause_s: f64,
    /// The longest pause tried still recovers: the critical pause is at
    /// least this.
    pub at_least: bool,
    /// Even without a pause the system does not hold its load.
    pub overloaded: bool,
    /// Median recovery time at the critical pause, seconds.
    pub recovery_s: Option<f64>,
    /// Where half the runs recover, seconds (empty when the edge is not
    /// within the pauses tried).
    pub t50_s: Option<f64>,
    /// T50's 95 % interval, low end (empty: not bounded by the pauses
    /// tried).
    pub t50_ci_low_s: Option<f64>,
    /// T50's 95 % interval, high end.
    pub t50_ci_high_s: Option<f64>,
    /// Where only 10 % of the runs recover: the end of the edge.
    pub t10_s: Option<f64>,
    /// Where 90 % of the runs still recover: the start of the edge.
    pub t90_s: Option<f64>,
    /// Where T50 lies when it is not within the pauses tried: `longer`
    /// (half or more recover from every pause tried) or `shorter` (fewer
    /// than half recover even without a pause); empty when within.
    pub t50_outside: Option<Outside>,
}

/// Which side of the pauses tried an edge lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outside {
    /// Longer than every pause tried.
    Longer,
    /// Shorter than every pause tried.
    Shorter,
}

/// What a sweep found.
#[derive(Debug, Clone, Default)]
pub struct SweepReport {
    /// One per setting, in order (none at one pause: no edge there).
    pub critical: Vec<Critical>,
    /// Every pause tried, by setting then pause.
    pub points: Vec<Point>,
    /// Which rows each setting run gave, in the order of the rows.
    pub lines: Vec<LineRows>,
    /// Virtual-time runs made.
    pub runs: u64,
    /// Events they processed.
    pub events: u64,
    /// Real time the sweep took.
    pub wall: Duration,
    /// Stopped part way against a target: the settings not searched are
    /// missing, and the last one's edge is what its runs before the stop
    /// say.
    pub stopped: bool,
}

/// The rows one setting gave: how many of `critical` (0 or 1) and of
/// `points` are its, so that shards' rows can be put back in the order
/// of one process's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRows {
    /// The setting's place among the sweep's settings.
    pub setting: usize,
    /// Its rows of `critical.csv`.
    pub critical: usize,
    /// Its rows of `phase.csv`.
    pub points: usize,
}

impl fmt::Display for Critical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", Key::from(self))?;
        match (self.t50_s, self.t50_outside) {
            (Some(t), _) => write!(
                f,
                "T50 {t:.1} s ({}-{})",
                self.t50_ci_low_s.map_or("0".into(), |t| format!("{t:.1}")),
                self.t50_ci_high_s
                    .map_or("more".into(), |t| format!("{t:.1}"))
            ),
            (None, Some(Outside::Shorter)) => {
                write!(f, "fewer than half recover even without a pause")
            }
            (None, _) => write!(f, "half or more recover from every pause tried"),
        }
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, pause {} s: {} of {} recovered ({:.2}-{:.2})",
            Key::from(self),
            self.pause_s,
            self.recovered_runs,
            self.runs,
            self.p_low,
            self.p_high
        )
    }
}

/// What a row of `critical.csv` and one of `phase.csv` share: the case
/// and its setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Key<'a> {
    /// The case's name.
    pub case: &'a str,
    /// Number of clients (none: open traffic).
    pub clients: Option<u32>,
    /// Sessions arriving a second (none: a closed population).
    pub arrival_rate: Option<f64>,
    /// Mean think time, seconds (none: the case's own).
    pub lambda_s: Option<f64>,
    /// Client timeout, seconds.
    pub timeout_s: f64,
    /// Server limit.
    pub limit: u64,
}

impl<'a> From<&'a Critical> for Key<'a> {
    fn from(c: &'a Critical) -> Key<'a> {
        Key {
            case: &c.case,
            clients: c.clients,
            arrival_rate: c.arrival_rate,
            lambda_s: c.lambda_s,
            timeout_s: c.timeout_s,
            limit: c.server_limit,
        }
    }
}

impl<'a> From<&'a Point> for Key<'a> {
    fn from(p: &'a Point) -> Key<'a> {
        Key {
            case: &p.case,
            clients: p.clients,
            arrival_rate: p.arrival_rate,
            lambda_s: p.lambda_s,
            timeout_s: p.timeout_s,
            limit: p.server_limit,
        }
    }
}

/// The server limit of a setting against a target: none of the project's
/// servers runs, and a row says no limit.
pub const NO_LIMIT: u64 = 0;

/// The setting in words: its case, its load (clients, or arrivals a
/// second), think time (where the sweep sets it), timeout and server
/// limit (none against a target).
impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.case)?;
        if let Some(clients) = self.clients {
            write!(f, ", {clients} clients")?;
        }
        if let Some(rate) = self.arrival_rate {
            write!(f, ", {rate} arrivals/s")?;
        }
        if let Some(think) = self.lambda_s {
            write!(f, ", think {think} s")?;
        }
        write!(f, ", timeout {} s", self.timeout_s)?;
        if self.limit != NO_LIMIT {
            write!(f, ", limit {}", self.limit)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows<T: serde::de::DeserializeOwned>(csv: &str) -> Vec<T> {
        csv::Reader::from_reader(csv.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn rows_written_before_open_traffic_read_as_closed() {
        let points: Vec<Point> = rows(
            "case,clients,lambda_s,timeout_s,server_limit,pause_s,runs,recovered_runs,\
             p_recovered,p_low,p_high,recovery_s\n\
             fixed,250,,2.0,30,2.0,20,20,1.0,0.83,1.0,1.5\n",
        );
        assert_eq!(
            (points[0].clients, points[0].arrival_rate),
            (Some(250), None)
        );
        let critical: Vec<Critical> = rows(
            "case,clients,lambda_s,timeout_s,server_limit,seeds,critical_pause_s,at_least,\
             overloaded,recovery_s,t50_s,t50_ci_low_s,t50_ci_high_s,t10_s,t90_s,t50_outside\n\
             fixed,250,,2.0,30,10,13.0,false,false,9.5,13.38,11.0,14.0,13.88,11.8,\n",
        );
        assert_eq!(critical[0].arrival_rate, None);
        assert_eq!(
            critical[0].to_string(),
            "fixed, 250 clients, timeout 2 s, limit 30: T50 13.4 s (11.0-14.0)"
        );
    }

    #[test]
    fn an_open_setting_is_named_by_its_rate_right_after_the_clients_column() {
        let mut w = csv::Writer::from_writer(Vec::new());
        let point: Point = rows::<Point>(
            "case,clients,arrival_rate,lambda_s,timeout_s,server_limit,pause_s,runs,\
             recovered_runs,p_recovered,p_low,p_high,recovery_s\n\
             open,,100.0,,2.0,30,5.0,4,1,0.25,0.05,0.7,\n",
        )
        .remove(0);
        assert_eq!((point.clients, point.arrival_rate), (None, Some(100.0)));
        assert_eq!(
            point.to_string(),
            "open, 100 arrivals/s, timeout 2 s, limit 30, pause 5 s: 1 of 4 recovered (0.05-0.70)"
        );
        w.serialize(&point).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert!(
            text.starts_with("case,clients,arrival_rate,lambda_s,")
                && text.contains("\nopen,,100.0,,2.0,"),
            "{text}"
        );
    }
}
