//! Plots: rows and a few options in, files out. For a storm, per case, the
//! client's OK/error/timeout rates over time with the pause shaded and the
//! server's concurrency on a second axis, and one overlay of goodput across
//! cases; for a sweep, the heat map of recovery time by pause. SVG by
//! default, PNG on request, drawn with plotters.

mod canvas;
mod cdf;
mod heatmap;
mod storm;

pub(crate) use canvas::DrawResult;
pub use cdf::{RecoveryCurve, recovery_cdf};
pub use heatmap::{HeatRow, HeatmapScale, draw_heatmap};
pub use storm::{RunChart, storm_charts};
