//! A real server in this test process, on an ephemeral loopback port, and
//! a client configuration to drive it with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use retry_storm::model::arrivals::ThinkTime;
use retry_storm::model::client::ClientConfig;
use retry_storm::model::latency::LatencyModel;
use retry_storm::model::server::{OnDisconnect, ServerConfig, Shedding};
use retry_storm::model::shard::Shard;
use retry_storm::model::wire::Wire;
use retry_storm::net::server::{Gauges, Server};
use retry_storm::policy::{RetryLimits, Strategy};
use retry_storm::report::summary::ServerSummary;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A server running in the background on an ephemeral loopback port.
pub struct Running {
    pub addr: SocketAddr,
    pub gauges: Arc<Gauges>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<ServerSummary>,
}

impl Running {
    pub fn start(model: LatencyModel, on_disconnect: OnDisconnect) -> Running {
        Running::start_with(model, on_disconnect, None)
    }

    pub fn start_with(
        model: LatencyModel,
        on_disconnect: OnDisconnect,
        shed: Option<Shedding>,
    ) -> Running {
        Running::start_config(ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            model,
            backlog: 1024,
            on_disconnect,
            shed,
            report_interval: ms(50),
            header_read_timeout: Duration::from_secs(10),
            timer_resolution: Duration::ZERO,
            csv: None,
            quiet: true,
            ..ServerConfig::default()
        })
    }

    /// A server with a 5 ms base delay and this header-read timeout.
    pub fn with_header_read_timeout(timeout: Duration) -> Running {
        Running::start_config(ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            model: model(ms(5)),
            header_read_timeout: timeout,
            quiet: true,
            ..ServerConfig::default()
        })
    }

    pub fn start_config(config: ServerConfig) -> Running {
        let server = Server::bind(config).expect("bind an ephemeral port");
        let addr = server.local_addr();
        let gauges = server.gauges();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Running {
            addr,
            gauges,
            stop,
            task,
        }
    }

    pub async fn stop(self) -> ServerSummary {
        let _ = self.stop.send(());
        self.task.await.unwrap()
    }

    pub fn url(&self) -> String {
        format!("http://{}/api", self.addr)
    }
}

pub fn model(base: Duration) -> LatencyModel {
    LatencyModel {
        base,
        max_delay: Duration::from_secs(60),
        ..LatencyModel::default()
    }
}

pub fn client_config(url: String) -> ClientConfig {
    ClientConfig {
        url,
        clients: 20,
        open: None,
        shard: Shard::WHOLE,
        start_at: None,
        think: ThinkTime::new(ms(20)),
        timeout: Duration::from_secs(5),
        strategy: Strategy::Fixed { delay: ms(10) },
        limits: RetryLimits::default(),
        hedging: None,
        throttle: None,
        report_interval: ms(100),
        duration: Some(ms(800)),
        ramp_up: Duration::ZERO,
        timer_resolution: Duration::ZERO,
        threads: None,
        seed: 7,
        csv: None,
        hlog: None,
        quiet: true,
        wire: Wire::default(),
    }
}
