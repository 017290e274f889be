//! The state that the transports share with the daemon and the HTTP API:
//! the serving engine (swapped whole on reload, read without a lock), the
//! counters and the shutdown signals.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    /// TCP connections waiting for a query, oldest first (see `IdleConns`).
    pub tcp_idle: Mutex<IdleConns>,
    /// TCP listener tasks still running (see `tcp_listener`).
    pub tcp_listeners: AtomicUsize,
    /// Set to true on shutdown: TCP listeners stop accepting (and close).
    pub stop: tokio::sync::watch::Sender<bool>,
    /// The query log's ring when `query_log` is set (at start; a reload
    /// does not change it).
    pub query_log: Option<Arc<super::qlog::QueryLog>>,
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
        })
    }

    /// Closes the TCP connection idle the longest, to make room for a new
    /// one at the cap; false if none is idle. Its slot frees when its task
    /// sees the signal.
    pub fn evict_oldest_idle(&self) -> bool {
        let oldest = self.idle().pop_first();
        match oldest {
            Some((_, n)) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }

    /// The idle set; a panic while it was held cannot leave it inconsistent
    /// (each operation is one map call), so a poisoned lock is used as is.
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

/// The TCP connections that wait for a query with nothing buffered, in the
/// order they became idle, each with the signal that closes it. At the
/// connection cap the listener closes the first (RFC 7766 §6.2.3: a server
/// may close idle connections to free resources), as Knot and gdnsd do,
/// instead of refusing the new client, which has a query to send.
#[derive(Default)]
pub struct IdleConns {
    next: u64,
    by_age: BTreeMap<u64, Arc<tokio::sync::Notify>>,
}

impl IdleConns {
    /// Adds a connection that just became idle; the key removes it.
    pub fn insert(&mut self, close: Arc<tokio::sync::Notify>) -> u64 {
        self.next += 1;
        self.by_age.insert(self.next, close);
        self.next
    }

    /// Removes a connection that is idle no more (or gone).
    pub fn remove(&mut self, key: u64) {
        self.by_age.remove(&key);
    }

    fn pop_first(&mut self) -> Option<(u64, Arc<tokio::sync::Notify>)> {
        self.by_age.pop_first()
    }
}
