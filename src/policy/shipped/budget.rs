//! Shipped clients' retry budgets: the AWS SDKs' retry quota, tower's
//! `TpsBudget`, Finagle's `RetryBudget` and Envoy's concurrent-retry budget.
//! Time is a [`Duration`] since an epoch the caller chooses.

use std::time::Duration;

/// botocore's `RetryQuotaChecker` over a `RetryQuota` of 500: a retry
/// takes 5 (10 after a timeout; botocore 1.44: 14 after a transient
/// error, 5 after throttling) and is refused when the quota holds less; a
/// success without retries gives 1 back, a success after retries gives back
/// the cost of the *last* retry only (the request context keeps one
/// amount, overwritten by every retry: a quirk of the code), never above
/// the initial 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwsQuota {
    available: u32,
    max: u32,
    cost: u32,
    timeout_cost: u32,
    throttle_cost: u32,
    refund: u32,
}

/// An AWS retry quota's parameters: its size (what it starts with and
/// never exceeds), what a retry takes after each kind of failure, and what
/// a success without retries gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwsQuotaConfig {
    /// The quota's size (botocore: 500).
    pub capacity: u32,
    /// A retry after a failure that is neither a timeout nor a throttling
    /// answer (5; botocore 1.44: 14).
    pub retry_cost: u32,
    /// A retry after a timeout (10; botocore 1.44: 14).
    pub timeout_cost: u32,
    /// A retry after a throttling answer, a 429 (5 in both).
    pub throttle_cost: u32,
    /// What a success without retries gives back (1).
    pub refund: u32,
}

impl AwsQuotaConfig {
    /// botocore's standard mode: 500; a retry takes 5, 10 after a timeout,
    /// 5 after a 429; a clean success gives 1 back.
    pub const STANDARD: AwsQuotaConfig = AwsQuotaConfig {
        capacity: 500,
        retry_cost: 5,
        timeout_cost: 10,
        throttle_cost: 5,
        refund: 1,
    };

    /// botocore 1.44's: 14 after a transient error (timeouts are
    /// transient), 5 after throttling.
    pub const VARIANT_2026: AwsQuotaConfig = AwsQuotaConfig {
        retry_cost: 14,
        timeout_cost: 14,
        ..AwsQuotaConfig::STANDARD
    };

    /// The standard mode's parameters, or botocore 1.44's.
    pub fn of(variant_2026: bool) -> Self {
        if variant_2026 {
            AwsQuotaConfig::VARIANT_2026
        } else {
            AwsQuotaConfig::STANDARD
        }
    }

    /// A full quota with these parameters.
    pub fn quota(self) -> AwsQuota {
        AwsQuota::new(
            self.capacity,
            self.retry_cost,
            self.timeout_cost,
            self.throttle_cost,
            self.refund,
        )
    }
}

impl AwsQuota {
    /// The standard mode's quota: 500, cost 5, 10 after a timeout.
    pub fn standard() -> Self {
        AwsQuotaConfig::STANDARD.quota()
    }

    /// botocore 1.44's: cost 14 for a transient error, 5 for throttling
    /// (timeouts are transient).
    pub fn variant_2026() -> Self {
        AwsQuotaConfig::VARIANT_2026.quota()
    }

    /// A full quota of `capacity` with these costs: after another failure,
    /// a timeout, a throttle; and `refund`, what a success without retries
    /// gives back.
    pub fn new(
        capacity: u32,
        cost: u32,
        timeout_cost: u32,
        throttle_cost: u32,
        refund: u32,
    ) -> Self {
        AwsQuota {
            available: capacity,
            max: capacity,
            cost,
            timeout_cost,
            throttle_cost,
            refund,
        }
    }

    /// What is left.
    pub fn available(&self) -> u32 {
        self.available
    }

    /// A retry after a failure (a timeout or not): its cost if the quota
    /// allows it (the request remembers it), `None` if the request must
    /// fail instead.
    pub fn acquire(&mut self, after_timeout: bool, after_throttle: bool) -> Option<u32> {
        let amount = self.cost_of(after_timeout, after_throttle);
        (amount <= self.available).then(|| {
            self.available -= amount;
            amount
        })
    }

    /// What a retry costs after a throttle, a timeout or another failure.
    pub fn cost_of(&self, after_timeout: bool, after_throttle: bool) -> u32 {
        if after_throttle {
            self.throttle_cost
        } else if after_timeout {
            self.timeout_cost
        } else {
            self.cost
        }
    }

