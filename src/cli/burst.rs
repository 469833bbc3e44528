//! `client plan`'s burst flags: put the throttle through a burst of
//! failures and show how many retries it lets out.

use std::time::Duration;

use clap::Args;

use super::values::{positive, positive_duration};
use crate::model::burst::BurstRequest;
use crate::policy::ThrottleConfig;

/// A burst of failures for the throttle.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Burst of failures")]
pub struct BurstArgs {
    /// Also show what the throttle does to a burst of failures: requests
    /// arriving evenly at this many a second, every attempt failing, each
    /// failure retried at once while the throttle and the attempt limit
    /// allow (with --format csv, only the burst's table).
    #[arg(long, value_parser = positive, value_name = "PER_SEC")]
    pub burst_rate: Option<f64>,
    /// How long requests keep arriving [default: 30s].
    #[arg(long, requires = "burst_rate", value_parser = positive_duration, value_name = "DURATION")]
    pub burst_length: Option<Duration>,
    /// How long an attempt takes to fail [default: 100ms].
    #[arg(long, requires = "burst_rate", value_parser = positive_duration, value_name = "DURATION")]
    pub burst_latency: Option<Duration>,
    /// The attempts fail by timing out (botocore 1.43's quota charges a
    /// retry after a timeout 10, not 5; 1.44's charges 14 either way).
    #[arg(long, requires = "burst_rate")]
    pub burst_timeouts: bool,
}

impl BurstArgs {
    /// The burst asked for, if any, against `throttle`; an error if there is
    /// no throttle to put through it.
    pub fn request(
        &self,
        throttle: Option<ThrottleConfig>,
        max_attempts: Option<u32>,
        seed: u64,
    ) -> Result<Option<BurstRequest>, String> {
        let Some(rate) = self.burst_rate else {
            return Ok(None);
        };
        let throttle = throttle.ok_or_else(|| {
            "--burst-rate needs a throttle: --throttle NAME, or a strategy that brings one \
             (aws-standard, grpc, envoy, finagle)"
                .to_string()
        })?;
        Ok(Some(BurstRequest {
            throttle,
            rate,
            length: self.burst_length.unwrap_or(Duration::from_secs(30)),
            latency: self.burst_latency.unwrap_or(Duration::from_millis(100)),
            timeouts: self.burst_timeouts,
            max_attempts,
            seed,
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::client::{ClientCli, ClientCommand};
    use crate::model::burst::BurstRequest;
    use crate::policy::ThrottleConfig;

    fn burst(args: &[&str]) -> Result<Option<BurstRequest>, String> {
        let mut argv = vec!["client", "plan"];
        argv.extend_from_slice(args);
        match ClientCli::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .command
        {
            Some(ClientCommand::Plan(p)) => p.request().map(|r| r.burst).map_err(|e| e.to_string()),
            None => panic!("plan is a subcommand"),
        }
    }

    #[test]
    fn a_burst_takes_the_strategys_throttle_and_attempt_limit() {
        let b = burst(&["--strategy", "aws-standard", "--burst-rate", "50"])
            .unwrap()
            .unwrap();
        assert_eq!(b.rate, 50.0);
        assert_eq!(b.max_attempts, Some(3));
        assert_eq!(b.length, std::time::Duration::from_secs(30));
        assert_eq!(b.throttle.name(), "aws-quota");
        let b = burst(&[
            "--burst-rate",
            "5",
            "--throttle",
            "token-bucket",
            "--max-tokens",
            "4",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            b.throttle,
            ThrottleConfig::TokenBucket {
                max_tokens: 4.0,
                token_ratio: 0.1
            }
        );
        assert_eq!(burst(&["--strategy", "grpc"]).unwrap(), None);
    }

    #[test]
    fn a_burst_needs_a_throttle_and_its_flags_need_a_rate() {
        let e = burst(&["--burst-rate", "5"]).unwrap_err();
        assert!(e.contains("needs a throttle"), "{e}");
        let e = burst(&["--strategy", "grpc", "--burst-length", "5s"]).unwrap_err();
        assert!(e.contains("--burst-rate"), "{e}");
        assert!(burst(&["--strategy", "grpc", "--burst-rate", "0"]).is_err());
    }
}
