//! Value parsers of the command line: durations, numbers with their
//! bounds, URLs. Each says what is wrong in words a user can act on.

use std::time::Duration;

use hyper::Uri;

use crate::model::units::parse_duration;

/// Parses a duration written like `100ms`, `2s`, `1m 30s` or `5m`, at most
/// a year ([`parse_duration`]).
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

/// Parses a duration that must be greater than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        Duration::ZERO => Err("must be greater than zero".to_string()),
        d => Ok(d),
    }
}

/// Parses a timer resolution: from zero (each deadline exactly) to 10 ms.
pub fn timer_resolution(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d > Duration::from_millis(10) => {
            Err("must be at most 10ms (0s rings at each deadline exactly)".to_string())
        }
        d => Ok(d),
    }
}

/// Parses a mean think time: plain seconds (`10`, `0.5`, as the original's
/// `-lambda`) or a duration (`500ms`). Must be greater than zero.
pub fn seconds_or_duration(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?
        }
        Ok(_) => return Err("must be a number of seconds greater than zero".to_string()),
        Err(_) => duration(s)?,
    };
    if d.is_zero() {
        return Err("must be greater than zero".to_string());
    }
    Ok(d)
}

fn finite(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("'{s}' is not a number")),
    }
}

/// A session's mean number of requests: a number of at least 1.
pub fn session_requests(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 1.0 => Ok(x),
        _ => Err("must be at least 1 (a session makes one request or more)".to_string()),
    }
}

/// A growth factor: a number of at least 1.
pub fn growth_factor(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 1.0 => Ok(x),
        _ => Err("must be at least 1 (delays grow, they never shrink)".to_string()),
    }
}

/// A backoff multiplier: a number greater than 1.
pub fn backoff_factor(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 1.0 => Ok(x),
        _ => Err("must be greater than 1 for the delay to grow".to_string()),
    }
}

/// A number greater than zero.
pub fn positive(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 0.0 => Ok(x),
        _ => Err("must be greater than zero".to_string()),
    }
}

/// A number of at least zero.
pub fn non_negative(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 0.0 => Ok(x),
        _ => Err("must be zero or more".to_string()),
    }
}

/// A time compression factor: at least 1.
pub fn time_scale(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x >= 1.0 => Ok(x),
        _ => Err("must be at least 1 (1 is real time)".to_string()),
    }
}

/// An `http://host:port/path` URL, as written.
pub fn http_url(s: &str) -> Result<String, String> {
    let uri: Uri = s.parse().map_err(|e| format!("'{s}' is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!(
            "'{s}' is not an http:// or https://host:port/path URL"
        ));
    }
    Ok(s.to_string())
}

/// A probability: a number from 0 to 1.
pub fn probability(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err("must be from 0 to 1 (a fraction of requests)".to_string()),
    }
}

/// A number in (0, 1].
pub fn ratio(s: &str) -> Result<f64, String> {
    match finite(s)? {
        x if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err("must be greater than 0 and at most 1".to_string()),
    }
}

/// The shard a program runs and where it was named: `flag` (`--shard`),
/// else a cluster engine's environment, else the whole work.
pub fn resolve_shard(
    flag: Option<crate::model::shard::Shard>,
) -> Result<(crate::model::shard::Shard, crate::model::shard::ShardSource), String> {
    crate::model::shard::Shard::resolve(flag, |name| std::env::var(name).ok())
}

/// A shard, `I/N`: shard I (from 0) of N.
pub fn shard(s: &str) -> Result<crate::model::shard::Shard, String> {
    crate::model::shard::Shard::parse(s)
}

/// A wall-clock instant: RFC 3339 (`2026-11-24T10:00:00Z`, fractions of
/// a second allowed) or seconds since the Unix epoch (`1795000000.25`).
pub fn wall_clock(s: &str) -> Result<std::time::SystemTime, String> {
    let at = if let Ok(secs) = s.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(format!("'{s}' is not a time after the Unix epoch"));
        }
        Duration::try_from_secs_f64(secs)
            .ok()
            .and_then(|d| std::time::UNIX_EPOCH.checked_add(d))
            .ok_or_else(|| format!("'{s}' is too far in the future"))?
    } else {
        humantime::parse_rfc3339_weak(s).map_err(|e| {
            format!(
                "'{s}' is neither an RFC 3339 time (2026-11-24T10:00:00Z) nor Unix seconds: {e}"
            )
        })?
    };
    // RFC 3339 writes four-digit years: the start line names the instant.
    if at >= std::time::UNIX_EPOCH + Duration::from_secs(LAST_SECOND + 1) {
        return Err(format!(
            "'{s}' is after 9999-12-31T23:59:59Z, the last instant taken"
        ));
    }
    Ok(at)
}

/// 9999-12-31T23:59:59Z in seconds since the Unix epoch.
const LAST_SECOND: u64 = 253_402_300_799;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wall_clock_instant_is_refused_past_what_rfc_3339_writes_never_panicking() {
        let at = |secs: u64| std::time::UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(wall_clock("1795000000"), Ok(at(1_795_000_000)));
        assert_eq!(wall_clock("253402300799"), Ok(at(LAST_SECOND)));
        assert_eq!(wall_clock("9999-12-31T23:59:59Z"), Ok(at(LAST_SECOND)));
        for text in ["253402300800", "99999999999999999999", "1e300"] {
            let e = wall_clock(text).unwrap_err();
            assert!(
                e.contains("9999-12-31") || e.contains("too far"),
                "{text}: {e}"
            );
        }
        assert!(wall_clock("-1").is_err());
    }
}
