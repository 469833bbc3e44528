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
        super::order::nearest_rank(&sorted, q)
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
        } else if let Some(Reverse((at, client))) = sends.pop()
            && service.admit(at, client).is_err()
        {
            panic!("a closed loop of {clients} was refused at {at:?}");
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
    use crate::model::fit::shapes::{DEFAULT_QUEUE, Family, Twin};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn run(twin: &Twin, n: u32, stagger: Duration, window: Duration) -> Measured {
        let config = ServerConfig {
            seed: 3,
            ..twin.server_config()
        };
        closed_loop(&config, n, stagger, Duration::from_secs(30), window)
    }

    #[test]
    fn a_curve_gives_every_request_its_delay_at_n_and_batches_them() {
        let curves = [
            Twin::Exponential {
                base: ms(20),
                limit: 30,
                factor: 2.0,
                scale: 40.0,
            },
            Twin::Linear {
                base: ms(20),
                slope: ms(1),
            },
        ];
        let window = Duration::from_secs(60);
        for twin in curves {
            for n in [1, 8, 32, 64, 256] {
                // All at once, and spread over a second.
                for stagger in [Duration::ZERO, ms(1000)] {
                    let m = run(&twin, n, stagger, window);
                    let r = twin.latency(n);
                    // Every latency is delay(n), to the nanosecond.
                    for latency in &m.latencies {
                        assert!(
                            (latency - r).abs() < 2e-9,
                            "{twin:?} at {n}: {latency} vs {r}"
                        );
                    }
                    // Throughput N / R, give or take one batch in the window.
                    let slack = f64::from(n) / window.as_secs_f64();
                    assert!(
                        (m.throughput - twin.throughput(n)).abs() <= slack + 1e-9,
                        "{twin:?} at {n}: {} vs {}",
                        m.throughput,
                        twin.throughput(n)
                    );
                }
            }
        }
        // Above the limit, requests closer than delay(N) - delay(N - 1)
        // leave together: 256 clients spread over a second become one
        // batch a second.
        let m = run(&curves[0], 256, ms(1000), window);
        assert_eq!(m.instants, 60, "one batch each second");
    }

    #[test]
    fn a_pool_gives_one_service_time_unsaturated_and_n_s_over_w_beyond() {
        let window = Duration::from_secs(200);
        for distribution in [Family::Constant, Family::Exponential] {
            let twin = Twin::Pool {
                workers: 20,
                service_time: ms(50),
                distribution,
                queue: DEFAULT_QUEUE,
            };
            for n in [1, 8, 20, 32, 256] {
                let m = run(&twin, n, ms(50), window);
                let (r, x) = (twin.latency(n), twin.throughput(n));
                // Exponential service at N = 1: 4,000 draws, the mean's
                // standard error 1.6 %; 5 % is three of them.
                assert!(
                    (m.mean() / r - 1.0).abs() < 0.05,
                    "{twin:?} at {n}: {}",
                    m.mean()
                );
                assert!((m.throughput / x - 1.0).abs() < 0.05, "{twin:?} at {n}");
                if n <= 20 {
                    let spread = m.quantile(0.99) / m.quantile(0.5);
                    let expected = distribution.spread();
                    assert!(
                        (spread / expected - 1.0).abs() < 0.15,
                        "{distribution:?}: {spread}"
                    );
                }
            }
        }
    }
}
