//! What the project's own parsers must do with any input: never panic, and
//! return only what can be used. Shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/parse.rs`) and a seeded test that runs on stable.
//!
//! The parsers: the server's `Retry-After` header (read by the client from
//! a peer it does not control) and the command-line value parsers
//! (durations, think times, time scales, URLs).

use std::time::{Duration, SystemTime};

use crate::cli::values as cli;
use crate::policy::{MAX_RETRY_AFTER, parse_retry_after};

/// Runs every parser on `text` and checks what each accepts; panics on a
/// violation (which is what a fuzzer reports).
pub fn check_parsers(text: &str) {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
    if let Some(wait) = parse_retry_after(text, now) {
        assert!(wait <= MAX_RETRY_AFTER, "{text:?} -> {wait:?}");
    }
    if let Ok(d) = cli::positive_duration(text) {
        assert!(!d.is_zero(), "{text:?}");
    }
    let _ = cli::duration(text);
    if let Ok(step) = cli::timer_resolution(text) {
        assert!(step <= Duration::from_millis(10), "{text:?} -> {step:?}");
    }
    if let Ok(k) = cli::time_scale(text) {
        assert!(k.is_finite() && k >= 1.0, "{text:?} -> {k}");
    }
    if let Ok(think) = cli::seconds_or_duration(text) {
        assert!(!think.is_zero(), "{text:?}");
    }
    if let Ok(url) = cli::http_url(text) {
        let uri: hyper::Uri = url.parse().expect("an accepted URL parses");
        assert!(
            matches!(uri.scheme_str(), Some("http" | "https")),
            "{text:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    /// Pieces that parsers look for, so that random strings reach deep.
    const PIECES: [&str; 24] = [
        "0",
        "1",
        "9",
        ".",
        "-",
        "+",
        "e",
        "E",
        " ",
        "ms",
        "s",
        "m",
        "h",
        "inf",
        "NaN",
        "Mon, ",
        "22 Nov 2026 ",
        "12:00:00 GMT",
        "http://",
        "https://",
        "127.0.0.1:",
        "/api",
        "\u{fe0f}",
        "18446744073709551616",
    ];

    #[test]
    fn parsers_survive_fifty_thousand_seeded_strings() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..50_000 {
            let len = rng.random_range(0..8);
            let text: String = (0..len)
                .map(|_| PIECES[rng.random_range(0..PIECES.len())])
                .collect();
            check_parsers(&text);
        }
    }

    #[test]
    fn edge_values() {
        for text in [
            "",
            "0",
            "-1",
            "1e400",
            "18446744073709551616",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "99999999999999999999s",
            "http://",
            "http://[::1",
            // Found by the fuzzer: 1.4e19 seconds overflowed the client's clock.
            "0000000000000000000013960503047246548535\n",
        ] {
            check_parsers(text);
        }
    }
}
