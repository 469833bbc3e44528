//! Watching a run: the live terminal view (`--tui`) and the progress bar
//! of long work. Presentation over the report rows the programs already
//! produce, without the network runtime: the view runs on a thread of its
//! own, fed by a channel ([`Watch`]) with the same rows the status lines
//! carry, and a storm's batches and phases.
//!
//! - [`feed`]: what the view is told;
//! - [`state`]: what it keeps and derives (origins, shaded spans, time
//!   left), and [`forming`]: a storm run's verdict as it forms;
//! - [`charts`], [`draw`], [`figures`] and [`style`]: the screen, with a
//!   marker of its own for every series so that `NO_COLOR` loses nothing;
//!   [`proxy`]: a fault proxy's charts and figures;
//! - [`terminal`]: raw mode, the alternate screen, the program's output
//!   held meanwhile, and the terminal restored whatever happens;
//! - [`live`]: the thread, its keys (a program's own among them: the
//!   proxy's fault switch), and how `q` stops the program;
//! - [`progress`]: the progress bar on stderr.

pub mod charts;
pub mod draw;
pub mod feed;
pub mod figures;
pub mod forming;
pub mod live;
pub mod progress;
pub mod proxy;
pub mod state;
pub mod style;
pub mod terminal;

pub use feed::{Feed, Phase, Plan, RunWatch, Setup, Watch};
pub use live::{LiveView, OwnKey};
pub use progress::Progress;
