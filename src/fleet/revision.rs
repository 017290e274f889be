//! Serving pushed revisions: a revision from the watch is written under the
//! state dir and handed to the daemon to reload; a refusal keeps the
//! running config and says why.

use super::*;

impl Fleet {
    /// A `{prefix}config` value seen at etcd revision `rev` (the first
    /// read or the watch): handed to the revision task, never awaited, so
    /// the watch and the lease go on during a reload.
    pub(super) fn offer(&self, rev: i64, v: &[u8]) {
        let serving = self.server.fleet_revision.load(Ordering::Relaxed);
        if rev == serving {
            // Etcd's newest is what this node serves already (read back
            // from its state dir at start).
            self.source.store(Source::Etcd as u8, Ordering::Relaxed);
        }
        let refused = self
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|r| r.revision == rev);
        if rev > serving && !refused {
            self.offered.send_replace(Some((rev, v.into())));
        }
    }

    /// The revision task: serves each offered revision in turn (the newest
    /// offered while one loads comes next; those in between are skipped),
    /// then has the registration rewritten so `fleet push` hears at once.
    pub(super) async fn serve_offers(self: Arc<Self>) {
        let mut rx = self.offered.subscribe();
        while rx.changed().await.is_ok() {
            let offer = rx.borrow_and_update().clone();
            if let Some((rev, v)) = offer {
                self.serve_pushed(rev, &v).await;
                self.contact_now.notify_one();
            }
        }
    }

    /// Serve pushed revision `rev` (its stored value `v`): write its files
    /// under the state dir with this node's own `[server]`, `[api]` and
    /// `[fleet]` tables and key files, check the geo database's checksum,
    /// and have the daemon reload from it. A refusal or a failed load keeps
    /// the running config, and says why in the log and `/status`.
    async fn serve_pushed(&self, rev: i64, v: &[u8]) {
        if rev <= self.server.fleet_revision.load(Ordering::Relaxed) {
            return;
        }
        let refuse = |why: String| {
            let serving = self.server.fleet_revision.load(Ordering::Relaxed);
            let running = match Source::name(self.source.load(Ordering::Relaxed)) {
                "local" => "this node's own config".to_string(),
                from => format!("revision {serving}, from {from}"),
            };
            tracing::error!(
                "fleet: config revision {rev} refused, the running one ({running}) is kept: {why}"
            );
            *self.refused.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Refusal { revision: rev, why });
        };
        let pushed = match self.client().await {
            Ok(mut c) => super::store::load(&mut c, &self.settings, v).await,
            Err(e) => Err(e),
        };
        let pushed = match pushed {
            Ok(p) => p,
            Err(why) => return refuse(why),
        };
        // Writing the files and hashing the geo database take a while for
        // a large config: not on a runtime thread.
        let settings = self.settings.clone();
        let written = tokio::task::spawn_blocking(move || materialize(&settings, rev, &pushed))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        let path = match written {
            Ok(p) => p,
            Err(why) => return refuse(why),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.switch.send((path, tx)).await.is_err() {
            return;
        }
        match rx.await {
            Ok(true) => {
                self.server.fleet_revision.store(rev, Ordering::Relaxed);
                self.source.store(Source::Etcd as u8, Ordering::Relaxed);
                tracing::info!("fleet: serving config revision {rev}");
                let settings = self.settings.clone();
                let kept = tokio::task::spawn_blocking(move || {
                    accepted(&settings, rev)?;
                    super::state_dir::prune_state_dir(&settings, rev)
                        .map_err(|e| format!("pruning old revisions: {e}"))
                })
                .await;
                if let Ok(Err(e)) = kept {
                    tracing::warn!("fleet: revision {rev} serves, but: {e}");
                }
            }
            _ => refuse("it did not load: see the reload line above".into()),
        }
    }

    /// Say that this node started on revision `rev` read back from its
    /// state dir (`last_accepted`).
    pub fn started_from_state_dir(&self, rev: i64) {
        self.server.fleet_revision.store(rev, Ordering::Relaxed);
        self.source.store(Source::StateDir as u8, Ordering::Relaxed);
    }
}

/// The file under the state dir naming the last revision this node served.
const ACCEPTED: &str = "accepted";
/// In a revision's folder: the pushed config as pushed, and the checksum
/// of the geo database it was checked against, so a restart composes it
/// again with the node's own tables of that time.
const PUSHED_CONFIG: &str = ".pushed-config.toml";
const PUSHED_GEO: &str = ".pushed-geo-sha256";

/// Record `rev` as the revision a restart serves (written whole, then
/// renamed, so a crash leaves the old record or the new one).
fn accepted(s: &FleetSettings, rev: i64) -> Result<(), String> {
    let tmp = s.state_dir.join(format!("{ACCEPTED}.tmp"));
    let out = s.state_dir.join(ACCEPTED);
    std::fs::write(&tmp, format!("{rev}\n"))
        .and_then(|()| std::fs::rename(&tmp, &out))
        .map_err(|e| format!("{}: {e}", out.display()))
}

