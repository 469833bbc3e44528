//! The project's server shapes as a twin: each with what a closed-loop
//! probe would measure of it, and the `server` flags that build it.
//!
//! A probe holds N clients with no think time: each sends its next
//! request the instant its answer arrives. Every shape then keeps N
//! requests in the server at every instant, and by Little's law
//! throughput is `X(N) = N / R(N)` with `R(N)` the mean latency. What
//! each shape gives for `R(N)`:
//!
//! - **A delay curve** (exponential or linear): every request in flight
//!   completes at the first instant its elapsed time reaches
//!   `delay(current concurrency)`, re-evaluated whenever the concurrency
//!   changes (`model/service/curve.rs`). In the closed loop the
//!   concurrency is N at every instant but those of completions: a
//!   departing request is replaced at the same instant, and its answer
//!   leaves before the new request arrives. A request that reaches
//!   `delay(N)` leaves; at `N - 1`, any other whose elapsed time has
//!   reached `delay(N - 1)` leaves with it, and all are replaced at once.
//!   Requests admitted within `delay(N) - delay(N - 1)` of each other so
//!   merge into batches that leave together, and every request's latency
//!   is exactly `delay(N)`: `R(N) = delay(N)`, p50 = p99 = R. (The
//!   closed-loop test in this module runs the service itself and finds
//!   this to the nanosecond, batches and all.)
//!   - exponential: `R(N) = base` for `N <= limit`, else `base *
//!     factor^((N - limit) / scale)`;
//!   - linear: `R(N) = base + slope * N` (N counts the request itself:
//!     one client alone waits `base + slope`);
//!   - both capped at `--max-delay` (10 minutes unless given), far above
//!     any latency a probe holds a level at.
//! - **A pool** of W workers with mean service time S (FIFO, a queue
//!   long enough never to refuse): with `N <= W` every request finds a
//!   free worker and its latency is one service time, so `R = S` and `X
//!   = N / S`; with `N > W` the workers never idle (a finished worker
//!   takes a waiting request at once, and a client's next request joins
//!   the queue at once), so `X = W / S` and by Little's law `R = N S /
//!   W`. Both hold for any distribution of service times: `R(N) = S
//!   max(1, N / W)`.
//!
//! The distribution shows in the percentiles. Unsaturated (`N <= W`),
//! latency is the service time itself: constant, `p99 / p50 = 1`;
//! exponential, `p50 = S ln 2` and `p99 = S ln 100`, `p99 / p50 = ln 100
//! / ln 2 = 6.64`. Saturated, an exponential pool's latency is the wait
//! for `N - W` departures (each `Exp(W / S)`) plus a service time, whose
//! spread narrows as N grows, and a constant pool's is `ceil` or
//! `floor(N / W)` service times: the saturated levels say less, so the
//! family is read from the unsaturated ones ([`super::pool`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::latency::{Curve, LatencyModel};
use crate::model::server::{PoolModel, ServerConfig, ServiceDistribution, Shape};

/// How a pool's service times are drawn, as [`ServiceDistribution`]
/// with a name that reads and writes as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Exponentially distributed around the mean.
    Exponential,
    /// Always the mean.
    Constant,
}

impl Family {
    /// The project's distribution of this name.
    pub fn distribution(self) -> ServiceDistribution {
        match self {
            Family::Exponential => ServiceDistribution::Exponential,
            Family::Constant => ServiceDistribution::Constant,
        }
    }

    /// `p99 / p50` of one service time: 1 for constant, `ln 100 / ln 2`
    /// (6.64) for exponential.
    pub fn spread(self) -> f64 {
        match self {
            Family::Exponential => 100f64.ln() / 2f64.ln(),
            Family::Constant => 1.0,
        }
    }
}

/// The `--scale` a fitted exponential curve is written with: the
/// project's default, 15. Only `ln(factor) / scale` shows in latency, so
/// one of the two must be fixed, and the default scale keeps `--factor`
/// comparable with the 2014 curve's 1.05.
pub const EXPONENTIAL_SCALE: f64 = 15.0;

