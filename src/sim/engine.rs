//! The engine's state and what the servers do to it: the layers of
//! callers, the backend and the tiers before it as the network sees
//! them, and the event queue. What each attempt's events do is in
//! `attempt.rs`; what a tier does with a request it has served is in
//! `chain.rs`.

use std::time::Duration;

use super::config::SimConfig;
use super::event::{AttemptId, Event};
use super::host::{Delivery, Host, Request};
use super::layer::Layer;
use super::queue::{EventQueue, Key};
use super::slot::{Slot, in_flight};
use super::tier::{Incoming, Tier};
use crate::model::arrivals::user_rng;
use crate::model::open::Source;
use crate::model::outcome::{Hints, Outcome};
use crate::model::service::{Exit, Ticket};
use crate::model::user::User;

impl Request for AttemptId {
    const TIER: bool = false;

    /// The backend is never given a deadline.
    #[inline(always)]
    fn deadline(&self) -> Option<Duration> {
        None
    }
}

/// The engine's state: the layers of callers, the servers and the event
/// queue.
#[derive(Clone)]
pub(super) struct Engine {
    /// The client's users: layer 0, which calls the first tier (or the
    /// backend).
    pub(super) client: Layer,
    /// Each tier's calls: layer `t + 1` is tier `t`'s, and calls tier
    /// `t + 1` (or the backend, after the last tier).
    pub(super) calls: Vec<Layer>,
    /// The backend.
    pub(super) host: Host<AttemptId>,
    /// The tiers, from the client inward.
    pub(super) tiers: Vec<Tier>,
    /// The tier the pauses stop (`None`: the backend).
    paused: Option<usize>,
    pub(super) queue: EventQueue,
    /// Attempts answered by the backend's departures at hand, and how
    /// (kept to reuse its memory).
    answered: Vec<(AttemptId, Exit)>,
    /// A hedge cancelled while answers were handed out: its disconnect may
    /// have made others due at once.
    pub(super) recomplete: bool,
    /// Where open traffic's sessions come from, if the client sends it.
    pub(super) source: Option<Source>,
    pub(super) events: u64,
}

impl Engine {
    pub(super) fn push(&mut self, at: Duration, event: Event) {
        let key = Key::new(at, event.pack());
        match event {
            // Timeouts come in time order unless a deadline cuts one short.
            Event::Deadline(_) | Event::CallDeadline(..) => self.queue.push_ordered(key),
            _ => self.queue.push(key),
        }
    }

    /// Sends attempt `id` of layer `l`, which times out at `deadline`, to
    /// the server that layer calls, on a pooled connection or a new one.
    #[inline(always)]
    pub(super) fn send(
        &mut self,
        l: usize,
        now: Duration,
        id: AttemptId,
        deadline: Duration,
        pooled: bool,
    ) -> Delivery {
        match self.tiers.get_mut(l) {
            None => self.host.send(now, id, pooled),
            Some(tier) => tier.host.send(now, Incoming::new(id, deadline), pooled),
        }
    }

    /// A retransmitted SYN of attempt `id` of layer `l` arrives.
    #[inline(always)]
    pub(super) fn retry_connect(
        &mut self,
        l: usize,
        now: Duration,
        id: AttemptId,
        deadline: Duration,
    ) -> Delivery {
        match self.tiers.get_mut(l) {
            None => self.host.retry_connect(now, id),
            Some(tier) => tier.host.retry_connect(now, Incoming::new(id, deadline)),
        }
    }

    /// The caller of layer `l` admitted with `ticket` closed its
    /// connection; true if the server called was told now.
    #[inline]
    pub(super) fn disconnect(&mut self, l: usize, now: Duration, ticket: Ticket) -> bool {
        match self.tiers.get_mut(l) {
            None => self.host.disconnect(now, ticket),
            Some(tier) => tier.host.disconnect(now, ticket),
        }
    }

    /// The next departure of any running server.
    #[inline(always)]
    pub(super) fn next_completion(&self) -> Option<Duration> {
        let next = self.host.next_completion();
        if self.tiers.is_empty() {
            return next;
        }
        self.next_completion_of_tiers(next)
    }

