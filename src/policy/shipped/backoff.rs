//! Shipped clients' backoffs. Each formula is a function of its random
//! draw, so that a test can give the draw and check the delay; the state a
//! schedule carries from one retry to the next (Finagle's and Polly's
//! previous value) is returned beside the delay.

use std::time::Duration;

use rand::{Rng, RngExt};

use super::grpc::GrpcImplementation;
use crate::model::grpc::Codes;
use crate::model::timescale::compress;
use crate::policy::failure::Failure;

/// A delay in seconds, saturating and never negative.
fn secs(s: f64) -> Duration {
    if s.is_nan() || s <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)
    }
}

/// botocore's `standard.ExponentialBackoff`: before retry `n` (from 1),
/// `u * min(scale * 2^(n-1), max)` with `u` uniform in [0, 1); scale 1 s
/// and max 20 s in standard mode (botocore 1.44: scale 0.05 s for
/// transient errors, 1 s for throttling). With a retry-after hint `hint`
/// (botocore 1.44 only), `max(t, min(hint, t + 5 s))`.
pub fn aws_delay(
    n: u32,
    u: f64,
    scale: Duration,
    max: Duration,
    hint: Option<Duration>,
) -> Duration {
    aws_delay_within(n, u, scale, max, hint, AWS_HINT_CAP)
}

/// Whether the AWS SDK counts `failure` as throttling (its backoff's 1 s
/// scale, the quota's throttling cost, the adaptive limiter's cut): an AWS
/// throttling error code in every release; from botocore 1.44 (the 2026
/// generation, `variant_2026`) also a 429 without one
/// (`ThrottlingStatusCodeChecker`).
pub fn aws_throttling(variant_2026: bool, failure: &Failure) -> bool {
    failure.throttle_code || (variant_2026 && failure.throttled)
}

/// Whether the AWS SDK retries `failure` at all. Up to botocore 1.43 a 429
/// without a throttling error code is neither transient (500, 502, 503,
/// 504, connection errors, timeouts) nor throttling: it is not retried.
/// Every other failure the model produces is.
pub fn aws_retries(variant_2026: bool, failure: &Failure) -> bool {
    !failure.throttled || aws_throttling(variant_2026, failure)
}

/// How much longer than its backoff botocore 1.44 waits for a hint.
pub const AWS_HINT_CAP: Duration = Duration::from_secs(5);

/// [`aws_delay`] with the hint's cap given (5 s, divided when time is
/// compressed).
fn aws_delay_within(
    n: u32,
    u: f64,
    scale: Duration,
    max: Duration,
    hint: Option<Duration>,
    hint_cap: Duration,
) -> Duration {
    let grown = scale.as_secs_f64() * 2f64.powi(n.saturating_sub(1).min(1000) as i32);
    let t = secs(u * grown.min(max.as_secs_f64()));
    match hint {
        Some(hint) => t.max(hint.min(t.saturating_add(hint_cap))),
        None => t,
    }
}

/// gRPC's retry backoff (proposal A6, current text): before retry `n` (from
/// 1), `min(initial * multiplier^(n-1), max) * j` with `j` uniform in
/// [0.8, 1.2).
pub fn grpc_delay(n: u32, j: f64, initial: Duration, multiplier: f64, max: Duration) -> Duration {
    let grown = initial.as_secs_f64() * multiplier.powi(n.saturating_sub(1).min(1000) as i32);
    secs(grown.min(max.as_secs_f64()) * j)
}

/// Envoy's `JitteredExponentialBackOffStrategy`: the bound of retry `n`
/// (from 1): `base`, doubled while below half of `max`, then `max` (25, 50,
/// 100, 200, 250, 250 ms with the defaults). The delay is `r mod bound`
/// milliseconds for a random integer `r`, at most `max`.
pub fn envoy_bound(n: u32, base_ms: u64, max_ms: u64) -> u64 {
    let mut bound = base_ms.max(1);
    for _ in 1..n {
        bound = if bound < max_ms / 2 {
            bound * 2
        } else {
            max_ms
        };
    }
    bound
}

