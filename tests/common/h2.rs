//! HTTP/2's frames as bytes, for tests that write them by hand.

/// An HTTP/2 frame (RFC 9113, section 4.1): its header (the payload's
/// length in 24 bits, type, flags, stream), then its payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}
