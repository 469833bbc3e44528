//! Retry throttles: state shared by all the clients of one process that
//! decides whether an attempt may go out at all.
//!
//! Two kinds. `token-bucket`, `budget` and the shipped clients' budgets
//! only ever refuse *retries*, and decide when the failure arrives, before
//! any backoff, as their sources do; the logical request is then given up.
//! `adaptive` and `circuit-breaker` may refuse any attempt when it is about
//! to go out; such an attempt fails at once, as an error, without touching
//! the network. The AWS SDKs' adaptive mode may instead hold an attempt
//! until its rate limiter has a token for it.

use std::time::Duration;

use rand::{Rng, RngExt};

pub use super::decision::Decision;
use super::shipped::{Answer, AttemptKind, ShippedThrottle, ShippedThrottleConfig};
use crate::model::timescale::compress;

/// Throttle parameters, as chosen on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThrottleConfig {
    /// gRPC retry throttling: tokens start at `max_tokens`; each failed
    /// attempt takes one, each success adds `token_ratio`; no retries while
    /// tokens are at or below half the maximum.
    TokenBucket {
        /// Size of the bucket (gRPC example: 10).
        max_tokens: f64,
        /// Tokens a success returns (gRPC example: 0.1).
        token_ratio: f64,
    },
    /// A Finagle-style retry budget: over the last `ttl`, retries may not
    /// exceed `percent` of first attempts plus `min_per_sec * ttl`.
    Budget {
        /// Retries allowed per first attempt (0.2 for 20 %).
        percent: f64,
        /// Window length.
        ttl: Duration,
        /// Retries allowed per second regardless of traffic.
        min_per_sec: f64,
    },
    /// Client-side adaptive throttling (Google SRE book): over the last
    /// `window`, refuse each attempt locally with probability
    /// `max(0, (requests - k * accepts) / (requests + 1))`.
    Adaptive {
        /// The multiplier K (2 in the book).
        k: f64,
        /// Window length (2 minutes in the book).
        window: Duration,
    },
    /// A circuit breaker: closed until failures reach `failure_ratio` of at
    /// least `min_requests` attempts within `window` (or `consecutive`
    /// failures in a row); then open, refusing everything, for `cooldown`;
    /// then half-open, letting `probes` attempts through: a success closes
    /// it, a failure opens it again.
    CircuitBreaker {
        /// Failure share that opens the breaker.
        failure_ratio: f64,
        /// Fewest attempts in the window before the ratio counts.
        min_requests: u64,
        /// Window over which the ratio is measured.
        window: Duration,
        /// Consecutive failures that open the breaker, if set.
        consecutive: Option<u64>,
        /// How long it stays open.
        cooldown: Duration,
        /// Attempts let through while half-open.
        probes: u32,
    },
    /// A shipped client's budget ([`crate::policy::shipped`]).
    Shipped(ShippedThrottleConfig),
}

impl ThrottleConfig {
    /// The same throttle for an experiment compressed `k` times in time:
    /// windows and cool-downs divided by `k`, rates multiplied by it.
    pub fn scaled(&self, k: f64) -> ThrottleConfig {
        let s = |d: Duration| compress(d, k);
        match *self {
            ThrottleConfig::TokenBucket { .. } => *self,
            ThrottleConfig::Budget {
                percent,
                ttl,
                min_per_sec,
            } => ThrottleConfig::Budget {
                percent,
                ttl: s(ttl),
                min_per_sec: min_per_sec * k,
            },
            ThrottleConfig::Adaptive { k: mult, window } => ThrottleConfig::Adaptive {
                k: mult,
                window: s(window),
            },
            ThrottleConfig::CircuitBreaker {
                failure_ratio,
                min_requests,
                window,
                consecutive,
                cooldown,
                probes,
            } => ThrottleConfig::CircuitBreaker {
                failure_ratio,
                min_requests,
                window: s(window),
                consecutive,
                cooldown: s(cooldown),
                probes,
            },
            ThrottleConfig::Shipped(c) => ThrottleConfig::Shipped(c.scaled(k)),
        }
    }
}

/// Counts of two things over a sliding window, kept in buckets so that
/// adding and reading cost O(1) amortised.
#[derive(Debug, Clone)]
struct Window {
    bucket: Duration,
    /// (bucket index, a, b), oldest first.
    buckets: std::collections::VecDeque<(u64, u64, u64)>,
    len: u64,
    a: u64,
    b: u64,
}

