//! gRPC on the wire, as far as a storm needs it (grpc/grpc's
//! `doc/PROTOCOL-HTTP2.md` and `doc/http-grpc-status-mapping.md`): the
//! status codes, how an HTTP status without a `grpc-status` maps to one,
//! the framing of a message, and the answer's status read from its
//! headers or trailers. Both engines and both ends (the client's outcome,
//! the server's answer) use these.

use std::fmt;
use std::str::FromStr;

/// The header and trailer that carry a call's status code.
pub const STATUS_HEADER: &str = "grpc-status";

/// The header and trailer that carry a status's message.
pub const MESSAGE_HEADER: &str = "grpc-message";

/// The content type of a gRPC request and answer.
pub const CONTENT_TYPE: &str = "application/grpc";

/// The method called when none is named: the standard health check,
/// which every gRPC server may serve (`grpc.health.v1`).
pub const HEALTH_CHECK: &str = "grpc.health.v1.Health/Check";

/// A `HealthCheckResponse` with `status: SERVING` (field 1, varint 1).
pub const SERVING: [u8; 2] = [0x08, 0x01];

/// A gRPC status code (`grpc/status.h`, the same numbers in every
/// implementation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// 0: not an error.
    Ok,
    /// 1: the caller cancelled.
    Cancelled,
    /// 2: an error with no better code.
    Unknown,
    /// 3: the request is wrong whatever the server's state.
    InvalidArgument,
    /// 4: the deadline passed before the call ended.
    DeadlineExceeded,
    /// 5: an entity asked for was not found.
    NotFound,
    /// 6: an entity to create exists already.
    AlreadyExists,
    /// 7: the caller may not do this.
    PermissionDenied,
    /// 8: a resource (a quota, the server's capacity) is used up.
    ResourceExhausted,
    /// 9: the system is not in a state the call needs.
    FailedPrecondition,
    /// 10: aborted, usually by a concurrency conflict.
    Aborted,
    /// 11: beyond a valid range.
    OutOfRange,
    /// 12: the method is not implemented or not served.
    Unimplemented,
    /// 13: a broken invariant.
    Internal,
    /// 14: the service cannot answer now; retrying may help.
    Unavailable,
    /// 15: unrecoverable data loss.
    DataLoss,
    /// 16: the caller has no valid credentials.
    Unauthenticated,
}

/// Every code, in order of its number.
const CODES: [Code; 17] = [
    Code::Ok,
    Code::Cancelled,
    Code::Unknown,
    Code::InvalidArgument,
    Code::DeadlineExceeded,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
    Code::Unauthenticated,
];

impl Code {
    /// The code numbered `n`; a number no code has is `UNKNOWN`, as gRPC
    /// clients read it.
    pub fn from_number(n: u32) -> Code {
        CODES.get(n as usize).copied().unwrap_or(Code::Unknown)
    }

    /// The code's number, as `grpc-status` carries it.
    pub fn number(self) -> u32 {
        CODES
            .iter()
            .position(|&c| c == self)
            .expect("every code is listed") as u32
    }

