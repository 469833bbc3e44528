//! HTTP/2's connections as a client process holds them, pure: every
//! attempt is a stream on a connection with a stream free, up to the
//! server's `SETTINGS_MAX_CONCURRENT_STREAMS`; a new connection only when
//! every open one is full. A stream ends (its slot free at once) when its
//! answer is read or when its attempt times out or is cancelled: the
//! client sends `RST_STREAM` (`CANCEL`) and the connection stays open,
//! where HTTP/1.1 closes it. Connections are kept while idle, so after an
//! outage the client needs no new SYN while slots remain.
//!
//! The client takes the first connection with a stream free and never
//! closes one, so which connection a stream goes on changes nothing a
//! run counts: a new connection is needed exactly when every connection
//! is full, that is when the streams open equal the connections times the
//! limit. The books therefore hold the two totals alone, and the virtual
//! engine need not remember each stream's connection.
//!
//! What the server does with a reset is the same as what it does with a
//! closed HTTP/1.1 connection ([`on_reset`]): it learns of it when it
//! reads it (at once while it runs; at its resume while stopped, after the
//! request the reset cancels, written before it on the same connection),
//! and drops the work in `cancel` mode or goes on with it in `continue`.

use super::server::OnDisconnect;
use super::wire::Transport;

/// Where an attempt's request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// As a stream on a connection already open: no SYN, no backlog (a
    /// stopped server's socket holds it until the server reads it).
    Open,
    /// On a new connection, which must be opened first (a SYN, through
    /// the listen backlog while the server is stopped).
    New,
}

/// What a client does to its connection when an attempt on it times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// HTTP/1.1: the connection is closed (its request cannot be
    /// withdrawn otherwise); the next attempt needs another.
    Close,
    /// HTTP/2: the stream is reset (`RST_STREAM`); the connection stays
    /// open and its slot is free at once.
    Reset,
}

/// What a timeout does to the connection, by transport.
pub fn on_timeout(transport: Transport) -> OnTimeout {
    match transport {
        Transport::Http1 => OnTimeout::Close,
        Transport::Http2 => OnTimeout::Reset,
    }
}

/// Whether a server drops the work of a request when it reads the reset
/// of its stream (or the close of its connection): in `cancel` mode it
/// does, in `continue` mode the work goes on for nobody.
pub fn on_reset(on_disconnect: OnDisconnect) -> bool {
    on_disconnect == OnDisconnect::Cancel
}

/// A client process's HTTP/2 connections to one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multiplex {
    /// The streams the server lets one connection carry at once.
    limit: u64,
    /// Connections open (idle ones included).
    connections: u64,
    /// Streams open over all of them.
    streams: u64,
}

impl Multiplex {
    /// No connection yet, to a server allowing `limit` streams on each
    /// (at least one: a limit of zero would allow no request at all).
    pub fn new(limit: u32) -> Self {
        Multiplex {
            limit: u64::from(limit.max(1)),
            connections: 0,
            streams: 0,
        }
    }

    /// Where the next attempt goes: a stream slot is taken at once on an
    /// open connection with one free ([`Route::Open`]); else a new
    /// connection is needed ([`Route::New`]), and the slot is taken when
    /// it opens ([`Multiplex::opened`]).
    pub fn stream(&mut self) -> Route {
        if self.streams < self.connections * self.limit {
            self.streams += 1;
            Route::Open
        } else {
            Route::New
        }
    }

    /// A new connection has opened (its SYN answered, or queued in a
    /// stopped server's backlog), carrying the stream that opened it.
    pub fn opened(&mut self) {
        self.connections += 1;
        self.streams += 1;
    }

    /// A stream has ended: answered, or reset by its client (a timeout,
    /// or a hedge that lost). Its slot is free at once.
    pub fn ended(&mut self) {
        debug_assert!(self.streams > 0, "a stream was open");
        self.streams = self.streams.saturating_sub(1);
    }

    /// Connections open now: every one opened, as none is closed.
    pub fn connections(&self) -> u64 {
        self.connections
    }

    /// Streams open now.
    pub fn streams(&self) -> u64 {
        self.streams
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_attempt_opens_a_connection_and_the_next_share_it() {
        let mut m = Multiplex::new(3);
        assert_eq!(m.stream(), Route::New);
        m.opened();
        assert_eq!((m.connections(), m.streams()), (1, 1));
        assert_eq!(m.stream(), Route::Open);
        assert_eq!(m.stream(), Route::Open);
        assert_eq!((m.connections(), m.streams()), (1, 3));
    }

    #[test]
    fn the_limit_forces_a_second_connection_and_only_then() {
        // Limit 2: streams 1 and 2 on the first connection, the third
        // needs a second, the fourth shares it, the fifth needs a third.
        let mut m = Multiplex::new(2);
        let mut routes = Vec::new();
        for _ in 0..5 {
            let route = m.stream();
            if route == Route::New {
                m.opened();
            }
            routes.push(route);
        }
        use Route::*;
        assert_eq!(routes, vec![New, Open, New, Open, New]);
        assert_eq!((m.connections(), m.streams()), (3, 5));
    }

    #[test]
    fn a_reset_frees_its_slot_at_once_and_keeps_the_connection() {
        let mut m = Multiplex::new(2);
        assert_eq!(m.stream(), Route::New);
        m.opened();
        assert_eq!(m.stream(), Route::Open);
        // Full: a third attempt would need a new connection. One times
        // out and is reset: the third takes its slot instead.
        m.ended();
        assert_eq!((m.connections(), m.streams()), (1, 1));
        assert_eq!(m.stream(), Route::Open);
        assert_eq!((m.connections(), m.streams()), (1, 2));
    }

    #[test]
    fn idle_connections_are_kept_for_later_streams() {
        let mut m = Multiplex::new(1);
        for _ in 0..2 {
            assert_eq!(m.stream(), Route::New);
            m.opened();
        }
        m.ended();
        m.ended();
        assert_eq!((m.connections(), m.streams()), (2, 0));
        // Both idle connections serve again without a SYN.
        assert_eq!(m.stream(), Route::Open);
        assert_eq!(m.stream(), Route::Open);
        assert_eq!(m.stream(), Route::New);
    }

    #[test]
    fn a_limit_of_zero_is_taken_as_one() {
        let mut m = Multiplex::new(0);
        assert_eq!(m.stream(), Route::New);
        m.opened();
        assert_eq!(m.stream(), Route::New);
    }

    #[test]
    fn a_timeout_closes_over_http1_and_resets_over_http2() {
        assert_eq!(on_timeout(Transport::Http1), OnTimeout::Close);
        assert_eq!(on_timeout(Transport::Http2), OnTimeout::Reset);
        assert!(on_reset(OnDisconnect::Cancel));
        assert!(!on_reset(OnDisconnect::Continue));
    }
}
