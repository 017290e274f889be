//! Serving pushed revisions: a revision from the watch is written under the
//! state dir and handed to the daemon to reload; a refusal keeps the
//! running config and says why.

use super::*;

impl Fleet {
    /// Serve pushed revision `rev` (its stored value `v`): write its files
    /// under the state dir with this node's own `[server]`, `[api]` and
    /// `[fleet]` tables and key files, check the geo database's checksum,
    /// and have the daemon reload from it. A refusal or a failed load keeps
    /// the running config, and says why in the log and `/status`.
    pub(super) async fn serve_pushed(&self, rev: i64, v: &[u8]) {
        if rev <= self.server.fleet_revision.load(Ordering::Relaxed) {
            return;
        }
        let refuse = |why: String| {
            tracing::error!("fleet: config revision {rev} refused, the running one is kept: {why}");
            *self.refused.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Refusal { revision: rev, why });
        };
        // Decoding, writing the files and hashing the geo database take a
        // while for a large config: not on a runtime thread.
        let pushed = match self.client().await {
            Ok(mut c) => super::store::load(&mut c, &self.settings, v).await,
            Err(e) => Err(e),
        };
        let pushed = match pushed {
            Ok(p) => p,
            Err(why) => return refuse(why),
        };
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
                tracing::info!("fleet: serving config revision {rev}");
            }
            _ => refuse("it did not load: see the reload line above".into()),
        }
    }
}

/// Write revision `rev` under the state dir as this node will serve it;
/// the path of its config file.
pub(super) fn materialize(
    s: &FleetSettings,
    rev: i64,
    p: &Pushed,
) -> Result<std::path::PathBuf, String> {
    let dir = s.state_dir.join(format!("rev-{rev}"));
    let local_dir = s
        .local_config
        .parent()
        .unwrap_or(std::path::Path::new("/"))
        .to_path_buf();
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
            if let Some(want) = &p.geo_sha256 {
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
