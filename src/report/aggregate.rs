//! A case's figures over its runs: how often it recovered, with the 95 %
//! Wilson interval; its recovery time as quantiles over the runs, those
//! that never recovered counting as the slowest; every other figure as
//! median and range.

use serde::Serialize;

use super::chain::ChainSpread;
use super::estimate::{Percentiles3, Proportion, Spread};
use super::verdict::Figures;

/// A case's figures over its runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseFigures {
    /// The case's name.
    pub name: String,
    /// Runs made.
    pub runs: u32,
    /// Runs that recovered within the observation window.
    pub recovered_runs: u32,
    /// `recovered_runs / runs`.
    pub p_recovered: f64,
    /// Its 95 % Wilson interval, `[low, high]`.
    pub p_recovered_ci: [f64; 2],
    /// Recovery time over the runs, seconds from resume; a quantile that
    /// reaches a run that never recovered is none.
    pub recovery_s: Percentiles3,
    /// Runs that never recovered within the window.
    pub never: u32,
    /// When the runs were back at 90 % of their baseline, within the
    /// window or after it (see [`Figures::back_s`]).
    pub back_s: Percentiles3,
    /// Baseline OK/s.
    pub baseline_ok_per_s: Option<Spread>,
    /// Peak concurrency.
    pub peak_concurrency: Option<Spread>,
    /// Wasted work, requests.
    pub wasted: Option<Spread>,
    /// Wasted work, seconds of the server's time.
    pub wasted_s: Option<Spread>,
    /// Attempts sent per logical request, from the stop on.
    pub amplification: Option<Spread>,
    /// p99 latency before the stop, ms.
    pub p99_before_ms: Option<Spread>,
    /// p99 latency after recovery (or resume), ms.
    pub p99_after_ms: Option<Spread>,
    /// Time to calm, seconds (never counting as the slowest).
    pub calm_s: Percentiles3,
    /// Time to half the baseline, seconds (never counting as the slowest).
    pub to_50pct_s: Percentiles3,
    /// Time to 80 % of the baseline, seconds (never counting as the
    /// slowest).
    pub to_80pct_s: Percentiles3,
    /// Best OK/s after the resume.
    pub best_ok_per_s: Option<Spread>,
    /// Concurrency at the end.
    pub end_concurrency: Option<Spread>,
    /// A chain's figures per layer, from the client inward (the backend
    /// last); absent for a client against a server.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainSpread>,
}

impl CaseFigures {
    /// The figures of case `name` over `runs`.
    pub fn of(name: &str, runs: &[&Figures]) -> CaseFigures {
        let n = runs.len() as u32;
        let recovered = runs.iter().filter(|f| f.recovered).count() as u32;
        let p = Proportion::of(recovered, n);
        let times = |f: fn(&Figures) -> Option<f64>| {
            Percentiles3::of(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        let spread = |f: fn(&Figures) -> Option<f64>| Spread::of(runs.iter().map(|r| f(r)));
        CaseFigures {
            name: name.to_string(),
            runs: n,
            recovered_runs: recovered,
            p_recovered: p.p,
            p_recovered_ci: [p.low, p.high],
            recovery_s: times(|f| f.recovery_s),
            never: n - recovered,
            back_s: times(|f| f.back_s),
            baseline_ok_per_s: spread(|f| Some(f.baseline_ok_per_s)),
            peak_concurrency: spread(|f| f.peak_concurrency.map(|c| c as f64)),
            wasted: spread(|f| f.wasted.map(|w| w as f64)),
            wasted_s: spread(|f| f.wasted_s),
            amplification: spread(|f| f.amplification),
            p99_before_ms: spread(|f| f.p99_before_ms),
            p99_after_ms: spread(|f| f.p99_after_ms),
            calm_s: times(|f| f.calm_s),
            to_50pct_s: times(|f| f.to_50pct_s),
            to_80pct_s: times(|f| f.to_80pct_s),
            best_ok_per_s: spread(|f| f.best_ok_per_s),
            end_concurrency: spread(|f| f.end_concurrency.map(|c| c as f64)),
            chain: None,
        }
    }

    /// These figures with a chain's over the same runs.
    pub fn with_chain(self, chain: Option<ChainSpread>) -> CaseFigures {
        CaseFigures { chain, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's figures: recovered after `recovery` seconds or never, with
    /// this peak.
    fn run(recovery: Option<f64>, peak: u64) -> Figures {
        Figures {
            baseline_ok_per_s: 100.0,
            recovered: recovery.is_some(),
            recovery_s: recovery,
            back_s: recovery.or(Some(70.0)),
            peak_concurrency: Some(peak),
            wasted: Some(10),
            wasted_s: Some(1.5),
            amplification: Some(1.2),
            p50_before_ms: None,
            p99_before_ms: Some(101.0),
            p50_after_ms: None,
            p99_after_ms: None,
            to_50pct_s: recovery,
            to_80pct_s: recovery,
            best_ok_per_s: Some(99.0),
            calm_s: Some(3.0),
            end_concurrency: Some(peak / 2),
            peak_outstanding: None,
            refused_at_source: None,
            peak_connections: None,
        }
    }

    #[test]
    fn six_of_ten_recovered() {
        // Recovered after 40, 45, 50, 55, 60 and 65 s; four never.
        let mut runs: Vec<Figures> = [40.0, 45.0, 50.0, 55.0, 60.0, 65.0]
            .into_iter()
            .map(|t| run(Some(t), 1000))
            .collect();
        runs.extend((0..4).map(|i| run(None, 2000 + i)));
        let refs: Vec<&Figures> = runs.iter().collect();
        let c = CaseFigures::of("exponential-2014", &refs);
        assert_eq!((c.runs, c.recovered_runs, c.never), (10, 6, 4));
        assert_eq!(c.p_recovered, 0.6);
        // Wilson, 6 of 10: 0.3127 to 0.8318.
        let [low, high] = c.p_recovered_ci;
        assert_eq!(
            ((low * 1e4).round(), (high * 1e4).round()),
            (3127.0, 8318.0)
        );
        // Linear between order statistics, never the slowest: p10 at 44.5,
        // the median between 60 and 65, p90 in the runs that never came.
        assert_eq!(c.recovery_s.p10, Some(44.5));
        assert_eq!(c.recovery_s.p50, Some(62.5));
        assert_eq!(c.recovery_s.p90, None);
        // Back at 70 s after the window in the other four: every quantile.
        assert_eq!(c.back_s.p90, Some(70.0));
        let peak = c.peak_concurrency.unwrap();
        assert_eq!((peak.median, peak.min, peak.max), (1000.0, 1000.0, 2003.0));
        assert_eq!(c.p99_after_ms, None, "no run has one");
        assert_eq!(c.amplification.unwrap().median, 1.2);
    }

    #[test]
    fn one_run_is_its_own_aggregate() {
        let f = run(Some(5.0), 931);
        let c = CaseFigures::of("fixed+breaker", &[&f]);
        assert_eq!((c.runs, c.recovered_runs, c.p_recovered), (1, 1, 1.0));
        assert_eq!(c.recovery_s.p50, Some(5.0));
        assert_eq!(c.peak_concurrency.unwrap().median, 931.0);
    }
}
