//! Reloads: build a new engine from the same config on a low-priority
//! thread, carry the operator overrides and runtime weights into it, swap it in whole and
//! restart the health checkers; on any error keep serving the old one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::memory::{for_serving, release};
use crate::config::ServerSettings;
use crate::engine::RuntimeWeights;
use crate::health::{Checker, Overrides};
use crate::transport::ServerState;

/// What the daemon owns: the serving state, the overrides, the runtime
/// weights and the checkers.
pub(super) struct Daemon {
    pub(super) server: Arc<ServerState>,
    pub(super) overrides: Arc<Overrides>,
    pub(super) weights: Arc<RuntimeWeights>,
    pub(super) checker: Mutex<Checker>,
    /// The config the next reload reads instead of the serving engine's
    /// (fleet mode: a pushed revision); taken by that reload.
    pub(super) next_config: Mutex<Option<std::path::PathBuf>>,
    /// Fleet mode: this node's own `[fleet]` settings, so that a reload of
    /// a served revision composes it again with the node's own tables.
    #[cfg(feature = "fleet")]
    pub(super) fleet: Option<crate::config::fleet::FleetSettings>,
}

impl Daemon {
    /// Restart the checkers on the table of the engine now serving.
    pub(super) fn restart_checks(&self) {
        let e = self.server.engine.load_full();
        self.checker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .launch(e.health.clone(), e.checks.clone());
    }
}

/// The reason a reload gives when the geo database changed.
pub(super) const GEO_CHANGED: &str = "geo database changed";
/// The reason a reload gives when registered pool members changed.
pub(super) const REGISTRY_CHANGED: &str = "registry changed";

/// The reload thread: reloads requested by signals and the geo watcher run
/// here, one at a time, off the signal loop. Requests that arrive during a
/// reload are folded into one more reload after it.
pub(super) struct Reloader {
    tx: std::sync::mpsc::Sender<Request>,
    /// Requests sent and not yet covered by a finished reload.
    pending: Arc<AtomicUsize>,
    /// Set when a reload the geo watcher asked for is done: the database's
    /// modification time right after it, for the watcher to compare with.
    geo_done: Arc<Mutex<Option<Option<SystemTime>>>>,
}

impl Reloader {
    pub(super) fn start(d: Arc<Daemon>) -> Result<Reloader, String> {
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let pending = Arc::new(AtomicUsize::new(0));
        let p = pending.clone();
        let geo_done = Arc::new(Mutex::new(None));
        let g = geo_done.clone();
        std::thread::Builder::new()
            .name("meridian-reloader".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    // Requests queued meanwhile: one reload covers them all.
                    let mut why = first.why;
                    let mut waiting: Vec<_> = first.done.into_iter().collect();
                    let mut n = 1;
                    while let Ok(r) = rx.try_recv() {
                        why = r.why;
                        waiting.extend(r.done);
                        n += 1;
                    }
                    let ok = reload(&d, why);
                    for w in waiting {
                        let _ = w.send(ok);
                    }
                    if why == GEO_CHANGED {
                        *g.lock().unwrap_or_else(|e| e.into_inner()) = Some(geo_mtime(&d.server));
                    }
                    p.fetch_sub(n, Ordering::AcqRel);
                }
            })
            .map_err(|e| format!("meridian: cannot start the reload thread: {e}"))?;
        Ok(Reloader {
            tx,
            pending,
            geo_done,
        })
    }

    /// Ask for a reload; returns at once.
    pub(super) fn request(&self, why: &'static str) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        let _ = self.tx.send(Request { why, done: None });
    }

    /// Ask for a reload and be told whether it succeeded.
    pub(super) fn request_then(&self, why: &'static str) -> tokio::sync::oneshot::Receiver<bool> {
        let (done, rx) = tokio::sync::oneshot::channel();
        self.pending.fetch_add(1, Ordering::AcqRel);
        let _ = self.tx.send(Request {
            why,
            done: Some(done),
        });
        rx
    }

    /// After a reload for a geo change: the database's stamp then (once).
    pub(super) fn geo_done(&self) -> Option<Option<SystemTime>> {
        self.geo_done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Is a reload asked for or running?
    pub(super) fn busy(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }
}

pub(super) fn geo_mtime(shared: &ServerState) -> Option<SystemTime> {
    let e = shared.engine.load();
    let p = e.geo_path.as_ref()?;
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// One reload asked for, and who waits for its result.
struct Request {
    why: &'static str,
    done: Option<tokio::sync::oneshot::Sender<bool>>,
}

/// Build a new engine and swap it in; on failure keep serving the old one.
/// True if the new engine serves.
pub(super) fn reload(d: &Daemon, why: &str) -> bool {
    let shared = &d.server;
    let old = shared.engine.load_full();
    // Build on a thread of lower priority: on a busy core the UDP workers
    // keep answering at once instead of waiting out the build's time slice.
    let path = d
        .next_config
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| same_config(d, &old));
    let build = || {
        slow_reload_hook();
        crate::answer::load(&path, Some(&old))
    };
    let built = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("meridian-reload".into())
            .spawn_scoped(s, || {
                // SAFETY: setpriority on the calling thread (tid) only.
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
                }
                build()
            });
        match spawned {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            // No thread to be had: build here, at normal priority.
            Err(_) => build(),
        }
    });
    if shared.shutdown.load(Ordering::Relaxed) {
        // Stopping: nothing left to swap in for.
        return false;
    }
    let ok = swap(d, why, old, built);
    // Even after a failed build: logrotate's SIGHUP must reopen the file.
    if let (Some(log), Some(cfg)) = (&shared.query_log, &shared.engine.load().settings.query_log) {
        log.reconfigure(cfg);
    }
    ok
}

