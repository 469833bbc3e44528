//! A sweep at one pause: each setting a single point, and the map over the
//! settings instead of the pause (which loads, timeouts and limits survive
//! that outage).

use std::collections::HashMap;

use super::axis::{Axis, except, swept, title, varying};
use super::config::SweepConfig;
use super::findings::{Key, Point, SweepReport};
use super::summary::{RECOVERS, SETTING_HEAD, head, setting_cells};

use crate::plot::{Across, Axes, Panel, Row, panel_titled};

/// The map: a panel per case (and per value of any other setting that
/// varies), the first setting swept within a case across and the second
/// up the side; with fewer than two swept, one panel with a row per case
/// (and per value of any other setting that varies). Each row is marked
/// where its share first passes one half.
pub(super) fn panels(report: &SweepReport, pause_s: f64) -> (Vec<Panel>, Axes) {
    let keys: Vec<Key> = report.points.iter().map(Key::from).collect();
    let vary = swept(&keys);
    let across = vary.first().copied();
    let up = vary.get(1).copied();
    let named = except(&varying(&keys), &vary[..vary.len().min(2)]);
    let columns = match across {
        Some(axis) => values(&keys, axis),
        None => vec![format!("{pause_s} s")],
    };
    let index: HashMap<&str, usize> = (0..).zip(&columns).map(|(i, c)| (c.as_str(), i)).collect();
    let column = |k: &Key| across.map_or(0, |a| index[a.value(k).as_str()]);
    let mut points: Vec<&Point> = report.points.iter().collect();
    if let Some(up) = up {
        // Rows go up in the order of their values; cases keep theirs.
        points.sort_by(|a, b| up.number(&(*a).into()).total_cmp(&up.number(&(*b).into())));
    }
    let mut panels: Vec<Panel> = Vec::new();
    for p in points {
        let key = Key::from(p);
        let (panel_title, label) = match up {
            Some(up) => (title(&key, &named), up.value(&key)),
            None => (String::new(), title(&key, &named)),
        };
        let rows = &mut panel_titled(&mut panels, panel_title, up.is_some()).rows;
        let row = match rows.iter().position(|r| r.label == label) {
            Some(i) => &mut rows[i],
            None => {
                rows.push(Row::empty(label));
                rows.last_mut().expect("just pushed")
            }
        };
        row.cells.push((column(&key) as f64, p.p_recovered));
    }
    for row in panels.iter_mut().flat_map(|p| p.rows.iter_mut()) {
        row.cells.sort_by(|a, b| a.0.total_cmp(&b.0));
        row.t50 = half_way(&row.cells);
    }
    let axes = Axes {
        across: Across::Settings {
            name: across.map_or("pause".into(), |a| a.name().to_string()),
            labels: columns,
        },
        rows: up.map_or("case".into(), |a| a.name().to_string()),
    };
    (panels, axes)
}

