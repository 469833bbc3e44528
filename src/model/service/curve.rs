//! Exact completion of in-flight requests under a delay curve.
//!
//! Every in-flight request shares one modelled delay, `delay(concurrency)`, so
//! the oldest request always completes first. A request completes at the first
//! instant its elapsed time reaches the delay for the *current* concurrency,
//! re-evaluated whenever the concurrency changes. Holding requests in arrival
//! order and watching only the oldest makes that exact at O(1) per event,
//! whatever the concurrency, with no polling tick.
//!
//! Time is a [`Duration`] since an epoch the caller chooses, so the same code
//! serves the real server (wall clock) and a virtual-time engine.

use std::time::Duration;

use super::fifo::Fifo;
use super::ticket::{Departure, Exit, Ticket};
use crate::model::latency::{Curve, DelayTable};

/// A request in flight; its ticket is its place in the queue counted
/// from the front's (kept out of the entry: a storm holds tens of
/// thousands, and every byte of them is memory first touched).
#[derive(Clone)]
struct Entry<T> {
    start: Duration,
    /// `None` once cancelled; cancelled entries no longer count.
    payload: Option<T>,
}

impl<T> Default for Entry<T> {
    /// What a taken entry leaves in its place.
    fn default() -> Self {
        Entry {
            start: Duration::ZERO,
            payload: None,
        }
    }
}

/// Holds in-flight requests in arrival order and completes them on time.
#[derive(Clone)]
pub struct CompletionScheduler<T> {
    model: DelayTable,
    queue: Fifo<Entry<T>>,
    live: u64,
    /// `model.delay(live)`, kept up to date: read on every event, it
    /// changes only with the concurrency.
    delay: Duration,
    /// The ticket of the queue's front entry, or of the next admitted if
    /// the queue is empty.
    front: u64,
    /// Instant of the last event seen: admissions, cancellations, completions.
    clock: Duration,
    /// Completions found so far, each at its exact modelled instant (at
    /// or before the `now` that revealed it).
    done: Vec<Departure<T>>,
}

impl<T> CompletionScheduler<T> {
    /// An empty scheduler using `model` for every delay.
    pub fn new(model: Curve) -> Self {
        CompletionScheduler {
            model: DelayTable::reuse(model),
            queue: Fifo::default(),
            live: 0,
            delay: model.delay(0),
            front: 0,
            clock: Duration::ZERO,
            done: Vec::new(),
        }
    }

    /// Number of requests in flight (admitted, not completed, not cancelled).
    pub fn concurrency(&self) -> u64 {
        self.live
    }

    /// The delay the model gives every in-flight request right now.
    pub fn current_delay(&self) -> Duration {
        self.delay
    }

    fn set_live(&mut self, live: u64) {
        self.live = live;
        self.delay = self.model.delay(live);
    }

    /// The instant of the next completion if nothing else happens before it.
    #[inline]
    pub fn next_completion(&self) -> Option<Duration> {
        let front = self.queue.front()?;
        Some((front.start + self.current_delay()).max(self.clock))
    }

    /// Completes every request due at or before `now`, in order.
    ///
    /// Time never runs backwards: a `now` earlier than an event already seen
    /// is taken as that event's instant.
    #[inline(always)]
    pub fn advance(&mut self, now: Duration) {
        let now = now.max(self.clock);
        // Most events find nothing due.
        if self.next_completion().is_some_and(|due| due <= now) {
            self.complete_until(now);
        }
        self.clock = now;
    }

    /// Completes every request due at or before `now`, which is no
    /// earlier than the clock. Kept out of line, so that [`Self::advance`]
    /// inlines where it finds nothing due.
    #[inline(never)]
    fn complete_until(&mut self, now: Duration) {
        while let Some(due) = self.next_completion() {
            if due > now {
                break;
            }
            let entry = self.pop_front().expect("a due request exists");
            let payload = entry.payload.expect("the front entry is live");
            self.set_live(self.live - 1);
            self.clock = due;
            self.done.push(Departure {
                payload,
                ticket: Ticket(self.front - 1),
                start: entry.start,
                at: due,
                exit: Exit::Served,
            });
            self.drop_cancelled_front();
        }
    }

