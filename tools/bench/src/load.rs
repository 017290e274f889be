//! The load loop: batched UDP with sendmmsg/recvmmsg, one thread, no allocation per query.
//!
//! Why batched: a generator doing one `sendto` and one `recv` per query (dnsperf)
//! costs about as much CPU per query as a fast server, so on a small machine it,
//! not the server, becomes the bottleneck. One syscall per batch of up to
//! `batch` queries cuts that cost several-fold.
//!
//! How: all wire queries are built before the clock starts and are sent in a
//! cycle. Each outstanding query owns a 16-bit DNS ID, which indexes the
//! send-time table; replies are matched by ID. IDs are reused in FIFO order, so
//! a late reply is very unlikely to be taken for a newer query. The window
//! (`inflight`) and the optional fixed `rate` bound what is sent. A query with
//! no reply within `timeout` is counted lost and its ID freed; after the run the
//! loop stops sending and waits up to `timeout` for stragglers.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::hist::Histogram;

/// Largest batch per syscall.
pub const MAX_BATCH: usize = 256;
/// Send slot size: a query is at most 12 + 255 + 4 + 11 + 24 bytes.
const SEND_SLOT: usize = 512;
/// Receive slot size: larger than our advertised EDNS payload (1232).
const RECV_SLOT: usize = 2048;
/// Number of DNS IDs, so the ceiling on outstanding queries.
const IDS: usize = 1 << 16;
/// Socket buffer size we ask for, so bursts of a full window are not dropped.
const SOCK_BUF: libc::c_int = 4 << 20;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub server: SocketAddr,
    pub duration: Duration,
    pub inflight: usize,
    pub batch: usize,
    /// Fixed offered load in queries per second; `None` = as fast as the window allows.
    pub rate: Option<f64>,
    pub sockets: usize,
    /// A query without a reply after this long is lost (also the wait after the run).
    pub timeout: Duration,
}

/// What happened. Latencies are in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub server: String,
    pub queries: usize,
    pub inflight: usize,
    pub batch: usize,
    pub sockets: usize,
    pub rate: Option<f64>,
    /// Length of the sending phase, seconds.
    pub run_s: f64,
    pub sent: u64,
    /// Replies matched to a query (during the run and the wait after it).
    pub received: u64,
    /// Queries without a reply within the timeout.
    pub lost: u64,
    /// Replies that matched no outstanding query (late, duplicated or malformed).
    pub unmatched: u64,
    /// Failed send/receive syscalls (e.g. ECONNREFUSED when nothing listens).
    pub errors: u64,
    /// Replies received during the run, per second of run.
    pub qps: f64,
    pub lat_avg_ms: f64,
    pub lat_p50_ms: f64,
    pub lat_p99_ms: f64,
    pub lat_max_ms: f64,
    /// Mean queries in flight (Little's law: qps × mean latency). Near `inflight`
    /// means the server is the bottleneck; far below means the generator is.
    pub inflight_avg: f64,
    /// The generator's own CPU use over the run, percent of one core.
    pub client_cpu_pct: f64,
    pub rcodes: BTreeMap<String, u64>,
    /// Mean size of the matched replies, octets (DNS message, without UDP/IP).
    pub reply_bytes_avg: f64,
    /// Matched replies with TC set (did not fit the advertised 1232 octets).
    pub truncated: u64,
}

/// A batch of message slots plus the iovec/mmsghdr arrays the kernel reads.
struct Batch {
    buf: Vec<u8>,
    slot: usize,
    lens: Vec<usize>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
}

impl Batch {
    fn new(n: usize, slot: usize) -> Self {
        // SAFETY: iovec and mmsghdr are plain C structs; all-zero is a valid value.
        let zero_iov: libc::iovec = unsafe { std::mem::zeroed() };
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        Batch {
            buf: vec![0; n * slot],
            slot,
            lens: vec![slot; n],
            iov: vec![zero_iov; n],
            hdr: vec![zero_hdr; n],
        }
    }

    fn slot(&self, i: usize) -> &[u8] {
        &self.buf[i * self.slot..(i + 1) * self.slot]
    }

    fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.buf[i * self.slot..(i + 1) * self.slot]
    }

    /// Points the first `n` headers at their slots. Done right before every
    /// syscall, so the raw pointers are fresh and never outlive a borrow.
    fn arm(&mut self, n: usize) -> *mut libc::mmsghdr {
        let base = self.buf.as_mut_ptr();
        let iov = self.iov.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < n <= len of buf/slot, iov and hdr (all sized for the batch).
            unsafe {
                *iov.add(i) = libc::iovec {
                    iov_base: base.add(i * self.slot).cast(),
                    iov_len: self.lens[i],
                };
            }
            let h = &mut self.hdr[i].msg_hdr;
            h.msg_iov = unsafe { iov.add(i) };
            h.msg_iovlen = 1;
        }
        self.hdr.as_mut_ptr()
    }
}

