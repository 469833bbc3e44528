//! The fitting step of a virtual twin: a real service's closed-loop
//! measurements in, the project's server shapes fitted to them out, with
//! the `server` flags that build the best. Pure: no clock, no I/O.
//!
//! A probe measures, at concurrency N = 1, 2, 4, ... ([`Level`]),
//! throughput X, mean latency R, p50, p99 and the share of errors. Each
//! shape predicts R(N) and X(N) = N / R(N) for a closed loop with no
//! think time ([`shapes`] derives them from the model's own semantics).
//!
//! **What is minimised.** For every shape, and the Universal
//! Scalability Law beside them, the sum over the levels fitted of
//! `ln(R̂/R)² + ln(X̂/X)²`: relative errors, as log ratios, on both latency
//! and throughput, so that a level at 1 ms weighs like one at 1 s. Since
//! every shape obeys Little's law, that is a least-squares fit of `ln R̂`
//! to the middle of `ln R` and `ln(N/X)` at each level ([`level`]).
//! Levels whose error share passes [`FitOptions::max_error_share`] are
//! left out: the shapes fitted refuse nothing.
//!
//! **How.** Integer parameters are searched over every value (an
//! exponential curve's limit from 0, a pool's workers from 1, to the
//! largest concurrency probed); for each, the rest has a closed form
//! (the base latency or service time is a mean in log space; the
//! exponential curve's growth a straight line by least squares). The
//! linear curve's one ratio, slope over base, is scanned and refined by
//! golden-section search; the law's σ and κ by a grid and Nelder-Mead.
//! These searches are a hundred lines, tested in `search.rs`: the `usl`
//! crate fits another sum (module [`usl`] says how its code differs), and
//! a general fitting crate (levenberg-marquardt on nalgebra, argmin)
//! would bring a linear-algebra stack for two or three parameters whose
//! integer part it cannot search anyway.
//!
//! **Which shape.** Each fit reports its error, `sqrt` of the mean of the
//! two squared log ratios ([`Score::error`]). The twin is the shape of
//! least error, except that a shape with fewer parameters
//! ([`Twin::parameters`]) whose error is within [`TIE_MARGIN`] of the
//! least is preferred to it; among shapes of as many parameters, the
//! lower error wins, and an exact tie goes to the one listed first by
//! `--model` (exponential, linear, pool). Where the order probe has seen
//! how the service answers requests sent at once ([`order`]), only the
//! shapes of that kind that fit as well as can be told (within the
//! margin, or within [`REPEAT_NOISE`] of the least error) compete, by the
//! same rule ([`choose_with`]). The Universal Scalability Law
//! is fitted for comparison (its peak, `N* = sqrt((1 - σ) / κ)`) and never
//! chosen: the server cannot take it.
//!
//! **What it cannot tell.** A pool's queue, its kind and length (it held
//! every client the probe sent: [`queue`], from the burst probe), whether
//! the service finishes work for clients that have gone
//! (`--on-disconnect`: [`gone`]), a curve's cap (`--max-delay`, far above
//! what a probe holds).

#[cfg(test)]
mod closed_loop;
mod curves;
pub mod gone;
pub mod level;
pub mod order;
pub mod pool;
pub mod queue;
mod search;
pub mod shapes;
#[cfg(test)]
mod tests;
pub mod usl;

use serde::{Deserialize, Serialize};

pub use level::{FitError, Level, MIN_LEVELS, Score};
pub use order::Order;
pub use shapes::{Family, Twin};
pub use usl::{Usl, UslFit};

/// How much worse, relatively, a shape with fewer parameters may fit than
/// the best and still be chosen over it: 10 %.
pub const TIE_MARGIN: f64 = 0.10;

/// How far apart two fits' errors may be and still be as good as can be
/// told: 0.03. aiohttp's event loop running 5 ms of CPU a request,
/// calibrated twice on 2026-11-29 and 30, gave the linear curve errors of
/// 0.029 and 0.007 and the pool of one 0.030 and 0.023: a shape's error
/// moved by up to 0.022 between two calibrations of one service, though
/// each level's latency repeated within 1 to 3 % (grpcio, probed three
/// times). A fit better by less than that is not better by what a second
/// calibration would say.
pub const REPEAT_NOISE: f64 = 0.03;