/// The values `axis` takes among `keys`, in order, once each.
fn values(keys: &[Key], axis: Axis) -> Vec<String> {
    let mut sorted: Vec<&Key> = keys.iter().collect();
    sorted.sort_by(|a, b| axis.number(a).total_cmp(&axis.number(b)));
    let mut out: Vec<String> = Vec::new();
    for k in sorted {
        let v = axis.value(k);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Where a row's share first passes one half, either way, linear between
/// neighbouring columns; none if it never does.
fn half_way(cells: &[(f64, f64)]) -> Option<f64> {
    cells.windows(2).find_map(|w| {
        let ((x0, p0), (x1, p1)) = (w[0], w[1]);
        ((p0 >= 0.5) != (p1 >= 0.5)).then(|| x0 + (x1 - x0) * (p0 - 0.5) / (p0 - p1))
    })
}

/// The summary of a sweep at one pause: every setting's share with its
/// interval.
pub(super) fn summary(
    config: &SweepConfig,
    report: &SweepReport,
    command: &str,
    pause_s: f64,
) -> String {
    let title = format!("Who recovers from a {pause_s} s pause");
    let pauses = format!("one pause of {pause_s} s");
    let runs = format!(
        "{} runs a setting, seeds {} on",
        config.seeds, config.storm.scenario.seed
    );
    let mut md = head(config, report, &title, command, (&pauses, &runs));
    md.push_str(&format!(
        "{SETTING_HEAD} recovered | P(recovered) | 95 % interval | median recovery (s) |\n\
         |{}\n",
        " --- |".repeat(10)
    ));
    for p in &report.points {
        md.push_str(&format!(
            "{} {} of {} | {:.2} | {:.2}-{:.2} | {} |\n",
            setting_cells(&p.into()),
            p.recovered_runs,
            p.runs,
            p.p_recovered,
            p.p_low,
            p.p_high,
            p.recovery_s.map_or("-".into(), |t| format!("{t:.1}")),
        ));
    }
    md.push_str(&format!(
        "\n{RECOVERS} P(recovered): the share of runs that recovered, with its 95 % Wilson \
         interval. Median recovery: over the runs, one that never recovers counting as the \
         slowest (a dash when most never recover). phase.csv holds every setting; the map \
         colours each by the share that recovered, and marks where a row's share first \
         passes one half.\n"
    ));
    md
}

#[cfg(test)]
mod tests {

    use super::*;

    fn point(case: &str, clients: u32, timeout_s: f64, limit: u64, p: f64) -> Point {
        Point {
            case: case.into(),
            clients: Some(clients),
            arrival_rate: None,
            lambda_s: None,
            timeout_s,
            server_limit: limit,
            pause_s: 20.0,
            runs: 10,
            recovered_runs: (p * 10.0) as u32,
            p_recovered: p,
            p_low: 0.0,
            p_high: 1.0,
            recovery_s: None,
        }
    }

    fn report(points: Vec<Point>) -> SweepReport {
        SweepReport {
            points,
            ..SweepReport::default()
        }
    }

    #[test]
    fn the_first_setting_goes_across_the_second_up_a_third_makes_panels() {
        // Given out of order: 1,000 clients before 250, timeout 2 s before 1 s.
        let mut points = Vec::new();
        for limit in [30, 60] {
            for (clients, timeout, p) in [(1000, 2.0, 0.2), (250, 2.0, 1.0), (1000, 1.0, 0.0)] {
                points.push(point("fixed", clients, timeout, limit, p));
            }
            points.push(point("fixed", 250, 1.0, limit, 0.6));
        }
        let (maps, axes) = panels(&report(points), 20.0);
        assert_eq!(
            axes.across,
            Across::Settings {
                name: "clients".into(),
                labels: vec!["250".into(), "1000".into()],
            }
        );
        assert_eq!(axes.rows, "client timeout (s)");
        let titles: Vec<&str> = maps.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, ["fixed, limit 30", "fixed, limit 60"]);
        let rows = &maps[0].rows;
        assert!(maps[0].contours);
        // Timeouts go up from the bottom: 1 s first.
        assert_eq!((rows[0].label.as_str(), rows[1].label.as_str()), ("1", "2"));
        assert_eq!(rows[0].cells, vec![(0.0, 0.6), (1.0, 0.0)]);
        assert_eq!(rows[1].cells, vec![(0.0, 1.0), (1.0, 0.2)]);
        // 0.6 to 0.0 passes one half a sixth of the way.
        let t = rows[0].t50.unwrap();
        assert!((t - 1.0 / 6.0).abs() < 1e-12, "{t}");
    }

    #[test]
    fn with_one_setting_or_none_each_case_is_a_row() {
        let points = vec![
            point("fixed", 250, 2.0, 30, 1.0),
            point("fixed", 500, 2.0, 30, 0.0),
            point("shedding", 250, 2.0, 30, 1.0),
            point("shedding", 500, 2.0, 30, 1.0),
        ];
        let (maps, axes) = panels(&report(points), 20.0);
        assert_eq!(maps.len(), 1);
        assert!(!maps[0].contours);
        let labels: Vec<&str> = maps[0].rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["fixed", "shedding"]);
        assert_eq!(maps[0].rows[0].t50, Some(0.5));
        assert_eq!(maps[0].rows[1].t50, None, "never below one half");
        assert_eq!(axes.rows, "case");
        let (maps, axes) = panels(&report(vec![point("fixed", 250, 2.0, 30, 1.0)]), 20.0);
        assert_eq!(maps[0].rows[0].cells, vec![(0.0, 1.0)]);
        assert_eq!(
            axes.across,
            Across::Settings {
                name: "pause".into(),
                labels: vec!["20 s".into()],
            }
        );
    }

    #[test]
    fn a_case_at_its_own_rate_is_a_row_named_by_it_beside_closed_ones() {
        let open = |rate: f64, p: f64| Point {
            case: "open".into(),
            clients: None,
            arrival_rate: Some(rate),
            ..point("open", 0, 2.0, 30, p)
        };
        // Clients swept for the closed case; the open ones at their rates.
        let points = vec![
            point("closed", 250, 2.0, 30, 1.0),
            point("closed", 500, 2.0, 30, 0.0),
            open(25.0, 1.0),
            Point {
                case: "sessions".into(),
                ..open(5.0, 0.0)
            },
        ];
        let (maps, axes) = panels(&report(points.clone()), 20.0);
        assert_eq!(maps.len(), 1);
        let labels: Vec<&str> = maps[0].rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["closed", "open, 25 arrivals/s", "sessions, 5 arrivals/s"]
        );
        // Where clients do not apply, the column is a dash's.
        assert_eq!(
            axes.across,
            Across::Settings {
                name: "clients".into(),
                labels: vec!["-".into(), "250".into(), "500".into()],
            }
        );
        assert_eq!(maps[0].rows[1].cells, vec![(0.0, 1.0)]);
        let md = summary_rows(&points);
        assert!(
            md.contains("| closed | 250 | - | - | 2 | 30 | 10 of 10 |"),
            "{md}"
        );
        assert!(
            md.contains("| open | - | 25 | - | 2 | 30 | 10 of 10 |"),
            "{md}"
        );
    }

    /// The rows of the summary's table.
    fn summary_rows(points: &[Point]) -> String {
        points
            .iter()
            .map(|p| {
                format!(
                    "{} {} of {} |\n",
                    setting_cells(&p.into()),
                    p.recovered_runs,
                    p.runs
                )
            })
            .collect()
    }

    #[test]
    fn half_way_is_where_the_share_first_passes_one_half_either_way() {
        // 1.0 at column 0, 0.0 at column 1: half way between.
        assert_eq!(half_way(&[(0.0, 1.0), (1.0, 0.0)]), Some(0.5));
        // 0.9 to 0.4: (0.9 - 0.5) / (0.9 - 0.4) = 0.8 of the way.
        let x = half_way(&[(0.0, 1.0), (1.0, 0.9), (2.0, 0.4)]).unwrap();
        assert!((x - 1.8).abs() < 1e-12, "{x}");
        // Rising, as with a longer timeout: 0.2 to 0.7 passes at 0.6.
        let x = half_way(&[(0.0, 0.2), (1.0, 0.7)]).unwrap();
        assert!((x - 0.6).abs() < 1e-12, "{x}");
        // Only the first crossing.
        let x = half_way(&[(0.0, 1.0), (1.0, 0.0), (2.0, 1.0)]).unwrap();
        assert!((x - 0.5).abs() < 1e-12, "{x}");
        assert_eq!(
            half_way(&[(0.0, 1.0), (1.0, 0.5)]),
            None,
            "one half is not below"
        );
        assert_eq!(half_way(&[(0.0, 0.3)]), None);
    }
}
