//! Envoy's admission control filter: over a sliding window of the server's
//! answers, `n` requests of which `s` succeeded (status under 500), reject
//! each new request with probability
//! `p = min(((n - s / threshold) / (n + 1))^(1 / aggression), max)`, never
//! when that is negative. Requests the filter itself rejects are not
//! recorded, so the probability falls back to zero once the server answers
//! well again.
//!
//! As in Envoy's `ThreadLocalControllerImpl`, the window is kept in buckets
//! of one second: a record opens a new bucket when the newest is a second
//! old, and buckets leave when the oldest is a window old. The draw has
//! four significant figures: reject when `10^4 * p > r mod 10^4`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::model::timescale::compress;

/// The filter's settings, with Envoy's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdmissionConfig {
    /// How far back answers count (`sampling_window`, 30 s).
    pub window: Duration,
    /// The success rate below which requests are rejected (`sr_threshold`,
    /// 95 %), as a fraction.
    pub success_rate: f64,
    /// How fast rejection grows as successes fall (`aggression`, 1; Envoy
    /// treats anything below 1 as 1).
    pub aggression: f64,
    /// The highest rejection probability (`max_rejection_probability`,
    /// 80 %), as a fraction.
    pub max_rejection: f64,
    /// The granularity of the window (Envoy's is fixed at one second).
    pub bucket: Duration,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            window: Duration::from_secs(30),
            success_rate: 0.95,
            aggression: 1.0,
            max_rejection: 0.8,
            bucket: Duration::from_secs(1),
        }
    }
}

impl AdmissionConfig {
    /// The same filter with time compressed `k` times.
    pub fn scaled(self, k: f64) -> AdmissionConfig {
        AdmissionConfig {
            window: compress(self.window, k),
            bucket: compress(self.bucket, k),
            ..self
        }
    }
}

/// The filter's state: its window of answers.
#[derive(Debug, Clone)]
pub struct AdmissionControl {
    config: AdmissionConfig,
    /// (start, requests, successes) of each bucket, oldest first.
    buckets: VecDeque<(Duration, u64, u64)>,
    requests: u64,
    successes: u64,
}

/// Draws are integers below this (four significant figures).
pub const ACCURACY: u64 = 10_000;

impl AdmissionControl {
    /// An empty window.
    pub fn new(config: AdmissionConfig) -> Self {
        AdmissionControl {
            config,
            buckets: VecDeque::new(),
            requests: 0,
            successes: 0,
        }
    }

    /// Envoy's `maybeUpdateHistoricalData`: drops stale buckets and opens
    /// a new one when the newest is a bucket old (or there is none).
    fn update(&mut self, now: Duration) {
        while let Some(&(start, requests, successes)) = self.buckets.front() {
            if now.saturating_sub(start) < self.config.window {
                break;
            }
            self.requests -= requests;
            self.successes -= successes;
            self.buckets.pop_front();
        }
        let stale = self
            .buckets
            .back()
            .is_none_or(|&(start, _, _)| now.saturating_sub(start) >= self.config.bucket);
        if stale {
            self.buckets.push_back((now, 0, 0));
        }
    }

    /// The server answered a request the filter let through, at `now`.
    pub fn record(&mut self, now: Duration, success: bool) {
        self.update(now);
        let newest = self.buckets.back_mut().expect("update leaves a bucket");
        newest.1 += 1;
        self.requests += 1;
        if success {
            newest.2 += 1;
            self.successes += 1;
        }
    }

    /// Requests and successes in the window at `now`.
    pub fn counts(&mut self, now: Duration) -> (u64, u64) {
        self.update(now);
        (self.requests, self.successes)
    }

