//! Durations as the whole numbers that counters, event keys and
//! histograms store, saturating instead of failing: no run lasts the 584
//! years a `u64` of nanoseconds holds, and a saturated value is one no
//! comparison mistakes for a small one.

use std::time::Duration;

/// `d` in whole nanoseconds, `u64::MAX` beyond 584 years.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `d` in whole microseconds, `u64::MAX` beyond its range.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_units_truncate_and_saturate() {
        assert_eq!(nanos(Duration::new(2, 5)), 2_000_000_005);
        assert_eq!(micros(Duration::new(2, 5_999)), 2_000_005);
        // 2^64 ns is about 584.5 years; Duration::MAX is far beyond it.
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        assert_eq!(nanos(Duration::from_secs(585 * 365 * 86_400)), u64::MAX);
        assert_eq!(
            nanos(Duration::from_secs(584 * 365 * 86_400)),
            584 * 365 * 86_400 * 1_000_000_000
        );
        assert_eq!(micros(Duration::MAX), u64::MAX);
    }
}
