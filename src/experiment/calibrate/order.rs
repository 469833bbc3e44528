//! The order probe's step of a calibration: whether the service answers
//! requests sent at once in waves (a pool) or together (a curve), and the
//! twin's shape chosen with it among those that fit about as well.

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use crate::model::fit::order::{
    Batch, MIN_ANSWERS, Order, SLOWED, TOGETHER_FROM, batch_size, order,
};
use crate::model::fit::{Fits, Level, TIE_MARGIN, choose_with};
use crate::net::probe::{self, BatchConfig};
use crate::report::output::say;

/// The order probe, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderRecord {
    /// Requests sent at once in each batch (none: not probed).
    pub requests: Option<u32>,
    /// Each batch's successes, seconds from its start.
    pub latencies_s: Vec<Vec<f64>>,
    /// A lone request on the idle service before them, seconds.
    pub baseline_s: Option<f64>,
    /// The median of the batches' spreads (`model::fit::order`).
    pub spread: Option<f64>,
    /// How the service answered them (none: not told).
    pub order: Option<Order>,
    /// What it means, in words.
    pub reason: String,
}

impl OrderRecord {
    /// Batches not sent, and why.
    pub fn skipped(reason: String) -> OrderRecord {
        OrderRecord {
            requests: None,
            latencies_s: Vec::new(),
            baseline_s: None,
            spread: None,
            order: None,
            reason,
        }
    }
}

/// The batch size for `levels` (`model::fit::order::batch_size`), those
/// with a larger share of errors than `max_error_share` left out.
pub fn requests(levels: &[Level], max_error_share: f64) -> Option<u32> {
    let levels: Vec<(u32, f64)> = levels
        .iter()
        .filter(|l| l.error_share <= max_error_share)
        .map(|l| (l.concurrency, l.latency_mean_s))
        .collect();
    batch_size(&levels)
}

/// The batches `config` says, read, and the twin chosen again in `fits`
/// with what they told; or why they told nothing.
pub fn probe(config: &BatchConfig, stop: &AtomicBool, fits: &mut Fits) -> OrderRecord {
    say(format!(
        "order: {} batches of {} requests sent at once",
        config.batches, config.requests
    ));
    let probe = match probe::batch(config, stop) {
        Ok(probe) => probe,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            return OrderRecord::skipped("Stopped before the batches ended.".into());
        }
        // What the batches could not tell leaves the fit's choice: the
        // calibration goes on.
        Err(e) => {
            say(format!("order: not told: {e}"));
            return OrderRecord::skipped(format!("The batches could not be sent: {e}."));
        }
    };
    let sent = probe.requests as usize;
    let batches: Vec<Batch> = probe
        .latencies_s
        .into_iter()
        .map(|answered| Batch { answered, sent })
        .collect();
    let timeout = config.timeout.as_secs_f64();
    let told = order(&batches, probe.baseline_s, timeout);
    let answered: Vec<String> = batches
        .iter()
        .map(|b| b.answered.len().to_string())
        .collect();
    let before = fits.best().clone();
    let noise = fits.noise();
    if let Some((seen, _)) = told {
        fits.best = choose_with(&fits.shapes, Some(seen), noise);
    }
    let after = fits.best();
    let (was, now) = (before.twin.name(), after.twin.name());
    let sent_words = format!(
        "{} batches of {sent} requests sent at once to the idle service ({} answered with \
         success; a lone request {:.2} ms)",
        batches.len(),
        answered.join(", "),
        probe.baseline_s * 1e3
    );
    let reason = match told {
        None => format!(
            "{sent_words}: none told (at least {MIN_ANSWERS} and half a batch answered, its 90th \
             percentile at {SLOWED} times the lone request or more); the fit's choice stands."
        ),
        Some((seen, spread)) => format!(
            "{sent_words}: the answer at the 25th percentile came at {spread:.2} of the time of \
             the one at the 90th, each less the lone request's (median of the batches; \
             {TOGETHER_FROM} or more is together). {}",
            if seen != after.twin.order() {
                format!(
                    "No shape of that kind fits as well as the {now} (within {:.0} % of the least \
                     error, or {noise:.3} of it, as close as a second calibration would \
                     repeat): the {now} stays the twin; the fit and the probe disagree.",
                    TIE_MARGIN * 100.0
                )
            } else if was == now {
                format!("The twin, the {now}, is of that kind.")
            } else {
                format!(
                    "The {now} (error {:.3}), of that kind, is the twin in place of the {was} \
                     ({:.3}), which the closed loop alone chose: they fit as well as can be told \
                     (within {:.0} % of the least error, or {noise:.3} of it, as close as a \
                     second calibration would repeat).",
                    after.score.error,
                    before.score.error,
                    TIE_MARGIN * 100.0
                )
            }
        ),
    };
    say(format!(
        "order: {}; the twin is the {now}",
        told.map_or("not told".to_string(), |(o, s)| format!(
            "answered {} (spread {s:.2})",
            o.words()
        ))
    ));
    OrderRecord {
        requests: Some(probe.requests),
        latencies_s: batches.into_iter().map(|b| b.answered).collect(),
        baseline_s: Some(probe.baseline_s),
        spread: told.map(|(_, s)| s),
        order: told.map(|(o, _)| o),
        reason,
    }
}
