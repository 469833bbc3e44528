//! Prometheus metrics of a running client or server: counters that move as
//! each event happens (cumulative from the start), gauges of the state
//! now, and latency histograms, encoded by the `prometheus-client` crate
//! (Prometheus's official Rust client) in the OpenMetrics text format,
//! which Prometheus asks for first, or in Prometheus's text format 0.0.4
//! for whoever does not ([`Format`]). Names start with
//! `retry_storm_client_`, `retry_storm_server_` or `retry_storm_proxy_`
//! and carry their unit (`_seconds`) and, for counters, `_total`
//! (docs/metrics.md lists them all).
//!
//! The client's metrics are fed by [`ClientRecorder`] as it records, when
//! it is given them; the server's by the real server's model task; the
//! fault proxy's by its recorder (`report::proxy`). A tier
//! of a chain serves both, its server's and its calls', every series
//! labelled `tier` ([`ServerExposition`]); a plain server or client carries no
//! such label. No runtime here: the endpoint that serves them is
//! `net::metrics`.
//!
//! [`ClientRecorder`]: super::counts::ClientRecorder

mod client;
mod family;
mod proxy;
mod server;

pub use client::{ATTEMPT_OUTCOMES, ClientMetrics};
pub use family::{Exposition, LATENCY_BUCKETS, TIER_LABEL};
pub use proxy::{ANSWER_CLASSES, ProxyMetrics};
pub use server::{DROP_REASONS, MODEL_OUTCOMES, ServerExposition, ServerMetrics};

/// The text formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0, what Prometheus asks for first.
    OpenMetrics,
    /// Prometheus's text format 0.0.4, for whoever does not ask for
    /// OpenMetrics (curl, `promtool check metrics`, older scrapers).
    Prometheus,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics if it names it
    /// (with a weight above zero), else Prometheus's text format.
    pub fn accepted(accept: Option<&str>) -> Format {
        let wants = |range: &str| {
            let mut parts = range.split(';').map(str::trim);
            parts.next() == Some("application/openmetrics-text")
                && parts.all(|p| {
                    p.strip_prefix("q=")
                        .is_none_or(|q| q.parse::<f64>().is_ok_and(|q| q > 0.0))
                })
        };
        match accept {
            Some(accept) if accept.split(',').any(wants) => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The media type of an exposition in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// An exposition rendered as OpenMetrics, in this format. For
    /// Prometheus's: a counter's HELP and TYPE name its samples (with
    /// `_total`), and there is no `# UNIT` or `# EOF` line.
    pub fn encode(self, openmetrics: String) -> String {
        if self == Format::OpenMetrics {
            return openmetrics;
        }
        let counters: Vec<&str> = openmetrics
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
            .collect();
        let mut text = String::with_capacity(openmetrics.len());
        for line in openmetrics.lines() {
            if line.starts_with("# UNIT ") || line == "# EOF" {
                continue;
            }
            let family = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
                let rest = line.strip_prefix(tag)?;
                let name = rest.split(' ').next()?;
                counters
                    .contains(&name)
                    .then(|| (tag, name, &rest[name.len()..]))
            });
            match family {
                Some((tag, name, rest)) => {
                    text.push_str(&format!("{tag}{name}_total{rest}"));
                }
                None => text.push_str(line),
            }
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests;