/// At start: the last revision this node accepted, composed again with its
/// own tables, and the path of its config; None (and why, in the log) when
/// there is none or it no longer composes, so the node's own file serves.
pub fn last_accepted(s: &FleetSettings) -> Option<(i64, std::path::PathBuf)> {
    let path = s.state_dir.join(ACCEPTED);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(
                "fleet: {}: {e}: starting on this node's own config",
                path.display()
            );
            return None;
        }
    };
    let Ok(rev) = text.trim().parse::<i64>() else {
        tracing::warn!(
            "fleet: {}: not a revision number: starting on this node's own config",
            path.display()
        );
        return None;
    };
    let dir = s.state_dir.join(format!("rev-{rev}"));
    match compose(s, &dir) {
        Ok(p) => Some((rev, p)),
        Err(e) => {
            tracing::warn!(
                "fleet: the last accepted revision {rev} ({}) cannot be served again: {e}: starting on this node's own config",
                dir.display()
            );
            None
        }
    }
}

/// Write revision `rev` under the state dir (its files, and the pushed
/// config kept as pushed) and compose it (`compose`); the path of its
/// config file.
pub(super) fn materialize(
    s: &FleetSettings,
    rev: i64,
    p: &Pushed,
) -> Result<std::path::PathBuf, String> {
    let dir = s.state_dir.join(format!("rev-{rev}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut config_text = None;
    for (name, data) in &p.files {
        let rel = std::path::Path::new(name);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(format!("file {name:?} is outside the config's folder"));
        }
        let bytes = data.as_slice();
        if *name == p.config {
            config_text = Some(String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())?);
            continue;
        }
        let out = dir.join(rel);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&out, bytes).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    let text = config_text.ok_or("the config file is missing")?;
    let kept = |name: &str, data: &str| {
        let out = dir.join(name);
        std::fs::write(&out, data).map_err(|e| format!("{}: {e}", out.display()))
    };
    kept(PUSHED_CONFIG, &text)?;
    kept(PUSHED_GEO, p.geo_sha256.as_deref().unwrap_or(""))?;
    compose(s, &dir)
}

/// Revision `rev`, already under the state dir, composed again with this
/// node's own tables as they are now (a reload of the served revision);
/// the path of its config.
pub fn recompose(s: &FleetSettings, rev: i64) -> Result<std::path::PathBuf, String> {
    compose(s, &s.state_dir.join(format!("rev-{rev}")))
}

/// The config of the revision unpacked in `dir`, as this node serves it:
/// the pushed config with this node's own `[server]`, `[api]` and
/// `[fleet]` tables, key files and geo database (which must match the
/// checksum the push was checked against); written as `dir/meridian.toml`,
/// whose path it returns.
fn compose(s: &FleetSettings, dir: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let read = |name: &str| {
        let p = dir.join(name);
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let text = read(PUSHED_CONFIG)?;
    let geo_sha256 = Some(read(PUSHED_GEO)?.trim().to_string()).filter(|g| !g.is_empty());
    let local_dir = s
        .local_config
        .parent()
        .unwrap_or(std::path::Path::new("/"))
        .to_path_buf();
    let mut cfg: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
    let local_text = std::fs::read_to_string(&s.local_config)
        .map_err(|e| format!("{}: {e}", s.local_config.display()))?;
    let mut local: toml::Table = toml::from_str(&local_text).map_err(|e| e.to_string())?;
    // This node's own tables, their files found where its config is.
    if let Some(toml::Value::Table(api)) = local.get_mut("api") {
        if let Some(t) = api.get_mut("tokens") {
            absolutize(t, &local_dir);
        }
    }
    if let Some(toml::Value::Table(f)) = local.get_mut("fleet") {
        for k in ["ca", "cert", "key", "password_file"] {
            if let Some(v) = f.get_mut(k) {
                absolutize(v, &local_dir);
            }
        }
        // The state dir stays where this node's config put it.
        f.insert(
            "state_dir".into(),
            toml::Value::String(s.state_dir.display().to_string()),
        );
    }
    for t in ["server", "api", "fleet"] {
        match local.remove(t) {
            Some(v) => {
                cfg.insert(t.into(), v);
            }
            None => {
                cfg.remove(t);
            }
        }
    }
    // Key files and the geo database are this node's own copies.
    if let Some(toml::Value::Array(zones)) = cfg.get_mut("zone") {
        for z in zones {
            if let Some(toml::Value::Table(d)) = z.get_mut("dnssec") {
                for k in ["keys", "publish"] {
                    if let Some(toml::Value::Array(a)) = d.get_mut(k) {
                        a.iter_mut().for_each(|v| absolutize(v, &local_dir));
                    }
                }
            }
        }
    }
    if let Some(toml::Value::Table(g)) = cfg.get_mut("geo") {
        if let Some(db) = g.get_mut("database") {
            absolutize(db, &local_dir);
            let path = std::path::PathBuf::from(db.as_str().unwrap_or_default());
            let have = sha256_hex(&path)?;
            if let Some(want) = &geo_sha256 {
                if *want != have {
                    return Err(format!(
                        "the geo database {} has SHA-256 {have}, the pushed config was checked against {want}",
                        path.display()
                    ));
                }
            }
        }
    }
    let out = dir.join("meridian.toml");
    let text = toml::to_string(&cfg).map_err(|e| e.to_string())?;
    std::fs::write(&out, text).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}
