//! A tier of a service chain (docs/chains.md): a server whose handler
//! does its own work (any shape, any defence) and then calls the next tier
//! inward under its own client policy, answering OK when that call
//! succeeds, 503 when it fails, 504 when its last attempt timed out. The
//! call is the same [`User`](super::user::User) state machine the client
//! runs, as a session of one request; both engines take this
//! configuration and these rules.

use std::time::Duration;

use super::client::ClientConfig;
use super::deadline::{Budget, budget};
use super::outcome::Outcome;
use super::user::Rules;

/// What a tier calls after its own work, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct TierCall {
    /// The next tier's URL (the real engine's; virtual time has none).
    pub url: String,
    /// The call's client: strategy, limits, timeout, throttle and hedging
    /// (its population, traffic and reporting are unused).
    pub client: ClientConfig,
    /// Pass the caller's remaining time inward (gRPC's `grpc-timeout`):
    /// the call ends by the caller's deadline, and a request whose
    /// deadline has passed is answered 504 without work.
    pub propagate_deadline: bool,
    /// Cancel the call when the caller goes (its connection closes), so
    /// that work for a gone caller stops inward.
    pub propagate_cancel: bool,
}

/// A tier's answer to its caller once its call has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierAnswer {
    /// The call succeeded: 200.
    Ok,
    /// The call failed (errors, or given up by its policy): 503.
    Unavailable,
    /// The call's last attempt timed out, or the caller's deadline had
    /// passed: 504.
    GatewayTimeout,
}

impl TierAnswer {
    /// The answer for a call that succeeded or not (`ok`), whose last
    /// attempt ended with `last` (`None`: given up before any attempt
    /// ended, by a throttle).
    pub fn of(ok: bool, last: Option<Outcome>) -> TierAnswer {
        match (ok, last) {
            (true, _) => TierAnswer::Ok,
            (false, Some(Outcome::Timeout)) => TierAnswer::GatewayTimeout,
            (false, _) => TierAnswer::Unavailable,
        }
    }

    /// The HTTP status the tier answers with.
    pub fn status(self) -> u16 {
        match self {
            TierAnswer::Ok => 200,
            TierAnswer::Unavailable => 503,
            TierAnswer::GatewayTimeout => 504,
        }
    }
}

impl TierCall {
    /// The rules of one call made `remaining` before its caller's deadline
    /// (`None`: no deadline came with the request), or `None` when that
    /// deadline has already passed and the call is not to be made. With
    /// propagation on, the call's deadline (the time after which no
    /// attempt starts or runs, [`RetryLimits::deadline`]) is the smaller of
    /// the tier's own and the caller's remaining time; without it, the
    /// caller's time is ignored.
    ///
    /// [`RetryLimits::deadline`]: crate::policy::RetryLimits
    pub fn rules_for(&self, remaining: Option<Duration>) -> Option<Rules> {
        let mut rules = self.client.rules();
        if !self.propagate_deadline {
            return Some(rules);
        }
        let own = rules.limits.deadline.unwrap_or(Duration::MAX);
        match budget(own, remaining) {
            Budget::Expired => None,
            Budget::Call(d) if d == Duration::MAX => Some(rules),
            Budget::Call(d) => {
                rules.limits.deadline = Some(d);
                Some(rules)
            }
        }
    }

    /// What the tier does after its own work, for its start-up line.
    pub fn describe(&self) -> String {
        let c = &self.client;
        let limit = c
            .limits
            .max_attempts
            .map_or("no limit".to_string(), |n| format!("at most {n} attempts"));
        format!(
            ", then calls {} ({}, {limit}, timeout {:?}{}{})",
            self.url,
            c.policy_name(),
            c.timeout,
            if self.propagate_deadline {
                ", deadlines passed on"
            } else {
                ""
            },
            if self.propagate_cancel {
                ", cancellation passed on"
            } else {
                ""
            },
        )
    }

    /// The time a request arriving with `deadline` at this tier carries
    /// inward on its call, made at `now` (`None` unless the tier propagates
    /// deadlines and one came with the request). The call's own deadline
    /// may be shorter; [`TierCall::rules_for`] applies both.
    pub fn remaining(&self, deadline: Option<Duration>, now: Duration) -> Option<Duration> {
        deadline
            .filter(|_| self.propagate_deadline)
            .map(|d| d.saturating_sub(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{RetryLimits, Strategy};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn call(propagate_deadline: bool, deadline: Option<Duration>) -> TierCall {
        TierCall {
            url: "http://127.0.0.1:1/api".to_string(),
            client: ClientConfig::with_policy(
                String::new(),
                ms(1_000),
                Strategy::Fixed { delay: ms(10) },
                RetryLimits {
                    deadline,
                    ..RetryLimits::default()
                },
            ),
            propagate_deadline,
            propagate_cancel: false,
        }
    }

    #[test]
    fn a_tier_answers_ok_503_or_504_by_how_its_call_ended() {
        assert_eq!(TierAnswer::of(true, Some(Outcome::Ok)).status(), 200);
        assert_eq!(TierAnswer::of(false, Some(Outcome::Error)).status(), 503);
        assert_eq!(TierAnswer::of(false, Some(Outcome::Timeout)).status(), 504);
        // Given up by a throttle before any attempt ended.
        assert_eq!(TierAnswer::of(false, None).status(), 503);
    }

    #[test]
    fn a_propagated_deadline_bounds_the_call_and_an_expired_one_stops_it() {
        // Own deadline 2 s, caller has 700 ms left: the call gets 700 ms.
        let tier = call(true, Some(ms(2_000)));
        let rules = tier.rules_for(Some(ms(700))).unwrap();
        assert_eq!(rules.limits.deadline, Some(ms(700)));
        // Caller has 3 s left: the tier's own 2 s holds.
        assert_eq!(
            tier.rules_for(Some(ms(3_000))).unwrap().limits.deadline,
            Some(ms(2_000))
        );
        // No deadline of its own: the caller's is the call's.
        let open = call(true, None);
        assert_eq!(
            open.rules_for(Some(ms(450))).unwrap().limits.deadline,
            Some(ms(450))
        );
        assert_eq!(open.rules_for(None).unwrap().limits.deadline, None);
        // Nothing left: no call.
        assert!(tier.rules_for(Some(Duration::ZERO)).is_none());
        // Without propagation the caller's time is ignored.
        let deaf = call(false, Some(ms(2_000)));
        assert_eq!(
            deaf.rules_for(Some(Duration::ZERO))
                .unwrap()
                .limits
                .deadline,
            Some(ms(2_000))
        );
    }

    #[test]
    fn the_time_carried_inward_is_what_is_left_of_the_callers() {
        let tier = call(true, None);
        // Arrived with a deadline at 1.5 s; calls at 1.2 s: 300 ms left.
        assert_eq!(tier.remaining(Some(ms(1_500)), ms(1_200)), Some(ms(300)));
        assert_eq!(tier.remaining(Some(ms(1_500)), ms(1_800)), Some(ms(0)));
        assert_eq!(tier.remaining(None, ms(1_200)), None);
        assert_eq!(call(false, None).remaining(Some(ms(1_500)), ms(0)), None);
    }
}
