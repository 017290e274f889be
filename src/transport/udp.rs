//! DNS over UDP (RFC 1035 §4.2.1): SO_REUSEPORT sockets with DF set, and
//! one blocking worker thread per socket that answers batches of datagrams
//! read with recvmmsg and written with sendmmsg.
//!
//! Invariant: per datagram the worker allocates nothing, takes no lock and
//! logs nothing; counters go to a thread-local `Local` flushed every batch.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::rrl::{Limiter, Verdict};
use super::state::ServerState;
use crate::answer::{Outcome, Scratch, Transport};
use meridian_wire::truncate::truncate_response;

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

const BATCH: usize = 32;
const FLUSH_EVERY: Duration = Duration::from_millis(10);
const BUF: usize = 4096;

/// One UDP worker: receive a batch, answer each into its slot, send the batch.
/// `share` is the number of workers on this worker's listen address (the
/// rate limiter's share of the rate). On shutdown it answers what is already
/// queued on its socket, then returns.
pub fn udp_worker(shared: Arc<ServerState>, sock: std::net::UdpSocket, share: usize) {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let mut scratch = Scratch::default();
    let mut rx = vec![[0u8; BUF]; BATCH];
    let mut tx = vec![[0u8; BUF]; BATCH];
    // The kernel reads and writes these buffers through raw pointers taken
    // below (iovecs into `rx`/`tx`, msg_name into `addrs`, msg_iov into
    // `rx_iov`/`tx_iov`). That stays sound because none of these vectors is
    // resized, moved or dropped after the pointers are taken (their heap
    // blocks stay put until the function returns), and the kernel uses the
    // pointers only inside the recvmmsg/sendmmsg calls, while no Rust
    // reference into the buffers is live; between calls the loop re-borrows
    // them through the vectors as ordinary Rust memory.
    let mut addrs: Vec<libc::sockaddr_storage> =
        // SAFETY: sockaddr_storage is a plain-old-data C struct (integers
        // and byte arrays); all-zero bytes is a valid value (AF_UNSPEC).
        vec![unsafe { std::mem::zeroed() }; BATCH];
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
            // SAFETY: mmsghdr is a plain-old-data C struct of integers and
            // raw pointers; all-zero bytes is valid (null pointers, zero
            // lengths: no control data, no flags).
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = &mut addrs[i] as *mut _ as *mut _;
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_hdr.msg_iov = &mut rx_iov[i];
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    let mut tx_msgs: Vec<libc::mmsghdr> = (0..BATCH)
        // SAFETY: mmsghdr is a plain-old-data C struct of integers and raw
        // pointers; all-zero bytes is valid (null pointers, zero lengths).
        // Each entry is filled in before sendmmsg sees it.
        .map(|_| unsafe { std::mem::zeroed() })
        .collect();
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
        // SAFETY: `fd` is the socket `sock` owns, open for the whole loop.
        // `rx_msgs` holds BATCH headers, as many as `vlen` says; each points
        // at its own `addrs[i]` (msg_namelen, reset above, is its size) and
        // its own `rx_iov[i]`, which covers `rx[i]` (BUF bytes). All those
        // vectors outlive the call and are not resized or moved after the
        // pointers were taken, and no Rust reference into them is live
        // during the call. A null timeout is allowed.
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
        if rrl.as_ref().map(|l| l.cfg) != engine.settings.rrl {
            flush_rrl(&shared, &mut rrl);
            rrl = engine.settings.rrl.map(|c| Limiter::new(c, share));
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
                    Verdict::Slip => Some(truncate_response(&mut tx[i], rlen)),
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
            // SAFETY: `fd` is the socket `sock` owns. `tx_msgs[sent..nout]`
            // were all filled in for this batch (nout <= BATCH, and the
            // count passed is that slice's length); each points at an
            // `addrs[i]` the kernel filled (with its msg_namelen) and at
            // `tx_iov[i]`, whose iov_len (at most BUF) covers the response
            // written into `tx[i]`. The vectors are not resized or moved
            // after the pointers were taken, and no Rust reference into
            // them is live during the call; the kernel only reads.
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
                tx_iov[i].iov_len = truncate_response(&mut tx[i], tx_iov[i].iov_len);
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

fn flush_rrl(shared: &ServerState, rrl: &mut Option<Limiter>) {
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
            // SAFETY: the family is AF_INET, so the storage holds a
            // sockaddr_in; sockaddr_storage is larger than it and aligned
            // for any socket address, and every byte is initialised (zeroed
            // at first, then written by the kernel), with only integer
            // fields read. The reference borrows `sa` for no longer than it.
            let a = unsafe { &*(sa as *const _ as *const libc::sockaddr_in) };
            Some(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()))
        }
        libc::AF_INET6 => {
            // SAFETY: as above: the family is AF_INET6, sockaddr_storage is
            // large and aligned enough for a sockaddr_in6, and its bytes are
            // initialised integers and byte arrays.
            let a = unsafe { &*(sa as *const _ as *const libc::sockaddr_in6) };
            Some(IpAddr::from(a.sin6_addr.s6_addr))
        }
        _ => None,
    }
}
