//! Open and partly-open traffic (docs/traffic.md): sessions that
//! arrive as one Poisson stream of rate R whatever the service does, each
//! making a geometric number of requests with mean K, think times between,
//! then leaving. K = 1 is open traffic: every arrival one logical request.
//!
//! Arrival k of the one global stream belongs to shard k mod N
//! ([`Shard::owns`]): every shard draws the whole stream's instants and
//! keeps its own, and each session draws from a stream of its own, keyed
//! by its global index, so the shards together make exactly the arrivals
//! and sessions of one process.
//!
//! Traffic starts as if it had been arriving for ever ([`Source`]), as a
//! closed population starts with every user thinking: sessions arriving at
//! rate R, each thinking (K - 1) think times, are at any instant a Poisson
//! number with mean R (K - 1) E[think] between two requests (the time in
//! requests, a small part, aside). Think times and the number of requests
//! left are memoryless, so each of those sessions thinks a fresh think time
//! and then makes a geometric number of requests with mean K. Without them
//! a partly-open run would fill up over the first (K - 1) think times, and
//! its warm-up would see a fraction of the demand.
//!
//! Pure: the engines ask for the next arrival and drive each session's
//! requests through the same user state machine as a closed population.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp1, Geometric, Poisson};

use super::arrivals::{ThinkTime, user_rng};
use super::shard::Shard;
use super::user::{Rules, User};

/// Keeps the arrival stream's generator apart from every user's and
/// session's (`user_rng(seed, index)`).
const STREAM_SALT: u64 = 0x6F70_656E_2D61_7272;

/// Keeps the sessions' generators apart from a closed population's users'.
const SESSION_SALT: u64 = 0x7365_7373_696F_6E73;

/// The user index, under [`STREAM_SALT`], of the generator that draws how
/// many sessions are there at the start (the stream's gaps use 0).
const INITIAL_DRAW: u64 = 1;

/// One arrival: its index in the one global stream, and its instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Its place in the global stream, from 0.
    pub index: u64,
    /// When it arrives, since the engine's epoch.
    pub at: Duration,
}

/// A Poisson stream of arrivals at a given rate.
#[derive(Debug, Clone)]
pub struct Arrivals {
    /// Mean time between arrivals, in seconds.
    gap: f64,
    rng: Xoshiro256PlusPlus,
    next: Arrival,
}

impl Arrivals {
    /// Arrivals at `rate` a second from `start`, drawn from `seed`; refuses
    /// a rate that is not a positive finite number.
    pub fn new(rate: f64, seed: u64, start: Duration) -> Result<Arrivals, String> {
        Arrivals::numbered_from(rate, seed, start, 0)
    }

    /// [`Arrivals::new`], the first arrival's index `first`.
    fn numbered_from(
        rate: f64,
        seed: u64,
        start: Duration,
        first: u64,
    ) -> Result<Arrivals, String> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("an arrival rate must be above 0, not {rate}"));
        }
        let mut arrivals = Arrivals {
            gap: 1.0 / rate,
            rng: user_rng(seed ^ STREAM_SALT, 0),
            next: Arrival {
                index: first,
                at: start,
            },
        };
        arrivals.next.at = arrivals.after(start);
        Ok(arrivals)
    }

    /// The instant one exponential gap after `t`, saturating.
    fn after(&mut self, t: Duration) -> Duration {
        let unit: f64 = self.rng.sample(Exp1);
        t.saturating_add(Duration::try_from_secs_f64(unit * self.gap).unwrap_or(Duration::MAX))
    }

    /// The next arrival of the whole stream.
    pub fn next_arrival(&mut self) -> Arrival {
        let this = self.next;
        self.next = Arrival {
            index: this.index + 1,
            at: self.after(this.at),
        };
        this
    }

    /// The next arrival that `shard` owns: the others are drawn and passed
    /// over, so every shard sees the instants of the one stream.
    pub fn next_for(&mut self, shard: Shard) -> Arrival {
        loop {
            let a = self.next_arrival();
            if shard.owns(a.index) {
                return a;
            }
        }
    }
}

