//! What a run reports: counters and latency histograms, the report rows of
//! each interval (terminal line, CSV row, status line), the run's totals,
//! and the verdict and figures of a storm computed from the rows. No
//! network and no runtime: both engines report through this code.

pub mod aggregate;
pub mod chain;
pub mod counts;
pub mod estimate;
pub mod histogram;
pub mod hlog;
pub mod metrics;
pub mod output;
pub mod proxy;
pub mod proxy_figures;
pub mod rows;
pub mod search;
pub mod status;
pub mod summary;
pub mod verdict;
