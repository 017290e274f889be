//! Moves packets: UDP workers on SO_REUSEPORT sockets (one blocking thread
//! each, batched with recvmmsg/sendmmsg) and DNS over TCP with 2-byte length
//! framing (RFC 1035 §4.2.2, RFC 7766) on tokio. The engine is read through an
//! `ArcSwap`, so a reload never blocks or drops a query.
//!
//! Bounded everywhere, with no queue of our own: a UDP worker holds one
//! batch (32 datagrams) and its rate-limit table (fixed size, see `rrl`);
//! what it cannot take waits in the socket's kernel buffer (4 MiB) and a
//! flood beyond that is dropped by the kernel. TCP holds at most
//! `tcp_max_connections` connections, each with one 64 KiB read buffer and
//! one response buffer; a client that does not read its answers is closed
//! by the write timeout rather than buffered for. Connections that stall are
//! closed by the read and idle timeouts, which drop to `BUSY_TIMEOUT` while
//! more than half of the slots are taken (as NSD does), so slow clients
//! cannot hold the slots against others.

mod mmsg;
pub mod rrl;
pub mod state;
pub mod tcp;
pub mod udp;

pub use state::ServerState;
pub use tcp::{bind_tcp, tcp_listener, BUSY_TIMEOUT};
pub use udp::{bind_udp, udp_worker};