/// How many requests a session makes: geometric on 1, 2, ... with mean
/// `K` (the chance of leaving after each request is 1/K).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionLength {
    mean: f64,
}

impl SessionLength {
    /// Sessions of `mean` requests on average; refuses a mean below 1 or
    /// not finite.
    pub fn new(mean: f64) -> Result<SessionLength, String> {
        if !(mean.is_finite() && mean >= 1.0) {
            return Err(format!(
                "a session makes at least 1 request on average, not {mean}"
            ));
        }
        Ok(SessionLength { mean })
    }

    /// The mean number of requests a session makes.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Draws one session's number of requests (always 1 when the mean is
    /// 1: open traffic).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        if self.mean == 1.0 {
            return 1;
        }
        // Geometric counts the requests before the one after which the
        // session leaves.
        let p = 1.0 / self.mean;
        1 + Geometric::new(p)
            .expect("0 < 1/K < 1")
            .sample(rng)
            .min(u64::MAX - 1)
    }
}

/// The random generator of the session that arrival `index` starts, in a
/// run seeded with `seed`: its own stream, whichever shard runs it.
pub fn session_rng(seed: u64, index: u64) -> Xoshiro256PlusPlus {
    user_rng(seed ^ SESSION_SALT, index)
}

/// Open or partly-open traffic, as a client is told to send it: sessions
/// arriving at `rate` a second, each of a [`SessionLength`], at most
/// `max_outstanding` of them at once in one process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenTraffic {
    /// Sessions arriving a second, in the whole stream (all shards).
    pub rate: f64,
    /// How many requests each session makes.
    pub session: SessionLength,
    /// The most sessions one process holds at once; an arrival beyond it
    /// is refused at the source and counted.
    pub max_outstanding: u64,
}

impl OpenTraffic {
    /// Logical requests a second the whole stream asks for: `R * K`.
    pub fn demand(&self) -> f64 {
        self.rate * self.session.mean()
    }

    /// The same traffic with time compressed `k` times: `k` times the rate.
    pub fn scaled(self, k: f64) -> OpenTraffic {
        OpenTraffic {
            rate: self.rate * k,
            ..self
        }
    }
}

/// A session that has just arrived: its place in the global stream and
/// its user, whose first request is due at the arrival.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its index in the global stream of arrivals.
    pub index: u64,
    /// Its request cycle.
    pub user: User<Xoshiro256PlusPlus>,
}

/// Where one process's sessions come from: the sessions there at the
/// start (see the module's documentation), then its share of the global
/// stream of arrivals; and the bound on the sessions it holds at once.
/// Sessions there at the start take the stream's first indices, so that
/// they too belong to shard k mod N.
#[derive(Debug, Clone)]
pub struct Source {
    traffic: OpenTraffic,
    arrivals: Arrivals,
    shard: Shard,
    seed: u64,
    start: Duration,
    /// Sessions there at the start, in the whole stream.
    initial: u64,
    /// The index of this shard's next session there at the start.
    next_initial: u64,
    /// This shard's next arrival.
    next: Arrival,
}

impl Source {
    /// The source of `traffic` for `shard` of a run seeded with `seed`,
    /// starting at `start`, its sessions thinking `think` on average
    /// between requests.
    pub fn new(
        traffic: OpenTraffic,
        seed: u64,
        shard: Shard,
        start: Duration,
        think: ThinkTime,
    ) -> Result<Source, String> {
        let initial = Self::initial_sessions(&traffic, seed, think)?;
        let mut arrivals = Arrivals::numbered_from(traffic.rate, seed, start, initial)?;
        let next = arrivals.next_for(shard);
        Ok(Source {
            traffic,
            arrivals,
            shard,
            seed,
            start,
            initial,
            next_initial: u64::from(shard.index),
            next,
        })
    }