/// Choices of a fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// Levels with a larger share of errors are left out (default 0.01).
    pub max_error_share: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            max_error_share: 0.01,
        }
    }
}

/// One shape fitted to the levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeFit {
    /// The shape with its fitted parameters, as the flags write them.
    pub twin: Twin,
    /// How far its predictions are from the measurements.
    pub score: Score,
    /// What the fit could not pin down, in words.
    pub notes: Vec<String>,
}

/// Every shape fitted, the twin chosen, and the Universal Scalability Law
/// for comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fits {
    /// One fit per shape, in `--model`'s order: exponential, linear, pool.
    pub shapes: Vec<ShapeFit>,
    /// The index in [`Fits::shapes`] of the twin chosen.
    pub best: usize,
    /// The Universal Scalability Law fitted to the same levels.
    pub usl: UslFit,
    /// Levels fitted.
    pub levels: usize,
    /// Levels left out for their errors.
    pub failing: usize,
    /// RMS of `ln(N / (X R))` over the levels fitted: how far the
    /// measurements miss Little's law. Where it is large, the prober set
    /// the pace, and no shape fits better than half of it.
    pub little_error: f64,
}

impl Fits {
    /// The twin chosen.
    pub fn best(&self) -> &ShapeFit {
        &self.shapes[self.best]
    }

    /// How far below another shape's error one's must be to fit better
    /// by more than can be told ([`choose_with`]'s noise): [`REPEAT_NOISE`],
    /// or half of what the measurements miss Little's law by where that
    /// is more (the floor no fit gets below).
    pub fn noise(&self) -> f64 {
        REPEAT_NOISE.max(self.little_error / 2.0)
    }
}

/// Fits every shape and the Universal Scalability Law to `levels` and
/// chooses the twin (module doc).
pub fn fit(levels: &[Level], options: &FitOptions) -> Result<Fits, FitError> {
    let targets = level::Targets::new(levels, options.max_error_share)?;
    let shapes = vec![
        curves::exponential(&targets),
        curves::linear(&targets),
        pool::pool(&targets),
    ];
    Ok(Fits {
        best: choose(&shapes),
        usl: usl::usl(&targets),
        levels: targets.levels.len(),
        failing: targets.failing,
        little_error: targets.little_error(),
        shapes,
    })
}

/// The index of the shape to choose (module doc): among the shapes whose
/// error is within [`TIE_MARGIN`] of the least, the fewest parameters,
/// then the least error, then the first.
pub fn choose(fits: &[ShapeFit]) -> usize {
    choose_with(fits, None, 0.0)
}

/// [`choose`], told how the service answered requests sent at once
/// ([`order`]): the shapes of that kind (a pool for waves, a curve for
/// together) that fit as well as can be told, within [`TIE_MARGIN`] of
/// the least error or within `noise` of it ([`Fits::noise`]), compete by
/// [`choose`]'s rule among themselves. If none of that kind does, or none
/// was seen, [`choose`]'s rule.
pub fn choose_with(fits: &[ShapeFit], seen: Option<Order>, noise: f64) -> usize {
    let least_of = |shapes: &[usize]| {
        shapes
            .iter()
            .map(|&i| fits[i].score.error)
            .fold(f64::INFINITY, f64::min)
    };
    let all: Vec<usize> = (0..fits.len()).collect();
    let least = least_of(&all);
    let of_kind: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| {
            seen.is_some_and(|seen| fits[i].twin.order() == seen)
                && fits[i].score.error <= (least * (1.0 + TIE_MARGIN)).max(least + noise)
        })
        .collect();
    let shapes = if of_kind.is_empty() { all } else { of_kind };
    let least = least_of(&shapes);
    let mut eligible: Vec<usize> = shapes
        .into_iter()
        .filter(|&i| fits[i].score.error <= least * (1.0 + TIE_MARGIN))
        .collect();
    // A stable sort: an exact tie keeps --model's order.
    eligible.sort_by(|&a, &b| {
        let (a, b) = (&fits[a], &fits[b]);
        a.twin
            .parameters()
            .cmp(&b.twin.parameters())
            .then(a.score.error.total_cmp(&b.score.error))
    });
    eligible.first().copied().unwrap_or(0)
}
