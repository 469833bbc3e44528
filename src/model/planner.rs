//! The planner: a strategy's retry schedule, computed without any network,
//! so a user can see what a policy will do before running it.
//!
//! The elapsed time after retry n is the sum of the sleeps before retries
//! 1..=n (the attempts' own durations are not included). For the geometric
//! schedule `a * r^(n-1)` that is `a (r^n - 1) / (r - 1)`, and the ratio of
//! the next sleep to it tends to `r - 1`.

use std::fmt::Write;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use super::arrivals::ThinkTime;
use super::burst::BurstRequest;
use crate::policy::{Backoff, Strategy};

/// What to plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// A burst of failures to put the throttle through, if asked for.
    pub burst: Option<BurstRequest>,
    /// The strategy.
    pub strategy: Strategy,
    /// Think times (the 2014 strategy starts from the think time).
    pub think: ThinkTime,
    /// Number of retries to show.
    pub retries: u32,
    /// Draws for random strategies.
    pub samples: u32,
    /// Seed of the draws.
    pub seed: u64,
}

/// One row of a deterministic schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExactRow {
    /// Retry number, 1 for the first retry.
    pub retry: u32,
    /// Sleep before this retry.
    pub sleep: Duration,
    /// Sum of the sleeps up to and including this one.
    pub elapsed: Duration,
    /// Next sleep divided by `elapsed` (geometric schedules only).
    pub next_over_elapsed: Option<f64>,
    /// The sleep is held at the strategy's cap (the closed forms of the
    /// geometric schedule no longer apply).
    pub capped: bool,
}

/// Smallest, median and largest of a set of draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Smallest draw.
    pub min: Duration,
    /// Median draw.
    pub median: Duration,
    /// Largest draw.
    pub max: Duration,
}

impl Spread {
    fn of(values: &mut [Duration]) -> Spread {
        values.sort_unstable();
        Spread {
            min: values[0],
            median: values[values.len() / 2],
            max: values[values.len() - 1],
        }
    }
}

/// One row of a random schedule, over many draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampledRow {
    /// Retry number, 1 for the first retry.
    pub retry: u32,
    /// Sleep before this retry.
    pub sleep: Spread,
    /// Sum of the sleeps up to and including this one.
    pub elapsed: Spread,
}

/// A computed schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// A deterministic strategy: one schedule, exactly.
    Exact {
        /// Strategy name.
        strategy: &'static str,
        /// The rows.
        rows: Vec<ExactRow>,
    },
    /// A random strategy: spreads over many seeded draws.
    Sampled {
        /// Strategy name.
        strategy: &'static str,
        /// Number of draws.
        samples: u32,
        /// The rows.
        rows: Vec<SampledRow>,
    },
}

/// True for the geometric schedule (exponential without jitter).
fn is_geometric(strategy: &Strategy) -> bool {
    matches!(strategy, Strategy::Exponential { jitter, .. } if *jitter == 0.0)
}

/// Computes the schedule.
pub fn plan(req: &PlanRequest) -> Plan {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(req.seed);
    let n = req.retries as usize;
    if req.strategy.is_deterministic() {
        let mut backoff = Backoff::new(Duration::ZERO);
        // One sleep more than shown, for the last row's ratio.
        let sleeps: Vec<Duration> = (0..=n)
            .map(|_| backoff.next_delay(&req.strategy, &mut rng))
            .collect();
        let geometric = is_geometric(&req.strategy);
        let cap = match req.strategy {
            Strategy::Exponential { max, .. } => Some(max),
            _ => None,
        };
        let mut elapsed = Duration::ZERO;
        let rows = (0..n)
            .map(|i| {
                elapsed += sleeps[i];
                ExactRow {
                    retry: i as u32 + 1,
                    sleep: sleeps[i],
                    elapsed,
                    next_over_elapsed: geometric
                        .then(|| sleeps[i + 1].as_secs_f64() / elapsed.as_secs_f64()),
                    capped: cap.is_some_and(|max| sleeps[i] >= max),
                }
            })
            .collect();
        return Plan::Exact {
            strategy: req.strategy.name(),
            rows,
        };
    }
    let samples = req.samples.max(1) as usize;
    let mut sleeps = vec![Vec::with_capacity(samples); n];
    let mut elapsed = vec![Vec::with_capacity(samples); n];
    for _ in 0..samples {
        let mut backoff = Backoff::new(req.think.sample(&mut rng));
        let mut total = Duration::ZERO;
        for i in 0..n {
            let sleep = backoff.next_delay(&req.strategy, &mut rng);
            total = total.saturating_add(sleep);
            sleeps[i].push(sleep);
            elapsed[i].push(total);
        }
    }
    let rows = (0..n)
        .map(|i| SampledRow {
            retry: i as u32 + 1,
            sleep: Spread::of(&mut sleeps[i]),
            elapsed: Spread::of(&mut elapsed[i]),
        })
        .collect();
    Plan::Sampled {
        strategy: req.strategy.name(),
        samples: samples as u32,
        rows,
    }
}