    /// The earlier of `next` and the tiers' next departures.
    #[inline(never)]
    fn next_completion_of_tiers(&self, mut next: Option<Duration>) -> Option<Duration> {
        for tier in &self.tiers {
            next = match (next, tier.host.next_completion()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        next
    }

    /// Answers requests that left a server by `now` (served, or dropped
    /// from its queue with a 503) whose callers still wait; a tier calls
    /// inward for those it served.
    pub(super) fn complete(&mut self, now: Duration) {
        if self.tiers.is_empty() {
            loop {
                self.complete_once(now);
                if !std::mem::take(&mut self.recomplete) {
                    return;
                }
            }
        }
        let due = |host: Option<Duration>| host.is_some_and(|at| at <= now);
        loop {
            let mut any = false;
            for t in 0..self.tiers.len() {
                if due(self.tiers[t].host.next_completion()) {
                    self.complete_tier(t, now);
                    any = true;
                }
            }
            if due(self.host.next_completion()) {
                self.complete_once(now);
                any = true;
            }
            self.recomplete = false;
            if !any {
                return;
            }
        }
    }

    /// The backend's departures due by `now`, answered to the last layer.
    fn complete_once(&mut self, now: Duration) {
        let l = self.tiers.len();
        let mut answered = std::mem::take(&mut self.answered);
        let layer = self.calls.last().unwrap_or(&self.client);
        self.host.advance(now, |id, exit| {
            let waiting = in_flight(&layer.live, &layer.slots, id);
            if waiting {
                answered.push((id, exit));
            }
            waiting
        });
        match l {
            0 => answered
                .drain(..)
                .for_each(|(id, exit)| self.answer::<true>(l, id, exit, now)),
            _ => answered
                .drain(..)
                .for_each(|(id, exit)| self.answer::<false>(l, id, exit, now)),
        }
        self.answered = answered;
    }

    /// The server layer `l` calls answers attempt `id` as it left the
    /// server's model.
    #[inline(always)]
    pub(super) fn answer<const C: bool>(
        &mut self,
        l: usize,
        id: AttemptId,
        exit: Exit,
        now: Duration,
    ) {
        let (outcome, hints) = match exit {
            Exit::Served => (Outcome::Ok, Hints::default()),
            Exit::Dropped | Exit::Cancelled => {
                (Outcome::Error, self.layer::<C>(l).answers.dropped())
            }
        };
        self.reply::<C>(l, id, outcome, hints, now);
    }

    /// An answer reaches attempt `id` of layer `l` at `now`, on a
    /// connection that stays open; a stopped tier reads it when it
    /// resumes.
    pub(super) fn reply<const C: bool>(
        &mut self,
        l: usize,
        id: AttemptId,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
    ) {
        // A hedge answered at the same instant as the winner: it was
        // cancelled just now.
        if !self.in_flight::<C>(l, id) {
            return;
        }
        if !C && self.tiers[l - 1].host.is_stopped() {
            self.tiers[l - 1].unread(id, outcome, hints);
            return;
        }
        self.kept_open::<C>(l);
        self.end::<C>(l, id, outcome, hints, now, false);
    }

    /// An answer came back to layer `l` on a connection that goes back to
    /// its pool, if the server called keeps connections open (over HTTP/2
    /// the connection was never taken out: its stream ends instead).
    pub(super) fn kept_open<const C: bool>(&mut self, l: usize) {
        if self.layer::<C>(l).mux.is_some() {
            return;
        }
        let keeps = match self.tiers.get(l) {
            None => self.host.keeps_alive(),
            Some(tier) => tier.host.keeps_alive(),
        };
        self.layer_mut::<C>(l).pool += u64::from(keeps);
    }

    /// [`Engine::reply`] to a layer known by its number only.
    pub(super) fn reply_to(
        &mut self,
        l: usize,
        id: AttemptId,
        outcome: Outcome,
        hints: Hints,
        now: Duration,
    ) {
        match l {
            0 => self.reply::<true>(l, id, outcome, hints, now),
            _ => self.reply::<false>(l, id, outcome, hints, now),
        }
    }

    /// SIGSTOP of the paused server.
    pub(super) fn stop(&mut self) {
        match self.paused {
            None => self.host.stop(),
            Some(t) => self.tiers[t].host.stop(),
        }
    }

    /// Whether the backend is stopped.
    pub(super) fn backend_stopped(&self) -> bool {
        self.host.is_stopped()
    }

    /// SIGCONT of the paused server at `now`.
    pub(super) fn resume(&mut self, now: Duration) {
        if let Some(t) = self.paused {
            self.resume_tier(t, now);
            return;
        }
        let l = self.tiers.len();
        let mut reads = Vec::new();
        let calmed = self.calmed(l, self.host.pending_resets());
        let layer = self.calls.last().unwrap_or(&self.client);
        self.host.resume(
            now,
            |id| !in_flight(&layer.live, &layer.slots, *id),
            |id| calmed.unread.contains(id),
            |id, fate| reads.push((id, fate)),
        );
        // Requests whose client is gone stay in the model as wasted work.
        self.read_at_resume(l, reads, now);
        self.gone_away(l, &calmed, now);
        // What fell due while the server was stopped is answered now.
        self.complete(now);
    }

    /// Attempts of layer `l` read at `now` by the server it calls as it
    /// resumed, with their fates: those still in flight take them.
    pub(super) fn read_at_resume(
        &mut self,
        l: usize,
        reads: Vec<(AttemptId, Delivery)>,
        now: Duration,
    ) {
        for (id, fate) in reads {
            match l {
                0 if self.current::<true>(l, id).is_some() => {
                    self.delivered::<true>(l, id, fate, now, 0, Duration::ZERO);
                }
                0 => {}
                _ if self.current::<false>(l, id).is_some() => {
                    self.delivered::<false>(l, id, fate, now, 0, Duration::ZERO);
                }
                _ => {}
            }
        }
    }

    /// The engine of `config` at the start: every user thinking, the
    /// report ticks and the pauses queued.
    pub(super) fn new(config: &SimConfig) -> Engine {
        let client = &config.client;
        let called = |t: usize| config.tiers.get(t).unwrap_or(&config.server);
        let mut calls = Vec::new();
        let mut tiers = Vec::new();
        for (t, server) in config.tiers.iter().enumerate() {
            let call = server.call.as_deref().expect("a validated chain");
            calls.push(Layer::new(&call.client, called(t + 1), Vec::new()));
            tiers.push(Tier::new(server, call));
        }
        let rules = client.rules();
        let users = (0..client.clients)
            .map(|i| {
                let rng = user_rng(client.seed, u64::from(i));
                Slot::of(User::new(&rules, rng, client.start_of(i)))
            })
            .collect();
        let mut engine = Engine {
            client: Layer::new(client, called(0), users),
            calls,
            host: Host::new(&config.server),
            tiers,
            paused: config.paused,
            queue: EventQueue::with_capacity(client.clients as usize * 2),
            answered: Vec::new(),
            recomplete: false,
            source: client.open.map(|open| {
                Source::new(
                    open,
                    client.seed,
                    client.shard,
                    Duration::ZERO,
                    client.think,
                )
                .expect("a validated arrival rate")
            }),
            events: 0,
        };
        for user in 0..client.clients {
            engine.schedule::<true>(0, user, Duration::ZERO, false);
        }
        if let Some(source) = &engine.source {
            engine.push(source.next_at(), Event::Arrival);
        }
        engine.push(client.report_interval, Event::ClientTick);
        engine.push(config.server.report_interval, Event::ServerTick);
        for (t, tier) in config.tiers.iter().enumerate() {
            engine.push(tier.report_interval, Event::TierTick(t as u32));
        }
        for (i, pause) in config.pauses.iter().enumerate() {
            engine.push(pause.at, Event::Stop(i as u32));
        }
        engine
    }
}