    /// Admits a request at `now` (after completing what was due before it).
    pub fn admit(&mut self, now: Duration, payload: T) -> Ticket {
        self.advance(now);
        let ticket = Ticket(self.front + self.queue.len() as u64);
        self.queue.push_back(Entry {
            start: self.clock,
            payload: Some(payload),
        });
        self.set_live(self.live + 1);
        ticket
    }

    /// Removes a request at `now` if it is still in flight, returning its
    /// payload. The lower concurrency may complete others at once.
    pub fn cancel(&mut self, now: Duration, ticket: Ticket) -> Option<T> {
        self.advance(now);
        let index = self.index_of(ticket)?;
        let payload = self.queue.get_mut(index)?.payload.take()?;
        self.set_live(self.live - 1);
        self.drop_cancelled_front();
        self.advance(now);
        Some(payload)
    }

    /// When the request of `ticket` was admitted, if it is still in flight.
    #[inline]
    pub fn start_of(&self, ticket: Ticket) -> Option<Duration> {
        let entry = self.queue.get(self.index_of(ticket)?)?;
        entry.payload.as_ref().map(|_| entry.start)
    }

    /// Where `ticket` is in the queue, if it is still there. Tickets are
    /// issued one after another in arrival order and entries leave only
    /// from the front, so the queue holds consecutive tickets: the place
    /// is an offset from the front's (a binary search over tens of
    /// thousands of requests in flight was a tenth of a storm's time).
    fn index_of(&self, ticket: Ticket) -> Option<usize> {
        let index = usize::try_from(ticket.0.checked_sub(self.front)?).ok()?;
        (index < self.queue.len()).then_some(index)
    }

    /// The requests in flight, oldest first, each with its admission
    /// instant.
    pub fn in_flight(&self) -> impl Iterator<Item = (&T, Duration)> {
        self.queue
            .iter()
            .filter_map(|e| e.payload.as_ref().map(|p| (p, e.start)))
    }

    /// Whether completions were found since they were last taken.
    #[inline]
    pub fn has_completed(&self) -> bool {
        !self.done.is_empty()
    }

    /// Takes the completions found so far, oldest first.
    pub fn drain_completed(&mut self) -> std::vec::Drain<'_, Departure<T>> {
        self.done.drain(..)
    }

    fn drop_cancelled_front(&mut self) {
        while self.queue.front().is_some_and(|e| e.payload.is_none()) {
            self.pop_front();
        }
    }

    /// Takes the front entry; the next one's ticket is one more.
    fn pop_front(&mut self) -> Option<Entry<T>> {
        let entry = self.queue.pop_front()?;
        self.front += 1;
        Some(entry)
    }
}

impl<T> Drop for CompletionScheduler<T> {
    /// Leaves the delay table to the next scheduler of the same curve.
    fn drop(&mut self) {
        self.model.take().keep();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::latency::LatencyModel;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// delay(1) = 100 ms, doubling with every further request.
    fn doubling() -> Curve {
        Curve::Exponential(doubling_model())
    }

    /// 100 ms whatever the concurrency.
    fn flat() -> Curve {
        Curve::Exponential(LatencyModel {
            factor: 1.0,
            ..doubling_model()
        })
    }

    fn doubling_model() -> LatencyModel {
        LatencyModel {
            base: ms(100),
            limit: 1,
            factor: 2.0,
            scale: 1.0,
            max_delay: Duration::from_secs(3600),
        }
    }

    fn drain(s: &mut CompletionScheduler<&'static str>) -> Vec<(&'static str, u64)> {
        s.drain_completed()
            .map(|c| (c.payload, c.at.as_millis() as u64))
            .collect()
    }

    #[test]
    fn single_request_completes_after_base_delay() {
        let mut s = CompletionScheduler::new(doubling());
        s.admit(ms(10), "a");
        assert_eq!(s.next_completion(), Some(ms(110)));
        s.advance(ms(109));
        assert!(drain(&mut s).is_empty());
        s.advance(ms(500));
        assert_eq!(drain(&mut s), vec![("a", 110)]);
        assert_eq!(s.concurrency(), 0);
        assert_eq!(s.next_completion(), None);
    }

    #[test]
    fn oldest_completes_first() {
        let mut s = CompletionScheduler::new(flat());
        for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            s.admit(ms(i as u64 * 5), name);
        }
        s.advance(ms(1000));
        assert_eq!(
            drain(&mut s),
            vec![("a", 100), ("b", 105), ("c", 110), ("d", 115)]
        );
    }