    /// A success: `last_cost` is what the request's last retry took (none
    /// if it had no retries: then the refund). Never above the capacity.
    pub fn release(&mut self, last_cost: Option<u32>) {
        let amount = last_cost.unwrap_or(self.refund);
        self.available = self.available.saturating_add(amount).min(self.max);
    }
}

/// `min_per_sec * ttl * withdraw`, the reserve of tower's and Finagle's
/// budgets. Both take whole retries a second and count the ttl in whole
/// seconds; here the ttl may be compressed by `--time-scale` (which
/// multiplies `min_per_sec` as much), so the product is taken exactly and
/// rounded: the sources' value for a whole rate and a ttl of whole seconds.
fn reserve(min_per_sec: f64, ttl: Duration, withdraw: i64) -> i64 {
    ((min_per_sec * ttl.as_secs_f64()).round() as i64).saturating_mul(withdraw)
}

/// tower's `TpsBudget`, modelled on its code: a request deposits 1; a
/// retry withdraws `trunc(1 / percent)` (so 0.3 behaves as one retry in
/// three, and anything above 0.5 as one in one) against the sum of ten
/// slots, the current writer and a reserve of `min_per_sec * ttl *
/// withdraw`. The slots rotate as tower's do: a window after the last
/// rotation the writer is committed to the current slot, slots are cleared
/// while more than a window remains, and the rotation restarts from now,
/// not from the slot's boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TpsBudget {
    slots: Vec<i64>,
    index: usize,
    since: Duration,
    window: Duration,
    writer: i64,
    reserve: i64,
    deposit: i64,
    withdraw: i64,
}

impl TpsBudget {
    /// tower's defaults: ttl 10 s, 10 retries a second, 20 %.
    pub fn tower_default() -> Self {
        TpsBudget::new(Duration::from_secs(10), 10.0, 0.2)
    }

    /// `TpsBudget::new(ttl, min_per_sec, retry_percent)`. tower keeps the
    /// percent as an `f32`, so its withdrawal is computed in `f32` too: at
    /// 0.1 % a retry withdraws 999, not 1000 (`1.0 / 0.001` is
    /// 999.99994 in `f32`).
    pub fn new(ttl: Duration, min_per_sec: f64, percent: f64) -> Self {
        let percent = percent as f32;
        let (deposit, withdraw) = if percent == 0.0 {
            (0, 1)
        } else if percent <= 1.0 {
            (1, (1.0 / percent) as i64)
        } else {
            (1000, (1000.0 / percent) as i64)
        };
        let reserve = reserve(min_per_sec, ttl, withdraw);
        TpsBudget {
            slots: vec![0; 10],
            index: 0,
            since: Duration::ZERO,
            window: ttl / 10,
            writer: 0,
            reserve,
            deposit,
            withdraw,
        }
    }

    /// Why tower would compute a budget of this ttl, rate and percent
    /// (at full scale) otherwise than the model: tower takes a ttl of 1 to
    /// 60 whole seconds (it counts the reserve from `ttl.as_secs()` and
    /// asserts the range), a whole rate (a `u32`) and a percent of at most
    /// 1000 (100,000 %). Anything else is refused, not modelled.
    pub fn refusal(ttl: Duration, min_per_sec: f64, percent: f64) -> Option<String> {
        if ttl.subsec_nanos() != 0 || !(1..=60).contains(&ttl.as_secs()) {
            return Some(format!(
                "tower's TpsBudget takes a ttl of 1 to 60 whole seconds, not {} s",
                ttl.as_secs_f64()
            ));
        }
        if min_per_sec.fract() != 0.0 || min_per_sec >= f64::from(i32::MAX) {
            return Some(format!(
                "tower's TpsBudget takes a whole number of retries a second, not {min_per_sec}"
            ));
        }
        if percent > 1000.0 {
            return Some(format!(
                "tower's TpsBudget takes at most 100000 %, not {} %",
                percent * 100.0
            ));
        }
        None
    }

    fn expire(&mut self, now: Duration) {
        let mut diff = now.saturating_sub(self.since);
        if diff < self.window {
            return;
        }
        self.slots[self.index] = std::mem::take(&mut self.writer);
        let mut index = (self.index + 1) % self.slots.len();
        while diff > self.window {
            self.slots[index] = 0;
            diff -= self.window;
            index = (index + 1) % self.slots.len();
        }
        self.index = index;
        self.since = now;
    }