    /// How many sessions are there at the start: a Poisson number with
    /// mean R (K - 1) E[think], drawn alike by every shard.
    fn initial_sessions(traffic: &OpenTraffic, seed: u64, think: ThinkTime) -> Result<u64, String> {
        let mean = traffic.rate * (traffic.session.mean() - 1.0) * think.mean().as_secs_f64();
        if mean <= 0.0 {
            return Ok(0);
        }
        let poisson = Poisson::new(mean).map_err(|e| {
            format!("{mean} sessions at the start on average (rate x (K - 1) x think): {e}")
        })?;
        let drawn: f64 = poisson.sample(&mut user_rng(seed ^ STREAM_SALT, INITIAL_DRAW));
        Ok(drawn as u64)
    }

    /// Sessions there at the start, in the whole stream (all shards).
    pub fn initial(&self) -> u64 {
        self.initial
    }

    /// When this shard's next session comes: at the start while some of
    /// those there at the start are still to come.
    pub fn next_at(&self) -> Duration {
        if self.next_initial < self.initial {
            self.start
        } else {
            self.next.at
        }
    }

    /// Takes the session that is due, under `rules`, the process holding
    /// `held` sessions: the session admitted if that is below the bound;
    /// else `None`, the arrival refused at the source, never sent.
    pub fn arrive(&mut self, rules: &Rules, held: u64) -> Option<Session> {
        let (index, at, there) = if self.next_initial < self.initial {
            let index = self.next_initial;
            self.next_initial += u64::from(self.shard.count);
            (index, self.start, true)
        } else {
            let arrival = self.next;
            self.next = self.arrivals.next_for(self.shard);
            (arrival.index, arrival.at, false)
        };
        if held >= self.traffic.max_outstanding {
            return None;
        }
        let mut rng = session_rng(self.seed, index);
        let requests = self.traffic.session.sample(&mut rng);
        let user = match there {
            true => User::thinking(rules, rng, at, requests),
            false => User::arriving(rules, rng, at, requests),
        };
        Some(Session { index, user })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Arrivals per whole second of `[0, seconds)`.
    fn counts(rate: f64, seed: u64, seconds: usize) -> Vec<u64> {
        let mut arrivals = Arrivals::new(rate, seed, Duration::ZERO).unwrap();
        let mut counts = vec![0u64; seconds];
        loop {
            let a = arrivals.next_arrival();
            let s = a.at.as_secs() as usize;
            if s >= seconds {
                return counts;
            }
            counts[s] += 1;
        }
    }

    #[test]
    fn arrivals_come_at_the_rate() {
        // 50 a second for 2,000 s: 100,000 expected, standard deviation
        // sqrt(100,000) = 316; within four of them.
        let total: u64 = counts(50.0, 7, 2000).iter().sum();
        assert!((total as f64 - 100_000.0).abs() < 4.0 * 316.3, "{total}");
    }

    #[test]
    fn counts_per_second_are_poisson_dispersed() {
        // Poisson counts have variance equal to their mean: over n = 2,000
        // intervals the dispersion index D = s^2 / mean has (n - 1) D
        // chi-square with n - 1 degrees of freedom, so D lies within
        // 1 +- 4 sqrt(2 / (n - 1)) = 1 +- 0.127 but for 1 in 15,000 seeds.
        // Evenly spaced arrivals (k6's, wrk2's) give D = 0.
        for seed in [1, 2, 3] {
            let c = counts(20.0, seed, 2000);
            let n = c.len() as f64;
            let mean = c.iter().sum::<u64>() as f64 / n;
            let var = c.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let d = var / mean;
            assert!((d - 1.0).abs() < 0.127, "seed {seed}: D = {d}");
            assert!((mean - 20.0).abs() < 4.0 * (20.0f64 / n).sqrt(), "{mean}");
        }
    }

    #[test]
    fn shards_split_the_one_stream_exactly() {
        // Three shards' arrivals, merged, are the whole stream's: the same
        // indices at the same instants, none twice.
        let whole: Vec<Arrival> = {
            let mut a = Arrivals::new(100.0, 11, secs(5.0)).unwrap();
            (0..3000).map(|_| a.next_arrival()).collect()
        };
        let mut merged = Vec::new();
        for index in 0..3 {
            let shard = Shard::new(index, 3).unwrap();
            let mut a = Arrivals::new(100.0, 11, secs(5.0)).unwrap();
            merged.extend((0..1000).map(|_| a.next_for(shard)));
        }
        merged.sort_by_key(|a| a.index);
        assert_eq!(merged, whole);
        assert!(whole.iter().all(|a| a.at > secs(5.0)));
        assert!(whole.windows(2).all(|w| w[0].at <= w[1].at));
        // Shard 1 of 3 owns arrivals 1, 4, 7, ...
        let mut a = Arrivals::new(100.0, 11, secs(5.0)).unwrap();
        let shard = Shard::new(1, 3).unwrap();
        let owned: Vec<u64> = (0..4).map(|_| a.next_for(shard).index).collect();
        assert_eq!(owned, [1, 4, 7, 10]);
    }

    #[test]
    fn a_session_of_mean_one_is_one_request_and_longer_ones_are_geometric() {
        let mut rng = session_rng(3, 0);
        let open = SessionLength::new(1.0).unwrap();
        assert!((0..1000).all(|_| open.sample(&mut rng) == 1));
        // Mean 4: P(1 request) = 1/4, mean 4, variance (1 - p) / p^2 = 12;
        // over 100,000 sessions the mean's standard error is 0.011.
        let four = SessionLength::new(4.0).unwrap();
        let n = 100_000;
        let draws: Vec<u64> = (0..n).map(|_| four.sample(&mut rng)).collect();
        let mean = draws.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean - 4.0).abs() < 0.05, "{mean}");
        let ones = draws.iter().filter(|&&k| k == 1).count() as f64 / n as f64;
        assert!((ones - 0.25).abs() < 0.006, "{ones}");
        assert!(draws.iter().all(|&k| k >= 1));
    }

    fn open(rate: f64, mean: f64, max_outstanding: u64) -> OpenTraffic {
        OpenTraffic {
            rate,
            session: SessionLength::new(mean).unwrap(),
            max_outstanding,
        }
    }

    fn rules() -> Rules {
        Rules {
            think: crate::model::arrivals::ThinkTime::new(secs(1.0)),
            timeout: secs(2.0),
            strategy: crate::policy::Strategy::Fixed { delay: secs(0.1) },
            limits: crate::policy::RetryLimits::default(),
            hedging: None,
        }
    }

    #[test]
    fn the_source_admits_below_its_bound_and_refuses_at_it() {
        let (r, traffic) = (rules(), open(10.0, 1.0, 3));
        let mut source = Source::new(traffic, 4, Shard::WHOLE, Duration::ZERO, r.think).unwrap();
        let mut stream = Arrivals::new(10.0, 4, Duration::ZERO).unwrap();
        for held in [0, 1, 2, 3, 7] {
            let expected = stream.next_arrival();
            assert_eq!(source.next_at(), expected.at);
            match source.arrive(&r, held) {
                Some(s) if held < 3 => {
                    assert_eq!(s.index, expected.index);
                    assert_eq!(s.user.due(), Some(expected.at), "due at its arrival");
                }
                None if held >= 3 => {}
                other => panic!("holding {held}: {other:?}"),
            }
        }
        assert_eq!(traffic.demand(), 10.0);
        assert_eq!(open(10.0, 4.0, 1).scaled(10.0).demand(), 400.0);
    }

    #[test]
    fn a_session_is_the_same_whichever_shard_runs_it() {
        let (r, traffic) = (rules(), open(50.0, 3.0, 100));
        let whole = |index: u64| {
            let mut source =
                Source::new(traffic, 9, Shard::WHOLE, Duration::ZERO, r.think).unwrap();
            loop {
                if let Some(s) = source.arrive(&r, 0)
                    && s.index == index
                {
                    return s;
                }
            }
        };
        let shard = Shard::new(2, 3).unwrap();
        let mut source = Source::new(traffic, 9, shard, Duration::ZERO, r.think).unwrap();
        let mut longer = 0;
        for _ in 0..20 {
            let Some(mut mine) = source.arrive(&r, 0) else {
                panic!("admitted");
            };
            assert_eq!(mine.index % 3, 2);
            let mut same = whole(mine.index);
            assert_eq!(mine.user.due(), same.user.due());
            // The same draws from there on: the same think times.
            for user in [&mut mine.user, &mut same.user] {
                let t = user.due().unwrap();
                let crate::model::user::Attempt::Send { sent, .. } = user.begin(&r, None, t) else {
                    panic!("sent");
                };
                let ok = crate::model::outcome::Outcome::Ok;
                user.finish(&r, None, sent, ok, Default::default(), t + secs(0.1));
            }
            assert_eq!(mine.user.due(), same.user.due());
            assert_eq!(mine.user.is_gone(), same.user.is_gone());
            longer += u32::from(!mine.user.is_gone());
        }
        // Two thirds of sessions of mean 3 make a second request.
        assert!((5..20).contains(&longer), "{longer}");
    }

    #[test]
    fn partly_open_traffic_starts_with_its_sessions_thinking() {
        // 10 sessions a second of 10 requests, thinking 1 s between them:
        // 10 x 9 x 1 = 90 sessions there on average, Poisson (sd 9.5).
        let r = rules();
        let traffic = open(10.0, 10.0, u64::MAX);
        let start = secs(3.0);
        let counts: Vec<u64> = (0..200)
            .map(|seed| {
                Source::new(traffic, seed, Shard::WHOLE, start, r.think)
                    .unwrap()
                    .initial()
            })
            .collect();
        let mean = counts.iter().sum::<u64>() as f64 / 200.0;
        assert!((mean - 90.0).abs() < 4.0 * 9.5 / 200f64.sqrt(), "{mean}");
        let var = counts
            .iter()
            .map(|&c| (c as f64 - mean).powi(2))
            .sum::<f64>()
            / 199.0;
        assert!(
            (var / mean - 1.0).abs() < 0.4,
            "Poisson: variance {var}, mean {mean}"
        );
        // Open traffic has none: every arrival is one request, at once.
        let none = Source::new(open(10.0, 1.0, 9), 1, Shard::WHOLE, start, r.think).unwrap();
        assert_eq!(none.initial(), 0);

        // Those there come first, at the start, thinking; the stream's
        // arrivals follow, numbered after them; three shards share both.
        let whole = Source::new(traffic, 5, Shard::WHOLE, start, r.think).unwrap();
        let n = whole.initial();
        let mut seen = Vec::new();
        for index in 0..3 {
            let shard = Shard::new(index, 3).unwrap();
            let mut source = Source::new(traffic, 5, shard, start, r.think).unwrap();
            for _ in 0..n.div_ceil(3) + 5 {
                let at = source.next_at();
                let s = source.arrive(&r, 0).unwrap();
                assert_eq!(s.index % 3, u64::from(index));
                if s.index < n {
                    assert_eq!(at, start);
                    assert!(s.user.due().unwrap() > start, "thinks first");
                } else {
                    assert!(at > start);
                    assert_eq!(s.user.due(), Some(at), "an arrival sends at once");
                }
                seen.push(s.index);
            }
        }
        seen.sort_unstable();
        assert!(seen.iter().take(n as usize).copied().eq(0..n), "each once");
    }

    #[test]
    fn bad_rates_and_means_are_refused() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Arrivals::new(rate, 1, Duration::ZERO).is_err(), "{rate}");
        }
        for mean in [0.5, 0.0, f64::NAN, f64::INFINITY] {
            assert!(SessionLength::new(mean).is_err(), "{mean}");
        }
    }

    #[test]
    fn sessions_draw_streams_of_their_own_whatever_the_shard() {
        let draw = |index| session_rng(5, index).random::<u64>();
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
        assert_ne!(
            session_rng(5, 0).random::<u64>(),
            user_rng(5, 0).random::<u64>()
        );
    }
}