fn s3(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

impl Plan {
    /// An aligned table for the terminal.
    pub fn table(&self) -> String {
        let mut out = String::new();
        match self {
            Plan::Exact { strategy, rows } => {
                let geometric = rows.first().is_some_and(|r| r.next_over_elapsed.is_some());
                let _ = writeln!(out, "strategy {strategy}: deterministic");
                let _ = write!(out, "{:>6} {:>14} {:>14}", "retry", "sleep_s", "elapsed_s");
                if geometric {
                    let _ = write!(out, " {:>14}", "next/elapsed");
                }
                out.push('\n');
                for r in rows {
                    let _ = write!(
                        out,
                        "{:>6} {:>14} {:>14}",
                        r.retry,
                        s3(r.sleep),
                        s3(r.elapsed)
                    );
                    if let Some(ratio) = r.next_over_elapsed {
                        let _ = write!(out, " {ratio:>14.3}");
                    }
                    if r.capped {
                        out.push_str("  (capped)");
                    }
                    out.push('\n');
                }
                if rows.iter().any(|r| r.capped) {
                    out.push_str(
                        "(capped): held at --max-delay; raise it to see the pure schedule\n",
                    );
                }
            }
            Plan::Sampled {
                strategy,
                samples,
                rows,
            } => {
                let _ = writeln!(
                    out,
                    "strategy {strategy}: random; min / median / max over {samples} seeded draws"
                );
                let _ = writeln!(
                    out,
                    "{:>6} {:>32} {:>32}",
                    "retry", "sleep_s min/median/max", "elapsed_s min/median/max"
                );
                let spread =
                    |s: &Spread| format!("{} / {} / {}", s3(s.min), s3(s.median), s3(s.max));
                for r in rows {
                    let _ = writeln!(
                        out,
                        "{:>6} {:>32} {:>32}",
                        r.retry,
                        spread(&r.sleep),
                        spread(&r.elapsed)
                    );
                }
            }
        }
        out
    }

    /// CSV, times in seconds with three decimals: `retry,sleep_s,elapsed_s`
    /// for a deterministic schedule, min/median/max columns for a random one.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        match self {
            Plan::Exact { rows, .. } => {
                out.push_str("retry,sleep_s,elapsed_s\n");
                for r in rows {
                    let _ = writeln!(out, "{},{},{}", r.retry, s3(r.sleep), s3(r.elapsed));
                }
            }
            Plan::Sampled { rows, .. } => {
                out.push_str(
                    "retry,sleep_min_s,sleep_median_s,sleep_max_s,elapsed_min_s,elapsed_median_s,elapsed_max_s\n",
                );
                for r in rows {
                    let (s, e) = (&r.sleep, &r.elapsed);
                    let _ = writeln!(
                        out,
                        "{},{},{},{},{},{},{}",
                        r.retry,
                        s3(s.min),
                        s3(s.median),
                        s3(s.max),
                        s3(e.min),
                        s3(e.median),
                        s3(e.max)
                    );
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometric(r: f64) -> PlanRequest {
        PlanRequest {
            burst: None,
            strategy: Strategy::Exponential {
                min: Duration::from_secs(1),
                max: Duration::from_secs(1 << 40),
                factor: r,
                jitter: 0.0,
            },
            think: ThinkTime::new(Duration::from_secs(10)),
            retries: 30,
            samples: 100,
            seed: 1,
        }
    }

    /// The CSV rows as (retry, sleep, elapsed) strings.
    fn csv_rows(plan: &Plan) -> Vec<Vec<String>> {
        plan.csv()
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect()
    }

    fn check_closed_forms(r: f64) {
        let plan = plan(&geometric(r));
        let rows = csv_rows(&plan);
        assert_eq!(rows.len(), 30);
        for (i, row) in rows.iter().enumerate() {
            let n = i as i32 + 1;
            let sleep = r.powi(n - 1);
            let elapsed = (r.powi(n) - 1.0) / (r - 1.0);
            assert_eq!(row[0], n.to_string());
            assert_eq!(row[1], format!("{sleep:.3}"), "sleep of retry {n}, r = {r}");
            assert_eq!(
                row[2],
                format!("{elapsed:.3}"),
                "elapsed after retry {n}, r = {r}"
            );
        }
        let Plan::Exact { rows, .. } = plan else {
            panic!("a geometric schedule is deterministic");
        };
        for row in &rows {
            let n = row.retry as i32;
            // next / elapsed = r^n (r - 1) / (r^n - 1).
            let expected = r.powi(n) * (r - 1.0) / (r.powi(n) - 1.0);
            assert!((row.next_over_elapsed.unwrap() - expected).abs() < 1e-6);
        }
        let last = rows.last().unwrap().next_over_elapsed.unwrap();
        assert!(
            (last - (r - 1.0)).abs() < 0.05 * r,
            "tends to r - 1: {last}"
        );
    }

    #[test]
    fn geometric_doubling_matches_the_closed_form() {
        check_closed_forms(2.0);
        let rows = csv_rows(&plan(&geometric(2.0)));
        assert_eq!(rows[0], ["1", "1.000", "1.000"]);
        assert_eq!(rows[3], ["4", "8.000", "15.000"]);
        assert_eq!(rows[9], ["10", "512.000", "1023.000"]);
    }

    #[test]
    fn geometric_ten_percent_matches_the_closed_form() {
        check_closed_forms(1.1);
        let rows = csv_rows(&plan(&geometric(1.1)));
        assert_eq!(rows[1], ["2", "1.100", "2.100"]);
        assert_eq!(rows[2], ["3", "1.210", "3.310"]);
        assert_eq!(rows[9], ["10", "2.358", "15.937"]);
    }

    #[test]
    fn capped_rows_are_marked() {
        let req = PlanRequest {
            burst: None,
            strategy: Strategy::Exponential {
                min: Duration::from_secs(1),
                max: Duration::from_secs(300),
                factor: 2.0,
                jitter: 0.0,
            },
            retries: 10,
            ..geometric(2.0)
        };
        let table = plan(&req).table();
        let capped: Vec<&str> = table.lines().filter(|l| l.ends_with("(capped)")).collect();
        // 2^9 = 512 > 300: retries 10 only (2^8 = 256 is below the cap).
        assert_eq!(capped.len(), 1, "{table}");
        assert!(capped[0].trim_start().starts_with("10 "), "{table}");
        assert!(table.contains("raise it"));
    }

    #[test]
    fn fixed_is_exact_without_a_ratio_column() {
        let req = PlanRequest {
            burst: None,
            strategy: Strategy::Fixed {
                delay: Duration::from_millis(100),
            },
            retries: 3,
            ..geometric(2.0)
        };
        let p = plan(&req);
        assert_eq!(
            p.csv(),
            "retry,sleep_s,elapsed_s\n1,0.100,0.100\n2,0.100,0.200\n3,0.100,0.300\n"
        );
        assert!(!p.table().contains("next/elapsed"));
        assert!(plan(&geometric(2.0)).table().contains("next/elapsed"));
    }

    #[test]
    fn random_strategies_show_spreads_within_their_bounds() {
        let req = PlanRequest {
            burst: None,
            strategy: Strategy::FullJitter {
                base: Duration::from_millis(100),
                cap: Duration::from_secs(300),
                factor: 2.0,
            },
            retries: 4,
            samples: 5_000,
            ..geometric(2.0)
        };
        let Plan::Sampled { rows, samples, .. } = plan(&req) else {
            panic!("full jitter is random");
        };
        assert_eq!(samples, 5_000);
        for row in &rows {
            let bound = Duration::from_secs_f64(0.1 * 2f64.powi(row.retry as i32));
            assert!(row.sleep.min <= row.sleep.median && row.sleep.median <= row.sleep.max);
            assert!(row.sleep.max < bound);
            // The median of U(0, v) is v/2.
            let median = row.sleep.median.as_secs_f64() / bound.as_secs_f64();
            assert!((median - 0.5).abs() < 0.03, "{median}");
            assert!(row.elapsed.min >= row.sleep.min);
        }
    }

    #[test]
    fn the_2014_schedule_starts_from_the_think_time() {
        let req = PlanRequest {
            burst: None,
            strategy: Strategy::exponential_2014(),
            retries: 1,
            samples: 20_000,
            ..geometric(2.0)
        };
        let Plan::Sampled { rows, .. } = plan(&req) else {
            panic!("exponential-2014 is random");
        };
        // e * Exp(10 s): median e * 10 * ln 2 = 18.84 s.
        let median = rows[0].sleep.median.as_secs_f64();
        assert!((median - 18.84).abs() < 0.6, "{median}");
    }

    #[test]
    fn same_seed_same_plan() {
        let req = PlanRequest {
            burst: None,
            strategy: Strategy::DecorrelatedJitter {
                base: Duration::from_millis(100),
                cap: Duration::from_secs(10),
                factor: 3.0,
            },
            retries: 5,
            samples: 200,
            ..geometric(2.0)
        };
        assert_eq!(plan(&req), plan(&req));
        assert_ne!(
            plan(&req),
            plan(&PlanRequest {
                burst: None,
                seed: 2,
                ..req.clone()
            })
        );
    }
}
