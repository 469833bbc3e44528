//! Whether a service finishes work for clients that have gone, from the
//! probe that abandons requests: pure, the latencies in, a verdict out.
//!
//! The probe measures a lone request's latency on an idle service (the
//! baseline), then sends `abandon` requests, closes their connections
//! while the service still holds them, and at once sends a lone request
//! (after). A service that goes on with the abandoned work makes the lone
//! request wait behind what is left of it; one that drops it answers the
//! lone request about as fast as on an idle service. What is left if the
//! service went on is estimated by the probe (the latency of a lone
//! request sent beside `abandon` others whose clients stay, less the time
//! they were held open): unless that stands well above the baseline, the
//! two behaviours look alike and nothing can be told.

use serde::{Deserialize, Serialize};

use crate::model::server::OnDisconnect;

/// What a service does with the work of clients that have gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Gone {
    /// It finishes the work anyway (`--on-disconnect continue`).
    Continues,
    /// It drops the work it has not started (`--on-disconnect cancel`).
    Cancels,
    /// The measurements cannot tell.
    Unclear,
}

impl Gone {
    /// The name written in results: `continues`, `cancels`, `unclear`.
    pub fn name(self) -> &'static str {
        match self {
            Gone::Continues => "continues",
            Gone::Cancels => "cancels",
            Gone::Unclear => "unclear",
        }
    }

    /// The server's `--on-disconnect` that behaves this way, if known.
    pub fn on_disconnect(self) -> Option<OnDisconnect> {
        match self {
            Gone::Continues => Some(OnDisconnect::Continue),
            Gone::Cancels => Some(OnDisconnect::Cancel),
            Gone::Unclear => None,
        }
    }

    /// The value of the server's `--on-disconnect` flag: `continue`,
    /// `cancel`, or `None` when unclear (the server's default, `continue`,
    /// then stands).
    pub fn flag(self) -> Option<&'static str> {
        self.on_disconnect().map(OnDisconnect::name)
    }
}

/// A lone request after the abandon answered within this many times the
/// baseline's median says the service dropped the abandoned work.
///
/// Not closer to 1: a service that drops work it has not started still
/// runs the work in progress to its end (a pool cannot abort a request a
/// worker holds, `model::service::pool`), so the lone request may wait up
/// to one more service time for a worker. With constant service times
/// that is up to twice the baseline; with exponential ones on a single
/// worker, the median of a service time plus a residual one is 1.68 mean
/// service times against the baseline's 0.69, 2.4 times.
pub const CANCELS_UP_TO: f64 = 2.5;

/// A lone request after the abandon answered in this many times the
/// baseline's median or more says the service went on with the abandoned
/// work: well beyond the one service time of work in progress a
/// cancelling service leaves ([`CANCELS_UP_TO`]). Between the two, the
/// verdict is unclear.
pub const CONTINUES_FROM: f64 = 4.0;

/// How far the estimate of the abandoned work left, if the service went
/// on with it, may be too high: twice (it is a single measurement, of a
/// latency under load the service may spread unevenly; over HTTP/2 a lone
/// request on a connection of its own overtakes part of the held streams,
/// which the service reads connection by connection).
pub const ESTIMATE_SLACK: f64 = 2.0;

/// The abandoned work left when the clients go, if the service went on
/// with it, must keep a lone request this many times the baseline's
/// median for the probe to say it continues: [`ESTIMATE_SLACK`] times
/// [`CONTINUES_FROM`], so that a continuing service lands above that line
/// even where the estimate is twice too high.
pub const CLEAR_FROM: f64 = ESTIMATE_SLACK * CONTINUES_FROM;

/// The same for the probe to say it cancels: [`ESTIMATE_SLACK`] times
/// [`CANCELS_UP_TO`], so that a continuing service stays above the
/// cancelling line even where the estimate is twice too high.
pub const CANCELS_CLEAR_FROM: f64 = ESTIMATE_SLACK * CANCELS_UP_TO;