    /// The code's name as gRPC writes it (`UNAVAILABLE`).
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The code a gRPC client gives an answer with HTTP status `status`
    /// and no `grpc-status` (`doc/http-grpc-status-mapping.md`). A 200
    /// without a status is a broken answer: `UNKNOWN`.
    pub fn from_http(status: u16) -> Code {
        match status {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }

    /// The code of an answer: its `grpc-status` if it has one (in the
    /// trailers, or in the headers of a Trailers-Only answer), else its
    /// HTTP status mapped. An unreadable `grpc-status` is `UNKNOWN`.
    pub fn of_answer(http_status: u16, grpc_status: Option<&str>) -> Code {
        match grpc_status {
            Some(v) => v.trim().parse().map_or(Code::Unknown, Code::from_number),
            None => Code::from_http(http_status),
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Code {
    type Err = String;

    /// A code by its name in any case, `-` or `_` between words
    /// (`unavailable`, `resource-exhausted`), or by its number.
    fn from_str(s: &str) -> Result<Code, String> {
        let t = s.trim();
        if let Ok(n) = t.parse::<u32>() {
            return CODES
                .get(n as usize)
                .copied()
                .ok_or_else(|| format!("no gRPC status is numbered {n} (0 to 16)"));
        }
        let wanted = t.to_ascii_uppercase().replace('-', "_");
        CODES
            .iter()
            .copied()
            .find(|c| c.name() == wanted)
            .ok_or_else(|| {
                format!("'{s}' is not a gRPC status (a name such as UNAVAILABLE, or 0 to 16)")
            })
    }
}

/// A set of status codes, as a retry policy's `retryableStatusCodes` or
/// a hedging policy's `nonFatalStatusCodes` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Codes(u32);

impl Codes {
    /// The set of `codes`.
    pub const fn of(codes: &[Code]) -> Codes {
        let mut bits = 0;
        let mut i = 0;
        while i < codes.len() {
            bits |= 1 << codes[i] as u32;
            i += 1;
        }
        Codes(bits)
    }

    /// Whether `code` is in the set.
    pub fn contains(self, code: Code) -> bool {
        self.0 & (1 << code as u32) != 0
    }

    /// The codes in the set, by number.
    pub fn iter(self) -> impl Iterator<Item = Code> {
        CODES.into_iter().filter(move |&c| self.contains(c))
    }
}

impl Default for Codes {
    /// [`DEFAULT_RETRYABLE`].
    fn default() -> Self {
        DEFAULT_RETRYABLE
    }
}

impl fmt::Display for Codes {
    /// The names, comma-separated (`UNAVAILABLE,RESOURCE_EXHAUSTED`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Code::name).collect();
        f.write_str(&names.join(","))
    }
}

impl FromStr for Codes {
    type Err = String;

    /// A comma-separated list of codes, each as [`Code`] reads it; `OK`
    /// is refused, since a success is never retried.
    fn from_str(s: &str) -> Result<Codes, String> {
        let mut bits = 0;
        for part in s.split(',') {
            let code: Code = part.parse()?;
            if code == Code::Ok {
                return Err("OK is a success, never retried".to_string());
            }
            bits |= 1 << code as u32;
        }
        Ok(Codes(bits))
    }
}

/// The codes gRPC's retry policy retries, and its hedging policy takes
/// as non-fatal, when none are named (gRFC A6's example):
/// `UNAVAILABLE`.
pub const DEFAULT_RETRYABLE: Codes = Codes::of(&[Code::Unavailable]);

/// One message framed for the wire: a compressed flag (0: not
/// compressed), four bytes of big-endian length, the bytes.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let len = u32::try_from(message.len()).expect("a gRPC message is under 4 GiB");
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Why bytes read are not framed messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes end inside a frame's prefix or message.
    Truncated,
    /// The message is compressed, which a call that set no encoding must
    /// not be.
    Compressed,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated => f.write_str("the gRPC message is cut short"),
            FrameError::Compressed => f.write_str("the gRPC message is compressed"),
        }
    }
}

/// The messages in `bytes`, a whole body of framed messages.
pub fn unframe(mut bytes: &[u8]) -> Result<Vec<&[u8]>, FrameError> {
    let mut messages = Vec::new();
    while !bytes.is_empty() {
        if bytes.len() < 5 {
            return Err(FrameError::Truncated);
        }
        if bytes[0] != 0 {
            return Err(FrameError::Compressed);
        }
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        let rest = &bytes[5..];
        if rest.len() < len {
            return Err(FrameError::Truncated);
        }
        messages.push(&rest[..len]);
        bytes = &rest[len..];
    }
    Ok(messages)
}

