//! Value parsers of the command line: durations, numbers with their
//! bounds, URLs. Each says what is wrong in words a user can act on.

use std::time::Duration;

use hyper::Uri;

/// Parses a duration written like `100ms`, `2s`, `1m 30s` or `5m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|_| format!("'{s}' is not a duration; write it like 100ms, 2s or 5m"))
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
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(format!("'{s}' is not an http://host:port/path URL"));
    }
    Ok(s.to_string())
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
    if let Ok(secs) = s.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(format!("'{s}' is not a time after the Unix epoch"));
        }
        return std::time::UNIX_EPOCH
            .checked_add(Duration::from_secs_f64(secs))
            .ok_or_else(|| format!("'{s}' is too far in the future"));
    }
    humantime::parse_rfc3339_weak(s).map_err(|e| {
        format!("'{s}' is neither an RFC 3339 time (2026-11-24T10:00:00Z) nor Unix seconds: {e}")
    })
}
