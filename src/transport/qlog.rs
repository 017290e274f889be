//! The optional query log (issue #15): sampled queries and their responses
//! as dnstap (<https://dnstap.info>) `AUTH_RESPONSE` messages in Frame
//! Streams framing, appended to a file by one writer thread.
//!
//! The transports copy a sampled exchange into a bounded ring of slots
//! allocated once at start (`QueryLog::new`); a full ring drops the entry
//! and counts it, so logging never blocks, never allocates per query and
//! never slows answering. The writer thread drains the ring, encodes and
//! writes. When `query_log` is not set there is no `QueryLog` at all and a
//! UDP worker tests one `Option` it read once.
//!
//! The ring is a bounded multi-producer queue (D. Vyukov's, a sequence
//! number per slot) in safe code: each slot's data sits in a `Mutex` that
//! the sequence numbers already make exclusive, so locking it is one
//! uncontended atomic and never waits.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::state::ServerState;
use crate::config::QueryLogConfig;
use crate::metrics::Metrics;

/// Slots in the ring (a power of two).
const SLOTS: usize = 512;
/// Octets of query plus response one slot holds (a UDP exchange always
/// fits; a larger TCP one is dropped and counted).
const SLOT_BYTES: usize = 8192;
/// The writer's pause when the ring is empty (no wake-up per query).
const IDLE: Duration = Duration::from_millis(10);

/// The Frame Streams content type of dnstap.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// One logged exchange, as a transport saw it.
struct Entry {
    tcp: bool,
    client: SocketAddr,
    server: Option<SocketAddr>,
    query_time: (u64, u32),
    response_time: (u64, u32),
    qlen: usize,
    rlen: usize,
    buf: Box<[u8]>,
}

struct Slot {
    seq: AtomicUsize,
    entry: Mutex<Entry>,
}

/// The ring the transports write sampled exchanges into.
pub struct QueryLog {
    slots: Box<[Slot]>,
    head: AtomicUsize,
    tail: AtomicUsize,
    /// Log one query in `sample`.
    pub sample: u32,
    tcp_seen: AtomicU64,
    stop: AtomicBool,
}