/// Outstanding-query bookkeeping: send time per DNS ID and a FIFO of free IDs.
struct Ids {
    busy: Vec<bool>,
    sent_ns: Vec<u64>,
    free: VecDeque<u16>,
    outstanding: usize,
}

impl Ids {
    fn new() -> Self {
        Ids {
            busy: vec![false; IDS],
            sent_ns: vec![0; IDS],
            free: (0..IDS).map(|i| i as u16).collect(),
            outstanding: 0,
        }
    }

    fn take(&mut self, now_ns: u64) -> u16 {
        let id = self.free.pop_front().expect("caller checks free IDs");
        self.busy[id as usize] = true;
        self.sent_ns[id as usize] = now_ns;
        self.outstanding += 1;
        id
    }

    /// Gives back an ID whose query was never sent.
    fn untake(&mut self, id: u16) {
        self.busy[id as usize] = false;
        self.free.push_back(id);
        self.outstanding -= 1;
    }

    /// Completes `id`; returns its send time if it was outstanding.
    fn complete(&mut self, id: u16) -> Option<u64> {
        let i = id as usize;
        if !self.busy[i] {
            return None;
        }
        self.untake(id);
        Some(self.sent_ns[i])
    }

    /// Frees every ID sent before `cutoff_ns`; returns how many.
    fn expire(&mut self, cutoff_ns: u64) -> u64 {
        let mut n = 0;
        for i in 0..IDS {
            if self.busy[i] && self.sent_ns[i] < cutoff_ns {
                self.untake(i as u16);
                n += 1;
            }
        }
        n
    }
}

/// Running totals.
#[derive(Default)]
struct Counts {
    sent: u64,
    received: u64,
    received_in_run: u64,
    lost: u64,
    unmatched: u64,
    errors: u64,
    rcodes: [u64; 16],
    reply_bytes: u64,
    truncated: u64,
}

struct Sockets {
    socks: Vec<UdpSocket>,
    next: usize,
}