/// Serve a built engine, or log why the build failed.
fn swap(
    d: &Daemon,
    why: &str,
    old: Arc<crate::engine::Engine>,
    built: Result<crate::engine::Engine, crate::error::LocatedError>,
) -> bool {
    let shared = &d.server;
    match built {
        Ok(new) => {
            let new = for_serving(new);
            for w in &new.warnings {
                tracing::warn!("reload ({why}): {w}");
            }
            // `[api]` warnings are said at start; here only the new ones
            // (a token file the service user cannot read, kept).
            let api_new = new.api.warnings.iter();
            for w in api_new.filter(|w| !old.api.warnings.contains(w)) {
                tracing::warn!("reload ({why}): {w}");
            }
            for (key, was, now) in restart_keys(&old.settings, &new.settings) {
                let msg = format!(
                    "reload ({why}): [server] {key} changed ({was} -> {now}) but applies only at start: restart to apply it"
                );
                tracing::warn!("{msg}");
            }
            let names = new.bindings.len();
            let (zones, read, tables) = (new.zones.len(), new.zones_loaded, new.geo_tables_built);
            count_build(&shared.metrics, &new);
            let new = Arc::new(new);
            // Lock order: overrides, then weights.
            d.overrides.apply_then(&new.health, &new.checks, || {
                d.weights
                    .apply_then(&new, || shared.engine.store(new.clone()))
            });
            d.restart_checks();
            release(old);
            shared.metrics.reloads_ok.fetch_add(1, Ordering::Relaxed);
            // One line per reload, whatever the log filter: operators and
            // tests wait for it.
            eprintln!(
                "meridian: reloaded ({why}) in {} ms: {names} name(s) on pools; {read} of {zones} zone(s) read, {tables} geo table(s) built",
                shared.engine.load().load_ms
            );
            true
        }
        Err(e) => {
            shared
                .metrics
                .reloads_failed
                .fetch_add(1, Ordering::Relaxed);
            eprintln!("meridian: reload failed ({why}), keeping the running config: {e}");
            false
        }
    }
}

/// The `[server]` keys that changed from `old` to `new` but are only read
/// at start (sockets, threads, user, the log filter): (key, old, new).
fn restart_keys(old: &ServerSettings, new: &ServerSettings) -> Vec<(&'static str, String, String)> {
    let mut v = Vec::new();
    let mut cmp = |key, a: String, b: String| {
        if a != b {
            v.push((key, a, b));
        }
    };
    let addrs = |l: &[std::net::SocketAddr]| {
        let s: Vec<String> = l.iter().map(|a| a.to_string()).collect();
        format!("[{}]", s.join(", "))
    };
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "none".into());
    cmp("listen", addrs(&old.listen), addrs(&new.listen));
    cmp("workers", old.workers.to_string(), new.workers.to_string());
    cmp("http_listen", opt(&old.http_listen), opt(&new.http_listen));
    cmp("user", opt(&old.user), opt(&new.user));
    cmp(
        "allow_root",
        old.allow_root.to_string(),
        new.allow_root.to_string(),
    );
    cmp("log", format!("{:?}", old.log), format!("{:?}", new.log));
    // A changed sink or sample applies on reload (`QueryLog::reconfigure`);
    // turning the log on or off needs the ring made, or not, at start.
    if old.query_log.is_some() != new.query_log.is_some() {
        let qlog = |q: &Option<crate::config::QueryLogConfig>| match q {
            Some(q) => q.sink.to_string(),
            None => "none".into(),
        };
        cmp("query_log", qlog(&old.query_log), qlog(&new.query_log));
    }
    v
}

/// Count what a build read and compiled (the rest it kept).
pub(super) fn count_build(m: &crate::metrics::Metrics, e: &crate::engine::Engine) {
    m.zone_loads
        .fetch_add(e.zones_loaded as u64, Ordering::Relaxed);
    m.geo_table_builds
        .fetch_add(e.geo_tables_built as u64, Ordering::Relaxed);
}

/// A test hook: `MERIDIAN_TEST_RELOAD_DELAY_MS` makes every reload's build
/// that much longer, as a huge zone on a busy host would (tests/fleet shows
/// that the fleet link never waits for one). Unset, it costs one lookup.
fn slow_reload_hook() {
    static DELAY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let ms = DELAY.get_or_init(|| {
        std::env::var("MERIDIAN_TEST_RELOAD_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(ms) = ms {
        std::thread::sleep(std::time::Duration::from_millis(*ms));
    }
}

/// The config a reload with no new path reads: the serving one, except
/// that a fleet node serving a pushed revision composes it again, so edits
/// to its own `[server]`, `[api]` and `[fleet]` tables take effect.
fn same_config(d: &Daemon, old: &crate::engine::Engine) -> std::path::PathBuf {
    #[cfg(feature = "fleet")]
    if let Some(fs) = &d.fleet {
        let rev = d.server.fleet_revision.load(Ordering::Relaxed);
        if rev > 0 {
            match crate::fleet::recompose(fs, rev) {
                Ok(p) => return p,
                Err(e) => tracing::warn!(
                    "fleet: revision {rev} cannot be composed with {} again, reloading it as it was: {e}",
                    fs.local_config.display()
                ),
            }
        }
    }
    #[cfg(not(feature = "fleet"))]
    let _ = d;
    old.config_path.clone()
}