/// Seconds and nanoseconds since the epoch (a vDSO call, no allocation).
pub fn now() -> (u64, u32) {
    let d = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

impl QueryLog {
    /// The ring, all slots allocated now (4 MiB).
    pub fn new(cfg: &QueryLogConfig) -> QueryLog {
        let slots = (0..SLOTS)
            .map(|i| Slot {
                seq: AtomicUsize::new(i),
                entry: Mutex::new(Entry {
                    tcp: false,
                    client: SocketAddr::from(([0, 0, 0, 0], 0)),
                    server: None,
                    query_time: (0, 0),
                    response_time: (0, 0),
                    qlen: 0,
                    rlen: 0,
                    buf: vec![0u8; SLOT_BYTES].into_boxed_slice(),
                }),
            })
            .collect();
        QueryLog {
            slots,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            sample: cfg.sample.max(1),
            tcp_seen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// Should this TCP query be logged? (One in `sample`, across all
    /// connections; UDP workers count on their own.)
    pub fn sample_tcp(&self) -> bool {
        self.sample == 1
            || self
                .tcp_seen
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(u64::from(self.sample))
    }

    /// Copy one exchange into the ring; false (and counted) if it is full
    /// or the messages do not fit a slot.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &self,
        m: &Metrics,
        tcp: bool,
        client: SocketAddr,
        server: Option<SocketAddr>,
        query_time: (u64, u32),
        query: &[u8],
        response: &[u8],
    ) -> bool {
        let dropped = || {
            m.query_log_dropped.fetch_add(1, Ordering::Relaxed);
            false
        };
        if query.len() + response.len() > SLOT_BYTES {
            return dropped();
        }
        let mask = SLOTS - 1;
        let mut pos = self.head.load(Ordering::Relaxed);
        let slot = loop {
            let slot = &self.slots[pos & mask];
            let seq = slot.seq.load(Ordering::Acquire);
            match seq.cmp(&pos) {
                std::cmp::Ordering::Equal => match self.head.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break slot,
                    Err(p) => pos = p,
                },
                // The slot still holds an entry from a lap ago: full.
                std::cmp::Ordering::Less => return dropped(),
                std::cmp::Ordering::Greater => pos = self.head.load(Ordering::Relaxed),
            }
        };
        {
            let mut e = slot.entry.lock().unwrap_or_else(|p| p.into_inner());
            e.tcp = tcp;
            e.client = client;
            e.server = server;
            e.query_time = query_time;
            e.response_time = now();
            e.qlen = query.len();
            e.rlen = response.len();
            e.buf[..query.len()].copy_from_slice(query);
            e.buf[query.len()..query.len() + response.len()].copy_from_slice(response);
        }
        slot.seq.store(pos + 1, Ordering::Release);
        true
    }

    /// Take the oldest entry, encoded as a dnstap message into `out`
    /// (cleared first); false when the ring is empty. One consumer only.
    fn pop_encoded(&self, ident: &Ident, out: &mut Vec<u8>) -> bool {
        let pos = self.tail.load(Ordering::Relaxed);
        let slot = &self.slots[pos & (SLOTS - 1)];
        if slot.seq.load(Ordering::Acquire) != pos + 1 {
            return false;
        }
        {
            let e = slot.entry.lock().unwrap_or_else(|p| p.into_inner());
            out.clear();
            encode(ident, &e, out);
        }
        self.tail.store(pos + 1, Ordering::Relaxed);
        slot.seq.store(pos + SLOTS, Ordering::Release);
        true
    }

    /// Ask the writer to drain what is queued, write STOP and exit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// What every frame names as its source.
struct Ident {
    identity: Vec<u8>,
    version: Vec<u8>,
}

/// Open the log file (before privileges are dropped) and start the writer
/// thread; it writes the START frame now and STOP after `QueryLog::stop`.
pub fn start_writer(
    shared: Arc<ServerState>,
    log: Arc<QueryLog>,
    cfg: &QueryLogConfig,
    identity: Option<&str>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&cfg.path)?;
    let ident = Ident {
        identity: identity.unwrap_or("meridian").as_bytes().to_vec(),
        version: format!("meridian {}", env!("CARGO_PKG_VERSION")).into_bytes(),
    };
    let path = cfg.path.clone();
    std::thread::Builder::new()
        .name("meridian-qlog".into())
        .spawn(move || {
            let m = &shared.metrics;
            if let Err(e) = write_loop(&log, &ident, file, m) {
                tracing::error!("query log {}: {e}; logging stopped", path.display());
                // Keep counting what is dropped from now on.
                while !log.stop.load(Ordering::Acquire) {
                    let mut scratch = Vec::new();
                    while log.pop_encoded(&ident, &mut scratch) {
                        m.query_log_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    std::thread::sleep(IDLE);
                }
            }
        })
}

fn write_loop(
    log: &QueryLog,
    ident: &Ident,
    file: std::fs::File,
    m: &Metrics,
) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(64 << 10, file);
    w.write_all(&control_frame(CONTROL_START, Some(CONTENT_TYPE)))?;
    w.flush()?;
    let mut msg = Vec::with_capacity(2 * SLOT_BYTES);
    loop {
        // Read the flag before draining, so that nothing pushed before
        // `stop` is left behind.
        let stopping = log.stop.load(Ordering::Acquire);
        let mut n = 0u64;
        while log.pop_encoded(ident, &mut msg) {
            w.write_all(&(msg.len() as u32).to_be_bytes())?;
            w.write_all(&msg)?;
            n += 1;
        }
        if n > 0 {
            m.query_log_frames.fetch_add(n, Ordering::Relaxed);
        }
        w.flush()?;
        if stopping {
            w.write_all(&control_frame(CONTROL_STOP, None))?;
            w.flush()?;
            return Ok(());
        }
        if n == 0 {
            std::thread::sleep(IDLE);
        }
    }
}

/// Frame Streams control frame types.
const CONTROL_START: u32 = 0x02;
const CONTROL_STOP: u32 = 0x03;
/// Frame Streams control field: content type.
const FIELD_CONTENT_TYPE: u32 = 0x01;

/// A control frame: the escape (a zero length), the control frame's
/// length, its type and an optional content type field.
pub fn control_frame(kind: u32, content_type: Option<&[u8]>) -> Vec<u8> {
    let mut body = kind.to_be_bytes().to_vec();
    if let Some(ct) = content_type {
        body.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        body.extend_from_slice(&(ct.len() as u32).to_be_bytes());
        body.extend_from_slice(ct);
    }
    let mut f = 0u32.to_be_bytes().to_vec();
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(&body);
    f
}

// The protobuf fields of dnstap.proto (github.com/dnstap/dnstap.pb).
const DNSTAP_IDENTITY: u32 = 1;
const DNSTAP_VERSION: u32 = 2;
const DNSTAP_MESSAGE: u32 = 14;
const DNSTAP_TYPE: u32 = 15;
const DNSTAP_TYPE_MESSAGE: u64 = 1;
const MSG_TYPE: u32 = 1;
const MSG_SOCKET_FAMILY: u32 = 2;
const MSG_SOCKET_PROTOCOL: u32 = 3;
const MSG_QUERY_ADDRESS: u32 = 4;
const MSG_RESPONSE_ADDRESS: u32 = 5;
const MSG_QUERY_PORT: u32 = 6;
const MSG_RESPONSE_PORT: u32 = 7;
const MSG_QUERY_TIME_SEC: u32 = 8;
const MSG_QUERY_TIME_NSEC: u32 = 9;
const MSG_QUERY_MESSAGE: u32 = 10;
const MSG_RESPONSE_TIME_SEC: u32 = 12;
const MSG_RESPONSE_TIME_NSEC: u32 = 13;
const MSG_RESPONSE_MESSAGE: u32 = 14;
const AUTH_RESPONSE: u64 = 2;
const INET: u64 = 1;
const INET6: u64 = 2;
const UDP: u64 = 1;
const TCP: u64 = 2;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(out: &mut Vec<u8>, field: u32, v: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, v);
}

