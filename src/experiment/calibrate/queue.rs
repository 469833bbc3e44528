//! The burst probe's step of a calibration: where the service keeps the
//! requests it cannot start yet, and the twin's queue from it.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::fit::Twin;
use crate::model::fit::queue::{Listen, Queue, Tally, classify, taken_in};
use crate::net::probe::{self, BurstConfig, BurstProbe};
use crate::report::output::say;

/// How long the burst is watched: past the 1 s after which Linux sends a
/// dropped SYN again, so that a drop shows as a connect of a second. Not
/// compressed with `--quick`: the kernel's clock is the same.
pub const BURST_HOLD: Duration = Duration::from_secs(2);

/// The burst probe, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRecord {
    /// Connections opened at once (none: not probed).
    pub connections: Option<u32>,
    /// How they ended.
    pub tally: Option<Tally>,
    /// The slowest connect of those let in, seconds.
    pub connect_max_s: Option<f64>,
    /// The requests in service the count of the queue leaves out: a
    /// pool's workers, none for a curve.
    pub serving: u32,
    /// Where the service keeps requests (none: not told).
    pub queue: Option<Queue>,
    /// The kernel's listen queue in front of the service, as it told it
    /// (none: not on this machine, or not told).
    #[serde(default)]
    pub listen: Option<Listen>,
    /// Connections the service took in itself beyond the kernel's queue,
    /// its workers and those finished while the burst came (none: not
    /// told).
    #[serde(default)]
    pub taken_in: Option<u32>,
    /// What it means, in words.
    pub reason: String,
}

impl QueueRecord {
    /// A burst not made, and why.
    pub fn skipped(reason: String) -> QueueRecord {
        QueueRecord {
            connections: None,
            tally: None,
            connect_max_s: None,
            serving: 0,
            queue: None,
            listen: None,
            taken_in: None,
            reason,
        }
    }
}

/// The requests in service while others wait, by the twin: a pool's
/// workers; none for a curve, whose every request is in service.
pub fn serving(twin: &Twin) -> u32 {
    match twin {
        Twin::Pool { workers, .. } => *workers,
        Twin::Exponential { .. } | Twin::Linear { .. } => 0,
    }
}

/// What `queue` means, in words, `serving` requests being in service.
pub fn words(queue: Queue, serving: u32) -> String {
    match queue {
        Queue::Backlog { depth } => format!(
            "the listen backlog, {depth} connections deep (the kernel dropped SYNs past it)"
        ),
        Queue::Refuses { places } => format!(
            "a queue of its own that refuses past {places} places beyond the {serving} in service"
        ),
        Queue::Holds { places } => format!(
            "a queue that held the whole burst: {places} places or more beyond the {serving} in \
             service"
        ),
    }
}

/// The burst probe `config` says, its fates classified with `twin`'s
/// requests in service, or why it told nothing.
pub fn burst(config: &BurstConfig, stop: &AtomicBool, twin: &Twin) -> QueueRecord {
    let connections = config.connections;
    say(format!(
        "burst: {connections} connections at once, a request each, watched {} s",
        BURST_HOLD.as_secs_f64()
    ));
    let probe = probe::burst(config, stop);
    // What the burst could not tell leaves the twin's queue as the fit
    // wrote it: the calibration goes on.
    let probe = match probe {
        Ok(probe) => probe,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            return QueueRecord::skipped("interrupted".into());
        }
        Err(e) => {
            let why = format!("not told: {e}");
            say(format!("burst: {why}"));
            return QueueRecord::skipped(why);
        }
    };
    let serving = serving(twin);
    let queue = classify(&probe.tally, serving, probe.finished, probe.listen);
    let taken_in = taken_in(&probe.tally, serving, probe.finished, probe.listen);
    let t = probe.tally;
    // A curve has no queue of its own; the kernel's it takes as --backlog.
    let curve = serving == 0 && !matches!(queue, Queue::Backlog { .. }) && probe.listen.is_none();
    let reason = format!(
        "Of {connections} connections opened at once, {} had their SYN dropped (sent again, or \
         a connect of a second or more), {} were refused, {} answered and {} still waiting \
         after {} s; the slowest connect let in took {:.1} ms, the last request was written \
         {:.1} ms after the first connect began; while the burst arrived (until then, or its \
         last refusal if later) {} answers came, whose places went to later requests and are \
         not counted.{}{}",
        t.dropped,
        t.refused,
        t.answered,
        t.waiting,
        BURST_HOLD.as_secs_f64(),
        probe.connect_max_s * 1e3,
        probe.spread_s * 1e3,
        probe.finished,
        kernel_words(&probe, serving, taken_in),
        if curve {
            " The twin is a curve, which has no queue: it takes nothing from this."
        } else {
            ""
        }
    );
    say(format!(
        "burst: {} dropped, {} refused, {} answered, {} waiting: the service's queue is {}",
        t.dropped,
        t.refused,
        t.answered,
        t.waiting,
        words(queue, serving)
    ));
    QueueRecord {
        connections: Some(connections),
        tally: Some(probe.tally),
        connect_max_s: Some(probe.connect_max_s),
        serving,
        queue: Some(queue),
        listen: probe.listen,
        taken_in,
        reason,
    }
}

/// What the kernel told of the `probe`'s listen queue, and what the
/// service took in beyond it and its `serving` workers, `taken_in`, in
/// words.
fn kernel_words(probe: &BurstProbe, serving: u32, taken_in: Option<u32>) -> String {
    let Some(listen) = probe.listen else {
        let why = match &probe.listen_error {
            Some(e) => format!("the kernel could not be asked ({e})"),
            None => "no listener of this machine serves the target".into(),
        };
        return format!(" Its listen queue was not told: {why}; a backlog's depth is the count.");
    };
    let sockets = match listen.listeners {
        1 => "one listening socket".to_string(),
        n => format!("{n} listening sockets sharing the port"),
    };
    let mut words = format!(
        " The kernel told its listen queue: {sockets}, a backlog of {} (it holds {}), the \
         twin's --backlog.",
        listen.backlog,
        listen.holds()
    );
    let counted = probe.tally.let_in().saturating_sub(probe.finished);
    if taken_in.is_some() && counted < listen.holds() {
        words.push_str(&format!(
            " Fewer were let in ({counted}) than it holds: SYNs were dropped before it filled (a \
             SYN queue, a filter), and the backlog's depth is the count."
        ));
    }
    match taken_in {
        Some(0) | None => {}
        Some(n) if serving == 0 => words.push_str(&format!(
            " The service took {n} connections in beyond that queue: in service, or accepted \
             ahead of its workers (the twin, a curve, has no workers to tell them apart)."
        )),
        Some(n) => words.push_str(&format!(
            " The service took {n} connections in itself beyond that queue and its workers: it \
             accepts ahead of its workers, which it cannot do while stopped, when the kernel's \
             queue alone fills; the twin's backlog is the kernel's."
        )),
    }
    words
}
