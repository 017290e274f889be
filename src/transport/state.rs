//! The state that the transports share with the daemon and the HTTP API:
//! the serving engine (swapped whole on reload, read without a lock), the
//! counters and the shutdown signals.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

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
    /// TCP listener tasks still running (see `tcp_listener`).
    pub tcp_listeners: AtomicUsize,
    /// Set to true on shutdown: TCP listeners stop accepting (and close).
    pub stop: tokio::sync::watch::Sender<bool>,
}

impl ServerState {
    /// Shared state serving `engine`, with zeroed counters and no shutdown.
    pub fn new(engine: Engine) -> Arc<ServerState> {
        let metrics = Metrics::new();
        Arc::new(ServerState {
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