fn open_socket(server: SocketAddr) -> io::Result<UdpSocket> {
    let local: IpAddr = match server.ip() {
        IpAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
    };
    let s = UdpSocket::bind((local, 0))?;
    s.connect(server)?;
    s.set_nonblocking(true)?;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // Best effort: the kernel caps it at rmem_max/wmem_max.
        // SAFETY: valid fd, pointer to a c_int of the stated size.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&SOCK_BUF as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    Ok(s)
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Pre-built wire queries in one buffer, sent in a cycle.
pub struct Wire {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl Wire {
    pub fn new<'a>(queries: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut w = Wire {
            data: Vec::new(),
            spans: Vec::new(),
        };
        for q in queries {
            assert!((12..=SEND_SLOT).contains(&q.len()), "query size");
            w.spans.push((w.data.len(), q.len()));
            w.data.extend_from_slice(q);
        }
        w
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// Runs the load and returns the report. Refuses non-loopback servers: this tool
/// is for benchmarking on the local machine only.
pub fn run(cfg: &Config, wire: &Wire) -> io::Result<Report> {
    if !cfg.server.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "only loopback servers (127.0.0.1, ::1) are allowed",
        ));
    }
    if wire.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no queries"));
    }
    let batch = cfg.batch.clamp(1, MAX_BATCH);
    let window = cfg.inflight.clamp(1, IDS - 1);
    let mut socks = Sockets {
        socks: (0..cfg.sockets.max(1))
            .map(|_| open_socket(cfg.server))
            .collect::<io::Result<_>>()?,
        next: 0,
    };
    let mut tx = Batch::new(batch, SEND_SLOT);
    let mut rx = Batch::new(batch, RECV_SLOT);
    let mut pfds: Vec<libc::pollfd> = socks
        .socks
        .iter()
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut ids = Ids::new();
    let mut hist = Histogram::new();
    let mut c = Counts::default();
    let timeout_ns = cfg.timeout.as_nanos() as u64;
    let run_ns = cfg.duration.as_nanos() as u64;
    let mut qi = 0usize;
    let mut last_sweep = 0u64;

    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let ns = || t0.elapsed().as_nanos() as u64;
    let mut now = 0u64;
    while now < run_ns {
        // How many to send now: window, rate, batch, free IDs.
        let mut want = window.saturating_sub(ids.outstanding);
        let mut wait_ns = 10_000_000u64;
        if let Some(rate) = cfg.rate {
            let due = (now as f64 * rate / 1e9) as u64;
            let allowed = due.saturating_sub(c.sent) as usize;
            if allowed < want {
                want = allowed;
                // Sleep until the next query is due (ceil, at least 1 µs).
                let next_ns = ((c.sent + 1) as f64 * 1e9 / rate) as u64;
                wait_ns = next_ns.saturating_sub(now).max(1_000);
            }
        }
        let want = want.min(batch).min(ids.free.len());
        let sent = if want > 0 {
            send_batch(
                &mut socks, &mut tx, &mut ids, wire, &mut qi, want, now, &mut c,
            )
        } else {
            0
        };
        let got = recv_all(&mut socks, &mut rx, &mut ids, &mut hist, t0, &mut c, true);
        now = ns();
        if sent == 0 && got == 0 {
            wait(&mut pfds, wait_ns.min(run_ns.saturating_sub(now)));
            now = ns();
        }
        if now - last_sweep > 100_000_000 {
            last_sweep = now;
            c.lost += ids.expire(now.saturating_sub(timeout_ns));
        }
    }
    let run_s = now as f64 / 1e9;
    let cpu_run = cpu_time() - cpu0;

    // Drain: no more sending; wait up to `timeout` for the replies still due.
    let end = now + timeout_ns;
    while ids.outstanding > 0 && now < end {
        if recv_all(&mut socks, &mut rx, &mut ids, &mut hist, t0, &mut c, false) == 0 {
            wait(&mut pfds, (end - now).min(10_000_000));
        }
        now = ns();
    }
    c.lost += ids.outstanding as u64;

    let qps = c.received_in_run as f64 / run_s;
    Ok(Report {
        server: cfg.server.to_string(),
        queries: wire.len(),
        inflight: window,
        batch,
        sockets: socks.socks.len(),
        rate: cfg.rate,
        run_s,
        sent: c.sent,
        received: c.received,
        lost: c.lost,
        unmatched: c.unmatched,
        errors: c.errors,
        qps,
        lat_avg_ms: hist.mean_ms(),
        lat_p50_ms: hist.quantile_ms(0.50),
        lat_p99_ms: hist.quantile_ms(0.99),
        lat_max_ms: hist.max_ms(),
        inflight_avg: qps * hist.mean_ms() / 1e3,
        client_cpu_pct: 100.0 * cpu_run.as_secs_f64() / run_s,
        rcodes: c
            .rcodes
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (rcode_name(i).to_string(), n))
            .collect(),
        reply_bytes_avg: if c.received > 0 {
            c.reply_bytes as f64 / c.received as f64
        } else {
            0.0
        },
        truncated: c.truncated,
    })
}

/// Fills up to `want` slots from the query cycle, sends them in one sendmmsg on
/// the next socket, and returns how many the kernel took.
#[allow(clippy::too_many_arguments)]
fn send_batch(
    socks: &mut Sockets,
    tx: &mut Batch,
    ids: &mut Ids,
    wire: &Wire,
    qi: &mut usize,
    want: usize,
    now_ns: u64,
    c: &mut Counts,
) -> usize {
    for i in 0..want {
        let (off, len) = wire.spans[*qi];
        *qi = (*qi + 1) % wire.spans.len();
        let id = ids.take(now_ns);
        let slot = tx.slot_mut(i);
        slot[..len].copy_from_slice(&wire.data[off..off + len]);
        slot[..2].copy_from_slice(&id.to_be_bytes());
        tx.lens[i] = len;
    }
    let fd = socks.socks[socks.next].as_raw_fd();
    socks.next = (socks.next + 1) % socks.socks.len();
    let hdr = tx.arm(want);
    // SAFETY: hdr points at `want` armed headers whose buffers live in `tx`.
    let r = unsafe { libc::sendmmsg(fd, hdr, want as libc::c_uint, 0) };
    let n = if r < 0 {
        c.errors += 1;
        0
    } else {
        r as usize
    };
    // Queries the kernel did not take go back as unsent (their IDs were not used on the wire).
    for i in n..want {
        let s = tx.slot(i);
        ids.untake(u16::from_be_bytes([s[0], s[1]]));
    }
    // The unsent queries are skipped in the cycle rather than rewound; it does not matter.
    c.sent += n as u64;
    n
}

