//! The state that the transports share with the daemon and the HTTP API:
//! the serving engine (swapped whole on reload, read without a lock), the
//! counters and the shutdown signals.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::engine::Engine;
use crate::metrics::Metrics;

/// What every transport task reads: the engine, counters and shutdown flags.
pub struct ServerState {
    /// The engine now serving. Queries load it without a lock; a reload
    /// stores a new one whole, and the old one is freed when its last reader
    /// lets go.
    pub engine: ArcSwap<Engine>,
    /// Process-wide counters, served at `/metrics`.
    pub metrics: Metrics,
    /// Set on shutdown (see `begin_shutdown`): UDP workers drain their
    /// sockets and stop, TCP connections finish what was sent and close.
    pub shutdown: AtomicBool,
    /// TCP connections open now, held under `tcp_max_connections`; past half
    /// of it, timeouts shrink to `BUSY_TIMEOUT`.
    pub tcp_conns: AtomicUsize,
    /// Open TCP connections and when each became idle (see `IdleConns`).
    pub tcp_idle: Mutex<IdleConns>,
    /// TCP listener tasks still running (see `tcp_listener`).
    pub tcp_listeners: AtomicUsize,
    /// Set to true on shutdown: TCP listeners stop accepting (and close).
    pub stop: tokio::sync::watch::Sender<bool>,
    /// The query log's ring when `query_log` is set at start (a reload may
    /// change its sink and sample, not turn it on or off).
    pub query_log: Option<Arc<super::qlog::QueryLog>>,
    /// Fleet mode: the etcd revision of the pushed config this node serves
    /// (0: none, the local config).
    pub fleet_revision: std::sync::atomic::AtomicI64,
    /// Fleet mode: cut off from etcd past `fleet_grace`, this node probes
    /// every member itself.
    pub fleet_local_probes: AtomicBool,
}

impl ServerState {
    /// Shared state serving `engine`, with zeroed counters and no shutdown.
    pub fn new(engine: Engine) -> Arc<ServerState> {
        let metrics = Metrics::new();
        let query_log = engine
            .settings
            .query_log
            .as_ref()
            .map(|c| Arc::new(super::qlog::QueryLog::new(c)));
        Arc::new(ServerState {
            engine: ArcSwap::from_pointee(engine),
            metrics,
            shutdown: AtomicBool::new(false),
            tcp_conns: AtomicUsize::new(0),
            tcp_idle: Mutex::new(IdleConns::default()),
            tcp_listeners: AtomicUsize::new(0),
            stop: tokio::sync::watch::Sender::new(false),
            query_log,
            fleet_revision: Default::default(),
            fleet_local_probes: AtomicBool::new(false),
        })
    }

    /// Closes the TCP connection idle the longest, to make room for a new
    /// one at the cap; false if none is idle. Its slot frees when its task
    /// sees the signal.
    pub fn evict_oldest_idle(&self) -> bool {
        let oldest = self.idle().take_oldest();
        match oldest {
            Some(c) => {
                c.close.notify_one();
                true
            }
            None => false,
        }
    }

    /// The connection table; a panic while it was held cannot leave it
    /// inconsistent (each operation is one map call), so a poisoned lock is
    /// used as is.
    pub fn idle(&self) -> std::sync::MutexGuard<'_, IdleConns> {
        self.tcp_idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Begin shutdown: listeners close, idle TCP connections close, UDP
    /// workers answer what is queued and stop.
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
    }
}

/// Every open TCP connection, registered once when it opens, with the
/// moment it last became idle (waiting for a query with nothing buffered)
/// and the signal that closes it. At the connection cap the listener closes
/// the one idle the longest (RFC 7766 §6.2.3: a server may close idle
/// connections to free resources), as Knot and gdnsd do, instead of
/// refusing the new client, which has a query to send.
///
/// A connection's idle/busy changes are one atomic store on its own entry,
/// so a query over TCP takes no lock; the table's lock is taken when a
/// connection opens or closes, and by an eviction, which scans it.
#[derive(Default)]
pub struct IdleConns {
    next: u64,
    conns: HashMap<u64, Arc<ConnIdle>>,
}

/// One connection's entry in [`IdleConns`].
#[derive(Default)]
pub struct ConnIdle {
    /// When it became idle (a stamp from [`ConnIdle::stamp`]); 0 while busy.
    since: AtomicU64,
    /// Closes it from its idle wait.
    pub close: tokio::sync::Notify,
}

/// Orders idle moments across connections (only their order matters).
static IDLE_CLOCK: AtomicU64 = AtomicU64::new(1);

impl ConnIdle {
    /// Waiting for a query with nothing buffered, from now.
    pub fn idle(&self) {
        if self.since.load(Ordering::Relaxed) == 0 {
            self.since.store(
                IDLE_CLOCK.fetch_add(1, Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
    }

    /// A query is arriving or being answered.
    pub fn busy(&self) {
        self.since.store(0, Ordering::Relaxed);
    }
}

impl IdleConns {
    /// Registers a new connection, idle from the start (one that connects
    /// and sends nothing is the first to go); the key unregisters it.
    pub fn insert(&mut self) -> (u64, Arc<ConnIdle>) {
        self.next += 1;
        let c = Arc::new(ConnIdle::default());
        c.idle();
        self.conns.insert(self.next, c.clone());
        (self.next, c)
    }

    /// Unregisters a closed connection.
    pub fn remove(&mut self, key: u64) {
        self.conns.remove(&key);
    }

    /// Claims the connection idle the longest (marks it busy so no other
    /// eviction picks it) and returns it.
    fn take_oldest(&self) -> Option<Arc<ConnIdle>> {
        loop {
            let (c, since) = self
                .conns
                .values()
                .map(|c| (c, c.since.load(Ordering::Relaxed)))
                .filter(|&(_, s)| s != 0)
                .min_by_key(|&(_, s)| s)?;
            // Lost to the connection itself turning busy: look again.
            if c.since
                .compare_exchange(since, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return Some(c.clone());
            }
        }
    }
}
