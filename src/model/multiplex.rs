//! HTTP/2's connections as a client process holds them, pure: every
//! attempt is a stream on the first connection with a stream free (in the
//! order they opened), up to the server's `SETTINGS_MAX_CONCURRENT_STREAMS`;
//! a new connection only when every open one is full. A stream ends (its
//! slot free at once) when its answer is read or when its attempt times
//! out or is cancelled: the client sends `RST_STREAM` (`CANCEL`) and the
//! connection stays open, where HTTP/1.1 closes it. Connections are kept
//! while idle, so after an outage the client needs no new SYN while slots
//! remain.
//!
//! What the server does with a reset is the same as what it does with a
//! closed HTTP/1.1 connection ([`on_reset`]): it learns of it when it
//! reads it (at once while it runs; at its resume while stopped, after the
//! request the reset cancels, written before it on the same connection),
//! and drops the work in `cancel` mode or goes on with it in `continue`.
//!
//! But a stream reset before the server accepted it is one h2 (hyper's
//! HTTP/2) counts, per connection, as a defence against rapid resets: past
//! a limit (`max_pending_accept_reset_streams`, h2's 20) the server answers
//! GOAWAY `ENHANCE_YOUR_CALM` and closes the connection
//! ([`too_many_resets`]). A running server accepts each stream as it reads
//! it, so only a server that was stopped meets it: at its resume it reads
//! every frame waiting on a connection before it accepts any stream, and
//! every request written during the stop and reset before the resume is
//! such a stream. The connection is then closed with all of them unread,
//! live ones too (their clients get an error), and the streams it carried
//! in service fail. So which connection a stream went on counts, and the
//! books keep each connection's streams.

use std::collections::{BTreeMap, BTreeSet};

use super::server::OnDisconnect;
use super::wire::Transport;

/// A connection of a [`Multiplex`], by its number in the order opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Conn(pub u32);

/// Where an attempt's request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// As a stream on this connection, already open: no SYN, no backlog (a
    /// stopped server's socket holds it until the server reads it).
    Open(Conn),
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

/// The connections a server that resumes closes with GOAWAY
/// `ENHANCE_YOUR_CALM`: those on which more than `limit` of the streams
/// written while it was stopped were reset before it read them. `streams`
/// are those streams, each with its connection and whether its client
/// has reset it.
pub fn too_many_resets(
    streams: impl IntoIterator<Item = (Conn, bool)>,
    limit: u32,
) -> BTreeSet<Conn> {
    let mut resets: BTreeMap<Conn, u64> = BTreeMap::new();
    for (conn, reset) in streams {
        if reset {
            *resets.entry(conn).or_default() += 1;
        }
    }
    resets
        .into_iter()
        .filter(|&(_, n)| n > u64::from(limit))
        .map(|(conn, _)| conn)
        .collect()
}

/// A client process's HTTP/2 connections to one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multiplex {
    /// The streams the server lets one connection carry at once.
    limit: u64,
    /// Streams open on each open connection (idle ones included).
    open: BTreeMap<Conn, u64>,
    /// The open connections with a stream free, the first taken first.
    room: BTreeSet<Conn>,
    /// Streams open over all of them.
    streams: u64,
    /// The number the next connection opened gets.
    next: u32,
}

impl Multiplex {
    /// No connection yet, to a server allowing `limit` streams on each
    /// (at least one: a limit of zero would allow no request at all).
    pub fn new(limit: u32) -> Self {
        Multiplex {
            limit: u64::from(limit.max(1)),
            open: BTreeMap::new(),
            room: BTreeSet::new(),
            streams: 0,
            next: 0,
        }
    }

    /// Where the next attempt goes: a stream slot is taken at once on the
    /// first open connection with one free ([`Route::Open`]); else a new
    /// connection is needed ([`Route::New`]), and the slot is taken when
    /// it opens ([`Multiplex::opened`]).
    pub fn stream(&mut self) -> Route {
        let Some(&conn) = self.room.first() else {
            return Route::New;
        };
        let n = self
            .open
            .get_mut(&conn)
            .expect("a connection with room is open");
        *n += 1;
        if *n >= self.limit {
            self.room.remove(&conn);
        }
        self.streams += 1;
        Route::Open(conn)
    }

    /// The connection the next one opened will be.
    pub fn next_conn(&self) -> Conn {
        Conn(self.next)
    }

    /// A new connection has opened (its SYN answered, or queued in a
    /// stopped server's backlog), carrying the stream that opened it.
    pub fn opened(&mut self) -> Conn {
        let conn = self.next_conn();
        self.next += 1;
        self.open.insert(conn, 1);
        if self.limit > 1 {
            self.room.insert(conn);
        }
        self.streams += 1;
        conn
    }

