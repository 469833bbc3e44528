//! What an HTTP/2 client connection has written, read from its bytes as
//! they go out (RFC 9113, section 4.1: a 24-byte preface, then frames of
//! a 9-byte header and a payload): whether a request has been written to
//! its end (a HEADERS or DATA frame with END_STREAM, its header block
//! ended), and whether a stream has been reset (RST_STREAM). hyper tells
//! neither, and h2 drops the frames of a stream still queued when it is
//! reset; the departure of a gone client's request
//! ([`super::departure`]) resets its stream only once the request is
//! written whole, then sends a PING of its own ([`PING`]) and closes the
//! connection once its answer ([`Pong`]) says that the target has read
//! everything before it. Closed at once, the connection would end before
//! the target took the reset stream in, and h2 (hyper's servers') drops
//! streams not yet taken in when its connection ends: the target would
//! never see the request, where a stopped server sees it, and its reset,
//! on a live connection.

/// The client's connection preface, before any frame.
const PREFACE_LEN: usize = 24;
/// A frame's header: length (3 bytes), type, flags, stream.
const HEADER_LEN: usize = 9;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// The departure's PING (type 6, on stream 0), after the stream's reset.
pub(super) const PING: [u8; 17] = [
    0, 0, 8, 0x6, 0, 0, 0, 0, 0, b'd', b'e', b'p', b'a', b'r', b't', b'e', b'd',
];

/// Its answer: the same, with ACK.
const PONG: [u8; 17] = [
    0, 0, 8, 0x6, 0x1, 0, 0, 0, 0, b'd', b'e', b'p', b'a', b'r', b't', b'e', b'd',
];

/// Looks for the answer to [`PING`] in the bytes read, across reads.
#[derive(Debug, Clone, Default)]
pub(super) struct Pong {
    /// The last bytes read, as many as may begin the answer.
    tail: Vec<u8>,
    /// The answer has come.
    pub(super) come: bool,
}

impl Pong {
    /// Reads `bytes`, the next ones read.
    pub(super) fn scan(&mut self, bytes: &[u8]) {
        if self.come {
            return;
        }
        self.tail.extend_from_slice(bytes);
        self.come = self.tail.windows(PONG.len()).any(|w| w == PONG);
        let keep = self.tail.len().min(PONG.len() - 1);
        self.tail.drain(..self.tail.len() - keep);
    }
}

/// What the frames written so far say.
#[derive(Debug, Clone)]
pub(super) struct Written {
    /// Bytes of the preface still to come.
    preface: usize,
    /// The header of the frame being read, as far as it has come.
    header: [u8; HEADER_LEN],
    have: usize,
    /// Bytes of the current frame's payload still to skip.
    skip: usize,
    /// A HEADERS frame with END_STREAM whose header block goes on in
    /// CONTINUATION frames.
    ending: bool,
    /// A request has been written to its end.
    pub(super) ended: bool,
    /// A stream has been reset.
    pub(super) reset: bool,
}

impl Written {
    /// Nothing written yet.
    pub(super) fn new() -> Written {
        Written {
            preface: PREFACE_LEN,
            header: [0; HEADER_LEN],
            have: 0,
            skip: 0,
            ending: false,
            ended: false,
            reset: false,
        }
    }

    /// Whether what is written ends with a whole frame: a frame of one's
    /// own may go next.
    pub(super) fn at_boundary(&self) -> bool {
        self.preface == 0 && self.have == 0 && self.skip == 0
    }

    /// Reads `bytes`, the next ones written.
    pub(super) fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.preface > 0 || self.skip > 0 {
                let left = if self.preface > 0 {
                    &mut self.preface
                } else {
                    &mut self.skip
                };
                let n = (*left).min(bytes.len());
                *left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (HEADER_LEN - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == HEADER_LEN {
                self.have = 0;
                self.frame();
            }
        }
    }

