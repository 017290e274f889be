//! `meridian fleet push` and its other end: a checked config and the files
//! it reads, stored as one etcd value, and each node writing a pushed
//! revision under its state dir (`materialize`) before it serves it.

use super::*;

/// The pushed config, as stored at `{prefix}config`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pushed {
    /// The config file's name among `files`.
    pub config: String,
    /// Every file the config reads that travels with it (the config, the
    /// zone files and their `$INCLUDE`s), by path relative to the config's
    /// folder, base64.
    pub files: Vec<(String, String)>,
    /// SHA-256 (hex) of the geo database the config names, if any: each
    /// node serves its local copy only if it matches.
    pub geo_sha256: Option<String>,
    /// Who pushed (user@host) and when (Unix ms).
    pub by: String,
    /// See `by`.
    pub at_ms: u64,
}

pub(super) fn b64() -> data_encoding::Encoding {
    data_encoding::BASE64
}

pub(super) fn sha256_hex(path: &std::path::Path) -> Result<String, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let d = ring::digest::digest(&ring::digest::SHA256, &data);
    Ok(data_encoding::HEXLOWER.encode(d.as_ref()))
}

/// Make `v` absolute against `dir` when it is a relative path string.
pub(super) fn absolutize(v: &mut toml::Value, dir: &std::path::Path) {
    if let toml::Value::String(s) = v {
        if !std::path::Path::new(s.as_str()).is_absolute() {
            *s = dir.join(s.as_str()).display().to_string();
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
        let bytes = b64()
            .decode(data.as_bytes())
            .map_err(|e| format!("file {name:?}: {e}"))?;
        if *name == p.config {
            config_text = Some(String::from_utf8(bytes).map_err(|e| e.to_string())?);
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

/// `meridian fleet push --config FILE`: check the config exactly as
/// `meridian check` does (zones, keys, geo database), refuse a bad one,
/// and store it with its zone files in etcd as a new revision, which every
/// node then serves. Returns the revision.
pub async fn push(config: &std::path::Path) -> Result<i64, String> {
    let settings = settings_of(config)?;
    let engine = crate::engine::Engine::load(config).map_err(|e| e.to_string())?;
    let dir = config
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf();
    let rel = |p: &std::path::Path| -> Result<String, String> {
        let p = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let base = std::fs::canonicalize(&dir).map_err(|e| e.to_string())?;
        p.strip_prefix(&base)
            .map(|r| r.display().to_string())
            .map_err(|_| {
                format!(
                    "{} is outside the config's folder {}: a pushed config carries only files under it",
                    p.display(),
                    base.display()
                )
            })
    };
    let read = |p: &std::path::Path| -> Result<String, String> {
        std::fs::read(p)
            .map(|b| b64().encode(&b))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let name = rel(config)?;
    let mut files = vec![(name.clone(), read(config)?)];
    for z in &engine.zones {
        for st in &z.sources {
            let r = rel(&st.path)?;
            if !files.iter().any(|(n, _)| *n == r) {
                files.push((r, read(&st.path)?));
            }
        }
    }
    let geo_sha256 = match &engine.geo_path {
        Some(p) => Some(sha256_hex(p)?),
        None => None,
    };
    let by = format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "?".into()),
        std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    );
    let pushed = Pushed {
        config: name,
        files,
        geo_sha256,
        by,
        at_ms: now_ms(),
    };
    let mut c = connect(&settings).await?;
    let v = serde_json::to_vec(&pushed).map_err(|e| e.to_string())?;
    let r = c
        .put(format!("{}config", settings.prefix), v, None)
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    Ok(r.header().map_or(0, |h| h.revision()))
}
