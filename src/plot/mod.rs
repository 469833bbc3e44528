//! Plots: rows and a few options in, files out. For a storm, per case, the
//! client's OK/error/timeout rates over time with the pause shaded and the
//! server's concurrency on a second axis, and one overlay of goodput across
//! cases, and the share of runs back by each time after the resume; for a
//! sweep, maps of the share of runs that recover against the pause; for a
//! twin's calibration, the levels probed beside every fitted shape. SVG by
//! default, PNG on request, drawn with plotters.

mod canvas;
mod cdf;
mod fit;
mod phase;
mod storm;

pub(crate) use canvas::DrawResult;
pub use canvas::extension;
pub use cdf::{RecoveryCurve, recovery_cdf};
pub use fit::fit_chart;
pub use phase::{Across, Axes, Panel, Row, draw_panels, panel_titled};
pub use storm::{RunChart, storm_charts};
