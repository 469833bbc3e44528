//! Deadline propagation along a chain of services (docs/chains.md),
//! as gRPC does it: the caller's remaining time travels with the request
//! in a `grpc-timeout` header, a tier's call inward uses the smaller of its
//! own timeout and that remaining time, and work whose deadline has passed
//! is not started (answered 504 at once).
//!
//! The header's format is PROTOCOL-HTTP2.md's: at most 8 ASCII digits and a
//! unit, `H`, `M`, `S`, `m`, `u` or `n`. Encoding follows grpc-go's
//! `grpcutil.EncodeDuration`: the finest unit whose value, rounded up,
//! fits in 8 digits (so a deadline never shrinks on the way), `0n` for
//! none left. Decoding follows grpc-go's `decodeTimeout`: 2 to 9
//! characters, a known unit, digits before it (grpc-go saturates hours
//! beyond 292 years, its duration's range; here 8 digits of hours, 11,400
//! years, fit).

use std::time::Duration;

/// The header that carries a caller's remaining time.
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

/// The most a `grpc-timeout` value holds: 8 digits.
const MAX_VALUE: u128 = 99_999_999;

/// The units of `grpc-timeout`, finest first, with their length in
/// nanoseconds.
const UNITS: [(char, u128); 6] = [
    ('n', 1),
    ('u', 1_000),
    ('m', 1_000_000),
    ('S', 1_000_000_000),
    ('M', 60_000_000_000),
    ('H', 3_600_000_000_000),
];

/// The `grpc-timeout` value for `remaining`: the finest unit whose count,
/// rounded up, fits in 8 digits.
pub fn encode_grpc_timeout(remaining: Duration) -> String {
    let nanos = remaining.as_nanos();
    if nanos == 0 {
        return "0n".to_string();
    }
    for (unit, size) in UNITS {
        let count = nanos.div_ceil(size);
        if count <= MAX_VALUE {
            return with_unit(count, unit);
        }
        if unit == 'H' {
            return format!("{count}{unit}");
        }
    }
    unreachable!("hours always fit")
}

/// `count` (at most 8 digits) in decimal, then `unit`: written by hand,
/// since every attempt sends one and `format!` of a `u128` cost about 1 %
/// of the client's CPU.
fn with_unit(mut count: u128, unit: char) -> String {
    let mut text = [0u8; 9];
    let mut start = 8;
    text[8] = unit as u8;
    loop {
        start -= 1;
        text[start] = b'0' + (count % 10) as u8;
        count /= 10;
        if count == 0 {
            break;
        }
    }
    std::str::from_utf8(&text[start..])
        .expect("ASCII digits and unit")
        .to_string()
}

/// The remaining time a `grpc-timeout` value says, or why it is not one.
pub fn decode_grpc_timeout(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    if value.len() < 2 {
        return Err(format!("grpc-timeout {value:?} is too short"));
    }
    if value.len() > 9 {
        return Err(format!(
            "grpc-timeout {value:?} is too long (8 digits and a unit at most)"
        ));
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let size = UNITS
        .iter()
        .find(|(u, _)| unit.starts_with(*u))
        .map(|&(_, size)| size)
        .ok_or_else(|| format!("grpc-timeout {value:?} has no unit of H, M, S, m, u or n"))?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("grpc-timeout {value:?} is not digits and a unit"));
    }
    let count: u128 = digits
        .parse()
        .map_err(|_| format!("grpc-timeout {value:?} is not digits and a unit"))?;
    let nanos = count * size;
    let secs = u64::try_from(nanos / 1_000_000_000).expect("8 digits of hours fit");
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// What a tier does with a call inward, given its own timeout and the
/// time its caller has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Make the call, timing out after this long.
    Call(Duration),
    /// The caller's deadline has passed: start nothing, answer 504.
    Expired,
}

/// The call a tier makes with `own` timeout when its caller has
/// `remaining` left (`None`: no deadline came with the request, or the
/// tier does not propagate deadlines).
pub fn budget(own: Duration, remaining: Option<Duration>) -> Budget {
    match remaining {
        Some(left) if left.is_zero() => Budget::Expired,
        Some(left) => Budget::Call(own.min(left)),
        None => Budget::Call(own),
    }
}