/// Finagle's `Backoff.decorrelatedJittered(start, max)`: the first delay is
/// `start`; then from delay `d`, `next = d + u * (upper - d)` with `u` in
/// [0, 1) and `upper = max` once `d >= max / 3`, else `3 d`.
pub fn finagle_next(
    previous: Option<Duration>,
    u: f64,
    start: Duration,
    max: Duration,
) -> Duration {
    let Some(d) = previous else {
        return start;
    };
    let d_s = d.as_secs_f64();
    let upper = if d_s >= max.as_secs_f64() / 3.0 {
        max.as_secs_f64()
    } else {
        3.0 * d_s
    };
    secs(d_s + u * (upper - d_s).max(0.0))
}

/// Polly v8's decorrelated jitter V2 for retry `k` (from 0): `t = k + u`
/// with `u` in [0, 1), `next = 2^t * tanh(sqrt(4 t))`, the delay
/// `(next - prev) / 1.4 * base`, capped at `max`. Returns the delay and the
/// new `prev`. (Polly's own code also guards against overflow, capping the
/// formula's value at the largest `TimeSpan`; `max` does that here.)
pub fn polly_v2_next(k: u32, u: f64, prev: f64, base: Duration, max: Duration) -> (Duration, f64) {
    const FACTOR: f64 = 4.0;
    const SCALE: f64 = 1.0 / 1.4;
    let t = f64::from(k) + u;
    let next = 2f64.powf(t) * (FACTOR * t).sqrt().tanh();
    let formula = (next - prev) * SCALE * base.as_secs_f64();
    (secs(formula).min(max), next)
}

/// A shipped client's backoff, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShippedBackoff {
    /// The AWS SDKs' standard and adaptive modes (the same backoff; the
    /// adaptive mode brings its rate limiter as its throttle).
    Aws {
        /// The adaptive mode.
        adaptive: bool,
        /// The scale after a transient error: 1 s (botocore 1.44:
        /// 0.05 s).
        scale: Duration,
        /// The scale after a throttling answer: 1 s.
        throttle_scale: Duration,
        /// 20 s.
        max: Duration,
        /// botocore 1.44 (the SDKs' 2026 retry behaviour): the delay reads the
        /// server's retry-after hint.
        variant_2026: bool,
        /// How much longer than its backoff it waits for a hint: 5 s.
        hint_cap: Duration,
    },
    /// gRPC's retry policy.
    Grpc {
        /// initialBackoff.
        initial: Duration,
        /// backoffMultiplier.
        multiplier: f64,
        /// maxBackoff.
        max: Duration,
        /// The implementation followed.
        implementation: GrpcImplementation,
        /// retryableStatusCodes.
        retryable: Codes,
    },
    /// Envoy's router: base 25 ms, max 10 times the base.
    Envoy {
        /// Base interval.
        base: Duration,
        /// Maximum interval.
        max: Duration,
    },
    /// Finagle's default decorrelated jitter: 5 ms to 200 ms.
    Finagle {
        /// First delay.
        start: Duration,
        /// Maximum.
        max: Duration,
    },
    /// Polly v8's decorrelated jitter V2: base 2 s, no cap unless given.
    PollyV2 {
        /// Median first delay.
        base: Duration,
        /// Cap.
        max: Duration,
    },
}

impl ShippedBackoff {
    /// The standard mode's backoff, or botocore 1.44's.
    pub fn aws(adaptive: bool, variant_2026: bool) -> Self {
        let (scale, throttle_scale) = if variant_2026 {
            (Duration::from_millis(50), Duration::from_secs(1))
        } else {
            (Duration::from_secs(1), Duration::from_secs(1))
        };
        ShippedBackoff::Aws {
            adaptive,
            scale,
            throttle_scale,
            max: Duration::from_secs(20),
            variant_2026,
            hint_cap: AWS_HINT_CAP,
        }
    }