/// A pool's queue where the probe showed no need for a longer one: the
/// project's default.
pub const DEFAULT_QUEUE: u32 = 1000;

/// A server shape with its parameters: what the twin is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "lowercase")]
pub enum Twin {
    /// `--model exponential`: `base * factor^((N - limit) / scale)` above
    /// the limit, `base` at or below it.
    Exponential {
        /// `--base-delay`.
        #[serde(rename = "base_s", with = "seconds")]
        base: Duration,
        /// `--limit`.
        limit: u64,
        /// `--factor`.
        factor: f64,
        /// `--scale`.
        scale: f64,
    },
    /// `--model linear`: `base + slope * N`.
    Linear {
        /// `--base-delay`.
        #[serde(rename = "base_s", with = "seconds")]
        base: Duration,
        /// `--slope`.
        #[serde(rename = "slope_s", with = "seconds")]
        slope: Duration,
    },
    /// `--model pool`: W workers of mean service time S.
    Pool {
        /// `--workers`.
        workers: u32,
        /// `--service-time`.
        #[serde(rename = "service_time_s", with = "seconds")]
        service_time: Duration,
        /// `--service-distribution`.
        distribution: Family,
        /// `--queue`: places for waiting requests.
        queue: u32,
    },
}

impl Twin {
    /// The name given to `--model`.
    pub fn name(&self) -> &'static str {
        match self {
            Twin::Exponential { .. } => "exponential",
            Twin::Linear { .. } => "linear",
            Twin::Pool { .. } => "pool",
        }
    }

    /// How this shape answers requests sent at once: a pool in waves,
    /// a curve together (`order`).
    pub fn order(&self) -> super::order::Order {
        match self {
            Twin::Pool { .. } => super::order::Order::Waves,
            Twin::Exponential { .. } | Twin::Linear { .. } => super::order::Order::Together,
        }
    }

    /// Parameters fitted to the mean latency and throughput: three for
    /// the exponential curve (base, limit and growth, since only
    /// `ln(factor) / scale` shows), two for the linear curve (base,
    /// slope) and two for the pool (workers, service time; the
    /// distribution is read from the percentiles and moves neither).
    pub fn parameters(&self) -> usize {
        match self {
            Twin::Exponential { .. } => 3,
            Twin::Linear { .. } | Twin::Pool { .. } => 2,
        }
    }

    /// The mean latency in seconds a closed loop of `n` clients with no
    /// think time measures, `R(n)` (module doc). A curve's is its own
    /// delay, from the project's model.
    pub fn latency(&self, n: u32) -> f64 {
        match self {
            Twin::Pool {
                workers,
                service_time,
                ..
            } => service_time.as_secs_f64() * (f64::from(n) / f64::from(*workers)).max(1.0),
            _ => {
                let curve = self.server_config().curve().expect("a curve");
                curve.delay(u64::from(n)).as_secs_f64()
            }
        }
    }

    /// Answers a second of that closed loop, `X(n) = n / R(n)`.
    pub fn throughput(&self, n: u32) -> f64 {
        f64::from(n) / self.latency(n)
    }

    /// The `server` flags that build this shape, one argument each (the
    /// other flags keep their defaults).
    pub fn flags(&self) -> Vec<String> {
        let mut flags = vec!["--model".to_string(), self.name().to_string()];
        let mut push = |flag: &str, value: String| {
            flags.push(flag.to_string());
            flags.push(value);
        };
        match *self {
            Twin::Exponential {
                base,
                limit,
                factor,
                scale,
            } => {
                push("--base-delay", write_duration(base));
                push("--limit", limit.to_string());
                push("--factor", factor.to_string());
                push("--scale", scale.to_string());
            }
            Twin::Linear { base, slope } => {
                push("--base-delay", write_duration(base));
                push("--slope", write_duration(slope));
            }
            Twin::Pool {
                workers,
                service_time,
                distribution,
                queue,
            } => {
                push("--workers", workers.to_string());
                push("--service-time", write_duration(service_time));
                push(
                    "--service-distribution",
                    distribution.distribution().name().to_string(),
                );
                push("--queue", queue.to_string());
            }
        }
        flags
    }

    /// The server's configuration these flags give: the shape and the
    /// curve's parameters, everything else the defaults.
    pub fn server_config(&self) -> ServerConfig {
        let defaults = ServerConfig::default();
        match *self {
            Twin::Exponential {
                base,
                limit,
                factor,
                scale,
            } => ServerConfig {
                model: LatencyModel {
                    base,
                    limit,
                    factor,
                    scale,
                    ..defaults.model
                },
                shape: Shape::Exponential,
                ..defaults
            },
            Twin::Linear { base, slope } => ServerConfig {
                model: LatencyModel {
                    base,
                    ..defaults.model
                },
                shape: Shape::Linear { slope },
                ..defaults
            },
            Twin::Pool {
                workers,
                service_time,
                distribution,
                queue,
            } => ServerConfig {
                shape: Shape::Pool(PoolModel {
                    workers,
                    service_time,
                    distribution: distribution.distribution(),
                    queue,
                    ..PoolModel::default()
                }),
                ..defaults
            },
        }
    }

    /// The delay curve, for the curves.
    pub fn curve(&self) -> Option<Curve> {
        self.server_config().curve()
    }
}