    /// What may be withdrawn now: the slots, the writer and the reserve.
    pub fn balance(&mut self, now: Duration) -> i64 {
        self.expire(now);
        self.writer + self.slots.iter().sum::<i64>() + self.reserve
    }

    /// A request was made.
    pub fn deposit(&mut self, now: Duration) {
        self.expire(now);
        self.writer += self.deposit;
    }

    /// A retry asks to go: withdrawn if the balance allows it.
    pub fn withdraw(&mut self, now: Duration) -> bool {
        let ok = self.balance(now) >= self.withdraw;
        if ok {
            self.writer -= self.withdraw;
        }
        ok
    }
}

/// Finagle's `RetryBudget`: a request deposits 1000, a retry withdraws
/// `trunc(1000 / percent)`, against a correct windowed sum over ten slices
/// of `ttl / 10` plus a reserve of `min_per_sec * ttl * withdraw`. At 0 %
/// a request deposits nothing and a retry withdraws 1: only the reserve
/// pays for retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinagleBudget {
    /// (slice index, amount), oldest first.
    slices: std::collections::VecDeque<(u64, i64)>,
    slice: Duration,
    sum: i64,
    reserve: i64,
    deposit: i64,
    withdraw: i64,
}

/// Finagle's `ScaleFactor`: what a request deposits, so that a percent
/// above 1 needs no fractions.
const FINAGLE_SCALE: i64 = 1000;

impl FinagleBudget {
    /// Finagle's defaults: ttl 10 s, 10 retries a second, 20 %.
    pub fn finagle_default() -> Self {
        FinagleBudget::new(Duration::from_secs(10), 10.0, 0.2)
    }

    /// `RetryBudget(ttl, minRetriesPerSec, percentCanRetry)`.
    pub fn new(ttl: Duration, min_per_sec: f64, percent: f64) -> Self {
        let (deposit, withdraw) = if percent == 0.0 {
            (0, 1)
        } else {
            (FINAGLE_SCALE, (FINAGLE_SCALE as f64 / percent) as i64)
        };
        FinagleBudget {
            slices: std::collections::VecDeque::new(),
            slice: (ttl / 10).max(Duration::from_nanos(1)),
            sum: 0,
            reserve: reserve(min_per_sec, ttl, withdraw),
            deposit,
            withdraw,
        }
    }

    fn index(&self, now: Duration) -> u64 {
        (now.as_nanos() / self.slice.as_nanos()) as u64
    }

    fn add(&mut self, now: Duration, amount: i64) {
        self.expire(now);
        let i = self.index(now);
        match self.slices.back_mut() {
            Some(last) if last.0 == i => last.1 += amount,
            _ => self.slices.push_back((i, amount)),
        }
        self.sum += amount;
    }

    fn expire(&mut self, now: Duration) {
        let current = self.index(now);
        while let Some(&(i, amount)) = self.slices.front() {
            if i + 10 > current {
                break;
            }
            self.sum -= amount;
            self.slices.pop_front();
        }
    }

    /// What may be withdrawn now.
    pub fn balance(&mut self, now: Duration) -> i64 {
        self.expire(now);
        self.sum + self.reserve
    }

    /// A request was made.
    pub fn deposit(&mut self, now: Duration) {
        self.add(now, self.deposit);
    }

    /// A retry asks to go.
    pub fn withdraw(&mut self, now: Duration) -> bool {
        let ok = self.balance(now) >= self.withdraw;
        if ok {
            self.add(now, -self.withdraw);
        }
        ok
    }
}

/// Envoy's concurrent-retry budget: a retry may start while fewer retries
/// are in flight than `max(trunc(percent / 100 * active), min)`, `active`
/// being the requests in flight (20 % and 3 by default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnvoyRetryBudget {
    /// budget_percent (20).
    pub percent: f64,
    /// min_retry_concurrency (3).
    pub min: u64,
}

impl Default for EnvoyRetryBudget {
    fn default() -> Self {
        EnvoyRetryBudget {
            percent: 20.0,
            min: 3,
        }
    }
}

