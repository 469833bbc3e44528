//! gRPC's hedging on the real network: the real server on 127.0.0.1 port
//! 0, the real client hedging against it.

mod common;

use std::time::Duration;

use common::running::{Running, client_config, model, ms};
use retry_storm::model::arrivals::{ThinkTime, user_rng};
use retry_storm::model::client::ClientConfig;
use retry_storm::model::server::{
    OnDisconnect, PoolModel, ServerConfig, ServiceDistribution, Shape, Shedding,
};
use retry_storm::model::service::{Exit, Service};
use retry_storm::net::client;
use retry_storm::policy::{Hedging, ThrottleConfig};

/// A pool of 8 workers with exponential service times of mean 100 ms,
/// drawing from `seed`; a gone client's work is dropped.
fn pool(seed: u64) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        shape: Shape::Pool(PoolModel {
            workers: 8,
            service_time: ms(100),
            distribution: ServiceDistribution::Exponential,
            queue: 100,
            ..PoolModel::default()
        }),
        on_disconnect: OnDisconnect::Cancel,
        seed,
        quiet: true,
        ..ServerConfig::default()
    }
}

/// When the server's model finishes a request admitted at 0 and one
/// admitted at `hedge`, the first two it is sent.
fn finishes(config: &ServerConfig, hedge: Duration) -> (Duration, Duration) {
    let mut service = Service::new(config);
    service.admit(Duration::ZERO, 0).unwrap();
    service.admit(hedge, 1).unwrap();
    service.advance(Duration::from_secs(3600));
    let mut at = [Duration::MAX; 2];
    service.drain(|d| {
        assert_eq!(d.exit, Exit::Served);
        at[d.payload] = d.at;
        true
    });
    (at[0], at[1])
}

const HEDGE: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_first_attempt_is_beaten_by_a_hedge_whose_loser_is_closed() {
    // A server seed whose model serves the first request in 500 ms or more
    // and a copy sent 50 ms later within 150 ms: the hedge must win, by
    // far more than the machine's jitter.
    let seed = (0..100_000)
        .find(|&s| {
            let (first, hedge) = finishes(&pool(s), HEDGE);
            first >= ms(500) && hedge <= ms(150)
        })
        .expect("such a seed exists");
    let (first_done, hedge_done) = finishes(&pool(seed), HEDGE);
    // One user, whose first request comes soon and whose second does not
    // come within the run.
    let think = ThinkTime::new(Duration::from_secs(20));
    let client_seed = (0..100_000)
        .find(|&s| {
            let mut rng = user_rng(s, 0);
            think.sample(&mut rng) < ms(50) && think.sample(&mut rng) > Duration::from_secs(30)
        })
        .expect("such a seed exists");
    let server = Running::start_config(pool(seed));
    let config = ClientConfig {
        clients: 1,
        think,
        timeout: Duration::from_secs(5),
        hedging: Some(Hedging::new(HEDGE, 2)),
        duration: Some(first_done + ms(700)),
        seed: client_seed,
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let served = server.stop().await;
    let t = summary.totals.tally;
    assert_eq!((t.started, t.retries), (1, 1), "one request, one hedge");
    assert_eq!((t.ok, t.cancelled, t.errors, t.timeouts), (1, 1, 0, 0));
    let latency = summary.totals.request_latency.max();
    assert!(
        Duration::from_micros(latency) < first_done - ms(200),
        "answered by the hedge (model: {hedge_done:?}), not the first ({first_done:?}): \
         {latency} µs"
    );
    // The loser's connection was closed: the server saw its client go and
    // dropped the work.
    assert_eq!(served.completed, 1);
    assert_eq!(served.abandoned, 1);
    assert_eq!(t.amplification(), Some(2.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_amplification_counts_every_hedge() {
    // All three copies at once; one wins, two are cancelled: three sent
    // per request, exactly.
    let server = Running::start(model(ms(5)), OnDisconnect::Cancel);
    let config = ClientConfig {
        clients: 5,
        think: ThinkTime::new(ms(10)),
        hedging: Some(Hedging::new(Duration::ZERO, 3)),
        duration: Some(ms(600)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    let served = server.stop().await;
    let t = summary.totals.tally;
    assert!(t.started > 20, "{t:?}");
    assert_eq!(t.ok, t.started, "every request succeeded once");
    assert_eq!(t.cancelled, 2 * t.started, "{t:?}");
    assert_eq!(t.retries, 2 * t.started);
    assert_eq!(t.amplification(), Some(3.0));
    // The server received every copy.
    assert!(served.completed + served.abandoned >= 3 * t.started - 2 * 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedges_obey_the_throttle() {
    // Every attempt is refused; gRPC's bucket (10 tokens, no hedge once
    // at 5 or below) loses one per failure: after five failures no hedge
    // goes, and requests end after their first attempt.
    let server = Running::start_with(
        model(ms(5)),
        OnDisconnect::Continue,
        Some(Shedding {
            above: 0,
            status: 503,
            retry_after: Duration::from_secs(1),
        }),
    );
    let config = ClientConfig {
        clients: 5,
        think: ThinkTime::new(ms(5)),
        hedging: Some(Hedging::new(ms(1), 4)),
        throttle: Some(ThrottleConfig::TokenBucket {
            max_tokens: 10.0,
            token_ratio: 0.1,
        }),
        duration: Some(ms(600)),
        ..client_config(server.url())
    };
    let summary = client::run(config, std::future::pending()).await.unwrap();
    server.stop().await;
    let t = summary.totals.tally;
    assert!(t.started > 100, "{t:?}");
    assert_eq!(t.ok, 0);
    // At most five failures pass while the bucket is above half, plus the
    // hedges already let out by then (a few per user).
    assert!(t.retries <= 5 + 5 * 3, "{t:?}");
    assert!(t.throttled > 50, "{t:?}");
}
