//! Fuzzes everything the project parses itself from text it does not
//! control; the properties live in `retry_storm::fuzz::check_parsers`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        retry_storm::fuzz::check_parsers(text);
    }
});