fn field_fixed32(out: &mut Vec<u8>, field: u32, v: u32) {
    varint(out, (u64::from(field) << 3) | 5);
    out.extend_from_slice(&v.to_le_bytes());
}

fn field_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn ip_octets(ip: IpAddr) -> ([u8; 16], usize) {
    let mut a = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => {
            a[..4].copy_from_slice(&v4.octets());
            (a, 4)
        }
        IpAddr::V6(v6) => {
            a.copy_from_slice(&v6.octets());
            (a, 16)
        }
    }
}

/// One `Dnstap { identity, version, message: AUTH_RESPONSE, type: MESSAGE }`.
fn encode(ident: &Ident, e: &Entry, out: &mut Vec<u8>) {
    let mut m = Vec::with_capacity(e.qlen + e.rlen + 96);
    field_varint(&mut m, MSG_TYPE, AUTH_RESPONSE);
    // A v4-mapped client on a v6 socket is logged as the IPv4 it is.
    let client_ip = e.client.ip().to_canonical();
    field_varint(
        &mut m,
        MSG_SOCKET_FAMILY,
        if client_ip.is_ipv4() { INET } else { INET6 },
    );
    field_varint(&mut m, MSG_SOCKET_PROTOCOL, if e.tcp { TCP } else { UDP });
    let (a, n) = ip_octets(client_ip);
    field_bytes(&mut m, MSG_QUERY_ADDRESS, &a[..n]);
    if let Some(s) = e.server {
        let ip = s.ip().to_canonical();
        // Same family as the client, and a real address (not the wildcard).
        if !ip.is_unspecified() && ip.is_ipv4() == client_ip.is_ipv4() {
            let (a, n) = ip_octets(ip);
            field_bytes(&mut m, MSG_RESPONSE_ADDRESS, &a[..n]);
        }
    }
    field_varint(&mut m, MSG_QUERY_PORT, u64::from(e.client.port()));
    if let Some(s) = e.server {
        field_varint(&mut m, MSG_RESPONSE_PORT, u64::from(s.port()));
    }
    field_varint(&mut m, MSG_QUERY_TIME_SEC, e.query_time.0);
    field_fixed32(&mut m, MSG_QUERY_TIME_NSEC, e.query_time.1);
    field_bytes(&mut m, MSG_QUERY_MESSAGE, &e.buf[..e.qlen]);
    field_varint(&mut m, MSG_RESPONSE_TIME_SEC, e.response_time.0);
    field_fixed32(&mut m, MSG_RESPONSE_TIME_NSEC, e.response_time.1);
    field_bytes(
        &mut m,
        MSG_RESPONSE_MESSAGE,
        &e.buf[e.qlen..e.qlen + e.rlen],
    );
    field_bytes(out, DNSTAP_IDENTITY, &ident.identity);
    field_bytes(out, DNSTAP_VERSION, &ident.version);
    field_bytes(out, DNSTAP_MESSAGE, &m);
    field_varint(out, DNSTAP_TYPE, DNSTAP_TYPE_MESSAGE);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> QueryLogConfig {
        QueryLogConfig {
            path: "/nonexistent".into(),
            sample: 1,
        }
    }

    #[test]
    fn ring_fills_drops_and_drains_in_order() {
        let m = Metrics::new();
        let log = QueryLog::new(&cfg());
        let c: SocketAddr = "192.0.2.1:5353".parse().unwrap();
        for i in 0..SLOTS + 3 {
            let q = (i as u32).to_be_bytes();
            log.push(&m, false, c, None, (1, 2), &q, b"r");
        }
        assert_eq!(m.query_log_dropped.load(Ordering::Relaxed), 3);
        let ident = Ident {
            identity: b"i".to_vec(),
            version: b"v".to_vec(),
        };
        let mut out = Vec::new();
        for i in 0..SLOTS {
            assert!(log.pop_encoded(&ident, &mut out));
            let q = (i as u32).to_be_bytes();
            assert!(out.windows(6).any(|w| w[..2] == [0x52, 4] && w[2..] == q));
        }
        assert!(!log.pop_encoded(&ident, &mut out));
        // Space again after draining.
        assert!(log.push(&m, true, c, None, (1, 2), b"q", b"r"));
    }

    #[test]
    fn varints() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
    }
}