impl Window {
    /// A window of `span`, in twenty buckets.
    fn new(span: Duration) -> Self {
        let bucket = (span / 20).max(Duration::from_micros(1));
        Window {
            bucket,
            buckets: Default::default(),
            len: 20,
            a: 0,
            b: 0,
        }
    }

    fn index(&self, now: Duration) -> u64 {
        (now.as_nanos() / self.bucket.as_nanos()) as u64
    }

    /// Drops buckets that have left the window at `now`.
    fn expire(&mut self, now: Duration) {
        let current = self.index(now);
        while let Some(&(i, a, b)) = self.buckets.front() {
            if i + self.len > current {
                break;
            }
            self.a -= a;
            self.b -= b;
            self.buckets.pop_front();
        }
    }

    fn add(&mut self, now: Duration, a: u64, b: u64) {
        self.expire(now);
        let current = self.index(now);
        match self.buckets.back_mut() {
            Some(last) if last.0 >= current => {
                last.1 += a;
                last.2 += b;
            }
            _ => self.buckets.push_back((current, a, b)),
        }
        self.a += a;
        self.b += b;
    }

    /// The two counts over the window ending at `now`.
    fn counts(&mut self, now: Duration) -> (u64, u64) {
        self.expire(now);
        (self.a, self.b)
    }

    fn clear(&mut self) {
        self.buckets.clear();
        self.a = 0;
        self.b = 0;
    }
}

#[derive(Debug, Clone)]
enum State {
    TokenBucket {
        tokens: f64,
    },
    /// a = first attempts, b = retries.
    Budget {
        window: Window,
    },
    /// a = requests, b = accepts.
    Adaptive {
        window: Window,
    },
    Breaker {
        phase: Phase,
        /// a = attempts, b = failures, while closed.
        window: Window,
        consecutive: u64,
    },
    Shipped(ShippedThrottle),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Closed,
    Open { until: Duration },
    HalfOpen { probes_left: u32 },
}

/// A throttle's state. Pure: time is passed in, randomness too.
#[derive(Debug, Clone)]
pub struct Throttle {
    config: ThrottleConfig,
    state: State,
}

impl Throttle {
    /// A fresh throttle (full bucket, empty windows, closed breaker).
    pub fn new(config: ThrottleConfig) -> Self {
        let state = match config {
            ThrottleConfig::TokenBucket { max_tokens, .. } => {
                State::TokenBucket { tokens: max_tokens }
            }
            ThrottleConfig::Budget { ttl, .. } => State::Budget {
                window: Window::new(ttl),
            },
            ThrottleConfig::Adaptive { window, .. } => State::Adaptive {
                window: Window::new(window),
            },
            ThrottleConfig::CircuitBreaker { window, .. } => State::Breaker {
                phase: Phase::Closed,
                window: Window::new(window),
                consecutive: 0,
            },
            ThrottleConfig::Shipped(c) => State::Shipped(ShippedThrottle::new(c)),
        };
        Throttle { config, state }
    }

    /// The configuration.
    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    /// A shipped client's budget and its state (the AWS quota's balance,
    /// the adaptive limiter's rate), if this is one.
    pub fn shipped(&self) -> Option<&ShippedThrottle> {
        match &self.state {
            State::Shipped(t) => Some(t),
            _ => None,
        }
    }

    /// gRPC's retry throttle's tokens, if this is it (for the checks
    /// against the libraries).
    pub fn tokens(&self) -> Option<f64> {
        match self.state {
            State::TokenBucket { tokens } => Some(tokens),
            _ => None,
        }
    }

    /// Asked at a failure, when the strategy and the retry limits would
    /// retry: whether the retry of `kind` may follow. The throttles that
    /// refuse only retries decide here, when the failure arrives, as their
    /// sources do (gRPC's throttling, botocore's quota, tower's and
    /// Finagle's withdrawals, Envoy's count of retries in flight); a
    /// refused retry gives its logical request up at once. The others let
    /// it follow and judge the attempt when it goes out.
    pub fn allows_retry(&mut self, kind: AttemptKind, now: Duration) -> bool {
        match (&mut self.state, self.config) {
            (State::TokenBucket { tokens }, ThrottleConfig::TokenBucket { max_tokens, .. }) => {
                *tokens > max_tokens / 2.0
            }
            (
                State::Budget { window },
                ThrottleConfig::Budget {
                    percent,
                    ttl,
                    min_per_sec,
                },
            ) => {
                let (firsts, retries) = window.counts(now);
                let allowed = min_per_sec * ttl.as_secs_f64() + percent * firsts as f64;
                let ok = (retries + 1) as f64 <= allowed;
                if ok {
                    window.add(now, 0, 1);
                }
                ok
            }
            (State::Shipped(t), _) => t.allows_retry(kind, now),
            _ => true,
        }
    }