    #[test]
    fn rising_concurrency_delays_the_oldest() {
        let mut s = CompletionScheduler::new(doubling());
        s.admit(ms(0), "a");
        assert_eq!(s.next_completion(), Some(ms(100)));
        s.admit(ms(50), "b");
        // Two in flight: delay 200 ms, so "a" now completes at 200.
        assert_eq!(s.next_completion(), Some(ms(200)));
        s.advance(ms(199));
        assert!(drain(&mut s).is_empty());
        // At 200 "a" completes; "b" alone has delay 100 and elapsed 150: it
        // completes at the same instant, in a cascade.
        s.advance(ms(200));
        assert_eq!(drain(&mut s), vec![("a", 200), ("b", 200)]);
    }

    #[test]
    fn cascade_stops_where_the_condition_fails() {
        // delay(1) = 100, delay(2) = 150, delay(3) = 225 ms.
        let model = LatencyModel {
            factor: 1.5,
            ..doubling_model()
        };
        let mut s = CompletionScheduler::new(Curve::Exponential(model));
        s.admit(ms(0), "a");
        s.admit(ms(0), "b");
        s.admit(ms(140), "c");
        // Three in flight: "a" completes at 225. Two remain (150 ms): "b" has
        // waited 225 and completes too. "c" alone needs 100 ms but has
        // waited 85: it completes at 240.
        s.advance(ms(10_000));
        assert_eq!(drain(&mut s), vec![("a", 225), ("b", 225), ("c", 240)]);
    }

    #[test]
    fn cancelling_lowers_the_delay_and_may_complete_at_once() {
        let mut s = CompletionScheduler::new(doubling());
        s.admit(ms(0), "a");
        let b = s.admit(ms(0), "b");
        s.admit(ms(0), "c");
        // 400 ms for three; at 150 "b" goes away: two left, 200 ms.
        assert_eq!(s.start_of(b), Some(ms(0)));
        let held: Vec<_> = s.in_flight().map(|(p, start)| (*p, start)).collect();
        assert_eq!(held, vec![("a", ms(0)), ("b", ms(0)), ("c", ms(0))]);
        assert_eq!(s.cancel(ms(150), b), Some("b"));
        assert_eq!(s.start_of(b), None, "cancelled");
        assert_eq!(s.concurrency(), 2);
        assert!(drain(&mut s).is_empty());
        // Two in flight from 150 on: "a" completes at 200, and then "c",
        // alone with 100 ms and 200 waited, at once.
        s.advance(ms(199));
        assert_eq!(drain(&mut s), vec![]);
        s.advance(ms(200));
        assert_eq!(drain(&mut s), vec![("a", 200), ("c", 200)]);
        // A cancelled ticket cannot be cancelled twice.
        assert_eq!(s.cancel(ms(300), b), None);
    }

    #[test]
    fn cancelling_the_oldest_completes_a_due_successor_at_the_cancel_instant() {
        let mut s = CompletionScheduler::new(doubling());
        let a = s.admit(ms(0), "a");
        s.admit(ms(10), "b");
        assert_eq!(s.cancel(ms(150), a), Some("a"));
        // "b" alone needs 100 ms and has waited 140: it completes at 150.
        assert_eq!(drain(&mut s), vec![("b", 150)]);
        assert_eq!(s.concurrency(), 0);
    }

    #[test]
    fn tickets_are_found_after_the_front_has_left() {
        let mut s = CompletionScheduler::new(flat());
        let t: Vec<Ticket> = (0..6).map(|i| s.admit(ms(i * 10), i)).collect();
        // 0 and 1 leave (100 and 110 ms); 3 is cancelled in the middle.
        s.advance(ms(115));
        assert_eq!(s.cancel(ms(115), t[3]), Some(3));
        assert_eq!(s.start_of(t[0]), None, "served");
        assert_eq!(s.start_of(t[1]), None, "served");
        assert_eq!(s.start_of(t[2]), Some(ms(20)));
        assert_eq!(s.start_of(t[3]), None, "cancelled");
        assert_eq!(s.start_of(t[5]), Some(ms(50)));
        assert_eq!(s.start_of(Ticket(6)), None, "never issued");
        // 2 leaves; 3, cancelled, leaves the front with it.
        s.advance(ms(120));
        assert_eq!(s.start_of(t[4]), Some(ms(40)));
        assert_eq!(s.cancel(ms(121), t[2]), None);
        assert_eq!(s.cancel(ms(121), t[4]), Some(4));
        assert_eq!(s.start_of(t[5]), Some(ms(50)));
    }