impl EnvoyRetryBudget {
    /// How many retries may be in flight with `active` requests in flight.
    pub fn max(&self, active: u64) -> u64 {
        ((self.percent / 100.0 * active as f64) as u64).max(self.min)
    }

    /// Whether a retry may start with `retrying` retries and `active`
    /// requests in flight.
    pub fn allows(&self, retrying: u64, active: u64) -> bool {
        retrying < self.max(active)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_aws_quota_of_500_allows_100_retries_of_5_and_refunds_one_per_clean_success() {
        let mut q = AwsQuota::standard();
        for _ in 0..100 {
            assert_eq!(q.acquire(false, false), Some(5));
        }
        assert_eq!((q.available(), q.acquire(false, false)), (0, None));
        q.release(None);
        assert_eq!(q.available(), 1, "a success without retries gives 1");
        // Five clean successes make one retry possible again.
        for _ in 0..4 {
            q.release(None);
        }
        assert_eq!(q.acquire(false, false), Some(5));
        // A timeout costs 10.
        let mut q = AwsQuota::standard();
        assert_eq!(q.acquire(true, false), Some(10));
        // Two retries (5 then 10) and a success: only the last comes back.
        let mut q = AwsQuota::standard();
        q.acquire(false, false);
        let last = q.acquire(true, false);
        assert_eq!(q.available(), 485);
        q.release(last);
        assert_eq!(q.available(), 495, "refunds 10, not 15");
        // Never above the initial capacity.
        let mut q = AwsQuota::standard();
        q.release(None);
        assert_eq!(q.available(), 500);
        assert_eq!(AwsQuota::variant_2026().acquire(false, false), Some(14));
        assert_eq!(AwsQuota::variant_2026().acquire(true, false), Some(14));
        assert_eq!(
            AwsQuota::variant_2026().acquire(false, true),
            Some(5),
            "a 429"
        );
        assert_eq!(AwsQuota::standard().acquire(false, true), Some(5));
    }

    #[test]
    fn an_aws_quota_takes_its_size_costs_and_refund_as_given() {
        // The sources' two sets, as they were before they could be given.
        assert_eq!(AwsQuota::standard(), AwsQuota::new(500, 5, 10, 5, 1));
        assert_eq!(AwsQuota::variant_2026(), AwsQuota::new(500, 14, 14, 5, 1));
        // 50 at 10 a retry: exactly 5 retries, after any failure.
        let mut q = AwsQuota::new(50, 10, 10, 10, 1);
        for _ in 0..5 {
            assert_eq!(q.acquire(false, false), Some(10));
        }
        assert_eq!((q.available(), q.acquire(true, true)), (0, None));
        // A refund of 3: 20 - 5 + 3 = 18, then 21 is capped at 20.
        let mut q = AwsQuota::new(20, 5, 10, 5, 3);
        q.acquire(false, false);
        q.release(None);
        assert_eq!(q.available(), 18);
        q.release(None);
        assert_eq!(q.available(), 20, "never above its capacity");
        // A refund of 0: a clean success gives nothing back.
        let mut q = AwsQuota::new(10, 10, 10, 10, 0);
        q.acquire(false, false);
        q.release(None);
        assert_eq!(q.available(), 0);
        // A cost of 0: a free retry, even from an empty quota.
        let mut free = AwsQuota::new(1, 0, 1, 1, 1);
        assert_eq!(free.acquire(true, false), Some(1));
        assert_eq!(free.acquire(true, false), None);
        assert_eq!(free.acquire(false, false), Some(0));
        // A huge refund saturates at the capacity instead of overflowing.
        let mut q = AwsQuota::new(u32::MAX, 1, 1, 1, u32::MAX);
        q.acquire(false, false);
        q.release(None);
        assert_eq!(q.available(), u32::MAX);
    }

    #[test]
    fn tower_withdraws_what_its_f32_percent_gives() {
        // 1 / 0.001 is 999.99994 in f32: 999, where f64 gives 1000.
        let b = TpsBudget::new(Duration::from_secs(10), 0.0, 0.001);
        assert_eq!(b.withdraw, 999);
        let b = TpsBudget::new(Duration::from_secs(10), 0.0, 0.002);
        assert_eq!(b.withdraw, 499);
        let b = TpsBudget::new(Duration::from_secs(10), 0.0, 0.2);
        assert_eq!(b.withdraw, 5);
        // Above 1: a deposit of 1000, 1000 / 3 withdrawn.
        let b = TpsBudget::new(Duration::from_secs(10), 0.0, 3.0);
        assert_eq!((b.deposit, b.withdraw), (1000, 333));
    }

    #[test]
    fn what_tower_computes_otherwise_is_refused() {
        let s = Duration::from_secs;
        assert_eq!(TpsBudget::refusal(s(10), 10.0, 0.2), None);
        assert_eq!(TpsBudget::refusal(s(60), 0.0, 1000.0), None);
        for (ttl, rate, percent, says) in [
            (Duration::from_millis(1500), 10.0, 0.2, "1.5 s"),
            (s(0), 10.0, 0.2, "1 to 60"),
            (s(61), 10.0, 0.2, "1 to 60"),
            (s(10), 2.5, 0.2, "not 2.5"),
            (s(10), 10.0, 1000.5, "100000 %"),
        ] {
            let why = TpsBudget::refusal(ttl, rate, percent).expect(says);
            assert!(why.contains(says), "{why}");
        }
    }

    #[test]
    fn tower_turns_its_percent_into_a_whole_withdrawal() {
        // 0.3 withdraws trunc(1 / 0.3) = 3: one retry per three requests.
        let mut b = TpsBudget::new(Duration::from_secs(10), 0.0, 0.3);
        for _ in 0..3 {
            b.deposit(ms(0));
        }
        assert!(b.withdraw(ms(1)));
        assert!(!b.withdraw(ms(2)));
        // 0.6 withdraws trunc(1.67) = 1: every request allows a retry.
        let mut b = TpsBudget::new(Duration::from_secs(10), 0.0, 0.6);
        b.deposit(ms(0));
        b.deposit(ms(0));
        assert!(b.withdraw(ms(1)) && b.withdraw(ms(1)));
        assert!(!b.withdraw(ms(1)));
        // The default reserve: 10 a second for 10 s, at 5 each: 500.
        let mut b = TpsBudget::tower_default();
        assert_eq!(b.balance(ms(0)), 500);
        for _ in 0..100 {
            assert!(b.withdraw(ms(0)));
        }
        assert!(!b.withdraw(ms(0)));
    }

    #[test]
    fn towers_percent_of_one_half_withdraws_two() {
        // trunc(1 / 0.5) = 2: four deposits pay for two retries.
        let mut b = TpsBudget::new(Duration::from_secs(10), 0.0, 0.5);
        for _ in 0..4 {
            b.deposit(ms(0));
        }
        assert!(b.withdraw(ms(1)) && b.withdraw(ms(1)));
        assert!(!b.withdraw(ms(1)));
        // The reserve at 1 a second over 10 s: 10 retries of 2, so 20.
        let mut b = TpsBudget::new(Duration::from_secs(10), 1.0, 0.5);
        assert_eq!(b.balance(ms(0)), 20);
        // Finagle at one half: a retry withdraws trunc(1000 / 0.5) = 2000.
        let mut f = FinagleBudget::new(Duration::from_secs(10), 1.0, 0.5);
        assert_eq!(f.balance(ms(0)), 20_000);
        f.deposit(ms(0));
        f.deposit(ms(0));
        assert_eq!(f.balance(ms(0)), 22_000);
        assert!(f.withdraw(ms(0)));
        assert_eq!(f.balance(ms(0)), 20_000);
    }

    #[test]
    fn the_reserve_survives_time_compression() {
        // Ten times faster: 100 a second over 1 s, as much as 10 over 10 s;
        // three times: 30 over 3.333 s, the same 100 retries.
        for (ttl, rate) in [(ms(10_000), 10.0), (ms(1000), 100.0), (ms(3333), 30.0)] {
            let mut t = TpsBudget::new(ttl, rate, 0.2);
            let mut f = FinagleBudget::new(ttl, rate, 0.2);
            assert_eq!(t.balance(ms(0)), 500, "{ttl:?}");
            assert_eq!(f.balance(ms(0)), 500_000, "{ttl:?}");
        }
        // Under a second of ttl (k = 20) the product holds too.
        assert_eq!(TpsBudget::new(ms(500), 200.0, 0.2).balance(ms(0)), 500);
        // A rate that is not whole: 2.5 a second over 4 s is 10 retries,
        // and so is 10 a second over 1 s (four times faster).
        assert_eq!(TpsBudget::new(ms(4000), 2.5, 0.2).balance(ms(0)), 50);
        assert_eq!(TpsBudget::new(ms(1000), 10.0, 0.2).balance(ms(0)), 50);
    }

    #[test]
    fn tower_rotates_its_slots_as_its_code_does() {
        // tower's own tests, with time passed in: ttl 1 s, no reserve, one
        // retry per two deposits.
        let mut b = TpsBudget::new(Duration::from_secs(1), 0.0, 0.5);
        b.deposit(ms(0));
        b.deposit(ms(0));
        assert!(b.withdraw(ms(901)), "900 ms later the deposits hold");
        // A blank slate 2 s later, then deposits at +0, +301, +1102.
        let t = 901 + 2001;
        b.deposit(ms(t));
        b.deposit(ms(t + 301));
        b.deposit(ms(t + 301 + 801));
        assert!(b.withdraw(ms(t + 1102)), "the 2nd and 3rd deposits hold");
        assert!(!b.withdraw(ms(t + 1102)));
        // One deposit, 3 s later, is gone.
        let mut b = TpsBudget::new(Duration::from_secs(1), 0.0, 1.0);
        b.deposit(ms(0));
        assert!(!b.withdraw(ms(3000)));
    }

    #[test]
    fn finagle_keeps_a_windowed_sum_in_thousandths() {
        let mut b = FinagleBudget::new(Duration::from_secs(10), 0.0, 0.2);
        // 0.2: a retry withdraws 5000, a request deposits 1000.
        for _ in 0..10 {
            b.deposit(ms(0));
        }
        assert!(b.withdraw(ms(100)) && b.withdraw(ms(100)));
        assert!(!b.withdraw(ms(100)));
        // Ten seconds later the deposits (and withdrawals) have left.
        assert_eq!(b.balance(Duration::from_secs(10)), 0);
        // The default reserve: 10 a second over 10 s, at 5000 each.
        assert_eq!(FinagleBudget::finagle_default().balance(ms(0)), 500_000);
    }

    #[test]
    fn at_zero_percent_only_the_reserve_pays_for_retries() {
        // Finagle and tower alike: a request deposits 0, a retry withdraws
        // 1 from a reserve of 1 a second over 10 s: 10 retries, however
        // many requests were made.
        let mut f = FinagleBudget::new(Duration::from_secs(10), 1.0, 0.0);
        let mut t = TpsBudget::new(Duration::from_secs(10), 1.0, 0.0);
        for _ in 0..100 {
            f.deposit(ms(0));
            t.deposit(ms(0));
        }
        assert_eq!((f.balance(ms(0)), t.balance(ms(0))), (10, 10));
        for _ in 0..10 {
            assert!(f.withdraw(ms(1)) && t.withdraw(ms(1)));
        }
        assert!(!f.withdraw(ms(1)) && !t.withdraw(ms(1)));
        // No reserve either: no retry at all (Finagle's `Empty`).
        let mut f = FinagleBudget::new(Duration::from_secs(10), 0.0, 0.0);
        f.deposit(ms(0));
        assert!(!f.withdraw(ms(0)));
    }

    #[test]
    fn envoy_allows_a_fifth_of_active_requests_and_at_least_three() {
        let b = EnvoyRetryBudget::default();
        assert_eq!(b.max(0), 3);
        assert_eq!(b.max(14), 3, "trunc(2.8) = 2, at least 3");
        assert_eq!(b.max(20), 4);
        assert_eq!(b.max(1000), 200);
        assert!(b.allows(2, 0) && !b.allows(3, 0));
        assert!(b.allows(199, 1000) && !b.allows(200, 1000));
    }

    #[test]
    fn envoy_takes_its_percent_and_floor_as_given() {
        // Half of 10 requests in flight: 5 retries may be in flight.
        let b = EnvoyRetryBudget {
            percent: 50.0,
            min: 1,
        };
        assert_eq!(b.max(10), 5);
        assert!(b.allows(4, 10) && !b.allows(5, 10));
        // trunc(0.5 * 1) = 0: the floor of 1 holds; trunc(1.5) = 1.
        assert_eq!((b.max(0), b.max(1), b.max(3)), (1, 1, 1));
        // A floor of 0 and 0 %: no retry ever.
        let none = EnvoyRetryBudget {
            percent: 0.0,
            min: 0,
        };
        assert!(!none.allows(0, 1000));
    }
}
