//! The server's delay curves: latency shared by every request in flight,
//! growing with concurrency.
//!
//! `exponential` (the 2014 curve): `delay(c) = base * factor^((c - limit) /
//! scale)` for `c > limit`, else `base`. `linear` (processor sharing whose
//! latency grows linearly, as in Brooker's collapse simulation): `delay(c)
//! = base + slope * c`. Both saturate at a cap, so they can neither
//! overflow nor go negative (the 2014 original computed its delay in 64-bit
//! nanoseconds and wrapped negative).

use std::time::Duration;

/// Parameters of the concurrency-dependent latency model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyModel {
    /// Latency at or below `limit` concurrent requests.
    pub base: Duration,
    /// Concurrency above which latency starts to grow.
    pub limit: u64,
    /// Growth factor applied once per `scale` requests above `limit`.
    pub factor: f64,
    /// Number of requests above `limit` that multiply the delay by `factor`.
    pub scale: f64,
    /// Saturation cap: no modelled delay exceeds it.
    pub max_delay: Duration,
}

impl Default for LatencyModel {
    /// The 2014 original's parameters, capped at ten minutes.
    fn default() -> Self {
        LatencyModel {
            base: Duration::from_millis(100),
            limit: 30,
            factor: 1.05,
            scale: 15.0,
            max_delay: Duration::from_secs(600),
        }
    }
}

impl LatencyModel {
    /// The modelled time a request takes while `concurrency` requests are in flight.
    pub fn delay(&self, concurrency: u64) -> Duration {
        let base = self.base.min(self.max_delay);
        if concurrency <= self.limit {
            return base;
        }
        let exponent = (concurrency - self.limit) as f64 / self.scale;
        let secs = base.as_secs_f64() * self.factor.powf(exponent);
        // NaN, infinity and anything past the cap all saturate at the cap.
        match Duration::try_from_secs_f64(secs) {
            Ok(d) => d.min(self.max_delay),
            Err(_) => self.max_delay,
        }
    }

    /// The smallest concurrency at which the modelled delay reaches `target`,
    /// or `None` if it never does (target above the cap, or no growth).
    pub fn concurrency_for(&self, target: Duration) -> Option<u64> {
        if self.delay(self.limit) >= target {
            return Some(0);
        }
        if target > self.max_delay || self.factor <= 1.0 {
            return None;
        }
        let ratio = target.as_secs_f64() / self.base.as_secs_f64();
        let guess = self.limit as f64 + self.scale * ratio.ln() / self.factor.ln();
        // Correct the floating-point estimate against the model itself.
        let mut c = guess.floor().max(self.limit as f64) as u64;
        while c > self.limit && self.delay(c - 1) >= target {
            c -= 1;
        }
        while self.delay(c) < target {
            c += 1;
        }
        Some(c)
    }
}

/// A delay curve: which shape, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Curve {
    /// The 2014 curve.
    Exponential(LatencyModel),
    /// `base + slope * c`, capped at `max_delay`.
    Linear {
        /// The intercept: `delay(c) = base + slope * c`.
        base: Duration,
        /// Added per request in flight.
        slope: Duration,
        /// Saturation cap.
        max_delay: Duration,
    },
}

impl Curve {
    /// The modelled time a request takes while `concurrency` requests are
    /// in flight.
    pub fn delay(&self, concurrency: u64) -> Duration {
        match self {
            Curve::Exponential(m) => m.delay(concurrency),
            Curve::Linear {
                base,
                slope,
                max_delay,
            } => {
                let n = u32::try_from(concurrency).unwrap_or(u32::MAX);
                slope
                    .checked_mul(n)
                    .and_then(|grown| base.checked_add(grown))
                    .unwrap_or(*max_delay)
                    .min(*max_delay)
            }
        }
    }

    /// The delay's cap, if the curve never falls as concurrency grows (so
    /// that once it reaches the cap it stays there): linear curves, and
    /// exponential ones with a factor of at least 1 whose base is below
    /// the cap. A base at the cap is excluded: above the limit the delay
    /// goes through seconds as an `f64`, which can round a cap of weeks a
    /// nanosecond below itself.
    pub fn rising_cap(&self) -> Option<Duration> {
        match self {
            Curve::Exponential(m) => {
                (m.factor >= 1.0 && m.scale > 0.0 && m.base < m.max_delay).then_some(m.max_delay)
            }
            Curve::Linear { max_delay, .. } => Some(*max_delay),
        }
    }
}

