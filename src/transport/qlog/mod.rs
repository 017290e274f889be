//! The optional query log (issue #15): sampled queries and their responses
//! as dnstap (<https://dnstap.info>, `dnstap.proto`) `AUTH_RESPONSE`
//! messages in Frame Streams framing
//! (<https://github.com/farsightsec/fstrm>), written by one writer thread
//! to a file (unidirectional: START, data frames, STOP) or to a collector
//! on a Unix stream socket (bidirectional: READY, ACCEPT, START, data
//! frames, STOP, FINISH), as Knot, BIND and Unbound send it.
//!
//! The transports copy a sampled exchange into a bounded ring of slots
//! allocated once at start (`QueryLog::new`); a full ring drops the entry
//! and counts it, so logging never blocks, never allocates per query and
//! never slows answering. The writer thread drains the ring, encodes and
//! writes; while its sink is down (no collector, a write error) it drains
//! and counts the entries as dropped, and reconnects with backoff. When
//! `query_log` is not set there is no `QueryLog` at all and a UDP worker
//! tests one `Option` it read once.
//!
//! A reload hands the writer the config again (`QueryLog::reconfigure`):
//! a file renamed away (logrotate) is closed with STOP and a new one
//! started, a changed sink is switched to, a lost collector is retried at
//! once, and a changed `query_log_sample` applies to the next batch.
//!
//! The ring is a bounded multi-producer queue (D. Vyukov's, a sequence
//! number per slot) in safe code: each slot's data sits in a `Mutex` that
//! the sequence numbers already make exclusive, so locking it is one
//! uncontended atomic and never waits.

