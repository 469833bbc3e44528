//! What a run's fault proxy saw, from its report rows: the most it held
//! at once (connections, listen queue, requests in flight to the target,
//! requests held by the fault), what passed through it by status, what
//! the fault did, and latency through it before the outage and at its
//! worst. Against a target these are the figures besides the client's.

use serde::Serialize;

use super::proxy::ProxyRow;
use super::verdict::Timeline;

/// A run's figures from its fault proxy's rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProxyFigures {
    /// The most client connections open through it at a report.
    pub peak_connections: u64,
    /// The most connections waiting in its listen queue at a report.
    pub peak_queued: u64,
    /// The most requests in flight to the target at a report.
    pub peak_in_flight: u64,
    /// The most requests held by the fault at a report.
    pub peak_held: u64,
    /// Requests read from clients over the run.
    pub requests: u64,
    /// The target's answers passed back over the run, 2xx.
    pub answers_2xx: u64,
    /// The same, 4xx.
    pub answers_4xx: u64,
    /// The same, 5xx.
    pub answers_5xx: u64,
    /// The same, any other status.
    pub answers_other: u64,
    /// Requests the proxy answered itself, by the fault.
    pub injected: u64,
    /// Connections the proxy reset, by the fault.
    pub resets: u64,
    /// Requests the target did not answer (the proxy answered 502).
    pub upstream_errors: u64,
    /// Requests whose client had gone before their answer.
    pub gone: u64,
    /// Median of the warm-up intervals' median latency through the proxy,
    /// milliseconds: the target's answers before the outage.
    pub warmup_p50_ms: Option<f64>,
    /// The largest interval p99 through the proxy over the run,
    /// milliseconds.
    pub peak_p99_ms: Option<f64>,
}

impl ProxyFigures {
    /// The figures of `rows`, a run's rows in order, with `timeline` its
    /// phases; none if the run had no proxy.
    pub fn of(rows: &[ProxyRow], timeline: &Timeline) -> Option<ProxyFigures> {
        if rows.is_empty() {
            return None;
        }
        let mut f = ProxyFigures::default();
        let mut last_ms = rows[0]
            .unix_ms
            .saturating_sub((rows[0].elapsed_s * 1000.0) as u64);
        let mut sums = [0.0f64; 9];
        for row in rows {
            f.peak_connections = f.peak_connections.max(row.connections);
            f.peak_queued = f.peak_queued.max(row.queued);
            f.peak_in_flight = f.peak_in_flight.max(row.in_flight);
            f.peak_held = f.peak_held.max(row.held);
            // Rates over each row's own interval, back to counts.
            let secs = row.unix_ms.saturating_sub(last_ms) as f64 / 1000.0;
            last_ms = row.unix_ms;
            let rates = [
                row.requests_per_s,
                row.answers_2xx_per_s,
                row.answers_4xx_per_s,
                row.answers_5xx_per_s,
                row.answers_other_per_s,
                row.injected_per_s,
                row.resets_per_s,
                row.upstream_errors_per_s,
                row.gone_per_s,
            ];
            for (sum, rate) in sums.iter_mut().zip(rates) {
                *sum += rate * secs;
            }
        }
        let [
            requests,
            answers_2xx,
            answers_4xx,
            answers_5xx,
            answers_other,
            injected,
            resets,
            upstream_errors,
            gone,
        ] = sums.map(|s| s.round() as u64);
        let mut warmup: Vec<f64> = rows
            .iter()
            .filter(|r| r.unix_ms <= timeline.stop_ms)
            .filter_map(|r| r.p50_ms)
            .collect();
        warmup.sort_by(f64::total_cmp);
        Some(ProxyFigures {
            requests,
            answers_2xx,
            answers_4xx,
            answers_5xx,
            answers_other,
            injected,
            resets,
            upstream_errors,
            gone,
            warmup_p50_ms: warmup.get(warmup.len() / 2).copied(),
            peak_p99_ms: rows.iter().filter_map(|r| r.p99_ms).reduce(f64::max),
            ..f
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(unix_ms: u64, elapsed_s: f64) -> ProxyRow {
        ProxyRow {
            unix_ms,
            elapsed_s,
            ..ProxyRow::default()
        }
    }

    #[test]
    fn counts_are_rates_over_each_rows_own_interval_and_peaks_the_most_at_a_report() {
        let timeline = Timeline {
            start_ms: 10_000,
            stop_ms: 12_000,
            resume_ms: 14_000,
            end_ms: 20_000,
            confirm_ms: 22_000,
        };
        let rows = [
            // A first interval of 1 s (started at 10,000 ms): 100 req/s.
            ProxyRow {
                requests_per_s: 100.0,
                answers_2xx_per_s: 100.0,
                p50_ms: Some(10.0),
                p99_ms: Some(20.0),
                connections: 30,
                ..row(11_000, 1.0)
            },
            ProxyRow {
                requests_per_s: 100.0,
                answers_2xx_per_s: 90.0,
                answers_5xx_per_s: 10.0,
                p50_ms: Some(12.0),
                p99_ms: Some(25.0),
                connections: 40,
                ..row(12_000, 2.0)
            },
            // A stretched interval of 2 s: the fault on, 503s injected.
            ProxyRow {
                faulted: true,
                requests_per_s: 50.0,
                injected_per_s: 50.0,
                held: 7,
                queued: 3,
                in_flight: 5,
                p99_ms: Some(900.0),
                ..row(14_000, 4.0)
            },
            ProxyRow {
                requests_per_s: 10.0,
                answers_4xx_per_s: 2.5,
                answers_other_per_s: 1.0,
                resets_per_s: 1.5,
                upstream_errors_per_s: 0.5,
                gone_per_s: 2.0,
                p50_ms: Some(500.0),
                ..row(16_000, 6.0)
            },
        ];
        let f = ProxyFigures::of(&rows, &timeline).unwrap();
        // 100 + 100 + 50 * 2 + 10 * 2.
        assert_eq!(f.requests, 320);
        assert_eq!((f.answers_2xx, f.answers_5xx), (190, 10));
        assert_eq!((f.answers_4xx, f.answers_other), (5, 2));
        assert_eq!(
            (f.injected, f.resets, f.upstream_errors, f.gone),
            (100, 3, 1, 4)
        );
        assert_eq!((f.peak_connections, f.peak_queued), (40, 3));
        assert_eq!((f.peak_in_flight, f.peak_held), (5, 7));
        // Warm-up medians 10 and 12 (by 12,000 ms): the upper middle one.
        assert_eq!(f.warmup_p50_ms, Some(12.0));
        assert_eq!(f.peak_p99_ms, Some(900.0));
        assert_eq!(ProxyFigures::of(&[], &timeline), None);
    }
}