/// A curve with its delays remembered: a server's concurrency moves one
/// request at a time and the delay is read at every step, so each
/// concurrency's delay is computed once (`powf` was a twentieth of a
/// storm's time). The same values as [`Curve::delay`], bit for bit.
#[derive(Debug, Clone)]
pub struct DelayTable {
    curve: Curve,
    /// `curve.delay(c)` for every `c` below the length.
    known: Vec<Duration>,
    /// The cap, once `known` has reached it on a curve that never falls:
    /// every greater concurrency has the same delay.
    cap: Option<Duration>,
}

/// Concurrencies beyond this are computed each time instead of kept
/// (a megabyte of table at most).
const TABLE_LIMIT: u64 = 1 << 16;

thread_local! {
    /// A table kept by a scheduler dropped on this thread, the longest of
    /// its curve (see [`DelayTable::keep`]): the runs of a sweep or a
    /// storm share one server curve, and filling a table to a storm's
    /// tens of thousands of requests in flight cost each run as many
    /// `powf`s.
    static SPARE: std::cell::RefCell<Option<DelayTable>> = const { std::cell::RefCell::new(None) };
}

impl DelayTable {
    /// An empty table for `curve`.
    pub fn new(curve: Curve) -> Self {
        DelayTable {
            curve,
            known: Vec::new(),
            cap: None,
        }
    }

    /// A table for `curve`: the one [`DelayTable::keep`] kept last on
    /// this thread if it is for the same curve, else an empty one.
    pub fn reuse(curve: Curve) -> Self {
        SPARE
            .with(|spare| spare.borrow_mut().take())
            .filter(|t| t.curve == curve)
            .unwrap_or_else(|| DelayTable::new(curve))
    }

    /// Moves the table out, leaving this one empty.
    pub fn take(&mut self) -> DelayTable {
        DelayTable {
            curve: self.curve,
            known: std::mem::take(&mut self.known),
            cap: self.cap.take(),
        }
    }

