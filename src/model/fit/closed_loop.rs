//! The project's own pure service model run as a probe runs a real one:
//! a closed loop of N clients with no think time, each sending its next
//! request the instant its answer arrives. What it measures checks the
//! closed-loop formulas of [`super::shapes`] against the model itself.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use crate::model::server::ServerConfig;
use crate::model::service::Service;

/// What a closed loop measured over its window.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// Answers a second.
    pub throughput: f64,
    /// Every answer's latency in seconds, in order of completion.
    pub latencies: Vec<f64>,
    /// Distinct instants at which answers left in the window.
    pub instants: usize,
}

impl Measured {
    /// Mean latency in seconds.
    pub fn mean(&self) -> f64 {
        self.latencies.iter().sum::<f64>() / self.latencies.len() as f64
    }

    /// The `q` quantile of latency (nearest rank), in seconds.
    pub fn quantile(&self, q: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }
}

/// Runs `clients` closed-loop clients against a service built from
/// `config`: client `i` sends its first request at `i * stagger /
/// clients`, and each sends its next the instant its answer leaves. Counts
/// the answers that leave in `[warmup, warmup + window)`.
pub(crate) fn closed_loop(
    config: &ServerConfig,
    clients: u32,
    stagger: Duration,
    warmup: Duration,
    window: Duration,
) -> Measured {
    let end = warmup + window;
    let mut service: Service<u32> = Service::new(config);
    let mut sends: BinaryHeap<Reverse<(Duration, u32)>> = (0..clients)
        .map(|i| Reverse((stagger * i / clients, i)))
        .collect();
    let mut latencies = Vec::new();
    let mut instants = std::collections::BTreeSet::new();
    loop {
        let departure = service.next_event();
        let send = sends.peek().map(|Reverse((at, _))| *at);
        // What is due at an instant leaves before anything arrives at it,
        // as both engines order them.
        let now = match (departure, send) {
            (Some(d), Some(s)) => d.min(s),
            (Some(d), None) => d,
            (None, Some(s)) => s,
            (None, None) => break,
        };
        if now >= end {
            break;
        }
        if departure == Some(now) {
            service.advance(now);
        } else if let Some(Reverse((at, client))) = sends.pop() {
            if service.admit(at, client).is_err() {
                panic!("a closed loop of {clients} was refused at {at:?}");
            }
        }
        service.drain(|d| {
            if d.at >= warmup {
                latencies.push((d.at - d.start).as_secs_f64());
                instants.insert(d.at);
            }
            sends.push(Reverse((d.at, d.payload)));
            true
        });
    }
    Measured {
        throughput: latencies.len() as f64 / window.as_secs_f64(),
        latencies,
        instants: instants.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::latency::LatencyModel;
    use crate::model::server::{PoolModel, ServiceDistribution, Shape};

    #[test]
    fn explore() {
        let ms = Duration::from_millis;
        let exp = ServerConfig {
            model: LatencyModel {
                base: ms(20),
                limit: 30,
                factor: 2.0,
                scale: 40.0,
                max_delay: Duration::from_secs(600),
            },
            ..ServerConfig::default()
        };
        let lin = ServerConfig {
            model: LatencyModel { base: ms(20), ..LatencyModel::default() },
            shape: Shape::Linear { slope: ms(1) },
            ..ServerConfig::default()
        };
        let pool = ServerConfig {
            shape: Shape::Pool(PoolModel { workers: 20, service_time: ms(50), distribution: ServiceDistribution::Exponential, queue: 100_000, ..PoolModel::default() }),
            seed: 3,
            ..ServerConfig::default()
        };
        for (name, c) in [("exp", &exp), ("lin", &lin), ("pool", &pool)] {
            for n in [1u32, 2, 8, 32, 64, 128, 256] {
                for stagger in [Duration::ZERO, ms(20), ms(1000)] {
                    let m = closed_loop(c, n, stagger, Duration::from_secs(30), Duration::from_secs(60));
                    let delay = c.curve().map(|cv| cv.delay(n as u64).as_secs_f64());
                    println!("{name} n={n} stagger={stagger:?}: X={:.3} R={:.5} N/X={:.5} p50={:.5} p99={:.5} delay={delay:?} instants={}", m.throughput, m.mean(), n as f64 / m.throughput, m.quantile(0.5), m.quantile(0.99), m.instants);
                }
            }
        }
    }
}