/// The median of `values`: the middle one, or the mean of the two middle
/// ones; `None` when there are none or one is not a number.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// The verdict from the latencies, in seconds, of lone requests on an
/// idle service (`baseline_s`) and sent at once after abandoned requests'
/// clients went (`after_s`), and `expected_busy_s`, the latency a lone
/// request would have there if the service went on with the abandoned
/// work. With `b` and `a` the medians of the two:
///
/// - [`Gone::Continues`] when `a >= CONTINUES_FROM * b` and
///   `expected_busy_s >= CLEAR_FROM * b`;
/// - [`Gone::Cancels`] when `a <= CANCELS_UP_TO * b` and
///   `expected_busy_s >= CANCELS_CLEAR_FROM * b`;
/// - [`Gone::Unclear`] otherwise: between the lines, where the abandoned
///   work would not slow a lone request clearly enough for the verdict
///   the latencies point to, or when either list is empty or the
///   baseline is not a positive number.
pub fn verdict(baseline_s: &[f64], after_s: &[f64], expected_busy_s: f64) -> Gone {
    let (Some(b), Some(a)) = (median(baseline_s), median(after_s)) else {
        return Gone::Unclear;
    };
    // Written so that a NaN anywhere makes it unclear.
    let clear = |line: f64| b.is_finite() && b > 0.0 && expected_busy_s >= line * b;
    let ratio = a / b;
    if ratio >= CONTINUES_FROM && clear(CLEAR_FROM) {
        Gone::Continues
    } else if ratio <= CANCELS_UP_TO && clear(CANCELS_CLEAR_FROM) {
        Gone::Cancels
    } else {
        Gone::Unclear
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of 2 workers at a constant 20 ms, 40 requests abandoned
    /// after 100 ms: a lone request beside them waits for all 40 (20
    /// rounds of 20 ms) and its own 20 ms, 420 ms; 320 ms are left when
    /// the clients go.
    const BASELINE: [f64; 3] = [0.0201, 0.0203, 0.0202];
    const EXPECTED: f64 = 0.420 - 0.100;

    #[test]
    fn a_service_that_goes_on_keeps_the_lone_request_behind_the_backlog() {
        // Medians 0.0202 and 0.310: 15.3 times.
        let after = [0.300, 0.310, 0.320];
        assert_eq!(verdict(&BASELINE, &after, EXPECTED), Gone::Continues);
    }

    #[test]
    fn a_service_that_drops_the_work_answers_after_the_work_in_progress() {
        // Up to one service time in progress, then its own: 1.7 times.
        let after = [0.040, 0.031, 0.035];
        assert_eq!(verdict(&BASELINE, &after, EXPECTED), Gone::Cancels);
    }

    #[test]
    fn between_the_lines_nothing_is_told() {
        // 0.065 / 0.0202 = 3.2: above 2.5, below 4.
        let after = [0.060, 0.065, 0.070];
        assert_eq!(verdict(&BASELINE, &after, EXPECTED), Gone::Unclear);
    }

    #[test]
    fn a_service_the_abandoned_work_would_not_slow_tells_nothing() {
        // 0.099 s = 4.9 baselines expected: below 5, so neither a lone
        // request at 15 baselines nor one at 1 says anything.
        for after in [[0.31; 3], [0.0202; 3]] {
            assert_eq!(verdict(&BASELINE, &after, 0.099), Gone::Unclear);
        }
        assert_eq!(verdict(&BASELINE, &[0.31], f64::NAN), Gone::Unclear);
    }

    #[test]
    fn work_that_would_slow_a_little_tells_cancelling_only() {
        // 0.16 s = 7.9 baselines expected: a continuing service would keep
        // a lone request at 4 baselines or more even were it twice too
        // high, so one at 1.2 says cancels; one at 15 is past the
        // continuing line, but the estimate is below the 8 that line needs.
        assert_eq!(verdict(&BASELINE, &[0.025; 3], 0.16), Gone::Cancels);
        assert_eq!(verdict(&BASELINE, &[0.31; 3], 0.16), Gone::Unclear);
        // grpcio 1.85.3, calibrated: 103.45 ms alone, 127.68 ms after 236
        // streams were reset, 643.21 ms expected (6.2 times): cancels.
        let grpcio = verdict(&[0.10345], &[0.12768], 0.64321);
        assert_eq!(grpcio, Gone::Cancels);
    }

    #[test]
    fn the_lines_belong_to_the_verdicts_they_name() {
        // Exact in binary: 0.25 s baseline, 2 s expected (8 times).
        let b = [0.25];
        assert_eq!(verdict(&b, &[0.625], 2.0), Gone::Cancels, "2.5 times");
        assert_eq!(verdict(&b, &[1.0], 2.0), Gone::Continues, "4 times");
        assert_eq!(verdict(&b, &[0.75], 2.0), Gone::Unclear, "3 times");
        assert_eq!(verdict(&b, &[1.0], 1.999), Gone::Unclear, "under 8");
        assert_eq!(verdict(&b, &[0.625], 1.25), Gone::Cancels, "5 times");
        assert_eq!(verdict(&b, &[0.625], 1.249), Gone::Unclear, "under 5");
    }

    #[test]
    fn no_measurement_or_no_baseline_is_unclear() {
        assert_eq!(verdict(&[], &[0.3], 1.0), Gone::Unclear);
        assert_eq!(verdict(&[0.02], &[], 1.0), Gone::Unclear);
        assert_eq!(verdict(&[0.0], &[0.3], 1.0), Gone::Unclear);
        assert_eq!(verdict(&[f64::NAN], &[0.3], 1.0), Gone::Unclear);
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn each_verdict_names_its_server_flag_and_reads_back_in_lower_case() {
        assert_eq!(Gone::Continues.flag(), Some("continue"));
        assert_eq!(Gone::Cancels.flag(), Some("cancel"));
        assert_eq!(Gone::Unclear.flag(), None);
        for gone in [Gone::Continues, Gone::Cancels, Gone::Unclear] {
            let json = serde_json::to_string(&gone).unwrap();
            assert_eq!(json, format!("\"{}\"", gone.name()));
            assert_eq!(serde_json::from_str::<Gone>(&json).unwrap(), gone);
        }
    }
}