/// The time a caller has left at `now`, for a request that arrived at
/// `arrived` with `remaining` then: what the tier passes inward.
pub fn left_at(arrived: Duration, remaining: Duration, now: Duration) -> Duration {
    arrived.saturating_add(remaining).saturating_sub(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn encoding_picks_the_finest_unit_that_fits_and_rounds_up() {
        // 99,999,999 ns fit in 8 digits; one more needs microseconds.
        assert_eq!(
            encode_grpc_timeout(Duration::from_nanos(99_999_999)),
            "99999999n"
        );
        assert_eq!(
            encode_grpc_timeout(Duration::from_nanos(100_000_000)),
            "100000u"
        );
        // 100,000,001 ns: 100,000.001 us, rounded up.
        assert_eq!(
            encode_grpc_timeout(Duration::from_nanos(100_000_001)),
            "100001u"
        );
        assert_eq!(encode_grpc_timeout(ms(2_000)), "2000000u");
        // 100,000 s: 100,000,000 ms is one digit too many.
        assert_eq!(encode_grpc_timeout(Duration::from_secs(100_000)), "100000S");
        assert_eq!(encode_grpc_timeout(Duration::ZERO), "0n");
        // One digit, and the carry into a second one.
        assert_eq!(encode_grpc_timeout(Duration::from_nanos(7)), "7n");
        assert_eq!(encode_grpc_timeout(Duration::from_nanos(10)), "10n");
        // A year: 31,536,000 s fit in 8 digits of seconds.
        assert_eq!(
            encode_grpc_timeout(Duration::from_secs(31_536_000)),
            "31536000S"
        );
        // Beyond 8 digits of minutes: hours, even past 8 digits.
        assert_eq!(
            encode_grpc_timeout(Duration::from_secs(6_000_000_000)),
            "1666667H"
        );
        assert_eq!(encode_grpc_timeout(Duration::MAX), "5124095576030432H");
    }

    #[test]
    fn decoding_reads_what_encoding_wrote_and_refuses_the_rest() {
        for d in [
            ms(1),
            ms(2_000),
            Duration::from_nanos(7),
            Duration::from_secs(86_400),
        ] {
            let back = decode_grpc_timeout(&encode_grpc_timeout(d)).unwrap();
            assert!(back >= d && back - d < ms(1), "{d:?} came back as {back:?}");
        }
        assert_eq!(decode_grpc_timeout("1H"), Ok(Duration::from_secs(3_600)));
        assert_eq!(decode_grpc_timeout("5M"), Ok(Duration::from_secs(300)));
        assert_eq!(decode_grpc_timeout("250m"), Ok(ms(250)));
        assert_eq!(
            decode_grpc_timeout("99999999H"),
            Ok(Duration::from_secs(99_999_999 * 3_600))
        );
        for bad in [
            "",
            "5",
            "m",
            "123456789S",
            "12x",
            "-5S",
            "1.5S",
            "+5S",
            "5s",
        ] {
            assert!(decode_grpc_timeout(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_call_takes_the_smaller_of_its_timeout_and_the_time_left() {
        assert_eq!(budget(ms(500), None), Budget::Call(ms(500)));
        assert_eq!(budget(ms(500), Some(ms(2_000))), Budget::Call(ms(500)));
        assert_eq!(budget(ms(500), Some(ms(120))), Budget::Call(ms(120)));
        assert_eq!(budget(ms(500), Some(Duration::ZERO)), Budget::Expired);
        // A request that came with 1 s left at 10 s, its tier calling out
        // at 10.3 s after its own work: 700 ms left; at 11.2 s, none.
        let left = left_at(ms(10_000), ms(1_000), ms(10_300));
        assert_eq!(left, ms(700));
        assert_eq!(budget(ms(500), Some(left)), Budget::Call(ms(500)));
        let late = left_at(ms(10_000), ms(1_000), ms(11_200));
        assert_eq!(budget(ms(500), Some(late)), Budget::Expired);
    }
}