    /// Asked when an attempt of `kind` is about to go out at `now`: send
    /// it, reject it locally, or send it after a wait.
    pub fn before<R: Rng + ?Sized>(
        &mut self,
        kind: AttemptKind,
        now: Duration,
        rng: &mut R,
    ) -> Decision {
        match (&mut self.state, self.config) {
            (State::TokenBucket { .. }, _) => Decision::Allow,
            (State::Budget { window }, _) => {
                if !kind.retry {
                    window.add(now, 1, 0);
                }
                Decision::Allow
            }
            (State::Adaptive { window }, ThrottleConfig::Adaptive { k, .. }) => {
                let (requests, accepts) = window.counts(now);
                let p = ((requests as f64 - k * accepts as f64) / (requests as f64 + 1.0)).max(0.0);
                window.add(now, 1, 0);
                if p > 0.0 && rng.random::<f64>() < p {
                    Decision::Reject
                } else {
                    Decision::Allow
                }
            }
            (State::Breaker { phase, .. }, ThrottleConfig::CircuitBreaker { probes, .. }) => {
                match *phase {
                    Phase::Closed => Decision::Allow,
                    Phase::Open { until } if now >= until => {
                        *phase = Phase::HalfOpen {
                            probes_left: probes.saturating_sub(1),
                        };
                        Decision::Allow
                    }
                    Phase::Open { .. } => Decision::Reject,
                    Phase::HalfOpen { probes_left: 0 } => Decision::Reject,
                    Phase::HalfOpen { probes_left } => {
                        *phase = Phase::HalfOpen {
                            probes_left: probes_left - 1,
                        };
                        Decision::Allow
                    }
                }
            }
            (State::Shipped(t), _) => t.before(kind, now),
            _ => unreachable!("state and config are built together"),
        }
    }

    /// Records how an attempt of `kind` that went out ended. True if a
    /// user waiting for a rate limiter's token is to look again now.
    pub fn after(&mut self, answer: Answer, kind: AttemptKind, now: Duration) -> bool {
        let ok = answer == Answer::Ok;
        match (&mut self.state, self.config) {
            (State::Shipped(t), _) => return t.after(answer, kind, now),
            (
                State::TokenBucket { tokens },
                ThrottleConfig::TokenBucket {
                    max_tokens,
                    token_ratio,
                },
            ) => {
                *tokens = match answer {
                    Answer::Ok => (*tokens + token_ratio).min(max_tokens),
                    Answer::NotRetried => *tokens,
                    Answer::Throttled | Answer::Failed => (*tokens - 1.0).max(0.0),
                };
            }
            (State::Budget { .. }, _) => {}
            (State::Adaptive { window }, _) => {
                if ok {
                    window.add(now, 0, 1);
                }
            }
            (
                State::Breaker {
                    phase,
                    window,
                    consecutive,
                },
                ThrottleConfig::CircuitBreaker {
                    failure_ratio,
                    min_requests,
                    consecutive: max_consecutive,
                    cooldown,
                    ..
                },
            ) => match *phase {
                Phase::Closed => {
                    window.add(now, 1, u64::from(!ok));
                    *consecutive = if ok { 0 } else { *consecutive + 1 };
                    let (attempts, failures) = window.counts(now);
                    let by_ratio = attempts >= min_requests
                        && failures as f64 >= failure_ratio * attempts as f64;
                    let by_count = max_consecutive.is_some_and(|max| *consecutive >= max);
                    if !ok && (by_ratio || by_count) {
                        *phase = Phase::Open {
                            until: now + cooldown,
                        };
                        window.clear();
                        *consecutive = 0;
                    }
                }
                Phase::HalfOpen { .. } if ok => *phase = Phase::Closed,
                Phase::HalfOpen { .. } => {
                    *phase = Phase::Open {
                        until: now + cooldown,
                    }
                }
                // Outcomes of attempts sent before the breaker opened.
                Phase::Open { .. } => {}
            },
            _ => unreachable!("state and config are built together"),
        }
        false
    }

    /// An attempt of `kind` that went out was cancelled at `now` before
    /// it was answered (a hedge that lost). It neither succeeded nor
    /// failed: only a budget counting attempts in flight notices.
    pub fn cancelled(&mut self, kind: AttemptKind, now: Duration) {
        if let State::Shipped(t) = &mut self.state {
            t.cancelled(kind, now);
        }
    }

