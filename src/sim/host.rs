//! The server process as the network sees it in virtual time: the
//! latency model, the listen backlog, and the requests that wait while the
//! server is stopped. The backend and every tier of a chain are one each.

use std::collections::VecDeque;
use std::time::Duration;

use crate::model::server::{OnDisconnect, ServerConfig};
use crate::model::service::{Departure, Exit, Refusal, Service, Ticket};
use crate::report::counts::{Held, ServerCounts};
use crate::report::rows::{ServerRow, ServerState};
use crate::report::summary::ServerSummary;

/// Wall-clock stamps of a virtual run: milliseconds since its start, as if
/// it had started at the Unix epoch, so output depends on the seed alone.
pub(crate) fn virtual_unix_ms(t: Duration) -> u64 {
    t.as_millis() as u64
}

/// What a server's model holds for each request: which attempt it
/// answers, and what came with it.
pub trait Request: Copy {
    /// Whether the server holding such requests is a tier of a chain,
    /// which holds a request on while it calls inward, and may be given
    /// deadlines (the backend's path then does neither).
    const TIER: bool;

    /// The caller's deadline that came with the request (a tier's caller's
    /// attempt), if one did.
    fn deadline(&self) -> Option<Duration>;
}

/// How a request reached a stopped server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Read and admitted into the model.
    Admitted(Ticket),
    /// Refused at once (failed by a failing backend, shed, or turned away
    /// by a defence or a full queue).
    Refused(Refusal),
    /// Waiting in a socket or the listen backlog until the server runs.
    Waiting,
    /// No room in the backlog: the SYN was dropped.
    Dropped,
    /// Answered 504 at once, without work: a tier that propagates
    /// deadlines read it after the deadline it came with.
    Expired,
}

/// What the server counts, apart from the service itself (so that the
/// service can hand its departures to the counts).
#[derive(Clone)]
struct Books {
    /// Requests in the model whose client has gone, and the sum of their
    /// admission instants: each is added when its client is known gone and
    /// removed when it leaves the model, so the report needs no pass over
    /// the model.
    gone: u64,
    gone_since: Duration,
    interval: ServerCounts,
    totals: ServerCounts,
    peak: u64,
    /// Requests a tier holds outside its model, calling inward for them.
    calls: u64,
    /// The most requests held at once, in the model or calling.
    peak_held: u64,
    /// Requests answered 504 at once, their deadline passed.
    expired: u64,
}

impl Books {
    /// Counts something in the interval and in the run's totals.
    fn count(&mut self, f: impl Fn(&mut ServerCounts)) {
        f(&mut self.interval);
        f(&mut self.totals);
    }

    /// A request left the model, its answer `received` by a waiting
    /// client or not (its client is then known gone).
    fn departed<T>(&mut self, d: &Departure<T>, received: bool) {
        if !received {
            debug_assert!(self.gone > 0, "only marked requests leave as gone");
            self.gone = self.gone.saturating_sub(1);
            self.gone_since = self.gone_since.saturating_sub(d.start);
        }
        let held = d.at.saturating_sub(d.start);
        self.count(|c| c.departed(d.exit, received, held));
    }
}

/// The server process as the network sees it: the service, the listen
/// backlog and requests waiting while it is stopped.
#[derive(Clone)]
pub struct Host<T> {
    service: Service<T>,
    stopped: bool,
    /// Requests written but not read (the server is stopped), in order,
    /// each marked if its connection holds a backlog slot.
    unread: VecDeque<(T, bool)>,
    /// Backlog slots in use.
    queued: usize,
    backlog: usize,
    cancel: bool,
    /// Whether a request read after the deadline it came with is answered
    /// 504 without work (a tier that propagates deadlines).
    expire: bool,
    /// Whether report rows carry a pool's and the defences' figures.
    defences: bool,
    /// Whether connections stay open after an answer (all but a pool
    /// waiting in the backlog, which closes each after its one request).
    keep_alive: bool,
    /// Disconnects the stopped server will notice when it resumes.
    cancels: Vec<Ticket>,
    /// HTTP/2: the streams a connection may reset before they are
    /// accepted (`model::multiplex::too_many_resets`).
    pending_resets: u32,
    books: Books,
}

