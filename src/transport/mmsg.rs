//! Batched UDP I/O: a `Batch` owns the buffers for up to N datagrams and
//! reads and writes them with one recvmmsg/sendmmsg each. Every `unsafe`
//! block of the UDP path is in this file, so that `udp` is safe code.
//!
//! Invariants:
//! - Fixed capacity: every buffer is allocated once, in `Batch::new`, and
//!   never resized, so there is no allocation per datagram or per batch.
//! - The kernel reaches the buffers only through raw pointers (iovecs,
//!   msg_name, msg_iov) that `recv`/`send` derive from the owned Vecs with
//!   `as_mut_ptr` right before the syscall and never use after it returns.
//!   No Rust reference into the buffers is created between deriving them
//!   and the syscall, so no raw pointer outlives a borrow (Stacked Borrows).
//! - A response length never exceeds the slot size (`set_response_len`
//!   checks), so the kernel never reads past a send buffer.
//! - Each slot has a fixed control buffer (`Ctl`): on a wildcard socket
//!   (IP_PKTINFO / IPV6_RECVPKTINFO set) `recv` reads the address the
//!   datagram was sent to from it, and `send` writes that address back as
//!   the reply's source (IP_PKTINFO / IPV6_PKTINFO), so that a query to a
//!   secondary address is not answered from another one (RFC 1122
//!   §4.1.3.5: reply from the address the request was sent to).

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Size of the address buffer handed to the kernel for each datagram.
const NAMELEN: libc::socklen_t = size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// One slot's control buffer: room for a pktinfo message of either family
/// (40 octets for IPv6 on 64-bit) and one more; u64s for cmsghdr alignment.
type Ctl = [u64; 12];
const CTL_LEN: usize = size_of::<Ctl>();

/// The local address a datagram was sent to, from its pktinfo, and the
/// interface it came in on (needed only to reply from an IPv6 link-local).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Local {
    None,
    /// Octets in network order.
    V4([u8; 4]),
    V6([u8; 16], u32),
}

/// The buffers for up to `capacity` datagrams: for each slot a request
/// buffer, a response buffer, the peer address and lengths; plus a queue
/// of the slots whose response is to be sent, in order.
pub(super) struct Batch {
    /// Bytes per request and per response buffer.
    slot: usize,
    /// Request buffers, `slot` bytes each, back to back.
    rx: Vec<u8>,
    /// Response buffers, `slot` bytes each, back to back.
    tx: Vec<u8>,
    /// Peer address of each received datagram (its response goes there).
    addrs: Vec<libc::sockaddr_storage>,
    /// Length of each `addrs` entry, as the kernel reported it.
    namelens: Vec<libc::socklen_t>,
    rx_lens: Vec<usize>,
    /// Whether the datagram was longer than its buffer (MSG_TRUNC).
    truncated: Vec<bool>,
    tx_lens: Vec<usize>,
    /// Control buffer of each slot: pktinfo in on `recv`, out on `send`.
    ctl: Vec<Ctl>,
    /// Where each datagram was sent to, when the socket reports it.
    local: Vec<Local>,
    /// `queue[..queued]`: slots whose response `send` writes, in order.
    queue: Vec<usize>,
    queued: usize,
    /// Datagrams held from the last `recv`.
    received: usize,
    /// Scratch for the kernel, re-armed before every syscall.
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
}