    /// A frame's header has been read whole.
    fn frame(&mut self) {
        let h = self.header;
        self.skip = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if stream == 0 {
            return;
        }
        match kind {
            DATA if flags & END_STREAM != 0 => self.ended = true,
            HEADERS if flags & END_STREAM != 0 => {
                if flags & END_HEADERS != 0 {
                    self.ended = true;
                } else {
                    self.ending = true;
                }
            }
            CONTINUATION if self.ending && flags & END_HEADERS != 0 => {
                self.ending = false;
                self.ended = true;
            }
            RST_STREAM => self.reset = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = len.to_be_bytes()[1..].to_vec();
        out.extend([kind, flags]);
        out.extend(stream.to_be_bytes());
        out.extend(payload);
        out
    }

    fn preface() -> Vec<u8> {
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        // SETTINGS (type 4) on stream 0: never a request's.
        out.extend(frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100]));
        out
    }

    #[test]
    fn a_request_ends_with_its_last_data_frame_read_a_byte_at_a_time() {
        let mut bytes = preface();
        bytes.extend(frame(HEADERS, END_HEADERS, 1, b"hpack"));
        bytes.extend(frame(DATA, 0, 1, b"first"));
        let before_end = bytes.len();
        bytes.extend(frame(DATA, END_STREAM, 1, b"last"));
        let mut written = Written::new();
        for (i, byte) in bytes.iter().enumerate() {
            written.scan(std::slice::from_ref(byte));
            // Ended once the last frame's header is written: hyper hands
            // a frame over whole, so its payload follows in the same
            // write.
            assert_eq!(written.ended, i >= before_end + HEADER_LEN - 1, "{i}");
        }
        assert!(!written.reset);
        bytes.extend(frame(RST_STREAM, 0, 1, &8u32.to_be_bytes()));
        let mut whole = Written::new();
        whole.scan(&bytes);
        assert!(whole.ended && whole.reset);
    }

    #[test]
    fn headers_alone_end_a_request_once_their_block_ends() {
        let mut written = Written::new();
        written.scan(&preface());
        // END_STREAM is a flag of DATA too: 0x1 on a PING (type 6) or
        // SETTINGS is ACK, and stream 0 carries no request.
        written.scan(&frame(0x6, 0x1, 0, &[0; 8]));
        assert!(!written.ended);
        written.scan(&frame(HEADERS, END_STREAM, 3, b"part"));
        assert!(!written.ended, "the header block goes on");
        written.scan(&frame(CONTINUATION, 0, 3, b"more"));
        assert!(!written.ended);
        written.scan(&frame(CONTINUATION, END_HEADERS, 3, b"end"));
        assert!(written.ended);
        let mut one = Written::new();
        one.scan(&preface());
        one.scan(&frame(HEADERS, END_STREAM | END_HEADERS, 1, b"get"));
        assert!(one.ended && !one.reset);
    }

    #[test]
    fn the_pings_answer_is_found_across_reads_and_only_it() {
        let mut bytes = frame(0x4, 0x1, 0, &[]);
        // A PING of the target's own, and the answer to another.
        bytes.extend(frame(0x6, 0, 0, b"departed"));
        bytes.extend(frame(0x6, 0x1, 0, b"12345678"));
        let mut pong = Pong::default();
        pong.scan(&bytes);
        assert!(!pong.come);
        assert_eq!(PING.to_vec(), frame(0x6, 0, 0, b"departed"));
        let answer = frame(0x6, 0x1, 0, b"departed");
        for part in answer.chunks(5) {
            assert!(!pong.come);
            pong.scan(part);
        }
        assert!(pong.come);
        let mut written = Written::new();
        assert!(!written.at_boundary(), "the preface first");
        written.scan(&preface());
        assert!(written.at_boundary());
        written.scan(&frame(HEADERS, 0, 1, b"abc")[..10]);
        assert!(!written.at_boundary());
    }

    #[test]
    fn a_reset_without_an_end_is_a_reset_only() {
        let mut written = Written::new();
        written.scan(&preface());
        written.scan(&frame(HEADERS, END_HEADERS, 1, b"post"));
        written.scan(&frame(DATA, 0, 1, b"part of a body"));
        written.scan(&frame(RST_STREAM, 0, 1, &2u32.to_be_bytes()));
        assert!(written.reset && !written.ended);
    }
}