impl<T: Request> Host<T> {
    /// A running server with `config`'s model, backlog and policies.
    pub fn new(config: &ServerConfig) -> Self {
        Host {
            service: Service::new(config),
            stopped: false,
            unread: VecDeque::new(),
            queued: 0,
            backlog: config.backlog as usize,
            cancel: config.on_disconnect == OnDisconnect::Cancel,
            expire: config.call.as_ref().is_some_and(|c| c.propagate_deadline),
            defences: config.reports_defences(),
            keep_alive: !config.waits_in_backlog(),
            cancels: Vec::new(),
            pending_resets: config.pending_resets,
            books: Books {
                gone: 0,
                gone_since: Duration::ZERO,
                interval: ServerCounts::default(),
                totals: ServerCounts::default(),
                peak: 0,
                calls: 0,
                peak_held: 0,
                expired: 0,
            },
        }
    }

    /// Requests in the model.
    #[cfg(test)]
    fn concurrency(&self) -> u64 {
        self.service.concurrency()
    }

    /// A request served by a tier is held on while the tier calls inward
    /// for it.
    pub fn hold_call(&mut self) {
        self.books.calls += 1;
    }

    /// A tier's call has ended (or was cancelled): the request it was
    /// made for is no longer held.
    pub fn release_call(&mut self) {
        debug_assert!(self.books.calls > 0, "a call was held");
        self.books.calls -= 1;
    }

    /// The most requests held at once, in the model or calling inward.
    pub fn peak_held(&self) -> u64 {
        self.books.peak_held.max(self.books.peak)
    }

    /// Requests answered 504 at once, read after their deadline.
    pub fn expired(&self) -> u64 {
        self.books.expired
    }

    /// Whether a connection stays open for the next request once
    /// answered (a refusal included).
    pub fn keeps_alive(&self) -> bool {
        self.keep_alive
    }

    /// HTTP/2: the streams a connection may reset before the server
    /// accepted them, past which it closes the connection at its resume.
    pub fn pending_resets(&self) -> u32 {
        self.pending_resets
    }

    /// Whether the server is stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The next modelled departure, if the server runs: now, if some have
    /// left that were not answered yet.
    #[inline]
    pub fn next_completion(&self) -> Option<Duration> {
        if self.stopped {
            None
        } else {
            // Departures found by a cancellation are answered at once.
            self.service
                .undrained()
                .or_else(|| self.service.next_event())
        }
    }

    /// A request arrives at `now`, on a connection from the pool
    /// (`pooled`) or a new one.
    #[inline]
    pub fn send(&mut self, now: Duration, request: T, pooled: bool) -> Delivery {
        if !self.stopped {
            return self.read(now, request);
        }
        // Linux's accept queue is full beyond `backlog + 1` connections,
        // counting those a pool waiting in the backlog had not accepted.
        let waiting = self.queued + self.service.backlog_waiting() as usize;
        if !pooled && waiting > self.backlog {
            return Delivery::Dropped;
        }
        self.queued += usize::from(!pooled);
        self.unread.push_back((request, !pooled));
        Delivery::Waiting
    }

    /// A retransmitted SYN arrives: queued if there is room now.
    pub fn retry_connect(&mut self, now: Duration, request: T) -> Delivery {
        self.send(now, request, false)
    }

    /// The server reads a request: admitted into the model, or refused,
    /// or (its deadline passed, at a tier that propagates deadlines)
    /// answered 504 without work.
    fn read(&mut self, now: Duration, request: T) -> Delivery {
        if T::TIER && self.expire && request.deadline().is_some_and(|d| d <= now) {
            self.books.expired += 1;
            return Delivery::Expired;
        }
        match self.service.admit(now, request) {
            Ok(ticket) => {
                let concurrency = self.service.concurrency();
                let queue = self.service.gauges().queue;
                self.books.count(|c| c.admitted(concurrency, queue));
                self.books.peak = self.books.peak.max(concurrency);
                if T::TIER {
                    let held = concurrency + self.books.calls;
                    self.books.peak_held = self.books.peak_held.max(held);
                }
                Delivery::Admitted(ticket)
            }
            Err((_, Refusal::Unaccepted)) => Delivery::Dropped,
            Err((_, why)) => {
                self.books.count(|c| c.refused(why));
                Delivery::Refused(why)
            }
        }
    }