impl Batch {
    /// Buffers for `capacity` datagrams of up to `slot` bytes each.
    pub(super) fn new(capacity: usize, slot: usize) -> Self {
        assert!(capacity > 0 && capacity <= u32::MAX as usize);
        // Checked: a wrapped size would leave the slots past the buffers.
        let bytes = capacity.checked_mul(slot).expect("batch size overflows");
        // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs
        // of integers, byte arrays and raw pointers; all-zero bytes is a
        // valid value of each (AF_UNSPEC, null pointers, zero lengths).
        let (addr, iov, hdr): (libc::sockaddr_storage, libc::iovec, libc::mmsghdr) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed(), std::mem::zeroed()) };
        Batch {
            slot,
            rx: vec![0; bytes],
            tx: vec![0; bytes],
            addrs: vec![addr; capacity],
            namelens: vec![0; capacity],
            rx_lens: vec![0; capacity],
            truncated: vec![false; capacity],
            tx_lens: vec![0; capacity],
            ctl: vec![[0; 12]; capacity],
            local: vec![Local::None; capacity],
            queue: vec![0; capacity],
            queued: 0,
            received: 0,
            iov: vec![iov; capacity],
            hdr: vec![hdr; capacity],
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.hdr.len()
    }

    /// Receives up to `capacity` datagrams into slots `0..n` and returns n
    /// (never 0). With `wait`, blocks for the first datagram (up to the
    /// socket's read timeout) and then takes what else is queued;
    /// without, takes only what is queued. Forgets the previous batch,
    /// including its send queue.
    pub(super) fn recv(&mut self, fd: BorrowedFd<'_>, wait: bool) -> io::Result<usize> {
        self.received = 0;
        self.queued = 0;
        let cap = self.capacity();
        // Arm: fresh pointers into the owned buffers, used only by the call.
        let rx = self.rx.as_mut_ptr();
        for (i, v) in self.iov.iter_mut().enumerate() {
            *v = libc::iovec {
                iov_base: rx.wrapping_add(i * self.slot).cast(),
                iov_len: self.slot,
            };
        }
        let iov = self.iov.as_mut_ptr();
        let addrs = self.addrs.as_mut_ptr();
        let ctl = self.ctl.as_mut_ptr();
        for (i, h) in self.hdr.iter_mut().enumerate() {
            arm(h, addrs.wrapping_add(i), NAMELEN, iov.wrapping_add(i));
            h.msg_hdr.msg_control = ctl.wrapping_add(i).cast();
            h.msg_hdr.msg_controllen = CTL_LEN as _;
        }
        let hdr = self.hdr.as_mut_ptr();
        let flags = if wait {
            libc::MSG_WAITFORONE
        } else {
            libc::MSG_DONTWAIT
        };
        // SAFETY: `fd` is an open socket for the call (BorrowedFd). `hdr`
        // points at `cap` headers, as many as `vlen` says. Each header's
        // msg_name points at its own `addrs[i]` with msg_namelen its size,
        // and its msg_iov at its own `iov[i]`, which covers the `slot`
        // bytes of request buffer i inside `rx`, and its msg_control at its
        // own `ctl[i]` with msg_controllen its size. All those
        // pointers were derived above from the Vecs, which are not resized
        // or touched through a reference until the call returns, so the
        // kernel's writes stay inside live, exclusively owned memory. A
        // null timeout is allowed.
        let n =
            unsafe { libc::recvmmsg(fd.as_raw_fd(), hdr, cap as u32, flags, std::ptr::null_mut()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (n as usize).min(cap);
        for i in 0..n {
            let h = &self.hdr[i];
            self.rx_lens[i] = (h.msg_len as usize).min(self.slot);
            self.namelens[i] = h.msg_hdr.msg_namelen.min(NAMELEN);
            self.truncated[i] = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            // usize on glibc, u32 on musl.
            #[allow(clippy::unnecessary_cast)]
            let len = (h.msg_hdr.msg_controllen as usize).min(CTL_LEN);
            self.local[i] = pktinfo(&mut self.ctl[i], len);
        }
        self.received = n;
        Ok(n)
    }

    /// The bytes of datagram `i` (`slot` gives them with the response).
    #[allow(dead_code)] // the worker uses `slot`; kept for callers and tests
    pub(super) fn request(&self, i: usize) -> &[u8] {
        assert!(i < self.received);
        let at = i * self.slot;
        &self.rx[at..at + self.rx_lens[i]]
    }

    /// Whether datagram `i` was longer than its buffer, so that `request`
    /// holds only its first bytes (the worker drops it).
    pub(super) fn truncated(&self, i: usize) -> bool {
        assert!(i < self.received);
        self.truncated[i]
    }

    /// Where datagram `i` came from; None for an address family other than
    /// IPv4 or IPv6.
    pub(super) fn peer(&self, i: usize) -> Option<SocketAddr> {
        assert!(i < self.received);
        sockaddr(&self.addrs[i])
    }

    /// The address datagram `i` was sent to, if the socket reports it (a
    /// wildcard socket with pktinfo on); its reply leaves from there.
    #[cfg(test)]
    pub(super) fn local(&self, i: usize) -> Local {
        assert!(i < self.received);
        self.local[i]
    }

    /// Datagram `i` and its whole response buffer, to answer into.
    pub(super) fn slot(&mut self, i: usize) -> (&[u8], &mut [u8]) {
        assert!(i < self.received);
        let at = i * self.slot;
        (
            &self.rx[at..at + self.rx_lens[i]],
            &mut self.tx[at..at + self.slot],
        )
    }

    /// The whole response buffer of slot `i`.
    pub(super) fn response_mut(&mut self, i: usize) -> &mut [u8] {
        let at = i * self.slot;
        &mut self.tx[at..at + self.slot]
    }

    /// Length of the response in slot `i` (0 until set).
    pub(super) fn response_len(&self, i: usize) -> usize {
        self.tx_lens[i]
    }

    /// Sets the length of the response in slot `i`.
    pub(super) fn set_response_len(&mut self, i: usize, n: usize) {
        // The kernel reads `n` bytes of the slot: never past it.
        assert!(n <= self.slot);
        self.tx_lens[i] = n;
    }

    /// Queues the response in slot `i` (`n` bytes) for `send`, to the peer
    /// datagram `i` came from. At most once per slot and batch.
    pub(super) fn queue_response(&mut self, i: usize, n: usize) {
        assert!(i < self.received);
        self.set_response_len(i, n);
        self.queue[self.queued] = i;
        self.queued += 1;
    }

    /// Responses queued since the last `recv`.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// The slot of the `k`-th queued response.
    pub(super) fn queued_slot(&self, k: usize) -> usize {
        assert!(k < self.queued);
        self.queue[k]
    }

    /// Sends queued responses `from..queued()` with one sendmmsg and
    /// returns how many the kernel took, from `from` on (0 if none were
    /// left). An error is that of response `from`: the caller decides
    /// whether to retry it (e.g. shortened) or to skip it.
    pub(super) fn send(&mut self, fd: BorrowedFd<'_>, from: usize) -> io::Result<usize> {
        if from >= self.queued {
            return Ok(0);
        }
        let count = self.queued - from;
        // Arm, as in `recv`: response k goes out through iov[k] and hdr[k].
        let tx = self.tx.as_mut_ptr();
        for k in from..self.queued {
            let i = self.queue[k];
            self.iov[k] = libc::iovec {
                iov_base: tx.wrapping_add(i * self.slot).cast(),
                iov_len: self.tx_lens[i],
            };
        }
        let iov = self.iov.as_mut_ptr();
        let addrs = self.addrs.as_mut_ptr();
        let ctl = self.ctl.as_mut_ptr();
        for k in from..self.queued {
            let i = self.queue[k];
            let namelen = self.namelens[i];
            let h = &mut self.hdr[k];
            arm(h, addrs.wrapping_add(i), namelen, iov.wrapping_add(k));
            let c = ctl.wrapping_add(i);
            // SAFETY: `c` points at `ctl[i]` (i < capacity), derived above
            // from the Vec, with no reference into it alive.
            let len = unsafe { put_pktinfo(c, self.local[i]) };
            if len > 0 {
                h.msg_hdr.msg_control = c.cast();
                h.msg_hdr.msg_controllen = len as _;
            }
        }
        let hdr = self.hdr.as_mut_ptr().wrapping_add(from);
        // SAFETY: `fd` is an open socket for the call (BorrowedFd). `hdr`
        // points at headers `from..queued`, `count` of them, all inside
        // `self.hdr` and armed above. Each names the peer address of a
        // received slot (`addrs[i]`, i < capacity as `queue_response`
        // asserts, with the length the kernel gave) and points at its own
        // `iov[k]`, which covers the first `tx_lens[i]` bytes of response
        // buffer i inside `tx` (at most `slot`, checked by
        // `set_response_len`); its control data, if any, is the pktinfo
        // message `put_pktinfo` wrote in its own `ctl[i]`, msg_controllen
        // long (at most `CTL_LEN`). The pointers were
        // derived above from the Vecs, which are not resized or touched
        // through a reference until the call returns; the kernel reads the
        // buffers and writes only `msg_len` in the headers.
        let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), hdr, count as u32, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

/// Points one header at one address and one iovec, with no control data.
fn arm(
    h: &mut libc::mmsghdr,
    name: *mut libc::sockaddr_storage,
    namelen: libc::socklen_t,
    iov: *mut libc::iovec,
) {
    h.msg_len = 0;
    let m = &mut h.msg_hdr;
    m.msg_name = name.cast();
    m.msg_namelen = namelen;
    m.msg_iov = iov;
    m.msg_iovlen = 1;
    m.msg_control = std::ptr::null_mut();
    m.msg_controllen = 0;
    m.msg_flags = 0;
}

/// The destination of a received datagram, from the pktinfo message among
/// the first `len` octets of its control buffer.
fn pktinfo(ctl: &mut Ctl, len: usize) -> Local {
    // SAFETY: msghdr is a C struct of integers and pointers; zero is valid.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_control = ctl.as_mut_ptr().cast();
    m.msg_controllen = len.min(CTL_LEN) as _;
    let mut local = Local::None;
    // SAFETY: `m` describes the first `len` octets of `ctl`, which live and
    // are initialised (zeroed in `new`, then written by the kernel) for the
    // whole loop; CMSG_FIRSTHDR / CMSG_NXTHDR return only headers that lie
    // inside those octets (or null), CMSG_DATA points into the header's own
    // message, and its payload is read unaligned only when cmsg_len says
    // it holds the whole pktinfo struct.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let have = ((*c).cmsg_len as usize).saturating_sub(data.offset_from(c.cast()) as usize);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) if have >= size_of::<libc::in_pktinfo>() => {
                    let p: libc::in_pktinfo = std::ptr::read_unaligned(data.cast());
                    // The local address the kernel would answer from: the
                    // header destination for a unicast one, the interface's
                    // address for a broadcast.
                    local = Local::V4(p.ipi_spec_dst.s_addr.to_ne_bytes());
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO)
                    if have >= size_of::<libc::in6_pktinfo>() =>
                {
                    let p: libc::in6_pktinfo = std::ptr::read_unaligned(data.cast());
                    local = Local::V6(p.ipi6_addr.s6_addr, p.ipi6_ifindex);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
    }
    local
}

/// Writes the pktinfo message that makes a reply leave from `local` at the
/// start of the control buffer `c`, and returns its length (0 for none).
///
/// # Safety
/// `c` must point at a live `Ctl` that no reference aliases.
unsafe fn put_pktinfo(c: *mut Ctl, local: Local) -> usize {
    let (level, ty, plen) = match local {
        Local::None => return 0,
        Local::V4(_) => (
            libc::IPPROTO_IP,
            libc::IP_PKTINFO,
            size_of::<libc::in_pktinfo>(),
        ),
        Local::V6(..) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_PKTINFO,
            size_of::<libc::in6_pktinfo>(),
        ),
    };
    // SAFETY: CMSG_SPACE is arithmetic only.
    let space = unsafe { libc::CMSG_SPACE(plen as u32) } as usize;
    debug_assert!(space <= CTL_LEN);
    // SAFETY: the caller's contract: `c` is a live, unaliased Ctl of CTL_LEN octets, more
    // than `space`, aligned for cmsghdr (u64s); the header goes at its start
    // and the payload at CMSG_DATA, inside `space`.
    unsafe {
        let h = c.cast::<libc::cmsghdr>();
        std::ptr::write_bytes(c.cast::<u8>(), 0, space);
        (*h).cmsg_len = libc::CMSG_LEN(plen as u32) as _;
        (*h).cmsg_level = level;
        (*h).cmsg_type = ty;
        let data = libc::CMSG_DATA(h);
        match local {
            Local::V4(a) => std::ptr::write_unaligned(
                data.cast(),
                libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                },
            ),
            Local::V6(a, ifindex) => {
                // The interface matters only for a link-local source;
                // otherwise the route picks it, as for any reply.
                let link_local = a[0] == 0xfe && a[1] & 0xc0 == 0x80;
                std::ptr::write_unaligned(
                    data.cast(),
                    libc::in6_pktinfo {
                        ipi6_addr: libc::in6_addr { s6_addr: a },
                        ipi6_ifindex: if link_local { ifindex } else { 0 },
                    },
                )
            }
            Local::None => {}
        }
    }
    space
}