    /// A stream on `conn` has ended: answered, or reset by its client (a
    /// timeout, or a hedge that lost). Its slot is free at once. Nothing
    /// if `conn` was closed (its streams went with it).
    pub fn ended(&mut self, conn: Conn) {
        if let Some(n) = self.open.get_mut(&conn) {
            debug_assert!(*n > 0, "a stream was open");
            *n = n.saturating_sub(1);
            self.streams = self.streams.saturating_sub(1);
            self.room.insert(conn);
        }
    }

    /// The server closed `conn` (a GOAWAY): its streams are gone with it.
    pub fn closed(&mut self, conn: Conn) {
        if let Some(n) = self.open.remove(&conn) {
            self.streams = self.streams.saturating_sub(n);
            self.room.remove(&conn);
        }
    }

    /// Connections open now.
    pub fn connections(&self) -> u64 {
        self.open.len() as u64
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
        assert_eq!(m.opened(), Conn(0));
        assert_eq!((m.connections(), m.streams()), (1, 1));
        assert_eq!(m.stream(), Route::Open(Conn(0)));
        assert_eq!(m.stream(), Route::Open(Conn(0)));
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
        assert_eq!(routes, vec![New, Open(Conn(0)), New, Open(Conn(1)), New]);
        assert_eq!((m.connections(), m.streams()), (3, 5));
    }

    #[test]
    fn a_reset_frees_its_slot_at_once_and_keeps_the_connection() {
        let mut m = Multiplex::new(2);
        assert_eq!(m.stream(), Route::New);
        let c = m.opened();
        assert_eq!(m.stream(), Route::Open(c));
        // Full: a third attempt would need a new connection. One times
        // out and is reset: the third takes its slot instead.
        m.ended(c);
        assert_eq!((m.connections(), m.streams()), (1, 1));
        assert_eq!(m.stream(), Route::Open(c));
        assert_eq!((m.connections(), m.streams()), (1, 2));
    }

    #[test]
    fn idle_connections_are_kept_and_the_first_opened_is_taken_first() {
        let mut m = Multiplex::new(1);
        for _ in 0..2 {
            assert_eq!(m.stream(), Route::New);
            m.opened();
        }
        // The second frees its slot before the first: the first is still
        // taken first, as the client looks through them in order.
        m.ended(Conn(1));
        m.ended(Conn(0));
        assert_eq!((m.connections(), m.streams()), (2, 0));
        assert_eq!(m.stream(), Route::Open(Conn(0)));
        assert_eq!(m.stream(), Route::Open(Conn(1)));
        assert_eq!(m.stream(), Route::New);
    }

    #[test]
    fn a_closed_connection_takes_its_streams_and_the_next_is_a_new_one() {
        let mut m = Multiplex::new(3);
        assert_eq!(m.stream(), Route::New);
        let c = m.opened();
        assert_eq!(m.stream(), Route::Open(c));
        m.closed(c);
        assert_eq!((m.connections(), m.streams()), (0, 0));
        // A stream of the closed connection that ends changes nothing.
        m.ended(c);
        assert_eq!(m.streams(), 0);
        assert_eq!(m.stream(), Route::New);
        assert_eq!(m.next_conn(), Conn(1));
        assert_eq!(m.opened(), Conn(1));
    }

    #[test]
    fn a_limit_of_zero_is_taken_as_one() {
        let mut m = Multiplex::new(0);
        assert_eq!(m.stream(), Route::New);
        m.opened();
        assert_eq!(m.stream(), Route::New);
    }

    #[test]
    fn more_resets_than_the_limit_on_one_connection_close_it_alone() {
        // Limit 2. Connection 0: three reset and one live (closed);
        // connection 1: two reset, exactly the limit (kept); connection 2:
        // five live, no reset (kept).
        let mut streams = vec![(Conn(0), true); 3];
        streams.push((Conn(0), false));
        streams.extend([(Conn(1), true); 2]);
        streams.extend([(Conn(2), false); 5]);
        assert_eq!(
            too_many_resets(streams.clone(), 2),
            BTreeSet::from([Conn(0)])
        );
        // With a limit of 1, connection 1 goes too; with 3, none.
        assert_eq!(
            too_many_resets(streams.clone(), 1),
            BTreeSet::from([Conn(0), Conn(1)])
        );
        assert!(too_many_resets(streams, 3).is_empty());
    }

    #[test]
    fn a_timeout_closes_over_http1_and_resets_over_http2() {
        assert_eq!(on_timeout(Transport::Http1), OnTimeout::Close);
        assert_eq!(on_timeout(Transport::Http2), OnTimeout::Reset);
        assert!(on_reset(OnDisconnect::Cancel));
        assert!(!on_reset(OnDisconnect::Continue));
    }
}
