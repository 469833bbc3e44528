//! gRPC's side: calls on one channel (one retry throttle), each answered
//! attempt by attempt as the sequence says, driven through the model's own
//! user state machine (`model::user::User`) in virtual time, as
//! `scripts/grpc-check.js` drives grpc-js's own retrying call and
//! `scripts/grpc-core-check.py` runs grpcio (C-core) for real.
//!
//! Each call is a user whose request starts at the call's start (no think
//! time); its k-th attempt (a retry or a hedge) gets the call's k-th
//! answer, that long after it went. Events are taken in time order, an
//! attempt's end before an attempt due at the same instant. Every backoff
//! draw of a sequence is its one pinned draw.

use std::time::Duration;

use retry_storm::model::arrivals::ThinkTime;
use retry_storm::model::outcome::{Hints, Outcome};
use retry_storm::model::user::{Attempt, Rules, Sent, User};
use retry_storm::policy::shipped::GrpcImplementation;
use retry_storm::policy::{
    Hedging, Implementation, RetryLimits, StrategyKind, StrategyParams, Throttle, ThrottleConfig,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Pinned;

/// A retry policy, as a service config gives it.
#[derive(Deserialize)]
struct RetryPolicy {
    max_attempts: u32,
    initial_backoff: f64,
    max_backoff: f64,
    multiplier: f64,
}

/// A hedging policy, as a service config gives it.
#[derive(Deserialize)]
struct HedgingPolicy {
    max_attempts: u32,
    hedging_delay: f64,
}

/// The channel's retry throttling.
#[derive(Deserialize)]
struct Throttling {
    max_tokens: f64,
    token_ratio: f64,
}

/// One attempt's answer: its status, how long after the attempt went it
/// comes, and the server's pushback.
#[derive(Deserialize)]
struct Reply {
    status: String,
    after: f64,
    pushback_ms: Option<i64>,
}

/// One call: when it starts, and its attempts' answers in order.
#[derive(Deserialize)]
struct Call {
    start: f64,
    attempts: Vec<Reply>,
}

/// Calls on one channel under one policy.
#[derive(Deserialize)]
struct Sequence {
    name: String,
    retry: Option<RetryPolicy>,
    hedging: Option<HedgingPolicy>,
    throttle: Throttling,
    calls: Vec<Call>,
    draws: Vec<f64>,
}

fn at(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A status as the model's client sees it: gRPC's `UNAVAILABLE` is what it
/// maps a 503 to; `INTERNAL` a 400; anything else `UNKNOWN`, a 500.
fn answer(reply: &Reply) -> (Outcome, Hints) {
    let status = match reply.status.as_str() {
        "OK" => return (Outcome::Ok, Hints::default()),
        "UNAVAILABLE" => 503,
        "INTERNAL" => 400,
        _ => 500,
    };
    let hints = Hints {
        status: Some(status),
        pushback_ms: reply.pushback_ms,
        ..Hints::default()
    };
    (Outcome::Error, hints)
}

/// The rules every call of `seq` shares.
fn rules(implementation: GrpcImplementation, seq: &Sequence) -> Rules {
    let implementation_name = match implementation {
        GrpcImplementation::Core => Implementation::GrpcCore,
        GrpcImplementation::Js => Implementation::GrpcJs,
    };
    let (params, max_attempts) = match &seq.retry {
        Some(r) => (
            StrategyParams {
                min_delay: Some(at(r.initial_backoff)),
                max_delay: Some(at(r.max_backoff)),
                factor: Some(r.multiplier),
                implementation: Some(implementation_name),
                ..StrategyParams::default()
            },
            Some(r.max_attempts),
        ),
        None => (
            StrategyParams {
                implementation: Some(implementation_name),
                ..StrategyParams::default()
            },
            None,
        ),
    };
    let strategy = StrategyKind::Grpc.build(&params).expect("a gRPC policy");
    let limits = StrategyKind::Grpc.limits(RetryLimits {
        max_attempts,
        ..RetryLimits::default()
    });
    Rules {
        think: ThinkTime::new(Duration::ZERO),
        // gRPC has no per-attempt timeout: none ends before its answer.
        timeout: Duration::from_secs(24 * 3600),
        strategy,
        limits,
        hedging: seq
            .hedging
            .as_ref()
            .map(|h| Hedging::new(at(h.hedging_delay), h.max_attempts).following(implementation)),
    }
}

/// A call under way.
struct Running {
    user: User<Pinned>,
    /// Attempts in flight: the attempt, when its answer comes, which
    /// answer it gets.
    flights: Vec<(Sent, f64, usize)>,
    starts: Vec<f64>,
    last_status: String,
}

/// A call's record, as the script compares it.
#[derive(Default)]
struct Record {
    starts: Vec<f64>,
    end: Option<f64>,
    status: String,
}

/// What happens next to a call.
enum Next {
    Start,
    End(usize),
    Due,
}

fn run(implementation: GrpcImplementation, seq: &Sequence) -> Result<Value, String> {
    let u = *seq.draws.first().unwrap_or(&0.5);
    if seq.draws.iter().any(|&d| d != u) {
        return Err(format!(
            "{}: the model pins one draw a sequence; its draws differ",
            seq.name
        ));
    }
    let rules = rules(implementation, seq);
    let mut throttle = Throttle::new(ThrottleConfig::TokenBucket {
        max_tokens: seq.throttle.max_tokens,
        token_ratio: seq.throttle.token_ratio,
    });
    let mut running: Vec<Option<Running>> = seq.calls.iter().map(|_| None).collect();
    let mut records: Vec<Record> = seq.calls.iter().map(|_| Record::default()).collect();
    let mut tokens = vec![];
    let mut last_tokens = throttle.tokens();
    loop {
        // The earliest event: (time, order at a tie, call, what).
        let mut next: Option<(f64, u8, usize, Next)> = None;
        for (c, call) in seq.calls.iter().enumerate() {
            let mut consider = |t: f64, order: u8, what: Next| {
                if next
                    .as_ref()
                    .is_none_or(|n| (t, order, c) < (n.0, n.1, n.2))
                {
                    next = Some((t, order, c, what));
                }
            };
            match &running[c] {
                None if records[c].end.is_none() => consider(call.start, 2, Next::Start),
                None => {}
                Some(r) => {
                    for (i, f) in r.flights.iter().enumerate() {
                        consider(f.1, 0, Next::End(i));
                    }
                    if let Some(due) = r.user.due() {
                        consider(due.as_secs_f64(), 1, Next::Due);
                    }
                }
            }
        }
        let Some((t, _, c, what)) = next else { break };
        let now = at(t);
        match what {
            Next::Start => {
                running[c] = Some(Running {
                    user: User::new(&rules, Pinned::new(u), now),
                    flights: vec![],
                    starts: vec![],
                    last_status: String::new(),
                });
            }
            Next::Due => {
                let r = running[c].as_mut().expect("running");
                match r.user.begin(&rules, Some(&mut throttle), now) {
                    Attempt::Send { sent, .. } => {
                        let k = r.starts.len();
                        let reply = seq.calls[c].attempts.get(k).ok_or_else(|| {
                            format!("{}: call {c} made attempt {k}, unscripted", seq.name)
                        })?;
                        r.starts.push(t);
                        r.flights.push((sent, t + reply.after, k));
                    }
                    Attempt::Held => {}
                    Attempt::Refused(_) => {
                        let status = r.last_status.clone();
                        finish(&mut running[c], &mut records[c], t, status, &mut throttle);
                    }
                    Attempt::Wait | Attempt::Rejected(_) => {
                        return Err("gRPC's throttle neither waits nor rejects".into());
                    }
                }
            }
            Next::End(i) => {
                let r = running[c].as_mut().expect("running");
                let (sent, _, k) = r.flights.remove(i);
                let reply = &seq.calls[c].attempts[k];
                let (outcome, hints) = answer(reply);
                r.last_status = reply.status.clone();
                let finished =
                    r.user
                        .finish(&rules, Some(&mut throttle), sent, outcome, hints, now);
                if finished.request.is_some() {
                    let status = reply.status.clone();
                    finish(&mut running[c], &mut records[c], t, status, &mut throttle);
                }
            }
        }
        if throttle.tokens() != last_tokens {
            last_tokens = throttle.tokens();
            tokens.push(json!({ "t": t, "tokens": last_tokens }));
        }
    }
    let calls: Vec<Value> = records
        .iter()
        .map(|r| json!({ "attempts": r.starts, "end": r.end, "status": r.status }))
        .collect();
    Ok(json!({ "name": seq.name, "calls": calls, "tokens": tokens }))
}

/// Ends a call at `t` with `status`: the copies still out are cancelled.
fn finish(
    running: &mut Option<Running>,
    record: &mut Record,
    t: f64,
    status: String,
    throttle: &mut Throttle,
) {
    let r = running.take().expect("running");
    for (sent, _, _) in &r.flights {
        sent.cancel(Some(throttle), at(t));
    }
    *record = Record {
        starts: r.starts,
        end: Some(t),
        status,
    };
}

/// Runs every sequence of `input` as `implementation` does it.
pub fn trace(implementation: GrpcImplementation, input: &str) -> Option<Value> {
    let seqs: Vec<Sequence> = serde_json::from_str(input).expect("sequences as JSON");
    let out: Result<Vec<Value>, String> = seqs.iter().map(|s| run(implementation, s)).collect();
    match out {
        Ok(out) => Some(Value::Array(out)),
        Err(e) => {
            eprintln!("policy_trace: {e}");
            std::process::exit(2);
        }
    }
}
