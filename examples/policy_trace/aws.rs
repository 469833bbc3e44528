//! The AWS strategies' side: sequences of attempts, one at a time, as
//! `scripts/libraries-check.py` feeds them to botocore. Each sequence
//! starts a fresh process: a full quota, a limiter that is off. Each event
//! is one attempt; the model's pieces are called in the order
//! `model::user` calls them: the throttle before the attempt goes out (the
//! limiter's token), the throttle told how it ended, then for a failure
//! the backoff, the retry limits and the quota. The backoff's draw is the
//! event's `u`.

use std::time::{Duration, SystemTime};

use retry_storm::model::outcome::{Hints, Outcome};
use retry_storm::policy::shipped::{AttemptKind, ShippedThrottle};
use retry_storm::policy::{
    AWS_THROTTLING_CODES, Answer, Backoff, Decision, Failure, Implementation, Next, RetryLimits,
    Strategy, StrategyKind, StrategyParams, Throttle, ThrottleKind, ThrottleParams, read_hints,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Pinned;

/// One attempt and its answer, as the script generates it.
#[derive(Deserialize)]
struct Event {
    /// HTTP status; none for a timeout or a refused connection.
    status: Option<u16>,
    /// `read-timeout` or `connection` when there is no status.
    error: Option<String>,
    /// The AWS error code in the body, if any.
    code: Option<String>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    t_send: f64,
    t_recv: f64,
    /// The backoff's draw.
    u: f64,
}

/// A sequence of attempts.
#[derive(Deserialize)]
pub struct Sequence {
    name: String,
    events: Vec<Event>,
}

fn at(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// The event's outcome and hints, as the networked client reads them.
fn answer(ev: &Event) -> (Outcome, Hints) {
    match ev.status {
        None if ev.error.as_deref() == Some("read-timeout") => (Outcome::Timeout, Hints::default()),
        None => (Outcome::Error, Hints::default()),
        Some(s) if (200..300).contains(&s) => (Outcome::Ok, Hints::default()),
        Some(s) => {
            let lower: Vec<(String, &str)> = ev
                .headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str()))
                .collect();
            let header = |name: &str| lower.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
            let mut hints = read_hints(s, header, SystemTime::UNIX_EPOCH);
            // The model reads no bodies: the code the body names is given.
            hints.throttle_code = ev
                .code
                .as_deref()
                .is_some_and(|c| AWS_THROTTLING_CODES.contains(&c));
            (Outcome::Error, hints)
        }
    }
}

/// The model's decisions on `seq`, as strategy `kind` of generation
/// 1.44 (`aws_2026`) or 1.43 makes them.
fn run(kind: StrategyKind, aws_2026: bool, seq: &Sequence) -> Value {
    let params = StrategyParams {
        implementation: Some(if aws_2026 {
            Implementation::Botocore144
        } else {
            Implementation::Botocore143
        }),
        ..StrategyParams::default()
    };
    let strategy = kind.build(&params).expect("the AWS strategies build");
    let limits = kind.limits(RetryLimits::default());
    let throttle_kind: Option<ThrottleKind> = strategy.default_throttle();
    let config = ThrottleKind::build(throttle_kind, &ThrottleParams::default())
        .expect("defaults")
        .expect("the AWS strategies bring a throttle");
    let mut throttle = Throttle::new(config);
    let mut backoff = Backoff::new(Duration::ZERO);
    let mut attempts = 0u32;
    let mut last: Option<(Outcome, bool)> = None;
    let mut out = Vec::new();
    for ev in &seq.events {
        attempts += 1;
        let kind = AttemptKind {
            retry: attempts > 1,
            after_timeout: last.is_some_and(|(o, _)| o == Outcome::Timeout),
            after_throttle: last.is_some_and(|(_, t)| t),
        };
        let mut rec = serde_json::Map::new();
        let mut rng = Pinned::new(ev.u);
        let token = throttle.before(kind, at(ev.t_send), &mut rng) == Decision::Allow;
        let (outcome, hints) = answer(ev);
        let told = match outcome {
            Outcome::Ok => Answer::Ok,
            _ if strategy.throttling(&Failure::of(&hints)) => Answer::Throttled,
            _ => Answer::Failed,
        };
        throttle.after(told, kind, at(ev.t_recv));
        let mut delay = None;
        let failure = Failure::of(&hints);
        if outcome != Outcome::Ok && strategy.retries(&failure) {
            let proposed = backoff.next_delay_after(&strategy, failure, &mut rng);
            if let Next::Retry(d) =
                limits.next(attempts, Duration::ZERO, proposed, hints.retry_after)
                && throttle.allows_retry(kind_after(&strategy, outcome, failure), at(ev.t_recv))
            {
                delay = Some(d);
            }
        }
        rec.insert("retry".into(), json!(delay.is_some()));
        rec.insert("delay".into(), json!(delay.map(|d| d.as_secs_f64())));
        match throttle.shipped() {
            Some(ShippedThrottle::AwsQuota(q)) => {
                rec.insert("quota".into(), json!(q.available()));
            }
            Some(ShippedThrottle::AwsAdaptive { quota, limiter }) => {
                rec.insert("token".into(), json!(token));
                rec.insert("quota".into(), json!(quota.available()));
                rec.insert("enabled".into(), json!(limiter.enabled()));
                rec.insert("rate".into(), json!(limiter.rate()));
            }
            _ => {}
        }
        out.push(Value::Object(rec));
        if delay.is_some() {
            last = Some((outcome, strategy.throttling(&failure)));
        } else {
            attempts = 0;
            last = None;
            backoff = Backoff::new(Duration::ZERO);
        }
    }
    json!({ "name": seq.name, "decisions": out })
}

/// What the quota is told of the retry that would follow this failure.
fn kind_after(strategy: &Strategy, outcome: Outcome, failure: Failure) -> AttemptKind {
    AttemptKind {
        retry: true,
        after_timeout: outcome == Outcome::Timeout,
        after_throttle: strategy.throttling(&failure),
    }
}

/// Runs every sequence of `input` through strategy `mode` (`standard` or
/// `adaptive`) of `generation` (`1.43` or `1.44`); `None` for a mode or
/// generation it does not know.
pub fn trace(mode: &str, generation: &str, input: &str) -> Option<Value> {
    let kind = match mode {
        "standard" => StrategyKind::AwsStandard,
        "adaptive" => StrategyKind::AwsAdaptive,
        _ => return None,
    };
    let aws_2026 = match generation {
        "1.44" => true,
        "1.43" => false,
        _ => return None,
    };
    let seqs: Vec<Sequence> = serde_json::from_str(input).expect("sequences as JSON");
    let results: Vec<Value> = seqs.iter().map(|s| run(kind, aws_2026, s)).collect();
    Some(json!({ "model": env!("CARGO_PKG_VERSION"), "results": results }))
}
