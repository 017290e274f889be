//! Moves packets: UDP workers on SO_REUSEPORT sockets (one blocking thread
//! each, batched with recvmmsg/sendmmsg) and DNS over TCP with 2-byte length
//! framing (RFC 1035 §4.2.2, RFC 7766) on tokio. The engine is read through an
//! `ArcSwap`, so a reload never blocks or drops a query.
//!
//! Threading model: `workers` UDP threads per listen address, each with its
//! own socket, receive buffer, response buffer, random generator and
//! rotation cursors; the kernel spreads datagrams across the sockets. TCP,
//! health checks, reloads and the HTTP API run on a small tokio runtime.
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

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::answer::{Outcome, Scratch, Transport};
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::rrl::{slip_response, Limiter, Verdict};

pub struct Shared {
    pub engine: ArcSwap<Engine>,
    pub metrics: Metrics,
    pub shutdown: AtomicBool,
    pub tcp_conns: AtomicUsize,
    /// TCP listener tasks still running (see `tcp_listener`).
    pub tcp_listeners: AtomicUsize,
    /// Set to true on shutdown: TCP listeners stop accepting (and close).
    pub stop: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    pub fn new(engine: Engine) -> Arc<Shared> {
        let metrics = Metrics::new();
        Arc::new(Shared {
            engine: ArcSwap::from_pointee(engine),
            metrics,
            shutdown: AtomicBool::new(false),
            tcp_conns: AtomicUsize::new(0),
            tcp_listeners: AtomicUsize::new(0),
            stop: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Begin shutdown: listeners close, idle TCP connections close, UDP
    /// workers answer what is queued and stop.
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
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
    dont_fragment(&s, addr.is_ipv6());
    s.bind(&addr.into())?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    Ok(s.into())
}

/// Send UDP responses with DF set (RFC 9715 §3.2: avoid IP fragmentation),
/// at the interface MTU rather than a path MTU that spoofed ICMP could
/// lower. A response that does not fit fails with EMSGSIZE and is sent
/// truncated instead (`udp_worker`). It also spares the kernel an IP ID
/// per datagram, which it needs only for packets that may be fragmented.
fn dont_fragment(s: &Socket, v6: bool) {
    use std::os::fd::AsRawFd;
    let (level, opt, val) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    };
    // SAFETY: a plain int option on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &val as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        tracing::debug!("udp: cannot set DF: {}", std::io::Error::last_os_error());
    }
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
const FLUSH_EVERY: Duration = Duration::from_millis(10);
const BUF: usize = 4096;

/// One UDP worker: receive a batch, answer each into its slot, send the batch.
/// `share` is the number of workers on this worker's listen address (the
/// rate limiter's share of the rate). On shutdown it answers what is already
/// queued on its socket, then returns.
pub fn udp_worker(shared: Arc<Shared>, sock: std::net::UdpSocket, share: usize) {
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
    let mut tx_msgs: Vec<libc::mmsghdr> =
        (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
    // tx_msgs[k] answers rx slot tx_slot[k].
    let mut tx_slot = [0usize; BATCH];
    let mut outcome = Outcome::default();
    let mut local = crate::metrics::Local::default();
    let mut last_flush = std::time::Instant::now();
    let mut rrl: Option<Limiter> = None;
    loop {
        let stopping = shared.shutdown.load(Ordering::Relaxed);
        for h in rx_msgs.iter_mut() {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_len = 0;
        }
        // Block for the first datagram, then take whatever else is queued;
        // when stopping, only take what is queued.
        let flags = if stopping {
            libc::MSG_DONTWAIT
        } else {
            libc::MSG_WAITFORONE
        };
        let n = unsafe {
            libc::recvmmsg(
                fd,
                rx_msgs.as_mut_ptr(),
                BATCH as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 {
            local.flush(&shared.metrics);
            flush_rrl(&shared, &mut rrl);
            if stopping {
                break;
            }
            continue;
        }
        let engine = shared.engine.load();
        // Rate limiting follows the config (a reload may turn it on or off).
        if rrl.as_ref().map(|l| l.cfg) != engine.rrl {
            flush_rrl(&shared, &mut rrl);
            rrl = engine.rrl.map(|c| Limiter::new(c, share));
        }
        let now = rrl.as_ref().map(|l| l.now_ms()).unwrap_or(0);
        let mut nout = 0;
        for i in 0..n as usize {
            let len = rx_msgs[i].msg_len as usize;
            let Some(src) = sockaddr_ip(&addrs[i]) else {
                continue;
            };
            let t = Transport { src, tcp: false };
            let r = engine.answer(&rx[i][..len], t, &mut scratch, &mut tx[i], &mut outcome);
            local.record(&outcome, r.is_some());
            let r = match (r, rrl.as_mut()) {
                (Some(rlen), Some(l)) => match l.check(src, now) {
                    Verdict::Send => Some(rlen),
                    Verdict::Drop => None,
                    Verdict::Slip => Some(slip_response(&mut tx[i], rlen)),
                },
                (r, _) => r,
            };
            if let Some(rlen) = r {
                tx_iov[i].iov_len = rlen;
                let h = &mut tx_msgs[nout];
                h.msg_hdr.msg_name = &mut addrs[i] as *mut _ as *mut _;
                h.msg_hdr.msg_namelen = rx_msgs[i].msg_hdr.msg_namelen;
                h.msg_hdr.msg_iov = &mut tx_iov[i];
                h.msg_hdr.msg_iovlen = 1;
                tx_slot[nout] = i;
                nout += 1;
            }
        }
        let mut sent = 0;
        let mut shrunk = usize::MAX;
        while sent < nout {
            let r = unsafe {
                libc::sendmmsg(fd, tx_msgs[sent..].as_mut_ptr(), (nout - sent) as u32, 0)
            };
            if r > 0 {
                sent += r as usize;
                continue;
            }
            let i = tx_slot[sent];
            let err = std::io::Error::last_os_error().raw_os_error();
            if err == Some(libc::EMSGSIZE) && shrunk != sent {
                // Larger than the interface MTU, and DF is set: send the
                // truncated form so that the client retries over TCP.
                tx_iov[i].iov_len = slip_response(&mut tx[i], tx_iov[i].iov_len);
                shrunk = sent;
                local.truncated_on_send();
            } else {
                // Skip the datagram that failed (e.g. an unreachable client).
                sent += 1;
            }
        }
        // Flush often enough that /metrics is current within ~10 ms.
        if local.pending() >= 1024 || last_flush.elapsed() >= FLUSH_EVERY {
            last_flush = std::time::Instant::now();
            local.flush(&shared.metrics);
            flush_rrl(&shared, &mut rrl);
        }
    }
}

fn flush_rrl(shared: &Shared, rrl: &mut Option<Limiter>) {
    if let Some(l) = rrl.as_mut() {
        if l.dropped > 0 {
            shared
                .metrics
                .rrl_dropped
                .fetch_add(l.dropped, Ordering::Relaxed);
            l.dropped = 0;
        }
        if l.slipped > 0 {
            shared
                .metrics
                .rrl_slipped
                .fetch_add(l.slipped, Ordering::Relaxed);
            l.slipped = 0;
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

/// Serve DNS over TCP on one listener until shutdown; then stop accepting
/// and close the listening socket, so that a new instance sharing the port
/// (SO_REUSEPORT) gets the new connections.
///
/// The caller counts the listener in `shared.tcp_listeners` before spawning
/// it; the count drops when the listener has handed over its last
/// connection, so shutdown can wait for those too.
pub async fn tcp_listener(shared: Arc<Shared>, listener: std::net::TcpListener) {
    struct Done<'a>(&'a Shared);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.tcp_listeners.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _done = Done(&shared);
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("tcp listener: {e}");
            return;
        }
    };
    let mut stop = shared.stop.subscribe();
    loop {
        if *stop.borrow_and_update() {
            break;
        }
        let (stream, peer) = tokio::select! {
            _ = stop.changed() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::debug!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        spawn_conn(&shared, stream, peer);
    }
    // Take the connections the kernel has already completed, so that closing
    // the listener resets none of them; they are served like the others.
    let Ok(std_listener) = listener.into_std() else {
        return;
    };
    while let Ok((s, peer)) = std_listener.accept() {
        if s.set_nonblocking(true).is_err() {
            continue;
        }
        if let Ok(stream) = tokio::net::TcpStream::from_std(s) {
            spawn_conn(&shared, stream, peer);
        }
    }
}

/// Serve a new connection, or close it at once when every slot is taken.
fn spawn_conn(shared: &Arc<Shared>, stream: tokio::net::TcpStream, peer: SocketAddr) {
    let max = shared.engine.load().tcp_max;
    if shared.tcp_conns.fetch_add(1, Ordering::Relaxed) >= max {
        shared.tcp_conns.fetch_sub(1, Ordering::Relaxed);
        shared.metrics.tcp_rejected.fetch_add(1, Ordering::Relaxed);
        drop(stream);
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        let _ = tcp_conn(&shared, stream, peer).await;
        shared.tcp_conns.fetch_sub(1, Ordering::Relaxed);
    });
}

/// The idle and read timeouts while more than half of the connection slots
/// are taken (and more than `BUSY_MIN` connections are open).
pub const BUSY_TIMEOUT: Duration = Duration::from_millis(250);
const BUSY_MIN: usize = 4;
/// How often a waiting connection looks at the load and at shutdown.
const TICK: Duration = Duration::from_millis(100);
/// Responses gathered from a pipelined burst before they are written.
const OUT_FLUSH: usize = 16 * 1024;
/// On shutdown, how long an idle connection still waits for queries that a
/// client sent just before (and that are still on their way).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(100);

/// Limits of one connection, read from the engine when it opens.
struct TcpLimits {
    idle: Duration,
    read: Duration,
    max_queries: usize,
    max_conns: usize,
}

impl TcpLimits {
    fn busy(&self, shared: &Shared) -> bool {
        let n = shared.tcp_conns.load(Ordering::Relaxed);
        n > BUSY_MIN && n * 2 > self.max_conns
    }
}

/// One TCP connection: read into a buffer, answer every complete message in
/// it (a pipelined burst is answered in order and written together), wait
/// for more within the idle timeout (no partial message) or the read
/// timeout (a message has started), and close after `max_queries`.
async fn tcp_conn(
    shared: &Shared,
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let lim = {
        let e = shared.engine.load();
        let idle = Duration::from_millis(e.tcp_idle_ms);
        TcpLimits {
            idle,
            read: Duration::from_millis(e.tcp_read_ms).min(idle),
            max_queries: if e.tcp_max_queries == 0 {
                usize::MAX
            } else {
                e.tcp_max_queries
            },
            max_conns: e.tcp_max,
        }
    };
    let mut scratch = Scratch::default();
    let mut outcome = Outcome::default();
    // One whole message (2-octet length + up to 65535) always fits.
    let mut inb = vec![0u8; 2 + 65535];
    let mut have = 0usize;
    let mut resp = vec![0u8; 65535];
    let mut out: Vec<u8> = Vec::with_capacity(OUT_FLUSH + 2 + 65535);
    let mut answered = 0usize;
    // Start of the idle wait, or of the partial message now in the buffer.
    let mut since = Instant::now();
    // When this connection, idle, first saw the shutdown.
    let mut stop_seen: Option<Instant> = None;
    let t = Transport {
        src: peer.ip(),
        tcp: true,
    };
    loop {
        // Answer every complete message already received.
        let mut off = 0;
        let mut close = false;
        while have - off >= 2 {
            let len = u16::from_be_bytes([inb[off], inb[off + 1]]) as usize;
            if have - off < 2 + len {
                break;
            }
            let engine = shared.engine.load();
            let r = engine.answer(
                &inb[off + 2..off + 2 + len],
                t,
                &mut scratch,
                &mut resp,
                &mut outcome,
            );
            shared.metrics.record_one(&outcome, r.is_some());
            off += 2 + len;
            match r {
                Some(n) => {
                    out.extend_from_slice(&(n as u16).to_be_bytes());
                    out.extend_from_slice(&resp[..n]);
                    answered += 1;
                }
                // Nothing can be answered on this stream: close it.
                None => close = true,
            }
            if close || answered >= lim.max_queries {
                close = true;
                break;
            }
            if out.len() >= OUT_FLUSH {
                write_out(&mut stream, &mut out, lim.read).await?;
            }
        }
        if off > 0 {
            inb.copy_within(off..have, 0);
            have -= off;
            since = Instant::now();
        }
        if !out.is_empty() {
            write_out(&mut stream, &mut out, lim.read).await?;
        }
        if close {
            let _ = stream.shutdown().await;
            return Ok(());
        }
        // Shutting down: finish a message that has started, take what the
        // client has already sent (waiting `SHUTDOWN_GRACE` for queries still
        // on their way), then close.
        let stopping = shared.shutdown.load(Ordering::Relaxed);
        if stopping && have == 0 {
            // A direct recv: tokio's try_read trusts readiness the reactor
            // may not have seen yet, and would miss a burst already here.
            use std::os::fd::AsRawFd;
            let n = unsafe {
                libc::recv(
                    stream.as_raw_fd(),
                    inb.as_mut_ptr() as *mut libc::c_void,
                    inb.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                have = n as usize;
                since = Instant::now();
                continue;
            }
            let t0 = *stop_seen.get_or_insert_with(Instant::now);
            if t0.elapsed() >= SHUTDOWN_GRACE {
                let _ = stream.shutdown().await;
                return Ok(());
            }
        }
        // Wait for more, within the timeout that applies now.
        let mut limit = if have == 0 { lim.idle } else { lim.read };
        if lim.busy(shared) {
            limit = limit.min(BUSY_TIMEOUT);
        }
        if let (true, Some(t0)) = (have == 0, stop_seen) {
            limit = limit.min((t0 + SHUTDOWN_GRACE).saturating_duration_since(since));
        }
        let deadline = since + limit;
        let now = Instant::now();
        if now >= deadline {
            if !(stopping && have == 0) {
                shared.metrics.tcp_timeouts.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(());
        }
        let wake = deadline.min(now + TICK);
        tokio::select! {
            r = stream.read(&mut inb[have..]) => match r {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    if have == 0 {
                        since = Instant::now();
                    }
                    have += n;
                }
                Err(e) => return Err(e),
            },
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

async fn write_out(
    stream: &mut tokio::net::TcpStream,
    out: &mut Vec<u8>,
    timeout: Duration,
) -> std::io::Result<()> {
    let r = tokio::time::timeout(timeout, stream.write_all(out)).await;
    out.clear();
    r.map_err(|_| std::io::Error::other("write timeout"))?
}
