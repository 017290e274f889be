//! DNS over TCP (RFC 1035 §4.2.2, RFC 7766): 2-byte length framing, many
//! queries per connection answered in order, idle and read timeouts that
//! shrink while the connection slots run short, and a connection cap at
//! which the connection idle the longest is closed for a new one (RFC 7766
//! §6.2.3). A connection's buffers are sized to its messages and returned
//! when it goes idle, so idle connections cost little memory.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Protocol, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::state::{ConnIdle, ServerState};
use crate::answer::{Outcome, Scratch, Transport};

thread_local! {
    /// Scratch space of this runtime thread: the answer call is synchronous,
    /// so connections on one thread take turns with it. Rotation and the
    /// random generator are per thread, as on the UDP workers.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// The response buffer of this runtime thread (the largest message),
    /// for the same reason: not one per connection.
    static RESP: RefCell<Vec<u8>> = RefCell::new(vec![0; 65535]);
}

/// A connection's read buffer to start with and to go back to when idle:
/// the length prefix and a query of 512 octets (most are far shorter). It
/// grows to the length of a longer message, up to 2 + 65535.
const IN_START: usize = 2 + 512;
/// The response queue a connection keeps when idle; larger is freed.
const OUT_KEEP: usize = 4096;

/// Bind a non-blocking TCP listener with SO_REUSEPORT (so that a new
/// instance can take over the port), IPv6-only for an IPv6 address.
pub fn bind_tcp(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let s = super::reusable_socket(addr, Type::STREAM, Protocol::TCP)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Serve DNS over TCP on one listener until shutdown; then stop accepting
/// and close the listening socket, so that a new instance sharing the port
/// (SO_REUSEPORT) gets the new connections.
///
/// The caller counts the listener in `shared.tcp_listeners` before spawning
/// it; the count drops when the listener has handed over its last
/// connection, so shutdown can wait for those too.
pub async fn tcp_listener(shared: Arc<ServerState>, listener: std::net::TcpListener) {
    struct Done<'a>(&'a ServerState);
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

/// Serve a new connection. When every slot is taken, close the connection
/// idle the longest to make room (its slot frees as soon as its task sees
/// the signal, so the count may pass the cap by the evictions in flight);
/// with none idle, close the new one at once.
fn spawn_conn(shared: &Arc<ServerState>, stream: tokio::net::TcpStream, peer: SocketAddr) {
    let max = shared.engine.load().settings.tcp_max_connections;
    if shared.tcp_conns.fetch_add(1, Ordering::Relaxed) >= max {
        if !shared.evict_oldest_idle() {
            shared.tcp_conns.fetch_sub(1, Ordering::Relaxed);
            shared.metrics.tcp_rejected.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            return;
        }
        shared.metrics.tcp_evicted.fetch_add(1, Ordering::Relaxed);
    }
    let (key, conn) = shared.idle().insert();
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut slot = IdleSlot {
            shared: &shared,
            key,
            conn,
        };
        let _ = tcp_conn(&shared, stream, peer, &mut slot).await;
        drop(slot);
        shared.tcp_conns.fetch_sub(1, Ordering::Relaxed);
    });
}

/// A connection's entry in `ServerState::tcp_idle`, unregistered when the
/// connection ends.
struct IdleSlot<'a> {
    shared: &'a ServerState,
    key: u64,
    conn: Arc<ConnIdle>,
}

impl IdleSlot<'_> {
    fn idle(&mut self) {
        self.conn.idle();
    }

    fn busy(&mut self) {
        self.conn.busy();
    }
}

impl Drop for IdleSlot<'_> {
    fn drop(&mut self) {
        self.shared.idle().remove(self.key);
    }
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
    fn busy(&self, shared: &ServerState) -> bool {
        let n = shared.tcp_conns.load(Ordering::Relaxed);
        n > BUSY_MIN && n * 2 > self.max_conns
    }
}

/// One TCP connection: read into a buffer, answer every complete message in
/// it (a pipelined burst is answered in order and written together), wait
/// for more within the idle timeout (no partial message) or the read
/// timeout (a message has started), and close after `max_queries`.
async fn tcp_conn(
    shared: &ServerState,
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
    slot: &mut IdleSlot<'_>,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let lim = {
        let e = shared.engine.load();
        let s = &e.settings;
        let idle = Duration::from_millis(s.tcp_idle_timeout_ms);
        TcpLimits {
            idle,
            read: Duration::from_millis(s.tcp_read_timeout_ms).min(idle),
            max_queries: if s.tcp_max_queries == 0 {
                usize::MAX
            } else {
                s.tcp_max_queries
            },
            max_conns: s.tcp_max_connections,
        }
    };
    let mut outcome = Outcome::default();
    // Grown to hold the message being read whole (see IN_START).
    let mut inb = vec![0u8; IN_START];
    let mut have = 0usize;
    let mut out: Vec<u8> = Vec::new();
    let mut answered = 0usize;
    // Chosen to make room at the cap while a query was arriving: close once
    // what it sent is answered.
    let mut evicted = false;
    // Start of the idle wait, or of the partial message now in the buffer.
    let mut since = Instant::now();
    // When this connection, idle, first saw the shutdown.
    let mut stop_seen: Option<Instant> = None;
    let t = Transport {
        src: peer.ip(),
        tcp: true,
    };
    let qlog = shared.query_log.as_deref();
    let server = match qlog {
        Some(_) => stream.local_addr().ok(),
        None => None,
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
            let msg = &inb[off + 2..off + 2 + len];
            let qtime = match qlog {
                Some(_) => super::qlog::now(),
                None => (0, 0),
            };
            let r = SCRATCH.with_borrow_mut(|scratch| {
                RESP.with_borrow_mut(|resp| {
                    let r = engine.answer(msg, t, scratch, resp, &mut outcome);
                    if let Some(n) = r {
                        out.extend_from_slice(&(n as u16).to_be_bytes());
                        out.extend_from_slice(&resp[..n]);
                        if let Some(q) = qlog.filter(|q| q.sample_tcp()) {
                            q.push(&shared.metrics, true, peer, server, qtime, msg, &resp[..n]);
                        }
                    }
                    r
                })
            });
            shared
                .metrics
                .record_one(&outcome, r.is_some(), &engine.pool_answers);
            off += 2 + len;
            match r {
                Some(_) => answered += 1,
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
            // Not idle since it connected: its age starts again.
            slot.busy();
        }
        if !out.is_empty() {
            write_out(&mut stream, &mut out, lim.read).await?;
        }
        if close || (evicted && have == 0) {
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
            // SAFETY: the fd belongs to `stream`, which is open and borrowed
            // for the call; the kernel writes at most `inb.len()` bytes into
            // `inb`, a live, initialised Vec<u8> that is exclusively ours
            // (no other reference to it exists during the call).
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
        if have == 0 {
            // Idle: give back what a long message or burst took, and be a
            // candidate for closing at the cap.
            if inb.len() > IN_START {
                inb.truncate(IN_START);
                inb.shrink_to_fit();
            }
            if out.capacity() > OUT_KEEP {
                out = Vec::new();
            }
            slot.idle();
        } else {
            slot.busy();
            // Room for the whole message that has started.
            if have >= 2 {
                let need = 2 + u16::from_be_bytes([inb[0], inb[1]]) as usize;
                if inb.len() < need {
                    inb.resize(need, 0);
                }
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
            // Closed for a new client at the cap.
            _ = slot.conn.close.notified() => {
                slot.busy();
                if have == 0 {
                    return Ok(());
                }
                evicted = true;
            }
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