    /// Keeps this table for the next [`DelayTable::reuse`] on this thread,
    /// unless the one kept is of the same curve and longer: a sweep's
    /// runs are copies of one warm-up, whose table is short, and each
    /// would otherwise put back a table shorter than the last run's.
    pub fn keep(self) {
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare
                .as_ref()
                .is_none_or(|kept| kept.curve != self.curve || kept.known.len() < self.known.len())
            {
                *spare = Some(self);
            }
        });
    }

    /// `curve.delay(concurrency)`.
    #[inline]
    pub fn delay(&mut self, concurrency: u64) -> Duration {
        if let Some(&known) = usize::try_from(concurrency)
            .ok()
            .and_then(|c| self.known.get(c))
        {
            return known;
        }
        self.cap.unwrap_or_else(|| self.grow(concurrency))
    }

    /// `curve.delay(concurrency)` past the table's end: the table takes
    /// the kept table's delays if that one is longer, else grows to it,
    /// or to the cap of a curve that never falls. Past the cap every
    /// concurrency has the same delay, so it is neither computed nor kept
    /// (a storm's tens of thousands of requests in flight sit far past the
    /// default curve's cap, reached near 2,700).
    #[cold]
    fn grow(&mut self, concurrency: u64) -> Duration {
        if concurrency >= TABLE_LIMIT {
            return self.curve.delay(concurrency);
        }
        if self.extend_from_kept() {
            return self.delay(concurrency);
        }
        let rising_cap = self.curve.rising_cap();
        while self.known.len() as u64 <= concurrency {
            let next = self.curve.delay(self.known.len() as u64);
            self.known.push(next);
            if rising_cap == Some(next) {
                self.cap = rising_cap;
                return next;
            }
        }
        self.known[concurrency as usize]
    }

    /// Whether this table took the delays it lacks from the table kept on
    /// this thread, which it does if that one is of the same curve and
    /// longer (the same values: each is `curve.delay(c)`). A copy of a
    /// table, as a sweep's runs are made from one warm-up, would
    /// otherwise compute again, one `powf` each, the delays another copy
    /// has already grown to.
    fn extend_from_kept(&mut self) -> bool {
        SPARE.with(|spare| match &*spare.borrow() {
            Some(kept) if kept.curve == self.curve && kept.known.len() > self.known.len() => {
                self.known
                    .extend_from_slice(&kept.known[self.known.len()..]);
                self.cap = kept.cap;
                true
            }
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    #[test]
    fn base_delay_up_to_the_limit() {
        let m = LatencyModel::default();
        for c in [0, 1, 29, 30] {
            assert_eq!(m.delay(c), Duration::from_millis(100));
        }
        assert!(m.delay(31) > Duration::from_millis(100));
    }

    #[test]
    fn grows_by_factor_every_scale_requests() {
        let m = LatencyModel::default();
        assert!((ms(m.delay(45)) - 105.0).abs() < 1e-6);
        assert!((ms(m.delay(60)) - 110.25).abs() < 1e-6);
        let ratio = m.delay(1030).as_secs_f64() / m.delay(1015).as_secs_f64();
        assert!((ratio - 1.05).abs() < 1e-9);
    }

    #[test]
    fn monotonic_in_concurrency() {
        let m = LatencyModel::default();
        let mut prev = Duration::ZERO;
        for c in 0..20_000 {
            let d = m.delay(c);
            assert!(d >= prev, "delay fell at c = {c}");
            prev = d;
        }
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        let m = LatencyModel::default();
        // 1.05^((c-30)/15) passes 2^64 ns long before u64::MAX.
        for c in [7_800, 50_000, 1_000_000, u64::MAX] {
            assert_eq!(m.delay(c), Duration::from_secs(600), "c = {c}");
        }
        let huge = LatencyModel {
            factor: 1e300,
            scale: 1e-300,
            ..m
        };
        assert_eq!(huge.delay(31), Duration::from_secs(600));
    }

    #[test]
    fn base_above_cap_is_capped() {
        let m = LatencyModel {
            base: Duration::from_secs(5),
            max_delay: Duration::from_secs(1),
            ..LatencyModel::default()
        };
        assert_eq!(m.delay(0), Duration::from_secs(1));
    }

    #[test]
    fn concurrency_for_a_two_second_timeout_matches_the_design_note() {
        // docs/model.md, "The delay": delay reaches 2 s at
        // c = 30 + 15 ln(20)/ln(1.05), about 950.
        let m = LatencyModel::default();
        let c = m.concurrency_for(Duration::from_secs(2)).unwrap();
        assert!((940..=960).contains(&c), "{c}");
        assert!(m.delay(c) >= Duration::from_secs(2));
        assert!(m.delay(c - 1) < Duration::from_secs(2));
        assert_eq!(m.concurrency_for(Duration::from_secs(3600)), None);
    }

    #[test]
    fn linear_grows_by_one_slope_per_request_and_saturates() {
        let curve = Curve::Linear {
            base: Duration::from_millis(100),
            slope: Duration::from_millis(5),
            max_delay: Duration::from_secs(2),
        };
        assert_eq!(curve.delay(0), Duration::from_millis(100));
        assert_eq!(curve.delay(1), Duration::from_millis(105));
        assert_eq!(curve.delay(20), Duration::from_millis(200));
        assert_eq!(curve.delay(380), Duration::from_secs(2));
        assert_eq!(curve.delay(381), Duration::from_secs(2), "capped");
        assert_eq!(curve.delay(u64::MAX), Duration::from_secs(2), "no overflow");
        let exp = Curve::Exponential(LatencyModel::default());
        assert_eq!(exp.delay(45), LatencyModel::default().delay(45));
    }

    #[test]
    fn a_table_gives_the_curves_own_delays_in_any_order() {
        let curves = [
            Curve::Exponential(LatencyModel::default()),
            Curve::Exponential(LatencyModel {
                factor: 0.9,
                ..LatencyModel::default()
            }),
            Curve::Linear {
                base: Duration::from_millis(100),
                slope: Duration::from_nanos(333_333),
                max_delay: Duration::from_secs(2),
            },
        ];
        for curve in curves {
            let mut table = DelayTable::new(curve);
            for c in [
                40,
                3,
                0,
                7_000,
                6_999,
                41,
                TABLE_LIMIT - 1,
                TABLE_LIMIT,
                1 << 40,
            ] {
                assert_eq!(table.delay(c), curve.delay(c), "{curve:?} at {c}");
            }
            for c in (0..2_000).rev() {
                assert_eq!(table.delay(c), curve.delay(c), "{curve:?} at {c}");
            }
        }
    }

    #[test]
    fn a_table_stops_growing_at_the_cap_of_a_rising_curve() {
        // The default curve reaches its 600 s cap where 0.1 s * 1.05^((c -
        // 30) / 15) does: c = 30 + 15 ln(6000) / ln(1.05), about 2,705.
        let curve = Curve::Exponential(LatencyModel::default());
        let mut table = DelayTable::new(curve);
        assert_eq!(table.delay(60_000), Duration::from_secs(600));
        let kept = table.known.len();
        assert!((2_690..2_720).contains(&kept), "{kept} delays kept");
        assert_eq!(table.delay(1 << 40), Duration::from_secs(600));
        assert_eq!(table.known.len(), kept, "nothing more kept");
        // A falling curve that starts at its cap is not cut short there.
        let falling = Curve::Exponential(LatencyModel {
            base: Duration::from_secs(5),
            max_delay: Duration::from_secs(1),
            factor: 0.9,
            ..LatencyModel::default()
        });
        let mut table = DelayTable::new(falling);
        assert_eq!(table.delay(0), Duration::from_secs(1));
        assert_eq!(table.delay(45), falling.delay(45));
        assert!(table.delay(45) < Duration::from_secs(1));
        // A base at a cap of 2^24 s and 1 ns: above the limit, 2^24 + 1e-9
        // seconds is 2^24 in an f64, a nanosecond below the cap.
        let cap = Duration::new(1 << 24, 1);
        let flat = Curve::Exponential(LatencyModel {
            base: cap,
            max_delay: cap,
            factor: 1.0,
            ..LatencyModel::default()
        });
        let mut table = DelayTable::new(flat);
        assert_eq!(table.delay(0), cap);
        assert_eq!(table.delay(31), Duration::from_secs(1 << 24));
        assert_eq!(table.delay(31), flat.delay(31));
    }

    #[test]
    fn a_kept_table_serves_only_its_own_curve() {
        let one = Curve::Exponential(LatencyModel::default());
        let two = Curve::Exponential(LatencyModel {
            factor: 1.5,
            ..LatencyModel::default()
        });
        let mut table = DelayTable::reuse(one);
        table.delay(500);
        table.keep();
        let mut again = DelayTable::reuse(one);
        assert_eq!(again.known.len(), 501, "kept");
        assert_eq!(again.delay(400), one.delay(400));
        again.keep();
        let mut other = DelayTable::reuse(two);
        assert!(other.known.is_empty(), "another curve starts afresh");
        assert_eq!(other.delay(400), two.delay(400));
    }

    #[test]
    fn copies_grow_from_the_longest_table_kept() {
        let curve = Curve::Exponential(LatencyModel::default());
        let mut warm = DelayTable::new(curve);
        warm.delay(10);
        let mut first = warm.clone();
        assert_eq!(first.delay(5_000), curve.delay(5_000));
        let cap = first.cap.expect("the default curve's cap, near 2,705");
        let grown = first.known.len();
        first.keep();
        // A second copy of the short table takes the first's delays.
        let mut second = warm.clone();
        assert_eq!(second.delay(1_000), curve.delay(1_000));
        assert_eq!(second.known.len(), grown, "taken, not computed");
        assert_eq!(second.cap, Some(cap), "the cap taken with them");
        assert_eq!(
            second.known,
            (0..grown as u64)
                .map(|c| curve.delay(c))
                .collect::<Vec<_>>()
        );
        assert_eq!(second.delay(60_000), cap);
        // The short table put back does not replace the long one.
        warm.keep();
        let again = DelayTable::reuse(curve);
        assert_eq!(again.known.len(), grown);
    }
}