use std::io::{BufWriter, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::state::ServerState;
use crate::config::{QueryLogConfig, QueryLogSink};
use crate::metrics::Metrics;

mod encode;
pub use encode::control_frame;
use encode::*;

/// The mode of a query log file meridian creates: its user and group.
const FILE_MODE: u32 = 0o640;

/// Slots in the ring (a power of two).
const SLOTS: usize = 512;
/// Octets of query plus response one slot holds (a UDP exchange always
/// fits; a larger TCP one is dropped and counted).
const SLOT_BYTES: usize = 8192;
/// The writer's pause when the ring is empty (no wake-up per query).
const IDLE: Duration = Duration::from_millis(10);
/// First and longest wait before reconnecting to a collector.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Longest a write to, or the handshake with, a collector may block the
/// writer: a stalled collector is dropped, not waited for (the ring
/// meanwhile drops and counts).
const SOCKET_TIMEOUT: Duration = Duration::from_secs(1);

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
    /// Log one query in `sample` (a reload may change it).
    sample: AtomicU32,
    tcp_seen: AtomicU64,
    stop: AtomicBool,
    /// The config a reload handed over, for the writer to apply.
    reconfig: Mutex<Option<QueryLogConfig>>,
    reconfig_pending: AtomicBool,
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
            sample: AtomicU32::new(cfg.sample.max(1)),
            // A random phase, like the UDP workers' (`phase`).
            tcp_seen: AtomicU64::new(fastrand::u64(..)),
            stop: AtomicBool::new(false),
            reconfig: Mutex::new(None),
            reconfig_pending: AtomicBool::new(false),
        }
    }

    /// Log one query in this many (read once per batch by UDP workers).
    pub fn sample(&self) -> u32 {
        self.sample.load(Ordering::Relaxed)
    }

    /// A UDP worker's first countdown value: random in `0..sample`, so
    /// workers do not all log the Nth, 2Nth... query of their own stream
    /// in step (and a client's first N-1 queries are not never logged).
    pub fn phase(&self) -> u32 {
        fastrand::u32(0..self.sample())
    }

    /// Should this TCP query be logged? (One in `sample`, across all
    /// connections; UDP workers count on their own.)
    pub fn sample_tcp(&self) -> bool {
        let sample = self.sample();
        sample == 1
            || self
                .tcp_seen
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(u64::from(sample))
    }

    /// A reload's config: the sample applies now, the sink when the writer
    /// next wakes (a renamed file is reopened, a lost collector retried).
    pub fn reconfigure(&self, cfg: &QueryLogConfig) {
        self.sample.store(cfg.sample.max(1), Ordering::Relaxed);
        *self.reconfig.lock().unwrap_or_else(|p| p.into_inner()) = Some(cfg.clone());
        self.reconfig_pending.store(true, Ordering::Release);
    }

    fn take_reconfig(&self) -> Option<QueryLogConfig> {
        if !self.reconfig_pending.swap(false, Ordering::Acquire) {
            return None;
        }
        self.reconfig
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
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
/// thread; a `unix:` sink is connected to by the thread. It writes STOP
/// (and waits for a collector's FINISH) after `QueryLog::stop`.
pub fn start_writer(
    shared: Arc<ServerState>,
    log: Arc<QueryLog>,
    cfg: &QueryLogConfig,
    identity: Option<&str>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut sink = Sink::new(cfg.sink.clone());
    if let QueryLogSink::File(p) = &cfg.sink {
        // At start a file that cannot be opened is an error, not a warning.
        sink.out = Some(Out::open_file(p)?);
    }
    let ident = Ident {
        identity: identity.unwrap_or("meridian").as_bytes().to_vec(),
        version: format!("meridian {}", env!("CARGO_PKG_VERSION")).into_bytes(),
    };
    std::thread::Builder::new()
        .name("meridian-qlog".into())
        .spawn(move || write_loop(&log, &ident, sink, &shared.metrics))
}

fn write_loop(log: &QueryLog, ident: &Ident, mut sink: Sink, m: &Metrics) {
    let mut msg = Vec::with_capacity(2 * SLOT_BYTES);
    loop {
        // Read the flag before draining, so that nothing pushed before
        // `stop` is left behind.
        let stopping = log.stop.load(Ordering::Acquire);
        if let Some(cfg) = log.take_reconfig() {
            sink.reconfigure(cfg.sink);
        }
        sink.connect_if_due();
        let (mut popped, mut written, mut dropped) = (0u64, 0u64, 0u64);
        while log.pop_encoded(ident, &mut msg) {
            popped += 1;
            let Some(out) = sink.out.as_mut() else {
                dropped += 1;
                continue;
            };
            let r = out
                .w
                .write_all(&(msg.len() as u32).to_be_bytes())
                .and_then(|()| out.w.write_all(&msg));
            match r {
                Ok(()) => written += 1,
                Err(e) => {
                    // What sat in the buffer is lost with the sink.
                    dropped += written + 1;
                    written = 0;
                    sink.lost(e);
                }
            }
        }
        if let Some(out) = sink.out.as_mut() {
            if let Err(e) = out.w.flush() {
                dropped += written;
                written = 0;
                sink.lost(e);
            }
        }
        if written > 0 {
            m.query_log_frames.fetch_add(written, Ordering::Relaxed);
        }
        if dropped > 0 {
            m.query_log_dropped.fetch_add(dropped, Ordering::Relaxed);
        }
        if stopping {
            if let Some(out) = sink.out.take() {
                out.finish();
            }
            return;
        }
        if popped == 0 {
            std::thread::sleep(IDLE);
        }
    }
}

/// Where the writer sends frames, and when it next tries to get there.
struct Sink {
    to: QueryLogSink,
    /// None while down: entries are dropped and counted.
    out: Option<Out>,
    /// A `unix:` sink: the next connection attempt, and the wait after it.
    retry_at: Instant,
    backoff: Duration,
    /// The outage was logged (once per outage, not per attempt).
    down_said: bool,
}

impl Sink {
    fn new(to: QueryLogSink) -> Sink {
        Sink {
            to,
            out: None,
            retry_at: Instant::now(),
            backoff: BACKOFF_MIN,
            down_said: false,
        }
    }

    /// A `unix:` sink that is down: try the collector when the backoff
    /// says so.
    fn connect_if_due(&mut self) {
        let QueryLogSink::Unix(path) = &self.to else {
            return;
        };
        if self.out.is_some() || Instant::now() < self.retry_at {
            return;
        }
        match Out::connect(path) {
            Ok(out) => {
                tracing::info!(
                    "query log: connected to the dnstap collector at {}",
                    path.display()
                );
                self.out = Some(out);
                self.backoff = BACKOFF_MIN;
                self.down_said = false;
            }
            Err(e) => {
                if !self.down_said {
                    tracing::warn!(
                        "query log: no dnstap collector at {} ({e}); dropping entries and retrying (every {} s at most)",
                        path.display(),
                        BACKOFF_MAX.as_secs()
                    );
                    self.down_said = true;
                }
                self.retry_at = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }

    /// A write failed: drop the sink (without flushing into it again) and
    /// say so once.
    fn lost(&mut self, e: std::io::Error) {
        if let Some(out) = self.out.take() {
            // Dropping a `BufWriter` flushes it: into a stuck collector
            // that would block the writer for another timeout.
            let _ = out.w.into_parts();
        }
        match &self.to {
            QueryLogSink::Unix(path) => {
                let why = match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
                        "it stopped reading: a write waited {} s",
                        SOCKET_TIMEOUT.as_secs()
                    ),
                    _ => e.to_string(),
                };
                tracing::warn!(
                    "query log: lost the dnstap collector at {} ({why}); dropping entries and reconnecting",
                    path.display()
                );
                self.down_said = true;
                self.backoff = BACKOFF_MIN;
                self.retry_at = Instant::now() + self.backoff;
            }
            QueryLogSink::File(path) => tracing::error!(
                "query log {}: {e}; dropping entries until a reload reopens it",
                path.display()
            ),
        }
    }

    /// A reload: switch to a changed sink, reopen a file renamed away
    /// (logrotate), retry a lost collector now.
    fn reconfigure(&mut self, to: QueryLogSink) {
        if to != self.to {
            tracing::info!("query log: now {to} (was {})", self.to);
            if let Some(out) = self.out.take() {
                out.finish();
            }
            *self = Sink::new(to);
            if let QueryLogSink::File(p) = &self.to {
                self.reopen_file(p.clone());
            }
            return;
        }
        match &self.to {
            QueryLogSink::File(p) => {
                let same = match (&self.out, std::fs::metadata(p)) {
                    (Some(out), Ok(now)) => out.file_id == Some((now.dev(), now.ino())),
                    _ => false,
                };
                if !same {
                    self.reopen_file(p.clone());
                }
            }
            QueryLogSink::Unix(_) => {
                if self.out.is_none() {
                    self.retry_at = Instant::now();
                    self.backoff = BACKOFF_MIN;
                }
            }
        }
    }

    /// Start a new file at `p`, then close the old one with STOP; if the
    /// new one cannot be opened, keep writing to the old one.
    fn reopen_file(&mut self, p: std::path::PathBuf) {
        match Out::open_file(&p) {
            Ok(new) => {
                if let Some(old) = self.out.replace(new) {
                    old.finish();
                }
                tracing::info!("query log: reopened {}", p.display());
            }
            Err(e) => tracing::warn!(
                "query log: cannot reopen {}: {e}; {}",
                p.display(),
                if self.out.is_some() {
                    "still writing to the file open before"
                } else {
                    "dropping entries"
                }
            ),
        }
    }
}

/// An open sink, its START (or handshake) written.
struct Out {
    w: BufWriter<Conn>,
    /// A file's device and inode, to tell whether its path was renamed.
    file_id: Option<(u64, u64)>,
}

enum Conn {
    File(std::fs::File),
    Unix(UnixStream),
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::File(f) => f.write(b),
            Conn::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::File(f) => f.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

impl Out {
    /// A Frame Streams file: truncated, then START. It holds client
    /// addresses, so a new file is not for every user: [`FILE_MODE`], less
    /// the umask. A file that exists keeps its mode and owner (logrotate's
    /// `create MODE OWNER GROUP`, an operator's chmod), with a warning when
    /// every user can read it.
    fn open_file(p: &std::path::Path) -> std::io::Result<Out> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(FILE_MODE)
            .open(p)?;
        let md = f.metadata()?;
        if md.mode() & 0o004 != 0 {
            tracing::warn!(
                "query log: {} is readable by every user (mode {:o}) and holds client addresses: chmod o-r it",
                p.display(),
                md.mode() & 0o777
            );
        }
        let mut w = BufWriter::with_capacity(64 << 10, Conn::File(f));
        w.write_all(&control_frame(CONTROL_START, Some(CONTENT_TYPE)))?;
        w.flush()?;
        Ok(Out {
            w,
            file_id: Some((md.dev(), md.ino())),
        })
    }

    /// The bidirectional handshake with a collector: READY with our
    /// content type, its ACCEPT naming it, then START.
    fn connect(p: &std::path::Path) -> std::io::Result<Out> {
        let mut s = UnixStream::connect(p)?;
        s.set_write_timeout(Some(SOCKET_TIMEOUT))?;
        s.set_read_timeout(Some(SOCKET_TIMEOUT))?;
        s.write_all(&control_frame(CONTROL_READY, Some(CONTENT_TYPE)))?;
        let (kind, types) = read_control(&mut s)?;
        if kind != CONTROL_ACCEPT {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the collector answered READY with control frame {kind}, not ACCEPT"),
            ));
        }
        if !types.is_empty() && !types.iter().any(|t| t == CONTENT_TYPE) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the collector does not accept protobuf:dnstap.Dnstap",
            ));
        }
        s.write_all(&control_frame(CONTROL_START, Some(CONTENT_TYPE)))?;
        Ok(Out {
            w: BufWriter::with_capacity(64 << 10, Conn::Unix(s)),
            file_id: None,
        })
    }

    /// STOP, and from a collector its FINISH (bounded by the timeout);
    /// errors only mean the other end is gone already.
    fn finish(mut self) {
        let stopped = self
            .w
            .write_all(&control_frame(CONTROL_STOP, None))
            .and_then(|()| self.w.flush());
        let (conn, _) = self.w.into_parts();
        if let (Ok(()), Conn::Unix(mut s)) = (stopped, conn) {
            let _ = read_control(&mut s);
        }
    }
}

