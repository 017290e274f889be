//! Moves packets: UDP workers on SO_REUSEPORT sockets (one blocking thread
//! each, batched with recvmmsg/sendmmsg) and DNS over TCP with 2-byte length
//! framing (RFC 1035 §4.2.2, RFC 7766) on tokio. The engine is read through an
//! `ArcSwap`, so a reload never blocks or drops a query.
//!
//! Threading model: `workers` UDP threads per listen address, each with its
//! own socket, receive buffer, response buffer, random generator and
//! rotation cursors; the kernel spreads datagrams across the sockets. TCP,
//! health checks, reloads and the HTTP API run on a small tokio runtime.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::answer::{Outcome, Scratch, Transport};
use crate::engine::Engine;
use crate::metrics::Metrics;

pub struct Shared {
    pub engine: ArcSwap<Engine>,
    pub metrics: Metrics,
    pub shutdown: AtomicBool,
    pub tcp_conns: AtomicUsize,
}

impl Shared {
    pub fn new(engine: Engine) -> Arc<Shared> {
        let metrics = Metrics::new();
        Arc::new(Shared {
            engine: ArcSwap::from_pointee(engine),
            metrics,
            shutdown: AtomicBool::new(false),
            tcp_conns: AtomicUsize::new(0),
        })
    }
}

/// Bind a UDP socket with SO_REUSEPORT so that several workers share the port.
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_reuse_port(true)?;
    s.set_reuse_address(true)?;
    // A bounded buffer: bursts queue in the kernel, floods are dropped there.
    let _ = s.set_recv_buffer_size(4 << 20);
    s.bind(&addr.into())?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    Ok(s.into())
}

pub fn bind_tcp(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_reuse_port(true)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

const BATCH: usize = 32;
const BUF: usize = 4096;

/// One UDP worker: receive a batch, answer each into its slot, send the batch.
pub fn udp_worker(shared: Arc<Shared>, sock: std::net::UdpSocket) {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let mut scratch = Scratch::default();
    let mut rx = vec![[0u8; BUF]; BATCH];
    let mut tx = vec![[0u8; BUF]; BATCH];
    let mut addrs: Vec<libc::sockaddr_storage> = vec![unsafe { std::mem::zeroed() }; BATCH];
    let mut rx_iov: Vec<libc::iovec> = rx
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut _,
            iov_len: BUF,
        })
        .collect();
    let mut tx_iov: Vec<libc::iovec> = tx
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut _,
            iov_len: 0,
        })
        .collect();
    let mut rx_msgs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|i| {
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = &mut addrs[i] as *mut _ as *mut _;
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_hdr.msg_iov = &mut rx_iov[i];
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    let mut tx_msgs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|_| unsafe { std::mem::zeroed() })
        .collect();
    let mut outcome = Outcome::default();
    let mut local = crate::metrics::Local::default();
    while !shared.shutdown.load(Ordering::Relaxed) {
        for (i, h) in rx_msgs.iter_mut().enumerate() {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_len = 0;
            let _ = i;
        }
        // Block for the first datagram, then take whatever else is queued.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                rx_msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 {
            local.flush(&shared.metrics);
            continue;
        }
        let engine = shared.engine.load();
        let mut nout = 0;
        for i in 0..n as usize {
            let len = rx_msgs[i].msg_len as usize;
            let Some(src) = sockaddr_ip(&addrs[i]) else {
                continue;
            };
            let t = Transport { src, tcp: false };
            let r = engine.answer(&rx[i][..len], t, &mut scratch, &mut tx[i], &mut outcome);
            local.record(&outcome, r.is_some());
            if let Some(rlen) = r {
                tx_iov[i].iov_len = rlen;
                let h = &mut tx_msgs[nout];
                h.msg_hdr.msg_name = &mut addrs[i] as *mut _ as *mut _;
                h.msg_hdr.msg_namelen = rx_msgs[i].msg_hdr.msg_namelen;
                h.msg_hdr.msg_iov = &mut tx_iov[i];
                h.msg_hdr.msg_iovlen = 1;
                nout += 1;
            }
        }
        let mut sent = 0;
        while sent < nout {
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    tx_msgs[sent..].as_mut_ptr(),
                    (nout - sent) as u32,
                    0,
                )
            };
            if r <= 0 {
                // Skip the datagram that failed (e.g. an unreachable client).
                sent += 1;
            } else {
                sent += r as usize;
            }
        }
        if local.pending() >= 1024 {
            local.flush(&shared.metrics);
        }
    }
}

fn sockaddr_ip(sa: &libc::sockaddr_storage) -> Option<IpAddr> {
    match sa.ss_family as i32 {
        libc::AF_INET => {
            let a = unsafe { &*(sa as *const _ as *const libc::sockaddr_in) };
            Some(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()))
        }
        libc::AF_INET6 => {
            let a = unsafe { &*(sa as *const _ as *const libc::sockaddr_in6) };
            Some(IpAddr::from(a.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

/// Serve DNS over TCP on one listener until shutdown.
pub async fn tcp_listener(shared: Arc<Shared>, listener: std::net::TcpListener) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("tcp listener: {e}");
            return;
        }
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let max = shared.engine.load().tcp_max;
        if shared.tcp_conns.fetch_add(1, Ordering::Relaxed) >= max {
            shared.tcp_conns.fetch_sub(1, Ordering::Relaxed);
            shared.metrics.tcp_rejected.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        }
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = tcp_conn(&shared, stream, peer).await;
            shared.tcp_conns.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Most queries answered on one connection before it is closed.
const MAX_QUERIES_PER_CONN: usize = 10_000;

async fn tcp_conn(
    shared: &Shared,
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut scratch = Scratch::default();
    let mut req = vec![0u8; 65535];
    let mut resp = vec![0u8; 65537];
    let mut outcome = Outcome::default();
    let idle = Duration::from_millis(shared.engine.load().tcp_idle_ms);
    for _ in 0..MAX_QUERIES_PER_CONN {
        let mut lenb = [0u8; 2];
        // Idle timeout between queries, and a read timeout within one.
        match tokio::time::timeout(idle, stream.read_exact(&mut lenb)).await {
            Ok(Ok(_)) => {}
            _ => return Ok(()),
        }
        let len = u16::from_be_bytes(lenb) as usize;
        match tokio::time::timeout(idle, stream.read_exact(&mut req[..len])).await {
            Ok(Ok(_)) => {}
            _ => return Ok(()),
        }
        if shared.shutdown.load(Ordering::Relaxed) {
            return Ok(());
        }
        let engine = shared.engine.load();
        let t = Transport {
            src: peer.ip(),
            tcp: true,
        };
        let r = engine.answer(&req[..len], t, &mut scratch, &mut resp[2..], &mut outcome);
        shared.metrics.record_one(&outcome, r.is_some());
        match r {
            Some(n) => {
                resp[..2].copy_from_slice(&(n as u16).to_be_bytes());
                tokio::time::timeout(idle, stream.write_all(&resp[..n + 2]))
                    .await
                    .map_err(|_| std::io::Error::other("write timeout"))??;
            }
            // Nothing can be answered on this stream: close it.
            None => return Ok(()),
        }
    }
    Ok(())
}