/// One non-blocking recvmmsg per socket; matches replies. Returns replies read.
fn recv_all(
    socks: &mut Sockets,
    rx: &mut Batch,
    ids: &mut Ids,
    hist: &mut Histogram,
    t0: Instant,
    c: &mut Counts,
    in_run: bool,
) -> usize {
    let mut total = 0;
    for s in &socks.socks {
        let nmsg = rx.hdr.len();
        let hdr = rx.arm(nmsg);
        // SAFETY: hdr points at `nmsg` armed headers whose buffers live in `rx`.
        let r = unsafe {
            libc::recvmmsg(
                s.as_raw_fd(),
                hdr,
                nmsg as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error().raw_os_error();
            if e != Some(libc::EAGAIN) && e != Some(libc::EWOULDBLOCK) {
                c.errors += 1;
            }
            continue;
        }
        let now = t0.elapsed().as_nanos() as u64;
        for i in 0..r as usize {
            let len = rx.hdr[i].msg_len as usize;
            let m = rx.slot(i);
            // A reply has QR set and at least a header.
            if len < 12 || m[2] & 0x80 == 0 {
                c.unmatched += 1;
                continue;
            }
            match ids.complete(u16::from_be_bytes([m[0], m[1]])) {
                Some(sent) => {
                    hist.record(now.saturating_sub(sent));
                    c.rcodes[(m[3] & 0x0f) as usize] += 1;
                    c.reply_bytes += len as u64;
                    c.truncated += u64::from(m[2] & 0x02 != 0);
                    c.received += 1;
                    c.received_in_run += in_run as u64;
                }
                None => c.unmatched += 1,
            }
        }
        total += r as usize;
    }
    total
}

/// Blocks until a socket is readable or `ns` nanoseconds pass.
fn wait(pfds: &mut [libc::pollfd], ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: pfds is a valid slice of pollfd; ts lives across the call.
    unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

pub fn rcode_name(rcode: usize) -> &'static str {
    const NAMES: [&str; 16] = [
        "NOERROR",
        "FORMERR",
        "SERVFAIL",
        "NXDOMAIN",
        "NOTIMP",
        "REFUSED",
        "YXDOMAIN",
        "YXRRSET",
        "NXRRSET",
        "NOTAUTH",
        "NOTZONE",
        "DSOTYPENI",
        "RCODE12",
        "RCODE13",
        "RCODE14",
        "RCODE15",
    ];
    NAMES[rcode & 0x0f]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_fifo_and_expire() {
        let mut ids = Ids::new();
        let a = ids.take(10);
        let b = ids.take(20);
        assert_eq!((a, b), (0, 1));
        assert_eq!(ids.complete(a), Some(10));
        assert_eq!(ids.complete(a), None, "a duplicate reply does not match");
        // The freed ID goes to the back of the queue, not the front.
        assert_eq!(ids.take(30), 2);
        assert_eq!(ids.expire(25), 1); // b, sent at 20
        assert_eq!(ids.outstanding, 1);
        assert_eq!(ids.complete(b), None);
    }

    #[test]
    fn refuses_remote_servers() {
        let cfg = Config {
            server: "192.0.2.1:53".parse().unwrap(),
            duration: Duration::from_millis(10),
            inflight: 1,
            batch: 1,
            rate: None,
            sockets: 1,
            timeout: Duration::from_millis(10),
        };
        let q = crate::query::parse_line("www.example.test A")
            .unwrap()
            .to_wire();
        let err = run(&cfg, &Wire::new([q.as_slice()])).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    /// End to end against a tiny echo responder on loopback (it sets QR and replies).
    #[test]
    fn loop_against_loopback_echo() {
        let srv = UdpSocket::bind("127.0.0.1:0").unwrap();
        srv.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let addr = srv.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let th = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            // Bounded: ends when told, or after 5 s at most.
            let t = Instant::now();
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) && t.elapsed().as_secs() < 5 {
                if let Ok((n, from)) = srv.recv_from(&mut buf) {
                    buf[2] |= 0x80;
                    buf[3] = (buf[3] & 0xf0) | 3; // NXDOMAIN, to see rcodes counted
                    let _ = srv.send_to(&buf[..n], from);
                }
            }
        });
        let qs: Vec<Vec<u8>> = ["a.test A", "b.test AAAA 10.0.0.0/8"]
            .iter()
            .map(|l| crate::query::parse_line(l).unwrap().to_wire())
            .collect();
        let cfg = Config {
            server: addr,
            duration: Duration::from_millis(300),
            inflight: 8,
            batch: 4,
            rate: Some(2000.0),
            sockets: 2,
            timeout: Duration::from_millis(500),
        };
        let r = run(&cfg, &Wire::new(qs.iter().map(|q| q.as_slice()))).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        th.join().unwrap();
        assert!(r.sent > 20 && r.sent <= 700, "rate-bounded: {}", r.sent);
        assert_eq!(r.received + r.lost, r.sent);
        assert_eq!(r.rcodes.get("NXDOMAIN"), Some(&r.received));
        assert!(r.lat_p50_ms <= r.lat_p99_ms && r.lat_p99_ms <= r.lat_max_ms);
    }
}