    /// The client of an admitted request closed its connection: the work
    /// is held for nobody until it leaves the model, which in `cancel` mode
    /// happens when the server notices (at once, or at resume). True if
    /// the service was told now (under a curve the work stops, and the
    /// lower concurrency may make others due at once).
    pub fn disconnect(&mut self, now: Duration, ticket: Ticket) -> bool {
        let Some(start) = self.service.start_of(ticket) else {
            return false;
        };
        self.books.gone += 1;
        self.books.gone_since += start;
        if !self.cancel {
            return false;
        }
        if self.stopped {
            self.cancels.push(ticket);
            return false;
        }
        self.service.cancel(now, ticket);
        true
    }

    /// SIGSTOP.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// SIGCONT at `now`: lets leave what fell due while stopped, notices
    /// disconnects, then reads every waiting request but those on a
    /// connection it closes unread (`closed`: an HTTP/2 connection with
    /// too many streams reset, `model::multiplex::too_many_resets`).
    /// `gone` tells whether a request's client has closed its connection
    /// (or reset its stream); each read request is passed to `delivered`
    /// with its fate (a tier that propagates deadlines answers those whose
    /// deadline has passed 504, without work), but for those a `cancel`
    /// server drops at once.
    pub fn resume(
        &mut self,
        now: Duration,
        gone: impl Fn(&T) -> bool,
        closed: impl Fn(&T) -> bool,
        mut delivered: impl FnMut(T, Delivery),
    ) {
        self.stopped = false;
        // The disconnects first, so that no worker starts a request whose
        // client is known gone. One that fell due while stopped leaves, as
        // gone, with the departures.
        for ticket in std::mem::take(&mut self.cancels) {
            if self.service.start_of(ticket).is_some() {
                self.service.cancel(now, ticket);
            }
        }
        self.service.advance(now);
        self.queued = 0;
        while let Some((request, _)) = self.unread.pop_front() {
            if closed(&request) {
                continue;
            }
            let fate = self.read(now, request);
            if let (true, Delivery::Admitted(ticket)) = (gone(&request), fate) {
                // Held for nobody from now on; in `cancel` mode, dropped as
                // soon as the closed socket shows.
                self.books.gone += 1;
                self.books.gone_since += now;
                if self.cancel {
                    self.service.cancel(now, ticket);
                    continue;
                }
            }
            delivered(request, fate);
        }
    }

    /// Lets leave every request due by `now` (if running), passing each
    /// answer (served, or dropped with a 503) to `answer`, which says
    /// whether its client was still waiting. A client that went while its
    /// request was admitted has been told to the host with
    /// [`Host::disconnect`] (or, at resume, by `gone`).
    pub fn advance(&mut self, now: Duration, mut answer: impl FnMut(T, Exit) -> bool) {
        if self.stopped {
            return;
        }
        self.service.advance(now);
        let books = &mut self.books;
        self.service.drain(|d| {
            let received = d.exit != Exit::Cancelled && answer(d.payload, d.exit);
            books.departed(&d, received);
            received
        });
    }

    /// The requests held for gone clients at `now`.
    fn held(&self, now: Duration) -> Held {
        let total = now.as_nanos() * u128::from(self.books.gone);
        let time = total.saturating_sub(self.books.gone_since.as_nanos());
        Held {
            count: self.books.gone,
            time: Duration::from_nanos(u64::try_from(time).unwrap_or(u64::MAX)),
        }
    }

    /// The report row of the interval of length `measured` ending at `now`.
    pub fn report(&mut self, now: Duration, measured: Duration) -> ServerRow {
        let concurrency = self.service.concurrency();
        let gauges = self.service.gauges();
        let counts = std::mem::replace(
            &mut self.books.interval,
            ServerCounts::starting_at(concurrency, gauges.queue),
        );
        let state = ServerState {
            concurrency,
            delay: self.service.current_delay(),
            held: self.held(now),
            defences: self.defences.then_some(gauges),
            failing: self.service.fails(),
        };
        ServerRow::new(counts, measured, state, virtual_unix_ms(now), now)
    }

    /// The counts over the whole run.
    #[cfg(test)]
    fn totals(&self) -> &ServerCounts {
        &self.books.totals
    }

    /// The run's totals.
    pub fn summary(&self) -> ServerSummary {
        let t = &self.books.totals;
        ServerSummary {
            completed: t.completed,
            abandoned: t.abandoned,
            peak_concurrency: self.books.peak,
            in_flight: self.service.concurrency(),
            abandoned_held: self.books.gone,
            shed: t.shed,
            refused: t.refused + t.limited + t.rejected,
            dropped: t.dropped,
            failed: t.failed,
        }
    }
}

#[cfg(test)]
mod tests;
