//! `meridian fleet push`: a checked config and the files it reads, stored
//! in etcd as a new revision.

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
    super::store::store(&mut c, &settings, &pushed).await
}