    #[test]
    fn tickets_go_on_counting_after_the_queue_empties() {
        let mut s = CompletionScheduler::new(flat());
        let a = s.admit(ms(0), 0);
        let b = s.admit(ms(0), 1);
        assert_eq!((a, b), (Ticket(0), Ticket(1)));
        s.advance(ms(100));
        assert_eq!(s.concurrency(), 0, "both served, the queue empty");
        let c = s.admit(ms(200), 2);
        assert_eq!(c, Ticket(2), "not numbered from the empty queue's front");
        assert_eq!(s.start_of(b), None, "served");
        assert_eq!(s.start_of(c), Some(ms(200)));
        assert_eq!(s.cancel(ms(250), c), Some(2));
        // Emptied by a cancellation this time.
        assert_eq!(s.admit(ms(260), 3), Ticket(3));
        let tickets: Vec<Ticket> = s.drain_completed().map(|d| d.ticket).collect();
        assert_eq!(tickets, vec![a, b]);
    }

    #[test]
    fn cancelling_after_completion_returns_nothing() {
        let mut s = CompletionScheduler::new(doubling());
        let a = s.admit(ms(0), "a");
        assert_eq!(s.cancel(ms(100), a), None);
        assert_eq!(drain(&mut s), vec![("a", 100)]);
    }

    #[test]
    fn late_observation_reports_exact_instants() {
        let mut s = CompletionScheduler::new(doubling());
        s.admit(ms(0), "a");
        s.admit(ms(0), "b");
        s.admit(ms(0), "c");
        s.advance(ms(60_000));
        assert_eq!(drain(&mut s), vec![("a", 400), ("b", 400), ("c", 400)]);
    }

    #[test]
    fn many_requests_match_a_brute_force_reference() {
        use rand::{RngExt, SeedableRng, rngs::Xoshiro256PlusPlus};
        let model = LatencyModel {
            base: ms(100),
            limit: 3,
            factor: 1.3,
            scale: 2.0,
            max_delay: Duration::from_secs(60),
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut starts = Vec::new();
        let mut t = 0u64;
        for _ in 0..200 {
            t += rng.random_range(0..40);
            starts.push(ms(t));
        }
        let mut s = CompletionScheduler::new(Curve::Exponential(model));
        for (i, &start) in starts.iter().enumerate() {
            s.admit(start, i);
        }
        s.advance(Duration::from_secs(100_000));
        let got: Vec<(usize, Duration)> = s.drain_completed().map(|c| (c.payload, c.at)).collect();

        // Reference: step time in 1 ms ticks, re-checking every request.
        let mut reference = Vec::new();
        let mut in_flight: Vec<usize> = Vec::new();
        let mut next = 0;
        let mut now = Duration::ZERO;
        while reference.len() < starts.len() {
            // Completions due at an instant come before admissions at it.
            loop {
                let delay = model.delay(in_flight.len() as u64);
                match in_flight.first() {
                    Some(&i) if now - starts[i] >= delay => {
                        reference.push((i, now));
                        in_flight.remove(0);
                    }
                    _ => break,
                }
            }
            while next < starts.len() && starts[next] <= now {
                in_flight.push(next);
                next += 1;
            }
            now += ms(1);
        }
        // Ticks round each instant up to the millisecond.
        assert_eq!(got.len(), reference.len());
        for ((gi, gat), (ri, rat)) in got.iter().zip(&reference) {
            assert_eq!(gi, ri);
            assert!(
                *rat >= *gat && *rat - *gat < ms(1),
                "{gi}: {gat:?} vs {rat:?}"
            );
        }
    }
}
