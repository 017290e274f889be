//! Moves packets: UDP workers on SO_REUSEPORT sockets (one blocking thread
//! each, batched with recvmmsg/sendmmsg) and DNS over TCP with 2-byte length
//! framing (RFC 1035 §4.2.2, RFC 7766) on tokio. The engine is read through an
//! `ArcSwap`, so a reload never blocks or drops a query.
//!
//! Bounded everywhere, with no queue of our own: a UDP worker holds one
//! batch (32 datagrams) and its rate-limit table (fixed size, see `rrl`);
//! what it cannot take waits in the socket's kernel buffer (4 MiB) and a
//! flood beyond that is dropped by the kernel. TCP holds at most
//! `tcp_max_connections` connections (at the cap the longest idle is closed
//! for a new one), each with a read buffer sized to its message and a
//! queue of responses not yet written; a client that does not read its
//! answers is closed by the write timeout rather than buffered for. Connections that stall are
//! closed by the read and idle timeouts, which drop to `BUSY_TIMEOUT` while
//! more than half of the slots are taken (as NSD does), so slow clients
//! cannot hold the slots against others.

mod mmsg;
pub mod qlog;
pub mod rrl;
pub mod state;
pub mod tcp;
pub mod udp;

pub use state::ServerState;
pub use tcp::{bind_tcp, tcp_listener, BUSY_TIMEOUT};
pub use udp::{bind_udp, udp_worker};

/// A socket for `addr` that several can bind at once (the UDP workers of
/// one address; an old and a new instance during a restart): SO_REUSEPORT
/// and SO_REUSEADDR, IPv6-only for an IPv6 address.
fn reusable_socket(
    addr: std::net::SocketAddr,
    ty: socket2::Type,
    proto: socket2::Protocol,
) -> std::io::Result<socket2::Socket> {
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), ty, Some(proto))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_reuse_port(true)?;
    s.set_reuse_address(true)?;
    Ok(s)
}
