//! The server's configuration: its latency model, its listen backlog, what
//! it does with work whose client has gone, and whether it sheds load.
//! Both engines take the same configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::latency::LatencyModel;
use super::timescale::compress;

/// The listen backlog where none is given and the kernel's cannot be read:
/// Linux's default maximum (`net.core.somaxconn`) since 5.4. The virtual
/// engine uses it too, so that its results do not depend on the host.
pub const DEFAULT_BACKLOG: u32 = 4096;

/// What the server does with a request whose client has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDisconnect {
    /// Keep the work and let it count until its modelled completion (the
    /// original's behaviour: the server never notices).
    Continue,
    /// Drop the work at once, as a server that notices disconnects would.
    Cancel,
}

impl OnDisconnect {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            OnDisconnect::Continue => "continue",
            OnDisconnect::Cancel => "cancel",
        }
    }
}

/// Load shedding: the server's push-back when it is over a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shedding {
    /// Requests in flight at which new ones are refused (so concurrency
    /// never exceeds it).
    pub above: u64,
    /// HTTP status of the refusal: 503 (overload) or 429 (rate limit).
    pub status: u16,
    /// Value of the `Retry-After` header sent with it.
    pub retry_after: Duration,
}

/// Everything the server needs to run.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (the virtual engine has none).
    pub listen: SocketAddr,
    /// The latency model.
    pub model: LatencyModel,
    /// Listen backlog: how many connections the kernel queues while the
    /// server does not accept (for example while it is stopped).
    pub backlog: u32,
    /// What happens to abandoned requests.
    pub on_disconnect: OnDisconnect,
    /// Push-back: with this many requests in flight, refuse new ones at once.
    pub shed: Option<Shedding>,
    /// How often to report.
    pub report_interval: Duration,
    /// How long a request head may take to arrive before the connection is
    /// closed (slow senders).
    pub header_read_timeout: Duration,
    /// Step of the timer that ends modelled delays (zero: exact).
    pub timer_resolution: Duration,
    /// Where to write report rows, if anywhere.
    pub csv: Option<PathBuf>,
    /// Print nothing on stdout (for tests and embedding).
    pub quiet: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8070)),
            model: LatencyModel::default(),
            backlog: DEFAULT_BACKLOG,
            on_disconnect: OnDisconnect::Continue,
            shed: None,
            report_interval: Duration::from_secs(1),
            header_read_timeout: Duration::from_secs(60),
            timer_resolution: Duration::from_micros(500),
            csv: None,
            quiet: false,
        }
    }
}

impl ServerConfig {
    /// The same server with time compressed `k` times: the modelled delays,
    /// `Retry-After` and the report interval divided by `k`. The header-read
    /// timeout (a guard against stalled senders) and the timer's step (a
    /// cost of the machine) stay as given.
    pub fn scaled(mut self, k: f64) -> ServerConfig {
        self.model.base = compress(self.model.base, k);
        self.model.max_delay = compress(self.model.max_delay, k);
        if let Some(shed) = &mut self.shed {
            shed.retry_after = compress(shed.retry_after, k);
        }
        self.report_interval = compress(self.report_interval, k);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_divides_the_models_times_but_not_the_machines() {
        let config = ServerConfig {
            shed: Some(Shedding {
                above: 5,
                status: 503,
                retry_after: Duration::from_secs(1),
            }),
            ..ServerConfig::default()
        }
        .scaled(10.0);
        assert_eq!(config.model.base, Duration::from_millis(10));
        assert_eq!(config.model.max_delay, Duration::from_secs(60));
        assert_eq!(config.shed.unwrap().retry_after, Duration::from_millis(100));
        assert_eq!(config.report_interval, Duration::from_millis(100));
        assert_eq!(config.header_read_timeout, Duration::from_secs(60));
        assert_eq!(config.timer_resolution, Duration::from_micros(500));
    }
}
