//! Durations as the whole numbers that counters, event keys and
//! histograms store, saturating instead of failing: no run lasts the 584
//! years a `u64` of nanoseconds holds, and a saturated value is one no
//! comparison mistakes for a small one.

use std::time::Duration;

/// The longest duration any flag or scenario file takes: a year. Far
/// beyond any experiment, and far enough below what a clock can add
/// without overflowing that no sum of the program's durations panics.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Parses a duration written like `100ms`, `2s`, `1m 30s` or `5m`, at most
/// [`MAX_DURATION`]; says what is wrong in words a user can act on. The
/// one parser of durations for flags and scenario files alike.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|_| format!("'{text}' is not a duration; write it like 100ms, 2s or 5m"))?;
    if d > MAX_DURATION {
        return Err(format!("'{text}' is longer than a year, the longest taken"));
    }
    Ok(d)
}

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
    fn durations_parse_up_to_a_year_and_no_further() {
        assert_eq!(parse_duration(" 1m 30s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("365d"), Ok(MAX_DURATION));
        let too_long = parse_duration("366d").unwrap_err();
        assert!(too_long.contains("longer than a year"), "{too_long}");
        // Past what a Duration holds, and far past it.
        for text in [
            "18446744073709551615s",
            "1000000h",
            "99999999999999999999999s",
        ] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("not a duration")
        );
    }

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