fn sockaddr(sa: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match sa.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family is AF_INET, so the storage holds a
            // sockaddr_in; sockaddr_storage is larger than it and aligned
            // for any socket address, and every byte is initialised (zeroed
            // in `new`, then written by the kernel), with only integer
            // fields read. The reference borrows `sa` for no longer than it.
            let a = unsafe { &*(sa as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes());
            Some(SocketAddr::new(ip, u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above: the family is AF_INET6, sockaddr_storage is
            // large and aligned enough for a sockaddr_in6, and its bytes are
            // initialised integers and byte arrays.
            let a = unsafe { &*(sa as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = IpAddr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip, u16::from_be(a.sin6_port)))
        }
        _ => None,
    }
}

/// Sets an int socket option that socket2 has no method for.
pub(super) fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    opt: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `fd` is an open socket for the call (BorrowedFd); the option
    // value is a live c_int and the length passed is its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn round_trip_with_peer_and_truncation() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let to = server.local_addr().unwrap();
        client.send_to(b"one", to).unwrap();
        client.send_to(&[7u8; 100], to).unwrap();
        client.send_to(b"three", to).unwrap();

        let mut b = Batch::new(4, 64);
        let mut n = 0;
        while n < 3 {
            // The datagrams may not all be queued yet when recv returns.
            let k = b.recv(server.as_fd(), true).unwrap();
            for i in 0..k {
                assert_eq!(b.peer(i), Some(client.local_addr().unwrap()));
                match n + i {
                    0 => assert_eq!((b.request(i), b.truncated(i)), (&b"one"[..], false)),
                    // Longer than the 64-byte slot: cut short and flagged.
                    1 => assert_eq!((b.request(i), b.truncated(i)), (&[7u8; 64][..], true)),
                    _ => assert_eq!((b.request(i), b.truncated(i)), (&b"three"[..], false)),
                }
                // Answer each with its request reversed.
                let (req, resp) = b.slot(i);
                let len = req.len();
                for (o, x) in resp.iter_mut().zip(req.iter().rev()) {
                    *o = *x;
                }
                b.queue_response(i, len);
            }
            assert_eq!(b.send(server.as_fd(), 0).unwrap(), k);
            n += k;
        }
        let mut buf = [0u8; 128];
        let mut got = Vec::new();
        for _ in 0..3 {
            let (len, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!(from, to);
            got.push(buf[..len].to_vec());
        }
        assert_eq!(got, vec![b"eno".to_vec(), vec![7u8; 64], b"eerht".to_vec()]);
        assert_eq!(b.send(server.as_fd(), b.queued()).unwrap(), 0);
    }

    /// A wildcard socket with IP_PKTINFO: the destination of each datagram
    /// is read, and its reply leaves from that address, not the route's.
    #[test]
    fn wildcard_reply_leaves_from_the_destination() {
        let server = UdpSocket::bind("0.0.0.0:0").unwrap();
        set_int_option(server.as_fd(), libc::IPPROTO_IP, libc::IP_PKTINFO, 1).unwrap();
        let port = server.local_addr().unwrap().port();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut b = Batch::new(2, 64);
        for dst in ["127.0.0.1", "127.0.0.9"] {
            let to: SocketAddr = format!("{dst}:{port}").parse().unwrap();
            client.send_to(b"ping", to).unwrap();
            assert_eq!(b.recv(server.as_fd(), true).unwrap(), 1);
            let want: std::net::Ipv4Addr = dst.parse().unwrap();
            assert_eq!(b.local(0), Local::V4(want.octets()));
            b.queue_response(0, 4);
            assert_eq!(b.send(server.as_fd(), 0).unwrap(), 1);
            let mut buf = [0u8; 16];
            let (_, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!(from, to);
        }
    }

    #[test]
    fn empty_socket_without_wait_is_an_error() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut b = Batch::new(2, 16);
        let e = b.recv(s.as_fd(), false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    #[should_panic]
    fn response_longer_than_slot_is_refused() {
        let mut b = Batch::new(1, 16);
        b.set_response_len(0, 17);
    }
}
