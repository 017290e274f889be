//! `meridian fleet push`: a checked config and the files it reads, stored
//! in etcd as a new revision (`store`), older revisions pruned, and the
//! wait for the registered nodes to serve or refuse it.

use super::*;

/// A pushed config with its files (stored as `store` lays it out).
#[derive(Clone, Debug)]
pub struct Pushed {
    /// The config file's name among `files`.
    pub config: String,
    /// Every file the config reads that travels with it (the config, the
    /// zone files and their `$INCLUDE`s), by path relative to the config's
    /// folder, with their content.
    pub files: Vec<(String, Vec<u8>)>,
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

/// What `push` stored.
#[derive(Debug)]
pub struct Stored {
    /// The etcd revision of the push: the one nodes report serving.
    pub revision: i64,
    /// What pruning the older revisions did, or why it failed (the push
    /// itself stands).
    pub pruned: Result<Pruned, String>,
}

/// `meridian fleet push --config FILE`: check the config exactly as
/// `meridian check` does (zones, keys, geo database), refuse a bad one,
/// store it with its zone files in etcd as a new revision, which every
/// node then serves, and prune the revisions past `keep_revisions`.
pub async fn push(config: &std::path::Path) -> Result<Stored, String> {
    let settings = settings_of(config)?;
    let engine = crate::engine::Engine::load(config).map_err(|e| e.to_string())?;
    // `--config meridian.toml` has an empty parent: the current folder.
    let dir = match config.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
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
    let read = |p: &std::path::Path| -> Result<Vec<u8>, String> {
        std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))
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
    let revision = super::store::store(&mut c, &settings, &pushed).await?;
    let pruned = super::store::prune(&mut c, &settings).await;
    Ok(Stored { revision, pruned })
}

/// One node's line while `fleet push` waits: `Some` once it answered
/// revision `rev` (serves it or a later one, or refused it), with whether
/// it serves.
fn answer(n: &NodeInfo, rev: i64) -> Option<(bool, String)> {
    if n.revision >= rev {
        return Some((true, format!("{}: serves revision {}", n.node, n.revision)));
    }
    match &n.refused {
        Some(r) if r.revision >= rev => Some((
            false,
            format!("{}: refused revision {}: {}", n.node, r.revision, r.why),
        )),
        _ => None,
    }
}

/// Wait until every node registered now serves revision `rev` or refused
/// it, up to `timeout`, polling the registrations. `line` gets a line per
/// node as it answers (or does not, at the end), then a summary. Whether
/// every node serves the revision.
pub async fn await_nodes(
    settings: &FleetSettings,
    rev: i64,
    timeout: Duration,
    mut line: impl FnMut(&str),
) -> Result<bool, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut c = connect(settings).await?;
    let registered = super::status::nodes(&mut c, settings).await?;
    if registered.is_empty() {
        line(&format!(
            "no node is registered under {}: a node serves revision {rev} when it starts",
            settings.prefix
        ));
        return Ok(true);
    }
    let mut waiting: Vec<String> = registered.iter().map(|n| n.node.clone()).collect();
    let (mut serve, mut refused, mut silent) = (0, 0, 0);
    loop {
        // A failed read is tried again until the deadline: etcd may be
        // electing a leader.
        if let Ok(now) = super::status::nodes(&mut c, settings).await {
            waiting.retain(|name| match now.iter().find(|n| n.node == *name) {
                None => {
                    line(&format!("{name}: no answer: its registration ended"));
                    silent += 1;
                    false
                }
                Some(n) => match answer(n, rev) {
                    Some((ok, text)) => {
                        line(&text);
                        if ok {
                            serve += 1
                        } else {
                            refused += 1
                        }
                        false
                    }
                    None => true,
                },
            });
        }
        if waiting.is_empty() || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for name in &waiting {
        let t = humantime::format_duration(timeout);
        line(&format!("{name}: no answer within {t}"));
        silent += 1;
    }
    line(&format!(
        "{serve} of {} node(s) serve revision {rev}, {refused} refused it, {silent} did not answer",
        registered.len()
    ));
    Ok(serve == registered.len())
}
