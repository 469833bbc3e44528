//! A tier's calls inward: after its own work, the server as a tier of a
//! chain calls the next tier under its own client policy, as a session of
//! one request of the same [`User`] state machine the client runs, on
//! connections of its own. How that call ends decides the answer
//! ([`TierAnswer`]).
//!
//! The call runs in a task of its own, so that a caller that goes does
//! not stop it unless the tier propagates cancellation: then the call's
//! attempts in flight are cancelled (their connections closed, so the
//! next tier sees its caller go) and nothing more is sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::balance::Balance;
use super::target::Target;
use super::user::{Common, Shared, user};
use crate::model::arrivals::user_rng;
use crate::model::tier::{TierAnswer, TierCall};
use crate::model::user::User;
use crate::policy::Throttle;
use crate::report::counts::ClientRecorder;
use crate::report::metrics::ClientMetrics;
use crate::report::rows::unix_ms;
use crate::report::summary::{ClientSummary, Reporter};

/// The call's connections are closed after this long idle, as the
/// client's are at each report.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// A tier's caller: its connections to the next tier, its timer, its
/// rules, throttle and recorder, shared by every call it makes.
pub(super) struct Caller {
    shared: Arc<Shared>,
    call: TierCall,
    /// Calls made so far: each draws from the stream of its number.
    made: AtomicU64,
}

impl Caller {
    /// The caller of `call`, on the current runtime (its timer and the
    /// idle connections' expiry run there), its calls counted in `metrics`
    /// too, if given.
    pub(super) fn start(
        call: &TierCall,
        metrics: Option<Arc<ClientMetrics>>,
    ) -> Result<Arc<Caller>, String> {
        let target = Target::resolve_now(&call.url, &call.client.wire)
            .map_err(|why| format!("--call: {why}"))?;
        let (balance, _doors) = Balance::new(1);
        // Every call runs in lane 0 of a one-lane client, and never moves.
        balance.joined(0);
        let common = Arc::new(Common {
            recorder: ClientRecorder::with_metrics(metrics),
            rules: call.client.rules(),
            throttle: call
                .client
                .throttle
                .map(|t| std::sync::Mutex::new(Throttle::new(t))),
            epoch: Instant::now(),
            waiters: Notify::new(),
            balance,
        });
        let shared = Shared::start(target, call.client.timer_resolution, common, 0)
            .map_err(|e| format!("cannot create a timer for the calls: {e}"))?;
        let caller = Arc::new(Caller {
            shared: Arc::new(shared),
            call: call.clone(),
            made: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&caller);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(IDLE_CHECK);
            loop {
                ticker.tick().await;
                match weak.upgrade() {
                    Some(caller) => caller.shared.pool.expire_idle(),
                    None => return,
                }
            }
        });
        Ok(caller)
    }

    /// Whether a request that came with `deadline` is to be answered 504
    /// at once, its deadline passed (only when the tier propagates them).
    pub(super) fn expired(&self, deadline: Option<Instant>) -> bool {
        self.call.propagate_deadline && deadline.is_some_and(|d| d <= Instant::now())
    }

    /// Whether the tier reads its callers' deadlines.
    pub(super) fn reads_deadlines(&self) -> bool {
        self.call.propagate_deadline
    }

    /// Calls inward for a request whose caller gives up at `deadline`, and
    /// returns the answer to give it. Dropping the returned future before
    /// it ends means the caller has gone: counted, and the call cancelled
    /// if the tier propagates cancellation.
    pub(super) async fn call(self: &Arc<Self>, deadline: Option<Instant>) -> TierAnswer {
        let common = &self.shared.common;
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let Some(rules) = self
            .call
            .rules_for(remaining.filter(|_| self.reads_deadlines()))
        else {
            return TierAnswer::GatewayTimeout;
        };
        let index = self.made.fetch_add(1, Ordering::Relaxed);
        let state = User::arriving(
            &rules,
            user_rng(self.call.client.seed, index),
            common.now(),
            1,
        );
        common.recorder.session_arrived();
        common.balance.joined(0);
        let (done, answer) = oneshot::channel();
        let (cancel, cancelled) = oneshot::channel::<()>();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            // A dropped sender (the answer was given) is no cancellation.
            let cancelled = async {
                if cancelled.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let ended = user(shared, state, Some(rules), cancelled).await;
            let _ = done.send(ended);
        });
        let mut guard = Gone {
            caller: self,
            cancel: self.call.propagate_cancel.then_some(cancel),
            armed: true,
        };
        let ended = answer.await.ok().flatten();
        guard.armed = false;
        match ended {
            Some((ok, last)) => TierAnswer::of(ok, last),
            None => TierAnswer::Unavailable,
        }
    }
}

impl Caller {
    /// Writes the calls' report rows with `reporter` every `interval`
    /// from `start` until `stop` fires, then the last one, and returns
    /// the calls' summary.
    pub(super) async fn report(
        self: Arc<Self>,
        mut reporter: Reporter,
        interval: Duration,
        stop: oneshot::Receiver<()>,
    ) -> ClientSummary {
        let recorder = &self.shared.common.recorder;
        let start = self.shared.common.epoch;
        let mut ticker = tokio::time::interval_at(start + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = start;
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = &mut stop => break,
            }
            let now = Instant::now();
            reporter.report(recorder, now - last, unix_ms(), now - start);
            last = now;
        }
        let now = Instant::now();
        reporter.report(recorder, now - last, unix_ms(), now - start);
        reporter.close(now - start, 0, 0, recorder)
    }
}

/// Counts a call whose caller went (its future dropped before the
/// answer) and cancels it, if the tier propagates cancellation.
struct Gone<'a> {
    caller: &'a Caller,
    cancel: Option<oneshot::Sender<()>>,
    armed: bool,
}

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.caller.shared.common.recorder.caller_gone();
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.send(());
        }
    }
}
