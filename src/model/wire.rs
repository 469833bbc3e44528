//! How a client's requests go on the wire: HTTP/1.1 or HTTP/2, the
//! request's method, headers and body, TLS's trust, and a gRPC call. Both
//! engines take it; the virtual engine reads only the transport (one
//! connection per request in flight, or many streams on one connection).

use std::path::PathBuf;

use super::grpc::HEALTH_CHECK;

/// The streams an HTTP/2 server lets one connection carry at once when it
/// says nothing else (`SETTINGS_MAX_CONCURRENT_STREAMS`): hyper's server
/// default (`proto/h2/server.rs`, 200).
pub const DEFAULT_MAX_STREAMS: u32 = 200;

/// The streams an HTTP/2 server lets a connection reset before it accepted
/// them, past which it closes the connection with GOAWAY
/// `ENHANCE_YOUR_CALM` (`model::multiplex::too_many_resets`): h2's
/// `DEFAULT_REMOTE_RESET_STREAM_MAX` (`proto/mod.rs`, 20), which hyper's
/// server keeps when told nothing.
pub const DEFAULT_PENDING_RESETS: u32 = 20;

/// The protocol requests travel by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    /// HTTP/1.1: one request at a time on a connection; a timed-out
    /// attempt closes its connection.
    #[default]
    Http1,
    /// HTTP/2: many streams on one connection, up to the server's limit;
    /// a timed-out attempt resets its stream (`RST_STREAM`), and the
    /// connection stays.
    Http2,
}

/// What every attempt sends: method, headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestShape {
    /// The method, as written (`GET`, `POST`, ...).
    pub method: String,
    /// Headers added to every request, in order, as `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// The body, empty for none.
    pub body: Vec<u8>,
}

impl Default for RequestShape {
    fn default() -> Self {
        RequestShape {
            method: "GET".to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}

/// Parses a header given as `Name: value`: the name before the first
/// colon, the value after it with surrounding blanks trimmed.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}' is not a header (Name: value)"))?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!(
            "'{s}' is not a header: its name is empty or has a blank"
        ));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// Whom a TLS client trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trust {
    /// A PEM file of certificates to trust instead of the system's.
    pub ca_cert: Option<PathBuf>,
    /// Trust any certificate (a test server's own, say).
    pub insecure: bool,
}

/// A gRPC call instead of a plain request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcCall {
    /// The method, `package.Service/Method`.
    pub method: String,
    /// The request message's protobuf bytes (unframed). Which of its
    /// statuses are retried is the retry policy's (`--grpc-retryable`).
    pub message: Vec<u8>,
}

impl Default for GrpcCall {
    /// The health check with an empty request.
    fn default() -> Self {
        GrpcCall {
            method: HEALTH_CHECK.to_string(),
            message: Vec::new(),
        }
    }
}

/// Everything about how a client's attempts go on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wire {
    /// HTTP/1.1 or HTTP/2.
    pub transport: Transport,
    /// The request every attempt sends (for a gRPC call, its headers).
    pub request: RequestShape,
    /// Whom to trust over `https://`.
    pub trust: Trust,
    /// A gRPC call, if the target is a gRPC service.
    pub grpc: Option<GrpcCall>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_a_name_a_colon_and_a_value() {
        assert_eq!(
            parse_header("Authorization: Bearer abc"),
            Ok(("Authorization".to_string(), "Bearer abc".to_string()))
        );
        assert_eq!(
            parse_header("x-a:b:c"),
            Ok(("x-a".to_string(), "b:c".to_string()))
        );
        assert_eq!(
            parse_header("x-empty:"),
            Ok(("x-empty".to_string(), String::new()))
        );
        for bad in ["no colon", ": v", "a b: v"] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn by_default_a_get_over_http1_and_the_health_check() {
        let wire = Wire::default();
        assert_eq!(wire.transport, Transport::Http1);
        assert_eq!(wire.request.method, "GET");
        assert!(wire.request.body.is_empty() && wire.grpc.is_none());
        let call = GrpcCall::default();
        assert_eq!(call.method, "grpc.health.v1.Health/Check");
        assert!(call.message.is_empty());
    }
}