/// The path a call to `method` (`package.Service/Method`, with or without
/// its leading `/`) is sent to, or why it is not a method's name.
pub fn method_path(method: &str) -> Result<String, String> {
    let name = method.strip_prefix('/').unwrap_or(method);
    match name.split_once('/') {
        Some((service, m))
            if !service.is_empty()
                && !m.is_empty()
                && !m.contains('/')
                && !name.contains(char::is_whitespace) =>
        {
            Ok(format!("/{name}"))
        }
        _ => Err(format!(
            "'{method}' is not a gRPC method (package.Service/Method, \
             e.g. {HEALTH_CHECK})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_numbered_as_grpc_numbers_them() {
        assert_eq!(Code::Ok.number(), 0);
        assert_eq!(Code::DeadlineExceeded.number(), 4);
        assert_eq!(Code::ResourceExhausted.number(), 8);
        assert_eq!(Code::Unimplemented.number(), 12);
        assert_eq!(Code::Unavailable.number(), 14);
        assert_eq!(Code::Unauthenticated.number(), 16);
        for n in 0..17 {
            assert_eq!(Code::from_number(n).number(), n);
        }
        assert_eq!(Code::from_number(17), Code::Unknown);
    }

    #[test]
    fn http_statuses_map_as_the_mapping_document_says() {
        assert_eq!(Code::from_http(400), Code::Internal);
        assert_eq!(Code::from_http(401), Code::Unauthenticated);
        assert_eq!(Code::from_http(403), Code::PermissionDenied);
        assert_eq!(Code::from_http(404), Code::Unimplemented);
        for s in [429, 502, 503, 504] {
            assert_eq!(Code::from_http(s), Code::Unavailable, "{s}");
        }
        for s in [200, 500, 501, 505] {
            assert_eq!(Code::from_http(s), Code::Unknown, "{s}");
        }
    }

    #[test]
    fn a_grpc_status_wins_over_the_http_status() {
        assert_eq!(Code::of_answer(200, Some("0")), Code::Ok);
        assert_eq!(Code::of_answer(200, Some("8")), Code::ResourceExhausted);
        assert_eq!(Code::of_answer(503, Some("14")), Code::Unavailable);
        assert_eq!(Code::of_answer(503, None), Code::Unavailable);
        assert_eq!(Code::of_answer(200, None), Code::Unknown);
        assert_eq!(Code::of_answer(200, Some("x")), Code::Unknown);
    }

    #[test]
    fn codes_are_read_by_name_or_number() {
        assert_eq!("unavailable".parse(), Ok(Code::Unavailable));
        assert_eq!("resource-exhausted".parse(), Ok(Code::ResourceExhausted));
        assert_eq!("DEADLINE_EXCEEDED".parse(), Ok(Code::DeadlineExceeded));
        assert_eq!("14".parse(), Ok(Code::Unavailable));
        assert!("17".parse::<Code>().is_err());
        assert!("busy".parse::<Code>().is_err());
    }

    #[test]
    fn a_message_is_framed_with_its_length_and_read_back() {
        assert_eq!(frame(&SERVING), vec![0, 0, 0, 0, 2, 0x08, 0x01]);
        assert_eq!(frame(&[]), vec![0, 0, 0, 0, 0]);
        let mut two = frame(&SERVING);
        two.extend(frame(b"abc"));
        assert_eq!(unframe(&two), Ok(vec![&SERVING[..], b"abc"]));
        assert_eq!(unframe(&[]), Ok(vec![]));
        assert_eq!(unframe(&[0, 0, 0, 0, 3, 1]), Err(FrameError::Truncated));
        assert_eq!(unframe(&[0, 0, 0]), Err(FrameError::Truncated));
        assert_eq!(unframe(&[1, 0, 0, 0, 0]), Err(FrameError::Compressed));
    }

    #[test]
    fn a_method_is_a_service_and_a_name() {
        assert_eq!(
            method_path(HEALTH_CHECK).as_deref(),
            Ok("/grpc.health.v1.Health/Check")
        );
        assert_eq!(method_path("/a.B/C").as_deref(), Ok("/a.B/C"));
        for bad in ["Check", "a.B/", "/C", "a/b/c", "a.B/C D", ""] {
            assert!(method_path(bad).is_err(), "{bad}");
        }
    }
    #[test]
    fn a_set_of_codes_reads_names_and_numbers_and_writes_names() {
        let codes: Codes = "unavailable, 8,ABORTED".parse().unwrap();
        assert!(codes.contains(Code::Unavailable));
        assert!(codes.contains(Code::ResourceExhausted));
        assert!(codes.contains(Code::Aborted));
        assert!(!codes.contains(Code::Internal));
        // By number: ABORTED is 10, RESOURCE_EXHAUSTED 8, UNAVAILABLE 14.
        assert_eq!(codes.to_string(), "RESOURCE_EXHAUSTED,ABORTED,UNAVAILABLE");
        assert_eq!(Codes::default(), Codes::of(&[Code::Unavailable]));
        assert_eq!(Codes::default().to_string(), "UNAVAILABLE");
        // The set keeps a code at the bit of its discriminant: its number.
        assert!(CODES.iter().all(|&c| c as u32 == c.number()));
        for bad in ["", "OK", "0", "UNAVAILABLE,", "17", "busy"] {
            assert!(bad.parse::<Codes>().is_err(), "{bad}");
        }
    }
}