/// Read one control frame: (type, content types it names).
fn read_control(s: &mut impl Read) -> std::io::Result<(u32, Vec<Vec<u8>>)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut h = [0u8; 8];
    s.read_exact(&mut h)?;
    if h[..4] != [0; 4] {
        return Err(bad("a data frame where a control frame was due"));
    }
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    // fstrm caps control frames at 512 octets.
    if !(4..=512).contains(&len) {
        return Err(bad("a control frame of a bad length"));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    let u32_at = |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    let kind = u32_at(0);
    let mut types = Vec::new();
    let mut at = 4;
    while at + 8 <= len {
        let (field, flen) = (u32_at(at), u32_at(at + 4) as usize);
        at += 8;
        if at + flen > len {
            return Err(bad("a control field past its frame"));
        }
        if field == FIELD_CONTENT_TYPE {
            types.push(body[at..at + flen].to_vec());
        }
        at += flen;
    }
    Ok((kind, types))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> QueryLogConfig {
        QueryLogConfig {
            sink: QueryLogSink::File("/nonexistent".into()),
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
    fn workers_start_at_random_phases() {
        let log = QueryLog::new(&QueryLogConfig { sample: 8, ..cfg() });
        let mut seen = [false; 8];
        for _ in 0..1000 {
            seen[log.phase() as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        // Sample 1 (every query): phase 0.
        assert_eq!(QueryLog::new(&cfg()).phase(), 0);
    }

    #[test]
    fn handshake_reads_accept_and_its_content_type() {
        let mut accept = control_frame(CONTROL_ACCEPT, Some(CONTENT_TYPE))
            .as_slice()
            .to_vec();
        let (kind, types) = read_control(&mut accept.as_slice()).unwrap();
        assert_eq!(kind, CONTROL_ACCEPT);
        assert_eq!(types, [CONTENT_TYPE.to_vec()]);
        // A data frame, or a length past fstrm's cap, is refused.
        accept[3] = 1;
        assert!(read_control(&mut accept.as_slice()).is_err());
        let mut long = 0u32.to_be_bytes().to_vec();
        long.extend_from_slice(&4096u32.to_be_bytes());
        assert!(read_control(&mut long.as_slice()).is_err());
    }

    #[test]
    fn varints() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
    }
}