    /// The probability of rejecting a request arriving at `now`.
    pub fn probability(&mut self, now: Duration) -> f64 {
        let (n, s) = self.counts(now);
        let (n, s) = (n as f64, s as f64);
        let mut p = (n - s / self.config.success_rate) / (n + 1.0);
        let aggression = self.config.aggression.max(1.0);
        if aggression != 1.0 {
            // A negative base gives NaN, which Envoy's comparisons treat
            // as never rejecting.
            p = p.powf(1.0 / aggression);
        }
        if p.is_nan() || p <= 0.0 {
            return 0.0;
        }
        p.min(self.config.max_rejection)
    }

    /// Whether to reject a request arriving at `now`, given a draw `r`
    /// uniform below [`ACCURACY`].
    pub fn should_reject(&mut self, now: Duration, r: u64) -> bool {
        ACCURACY as f64 * self.probability(now) > (r % ACCURACY) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn filled(config: AdmissionConfig, requests: u64, successes: u64) -> AdmissionControl {
        let mut a = AdmissionControl::new(config);
        for i in 0..requests {
            a.record(Duration::ZERO, i < successes);
        }
        a
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn probability_at_known_counts() {
        let config = AdmissionConfig::default();
        // Half of 100 succeeded: (100 - 50 / 0.95) / 101.
        let mut a = filled(config, 100, 50);
        let p = (100.0 - 50.0 / 0.95) / 101.0;
        assert!(close(a.probability(secs(1)), p), "{p}");
        assert!((p - 0.46899).abs() < 1e-5);
        // Nothing succeeded: 100 / 101, capped at 0.8.
        assert!(close(filled(config, 100, 0).probability(secs(1)), 0.8));
        // All succeeded, or 95 of 100: negative, never.
        assert_eq!(filled(config, 100, 100).probability(secs(1)), 0.0);
        assert_eq!(filled(config, 100, 95).probability(secs(1)), 0.0);
        // 94 of 100: (100 - 98.947) / 101.
        let p = (100.0 - 94.0 / 0.95) / 101.0;
        assert!(close(filled(config, 100, 94).probability(secs(1)), p));
        // Aggression 2 takes the square root.
        let mut a2 = filled(
            AdmissionConfig {
                aggression: 2.0,
                ..config
            },
            100,
            50,
        );
        let p = ((100.0 - 50.0 / 0.95) / 101.0f64).sqrt();
        assert!(close(a2.probability(secs(1)), p));
        // And an empty window never rejects.
        assert_eq!(AdmissionControl::new(config).probability(secs(1)), 0.0);
    }

    #[test]
    fn rejects_when_the_draw_falls_under_the_probability() {
        let mut a = filled(AdmissionConfig::default(), 100, 50);
        // p = 0.46899...: 10^4 p = 4689.9.
        assert!(a.should_reject(secs(1), 0));
        assert!(a.should_reject(secs(1), 4689));
        assert!(!a.should_reject(secs(1), 4690));
        assert!(!a.should_reject(secs(1), 9999));
        assert!(
            a.should_reject(secs(1), 10_000),
            "the draw is taken mod 10^4"
        );
    }

    #[test]
    fn answers_leave_the_window_a_window_later_in_whole_buckets() {
        let mut a = AdmissionControl::new(AdmissionConfig::default());
        a.record(Duration::from_millis(0), false);
        // 0.5 s later: the same bucket.
        a.record(Duration::from_millis(500), false);
        // 1.2 s: a new bucket.
        a.record(Duration::from_millis(1200), true);
        assert_eq!(a.counts(Duration::from_millis(29_999)), (3, 1));
        // At 30 s the first bucket (from 0 s, holding two) is a window old.
        assert_eq!(a.counts(secs(30)), (1, 1));
        assert_eq!(a.counts(Duration::from_millis(31_199)), (1, 1));
        assert_eq!(a.counts(Duration::from_millis(31_200)), (0, 0));
    }

    #[test]
    fn scaling_compresses_the_window_and_its_buckets() {
        let c = AdmissionConfig::default().scaled(10.0);
        assert_eq!((c.window, c.bucket), (secs(3), Duration::from_millis(100)));
        assert_eq!(c.success_rate, 0.95);
    }
}