/// `seconds` as a duration of four significant digits (the flags'
/// precision; a fit is not finer), at least a nanosecond.
pub(crate) fn round_duration(seconds: f64) -> Duration {
    let nanos = (seconds * 1e9).max(1.0);
    let digits = nanos.log10().floor() as i32;
    let unit = 10f64.powi((digits - 3).max(0));
    let rounded = ((nanos / unit).round() * unit).min(u64::MAX as f64);
    Duration::from_nanos(rounded as u64)
}

/// `x` to six significant digits.
pub(crate) fn round_number(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // Scaled by an exact power of ten and back, so that the result is
    // the double nearest the decimal and prints as it.
    let shift = 5 - x.abs().log10().floor() as i32;
    if shift >= 0 {
        let unit = 10f64.powi(shift);
        (x * unit).round() / unit
    } else {
        let unit = 10f64.powi(-shift);
        (x / unit).round() * unit
    }
}

/// A duration as a flag takes it, exactly: whole milliseconds,
/// microseconds or nanoseconds, the largest unit that holds it.
pub fn write_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{}us", nanos / 1_000)
    } else {
        format!("{nanos}ns")
    }
}

/// Durations as seconds in JSON and CSV, to the nanosecond.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `d` as a number of seconds.
    pub fn serialize<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(d.as_secs_f64())
    }

    /// Reads a number of seconds, rounded to the nanosecond.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(deserializer)?;
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(serde::de::Error::custom("not a number of seconds"));
        }
        let nanos = (secs * 1e9).round();
        Ok(Duration::from_nanos(nanos.min(u64::MAX as f64) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Equal to the nanosecond a curve's delay is kept in.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-7 * b.abs().max(1e-9)
    }

    #[test]
    fn the_exponential_curve_in_a_closed_loop_by_hand() {
        // base 20 ms, limit 30, doubling every 40 requests above it.
        let twin = Twin::Exponential {
            base: ms(20),
            limit: 30,
            factor: 2.0,
            scale: 40.0,
        };
        for n in [1, 16, 30] {
            assert!(close(twin.latency(n), 0.020), "flat up to the limit");
        }
        assert!(close(twin.throughput(16), 800.0), "16 / 20 ms");
        // 70 is 40 above the limit: one doubling. 110: two.
        assert!(close(twin.latency(70), 0.040));
        assert!(close(twin.throughput(70), 70.0 / 0.040));
        assert!(close(twin.latency(110), 0.080));
        assert!(close(twin.throughput(110), 1375.0));
        // 50 is half a doubling: 20 ms * sqrt 2.
        assert!(close(twin.latency(50), 0.020 * 2f64.sqrt()));
    }

    #[test]
    fn the_linear_curve_in_a_closed_loop_by_hand() {
        let twin = Twin::Linear {
            base: ms(20),
            slope: ms(1),
        };
        // One client waits base + slope: 21 ms, 47.6 answers a second.
        assert!(close(twin.latency(1), 0.021));
        assert!(close(twin.throughput(1), 1.0 / 0.021));
        assert!(close(twin.latency(80), 0.100));
        assert!(close(twin.throughput(80), 800.0));
        // Throughput approaches 1 / slope = 1000 a second.
        assert!(close(twin.throughput(980), 980.0));
    }

    #[test]
    fn the_pool_in_a_closed_loop_by_hand() {
        let twin = Twin::Pool {
            workers: 20,
            service_time: ms(50),
            distribution: Family::Exponential,
            queue: DEFAULT_QUEUE,
        };
        // Unsaturated: one service time, N / S.
        assert!(close(twin.latency(8), 0.050));
        assert!(close(twin.throughput(8), 160.0));
        assert!(close(twin.latency(20), 0.050));
        assert!(close(twin.throughput(20), 400.0));
        // Saturated: W / S = 400 a second, R = N S / W.
        assert!(close(twin.throughput(40), 400.0));
        assert!(close(twin.latency(40), 0.100));
        assert!(close(twin.latency(256), 0.640));
        assert!(close(Family::Exponential.spread(), 6.643_856_189_774_724));
    }

    #[test]
    fn flags_name_every_parameter_exactly() {
        let twin = Twin::Exponential {
            base: round_duration(0.012_345_67),
            limit: 30,
            factor: round_number(1.234_567_89),
            scale: EXPONENTIAL_SCALE,
        };
        assert_eq!(
            twin.flags().join(" "),
            "--model exponential --base-delay 12350us --limit 30 --factor 1.23457 --scale 15"
        );
        let twin = Twin::Linear {
            base: ms(100),
            slope: round_duration(0.000_000_123_45),
        };
        assert_eq!(
            twin.flags().join(" "),
            "--model linear --base-delay 100ms --slope 123ns"
        );
        let twin = Twin::Pool {
            workers: 20,
            service_time: round_duration(0.05),
            distribution: Family::Constant,
            queue: 1000,
        };
        assert_eq!(
            twin.flags().join(" "),
            "--model pool --workers 20 --service-time 50ms \
             --service-distribution constant --queue 1000"
        );
        assert_eq!(twin.parameters(), 2);
    }

    #[test]
    fn rounding_keeps_four_digits_of_a_duration_and_six_of_a_number() {
        assert_eq!(round_duration(0.123_456), Duration::from_micros(123_500));
        assert_eq!(round_duration(2.0), Duration::from_secs(2));
        assert_eq!(round_duration(0.0), Duration::from_nanos(1), "never zero");
        assert_eq!(round_duration(1.5e-9), Duration::from_nanos(2));
        assert_eq!(round_number(1.050_000_4), 1.05);
        assert_eq!(round_number(0.000_123_456_78), 0.000_123_457);
        assert_eq!(write_duration(Duration::from_secs(3)), "3000ms");
    }

    #[test]
    fn a_twin_reads_and_writes_as_json_in_seconds() {
        let twin = Twin::Pool {
            workers: 20,
            service_time: ms(50),
            distribution: Family::Exponential,
            queue: 1000,
        };
        let json = serde_json::to_string(&twin).unwrap();
        assert_eq!(
            json,
            r#"{"shape":"pool","workers":20,"service_time_s":0.05,"distribution":"exponential","queue":1000}"#
        );
        assert_eq!(serde_json::from_str::<Twin>(&json).unwrap(), twin);
        let curve = Twin::Linear {
            base: Duration::from_nanos(12_345_678),
            slope: ms(1),
        };
        let back: Twin = serde_json::from_str(&serde_json::to_string(&curve).unwrap()).unwrap();
        assert_eq!(back, curve, "to the nanosecond");
    }
}