    /// The delay before retry `n` (from 1) after `failure`, drawing from
    /// `rng`. `previous` is the sleep before the failed attempt (Finagle's
    /// `d`; none before the first retry); `polly_prev` carries Polly's
    /// `prev` (0 at first).
    pub fn delay<R: Rng + ?Sized>(
        &self,
        n: u32,
        failure: Failure,
        previous: Option<Duration>,
        polly_prev: &mut f64,
        rng: &mut R,
    ) -> Duration {
        match *self {
            ShippedBackoff::Aws {
                scale,
                throttle_scale,
                max,
                variant_2026,
                hint_cap,
                ..
            } => {
                let scale = if aws_throttling(variant_2026, &failure) {
                    throttle_scale
                } else {
                    scale
                };
                // botocore 1.44 reads x-amz-retry-after, not Retry-After.
                let hint = failure.amz_retry_after.filter(|_| variant_2026);
                aws_delay_within(n, rng.random(), scale, max, hint, hint_cap)
            }
            ShippedBackoff::Grpc {
                initial,
                multiplier,
                max,
                ..
            } => grpc_delay(n, rng.random_range(0.8..1.2), initial, multiplier, max),
            ShippedBackoff::Envoy { base, max } => {
                // Envoy counts in whole milliseconds; a schedule compressed
                // below them (--time-scale) counts in microseconds instead.
                let whole_ms = |d: Duration| d.subsec_nanos().is_multiple_of(1_000_000);
                let unit = if whole_ms(base) && whole_ms(max) {
                    Duration::from_millis(1)
                } else {
                    Duration::from_micros(1)
                };
                let units = |d: Duration| (d.as_nanos() / unit.as_nanos()) as u64;
                let (base_u, max_u) = (units(base), units(max));
                let bound = envoy_bound(n, base_u, max_u);
                let r: u64 = rng.random();
                unit * u32::try_from((r % bound).min(max_u)).unwrap_or(u32::MAX)
            }
            ShippedBackoff::Finagle { start, max } => {
                finagle_next(previous.filter(|_| n > 1), rng.random(), start, max)
            }
            ShippedBackoff::PollyV2 { base, max } => {
                let (delay, next) = polly_v2_next(n - 1, rng.random(), *polly_prev, base, max);
                *polly_prev = next;
                delay
            }
        }
    }

