//! Reloads: build a new engine from the same config on a low-priority
//! thread, carry the operator overrides into it, swap it in whole and
//! restart the health checkers; on any error keep serving the old one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::memory::{for_serving, release};
use crate::config::ServerSettings;
use crate::health::{Checker, Overrides};
use crate::transport::ServerState;

/// What the daemon owns: the serving state, the overrides and the checkers.
pub(super) struct Daemon {
    pub(super) server: Arc<ServerState>,
    pub(super) overrides: Arc<Overrides>,
    pub(super) checker: Mutex<Checker>,
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

pub(super) fn geo_mtime(shared: &ServerState) -> Option<SystemTime> {
    let e = shared.engine.load();
    let p = e.geo_path.as_ref()?;
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Build a new engine and swap it in; on failure keep serving the old one.
pub(super) fn reload(d: &Daemon, why: &str) {
    let shared = &d.server;
    let old = shared.engine.load_full();
    // Build on a thread of lower priority: on a busy core the UDP workers
    // keep answering at once instead of waiting out the build's time slice.
    let build = || crate::answer::load(&old.config_path, Some(&old));
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
    match built {
        Ok(new) => {
            let new = for_serving(new);
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
            d.overrides.apply_then(&new.health, &new.checks, || {
                shared.engine.store(new.clone())
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
        }
        Err(e) => {
            shared
                .metrics
                .reloads_failed
                .fetch_add(1, Ordering::Relaxed);
            eprintln!("meridian: reload failed ({why}), keeping the running config: {e}");
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
    v
}

/// Count what a build read and compiled (the rest it kept).
pub(super) fn count_build(m: &crate::metrics::Metrics, e: &crate::engine::Engine) {
    m.zone_loads
        .fetch_add(e.zones_loaded as u64, Ordering::Relaxed);
    m.geo_table_builds
        .fetch_add(e.geo_tables_built as u64, Ordering::Relaxed);
}