    /// A short description of the state, for reports.
    pub fn describe(&self) -> String {
        match &self.state {
            State::TokenBucket { tokens } => format!("tokens {tokens:.1}"),
            State::Budget { window } => format!("window firsts {} retries {}", window.a, window.b),
            State::Adaptive { window } => {
                format!("window requests {} accepts {}", window.a, window.b)
            }
            State::Breaker { phase, .. } => match phase {
                Phase::Closed => "closed".to_string(),
                Phase::Open { .. } => "open".to_string(),
                Phase::HalfOpen { .. } => "half-open".to_string(),
            },
            State::Shipped(t) => format!("{t:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::Xoshiro256PlusPlus};

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(99)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// What a throttle says of an attempt, whenever it says it.
    #[derive(Debug, PartialEq)]
    enum Said {
        Allow,
        GiveUp,
        Reject,
    }

    /// Asks for a retry (at its failure, then as it goes) or a first
    /// attempt, at one instant.
    fn attempt(t: &mut Throttle, retry: bool, now: Duration, rng: &mut Xoshiro256PlusPlus) -> Said {
        let kind = AttemptKind {
            retry,
            ..AttemptKind::default()
        };
        if retry && !t.allows_retry(kind, now) {
            return Said::GiveUp;
        }
        match t.before(kind, now, rng) {
            Decision::Allow => Said::Allow,
            Decision::Reject => Said::Reject,
            Decision::Wait(d) => panic!("no throttle here waits, yet one asked for {d:?}"),
        }
    }

    fn ended(t: &mut Throttle, ok: bool, now: Duration) {
        let answer = if ok { Answer::Ok } else { Answer::Failed };
        t.after(answer, AttemptKind::default(), now);
    }

    #[test]
    fn token_bucket_follows_the_grpc_arithmetic() {
        let mut t = Throttle::new(ThrottleConfig::TokenBucket {
            max_tokens: 10.0,
            token_ratio: 0.1,
        });
        let mut r = rng();
        let now = Duration::ZERO;
        // 10 tokens: four failures leave 6 (> 5): retries still allowed.
        for _ in 0..4 {
            ended(&mut t, false, now);
        }
        assert_eq!(attempt(&mut t, true, now, &mut r), Said::Allow);
        // The fifth leaves 5 (= max/2): retries stop; first attempts go on.
        ended(&mut t, false, now);
        assert_eq!(attempt(&mut t, true, now, &mut r), Said::GiveUp);
        assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
        // One success: 5.1 > 5, retries allowed again.
        ended(&mut t, true, now);
        assert_eq!(attempt(&mut t, true, now, &mut r), Said::Allow);
        // Never below zero nor above the maximum.
        for _ in 0..100 {
            ended(&mut t, false, now);
        }
        assert_eq!(t.describe(), "tokens 0.0");
        for _ in 0..1000 {
            ended(&mut t, true, now);
        }
        assert_eq!(t.describe(), "tokens 10.0");
    }

    #[test]
    fn budget_allows_a_share_of_first_attempts_plus_a_floor() {
        let mut t = Throttle::new(ThrottleConfig::Budget {
            percent: 0.2,
            ttl: Duration::from_secs(10),
            min_per_sec: 1.0,
        });
        let mut r = rng();
        let now = Duration::from_secs(1);
        // Floor: 1/s * 10 s = 10 retries with no traffic at all.
        for i in 0..10 {
            assert_eq!(attempt(&mut t, true, now, &mut r), Said::Allow, "retry {i}");
        }
        assert_eq!(attempt(&mut t, true, now, &mut r), Said::GiveUp);
        // 50 first attempts buy 10 more.
        for _ in 0..50 {
            assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
        }
        for _ in 0..10 {
            assert_eq!(attempt(&mut t, true, now, &mut r), Said::Allow);
        }
        assert_eq!(attempt(&mut t, true, now, &mut r), Said::GiveUp);
        // Once the window has passed, the floor is available again.
        let later = now + Duration::from_secs(11);
        assert_eq!(attempt(&mut t, true, later, &mut r), Said::Allow);
    }

    #[test]
    fn adaptive_rejects_with_the_sre_probability() {
        let mut t = Throttle::new(ThrottleConfig::Adaptive {
            k: 2.0,
            window: Duration::from_secs(120),
        });
        let mut r = rng();
        let now = Duration::from_secs(1);
        // While everything is accepted nothing is rejected.
        for _ in 0..1000 {
            assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
            ended(&mut t, true, now);
        }
        // Backend down: requests pile up with no accepts. After n more
        // requests, p = (1000 + n - 2000) / (1000 + n + 1): it reaches 0.5 at
        // about n = 3000 of attempts (rejected ones count too).
        let mut rejected = 0;
        for _ in 0..3000 {
            if attempt(&mut t, false, now, &mut r) == Said::Reject {
                rejected += 1;
            } else {
                ended(&mut t, false, now);
            }
        }
        // Expected rejections: the sum of p over those requests, give or take
        // four standard deviations of that sum of Bernoulli draws.
        let ps: Vec<f64> = (0..3000)
            .map(|n| ((1000.0 + n as f64 - 2000.0) / (1000.0 + n as f64 + 1.0)).max(0.0))
            .collect();
        let expected: f64 = ps.iter().sum();
        let sigma = ps.iter().map(|p| p * (1.0 - p)).sum::<f64>().sqrt();
        let got = rejected as f64;
        assert!(
            (got - expected).abs() < 4.0 * sigma,
            "{got} vs {expected} ± {sigma}"
        );
        // The window forgets: two minutes later nothing is rejected.
        let later = now + Duration::from_secs(121);
        assert_eq!(attempt(&mut t, false, later, &mut r), Said::Allow);
    }

    fn breaker() -> Throttle {
        Throttle::new(ThrottleConfig::CircuitBreaker {
            failure_ratio: 0.5,
            min_requests: 10,
            window: Duration::from_secs(10),
            consecutive: None,
            cooldown: ms(500),
            probes: 1,
        })
    }

    #[test]
    fn breaker_opens_on_the_failure_ratio_then_probes() {
        let mut t = breaker();
        let mut r = rng();
        let mut now = Duration::from_secs(1);
        // 9 attempts, all failed: below min_requests, still closed.
        for _ in 0..9 {
            assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
            ended(&mut t, false, now);
        }
        assert_eq!(t.describe(), "closed");
        ended(&mut t, false, now);
        assert_eq!(t.describe(), "open");
        assert_eq!(attempt(&mut t, false, now, &mut r), Said::Reject);
        now += ms(499);
        assert_eq!(attempt(&mut t, true, now, &mut r), Said::Reject);
        // Cool-down over: one probe goes out, the next is refused.
        now += ms(1);
        assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
        assert_eq!(t.describe(), "half-open");
        assert_eq!(attempt(&mut t, false, now, &mut r), Said::Reject);
        // The probe fails: open again for a whole cool-down.
        ended(&mut t, false, now);
        assert_eq!(t.describe(), "open");
        now += ms(500);
        assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
        ended(&mut t, true, now);
        assert_eq!(t.describe(), "closed");
        assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
    }

    #[test]
    fn breaker_stays_closed_below_the_ratio() {
        let mut t = breaker();
        let mut r = rng();
        let now = Duration::from_secs(1);
        for i in 0..100 {
            assert_eq!(attempt(&mut t, false, now, &mut r), Said::Allow);
            // 40 % failures, never 50 % of the attempts so far.
            ended(&mut t, i % 5 < 3, now);
        }
        assert_eq!(t.describe(), "closed");
    }

    #[test]
    fn breaker_can_open_on_consecutive_failures() {
        let mut t = Throttle::new(ThrottleConfig::CircuitBreaker {
            failure_ratio: 1.0,
            min_requests: 1_000_000,
            window: Duration::from_secs(10),
            consecutive: Some(3),
            cooldown: ms(500),
            probes: 1,
        });
        let now = Duration::ZERO;
        ended(&mut t, false, now);
        ended(&mut t, false, now);
        ended(&mut t, true, now);
        ended(&mut t, false, now);
        ended(&mut t, false, now);
        assert_eq!(t.describe(), "closed");
        ended(&mut t, false, now);
        assert_eq!(t.describe(), "open");
    }

    #[test]
    fn window_forgets_old_buckets() {
        let mut w = Window::new(Duration::from_secs(10));
        w.add(Duration::from_secs(0), 5, 1);
        w.add(Duration::from_secs(6), 3, 0);
        assert_eq!(w.counts(Duration::from_secs(9)), (8, 1));
        assert_eq!(w.counts(Duration::from_secs(11)), (3, 0));
        assert_eq!(w.counts(Duration::from_secs(17)), (0, 0));
    }
}
