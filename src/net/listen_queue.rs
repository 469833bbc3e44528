//! The kernel's listen queue of a service on this machine, asked of the
//! kernel itself (`sock_diag(7)`, as `ss -lt` asks it): the burst probe
//! counts the connections a service let in, and a service that accepts
//! ahead of its workers (asyncio's loop takes as many as its backlog at
//! each wake) lets in more than its kernel queues. Only the kernel's
//! queue fills while the service is stopped, so the twin's backlog is
//! the kernel's, and the rest is what the service took in itself.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP, TCP_LISTEN};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr as NetlinkAddr};

use crate::model::fit::queue::Listen;

/// One listening TCP socket, as the kernel lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    /// The address it is bound to (unspecified: every address).
    pub addr: SocketAddr,
    /// Its listen backlog as the kernel keeps it (`sk_max_ack_backlog`:
    /// listen(2)'s argument, at most `net.core.somaxconn`).
    pub backlog: u32,
}

/// The listen queue in front of `target`, if a listener of this machine's
/// network namespace takes its connections; `None` for a target
/// elsewhere, or one no listener here serves. Whatever listens here is
/// asked: behind a local forwarder (`ssh -L`, a container's published
/// port), the forwarder's queue. Fails only if neither family's sockets
/// could be listed.
pub fn of(target: SocketAddr) -> io::Result<Option<Listen>> {
    if !is_local(target.ip()) {
        return Ok(None);
    }
    let (v4, v6) = (listening(AF_INET), listening(AF_INET6));
    let listeners: Vec<Listener> = match (v4, v6) {
        (Err(e), Err(_)) => return Err(e),
        (v4, v6) => v4.into_iter().chain(v6).flatten().collect(),
    };
    Ok(serving(&listeners, target))
}

/// Whether `ip` is an address of this machine: binding to it is allowed
/// only then.
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// The listeners that take `target`'s connections, as Linux picks them:
/// those bound to its very address if any, otherwise those bound to every
/// address of its family, otherwise (an IPv4 target) IPv6 listeners on
/// every address, which take IPv4 too (the kernel's lookup tries the more
/// specific first; one with `IPV6_V6ONLY` would refuse the probe's
/// connections before the burst). IPv4-mapped IPv6 addresses count as the
/// IPv4 ones they map. Several of one kind share the port
/// (`SO_REUSEPORT`), and their queues add.
pub fn serving(listeners: &[Listener], target: SocketAddr) -> Option<Listen> {
    let ip = target.ip().to_canonical();
    let on_port = || listeners.iter().filter(|l| l.addr.port() == target.port());
    let exact = |l: &&Listener| l.addr.ip().to_canonical() == ip;
    let any_of_family =
        |l: &&Listener| l.addr.ip().is_unspecified() && l.addr.is_ipv4() == ip.is_ipv4();
    let any_v6 = |l: &&Listener| ip.is_ipv4() && l.addr.ip() == IpAddr::from([0u16; 8]);
    let kinds: [&dyn Fn(&&Listener) -> bool; 3] = [&exact, &any_of_family, &any_v6];
    kinds.iter().find_map(|kind| {
        let chosen: Vec<&Listener> = on_port().filter(|l| kind(l)).collect();
        (!chosen.is_empty()).then(|| Listen {
            listeners: u32::try_from(chosen.len()).unwrap_or(u32::MAX),
            backlog: chosen
                .iter()
                .fold(0, |sum, l| sum.saturating_add(l.backlog)),
        })
    })
}

/// Every listening TCP socket of `family` in this network namespace.
fn listening(family: u8) -> io::Result<Vec<Listener>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&NetlinkAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let socket_id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    let mut request = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::LISTEN,
            socket_id,
        })
        .into(),
    );
    request.finalize();
    let mut sent = vec![0; request.buffer_len()];
    request.serialize(&mut sent);
    socket.send(&sent, 0)?;
    let mut listeners = Vec::new();
    // A dump comes as datagrams of several messages each, until Done.
    let mut datagram = Vec::with_capacity(64 * 1024);
    loop {
        datagram.clear();
        let size = socket.recv(&mut datagram, 0)?;
        let mut rest = &datagram[..size];
        while !rest.is_empty() {
            let message = NetlinkMessage::<SockDiagMessage>::deserialize(rest)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            // Messages start on 4-byte boundaries (NLMSG_ALIGN); the
            // length was checked against the datagram in `deserialize`.
            let length = (message.header.length as usize + 3) & !3;
            match message.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r))
                    if r.header.state == TCP_LISTEN =>
                {
                    let id = &r.header.socket_id;
                    listeners.push(Listener {
                        addr: SocketAddr::new(id.source_address, id.source_port),
                        backlog: r.header.send_queue,
                    });
                }
                NetlinkPayload::Done(done) if done.code < 0 => {
                    return Err(io::Error::from_raw_os_error(-done.code));
                }
                NetlinkPayload::Done(_) => return Ok(listeners),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                _ => {}
            }
            rest = rest.get(length..).unwrap_or_default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(addr: &str, backlog: u32) -> Listener {
        Listener {
            addr: addr.parse().unwrap(),
            backlog,
        }
    }

    fn listen(listeners: u32, backlog: u32) -> Option<Listen> {
        Some(Listen { listeners, backlog })
    }

    #[test]
    fn the_most_specific_listeners_on_the_port_serve_and_their_queues_add() {
        let target: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let exact = listener("127.0.0.1:8080", 1000);
        let any = listener("0.0.0.0:8080", 128);
        let any_v6 = listener("[::]:8080", 4096);
        let other_port = listener("127.0.0.1:9090", 7);
        assert_eq!(
            serving(&[exact, any, any_v6, other_port], target),
            listen(1, 1000)
        );
        assert_eq!(serving(&[any, any_v6], target), listen(1, 128));
        assert_eq!(serving(&[any_v6, other_port], target), listen(1, 4096));
        // SO_REUSEPORT: two sockets share the port, each its own queue.
        assert_eq!(serving(&[exact, exact], target), listen(2, 2000));
        assert_eq!(serving(&[other_port], target), None);
        // An IPv6 target is never served by an IPv4 listener.
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        assert_eq!(serving(&[exact, any], v6), None);
        assert_eq!(serving(&[any, any_v6], v6), listen(1, 4096));
        // An IPv4-mapped address is the IPv4 one, either side.
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:8080".parse().unwrap();
        assert_eq!(serving(&[exact, any_v6], mapped), listen(1, 1000));
        let bound_mapped = listener("[::ffff:127.0.0.1]:8080", 64);
        assert_eq!(serving(&[bound_mapped, any], target), listen(1, 64));
    }

    #[test]
    fn the_kernel_lists_a_listener_of_ours_with_its_backlog() {
        // A listener made here with listen(2)'s backlog of 37 (below any
        // somaxconn), its queue read back from the kernel.
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        // SAFETY: the descriptor is the listener's, open for the call.
        let status = unsafe { nix::libc::listen(std::os::fd::AsRawFd::as_raw_fd(&socket), 37) };
        assert_eq!(status, 0);
        let told = of(addr).expect("sock_diag (netlink) lists this machine's sockets");
        assert_eq!(told, listen(1, 37));
        drop(socket);
        assert_eq!(of(addr).unwrap(), None);
        // An address of no interface here is not asked about.
        assert_eq!(of("192.0.2.1:80".parse().unwrap()).unwrap(), None);
    }
}