    /// The same backoff with every duration divided by `k`.
    pub fn scaled(&self, k: f64) -> ShippedBackoff {
        let s = |d: Duration| compress(d, k);
        match *self {
            ShippedBackoff::Aws {
                adaptive,
                scale,
                throttle_scale,
                max,
                variant_2026,
                hint_cap,
            } => ShippedBackoff::Aws {
                adaptive,
                scale: s(scale),
                throttle_scale: s(throttle_scale),
                max: s(max),
                variant_2026,
                hint_cap: s(hint_cap),
            },
            ShippedBackoff::Grpc {
                initial,
                multiplier,
                max,
                implementation,
                retryable,
            } => ShippedBackoff::Grpc {
                initial: s(initial),
                multiplier,
                max: s(max),
                implementation,
                retryable,
            },
            ShippedBackoff::Envoy { base, max } => ShippedBackoff::Envoy {
                base: s(base),
                max: s(max),
            },
            ShippedBackoff::Finagle { start, max } => ShippedBackoff::Finagle {
                start: s(start),
                max: s(max),
            },
            ShippedBackoff::PollyV2 { base, max } => ShippedBackoff::PollyV2 {
                base: s(base),
                max: s(max),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn close(a: Duration, b: f64) -> bool {
        (a.as_secs_f64() - b).abs() < 1e-9
    }

    #[test]
    fn aws_standard_draws_up_to_one_two_four_seconds_capped_at_twenty() {
        let (scale, max) = (Duration::from_secs(1), Duration::from_secs(20));
        assert!(close(aws_delay(1, 0.5, scale, max, None), 0.5));
        assert!(close(aws_delay(2, 0.5, scale, max, None), 1.0));
        assert!(close(aws_delay(3, 0.25, scale, max, None), 1.0));
        // 2^5 = 32 is capped at 20 before the draw.
        assert!(close(aws_delay(6, 0.5, scale, max, None), 10.0));
        assert!(close(aws_delay(60, 0.99, scale, max, None), 19.8));
        // botocore 1.44: 0.05 s for a transient error; a hint of 3 s
        // after t = 0.1 s waits 3 s; one of 60 s at most t + 5 s.
        let t = aws_delay(2, 1.0, ms(50), max, None);
        assert!(close(t, 0.1));
        let hinted = aws_delay(2, 1.0, ms(50), max, Some(Duration::from_secs(3)));
        assert!(close(hinted, 3.0));
        let capped = aws_delay(2, 1.0, ms(50), max, Some(Duration::from_secs(60)));
        assert!(close(capped, 5.1));
        // A hint shorter than t does not shorten it.
        assert!(close(aws_delay(3, 0.5, scale, max, Some(ms(10))), 2.0));
    }

    #[test]
    fn the_2026_variant_scales_by_the_failure_and_reads_the_hint() {
        use rand::SeedableRng;
        let rng = || rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        // The draw the backoff will take.
        let u: f64 = rng().random();
        let delay = |b: ShippedBackoff, n: u32, failure: Failure| {
            b.delay(n, failure, None, &mut 0.0, &mut rng())
                .as_secs_f64()
        };
        let transient = Failure::default();
        let throttled = Failure {
            throttled: true,
            ..Failure::default()
        };
        let hinted = |s: u64| Failure {
            amz_retry_after: Some(Duration::from_secs(s)),
            ..Failure::default()
        };
        let new = ShippedBackoff::aws(false, true);
        // Retry 3 after a transient error: u * 0.05 * 4; after a 429:
        // u * 1 * 4.
        assert!(close_to(delay(new, 3, transient), u * 0.2));
        assert!(close_to(delay(new, 3, throttled), u * 4.0));
        // A hint of 3 s: max(t, min(3, t + 5)) = 3 s; of 60 s: t + 5.
        assert!(close_to(delay(new, 1, hinted(3)), 3.0));
        assert!(close_to(delay(new, 1, hinted(60)), u * 0.05 + 5.0));
        // Standard mode: 1 s either way, and no hint read.
        let standard = ShippedBackoff::aws(false, false);
        assert!(close_to(delay(standard, 3, transient), u * 4.0));
        assert!(close_to(delay(standard, 3, throttled), u * 4.0));
        assert!(close_to(delay(standard, 1, hinted(3)), u));
        // Ten times compressed, a hint of 6 s (60 s of the source's time)
        // is cut at a tenth of t + 5 s.
        let tenth = new.scaled(10.0);
        let hinted_ms = |ms: u64| Failure {
            amz_retry_after: Some(Duration::from_millis(ms)),
            ..Failure::default()
        };
        assert!(close_to(
            delay(tenth, 1, hinted_ms(6000)),
            (u * 0.05 + 5.0) / 10.0
        ));
    }

    #[test]
    fn the_2026_variant_reads_x_amz_retry_after_and_not_retry_after() {
        use rand::SeedableRng;
        let rng = || rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        let u: f64 = rng().random();
        let new = ShippedBackoff::aws(false, true);
        let delay = |failure: Failure| {
            new.delay(1, failure, None, &mut 0.0, &mut rng())
                .as_secs_f64()
        };
        // Retry-After: 3 is not botocore's hint: u * 0.05 s after a 5xx.
        let http = Failure {
            retry_after: Some(Duration::from_secs(3)),
            ..Failure::default()
        };
        assert!(close_to(delay(http), u * 0.05));
        // x-amz-retry-after: 3000 is: max(t, min(3, t + 5)) = 3 s.
        let amz = Failure {
            amz_retry_after: Some(Duration::from_millis(3000)),
            ..Failure::default()
        };
        assert!(close_to(delay(amz), 3.0));
    }

    #[test]
    fn a_bare_429_is_throttling_and_retried_only_from_botocore_1_44() {
        let bare = Failure {
            throttled: true,
            ..Failure::default()
        };
        let coded = Failure {
            throttle_code: true,
            ..Failure::default()
        };
        let slow_down = Failure {
            throttle_code: true,
            ..Failure::default()
        };
        // Up to 1.43: a 429 without a code is not retried, not throttling.
        assert!(!aws_retries(false, &bare) && !aws_throttling(false, &bare));
        assert!(aws_retries(false, &coded) && aws_throttling(false, &coded));
        // From 1.44: it is both.
        assert!(aws_retries(true, &bare) && aws_throttling(true, &bare));
        // A 503 with SlowDown throttles in both; a plain 5xx in neither.
        assert!(aws_throttling(false, &slow_down) && aws_throttling(true, &slow_down));
        let plain = Failure::default();
        assert!(aws_retries(false, &plain) && !aws_throttling(true, &plain));
        // 1.44: a coded 503 backs off on the 1 s scale: u * 1 * 2^2.
        use rand::SeedableRng;
        let rng = || rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        let u: f64 = rng().random();
        let new = ShippedBackoff::aws(false, true);
        let d = new.delay(3, slow_down, None, &mut 0.0, &mut rng());
        assert!(close_to(d.as_secs_f64(), u * 4.0));
    }

    fn close_to(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn grpc_jitters_the_capped_exponential_by_twenty_percent() {
        let (initial, max) = (ms(100), Duration::from_secs(1));
        assert!(close(grpc_delay(1, 1.0, initial, 2.0, max), 0.1));
        assert!(close(grpc_delay(2, 0.8, initial, 2.0, max), 0.16));
        assert!(close(grpc_delay(3, 1.2, initial, 2.0, max), 0.48));
        // 0.1 * 2^4 = 1.6 is capped at 1 before the jitter.
        assert!(close(grpc_delay(5, 1.1, initial, 2.0, max), 1.1));
    }

    #[test]
    fn envoy_bounds_are_25_50_100_200_250_250_ms() {
        let bounds: Vec<u64> = (1..=7).map(|n| envoy_bound(n, 25, 250)).collect();
        assert_eq!(bounds, [25, 50, 100, 200, 250, 250, 250]);
        // A base of 100 and max of 1000: 100, 200, 400, 800, 1000.
        let bounds: Vec<u64> = (1..=5).map(|n| envoy_bound(n, 100, 1000)).collect();
        assert_eq!(bounds, [100, 200, 400, 800, 1000]);
    }

    #[test]
    fn envoy_keeps_its_bounds_when_time_is_compressed() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(3);
        let full = ShippedBackoff::Envoy {
            base: ms(25),
            max: ms(250),
        };
        let tenth = full.scaled(10.0);
        let mut prev = 0.0;
        for n in 1..=6 {
            let (mut a, mut b) = (0.0, 0.0);
            for _ in 0..2000 {
                a += full
                    .delay(n, Failure::default(), None, &mut prev, &mut rng)
                    .as_secs_f64();
                b += tenth
                    .delay(n, Failure::default(), None, &mut prev, &mut rng)
                    .as_secs_f64();
            }
            // Means of U{0..b-1} ms against a tenth of them, within 5 %.
            let ratio = a / b / 10.0;
            assert!((ratio - 1.0).abs() < 0.05, "retry {n}: {ratio}");
        }
    }

    #[test]
    fn finagle_starts_at_start_then_spreads_up_to_three_times_or_max() {
        let (start, max) = (ms(5), ms(200));
        let d1 = finagle_next(None, 0.7, start, max);
        assert_eq!(d1, ms(5));
        // From 5 ms: 5 + 0.5 * (15 - 5) = 10 ms.
        let d2 = finagle_next(Some(d1), 0.5, start, max);
        assert!(close(d2, 0.010));
        // From 70 ms (>= 200 / 3): 70 + 0.5 * (200 - 70) = 135 ms.
        assert!(close(finagle_next(Some(ms(70)), 0.5, start, max), 0.135));
        // From 60 ms (< 66.7): upper 180; 60 + 0.5 * 120 = 120 ms.
        assert!(close(finagle_next(Some(ms(60)), 0.5, start, max), 0.120));
        // At max it stays at max.
        assert_eq!(finagle_next(Some(max), 0.9, start, max), max);
    }

    #[test]
    fn polly_v2_follows_its_formula() {
        let base = Duration::from_secs(2);
        let max = Duration::from_secs(3600);
        // k = 0, u = 0.5: t = 0.5, next = 2^0.5 * tanh(sqrt(2)).
        let next0 = 2f64.sqrt() * 2f64.sqrt().tanh();
        let (d0, p0) = polly_v2_next(0, 0.5, 0.0, base, max);
        assert!((p0 - next0).abs() < 1e-12);
        assert!(close(d0, next0 / 1.4 * 2.0));
        // sqrt 2 = 1.41421, tanh of it 0.88838: next 1.25637, delay 1.7948 s.
        assert!((d0.as_secs_f64() - 1.7948).abs() < 1e-3, "{d0:?}");
        // k = 1, u = 0: t = 1, next = 2 * tanh(2).
        let next1 = 2.0 * 2f64.tanh();
        let (d1, p1) = polly_v2_next(1, 0.0, p0, base, max);
        assert!((p1 - next1).abs() < 1e-12);
        assert!(close(d1, (next1 - next0) / 1.4 * 2.0));
        // A cap holds.
        let (capped, _) = polly_v2_next(20, 0.9, 0.0, base, Duration::from_secs(30));
        assert_eq!(capped, Duration::from_secs(30));
    }
}
