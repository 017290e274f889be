//! Where a pushed revision lives in etcd: `store` writes one (the pusher's
//! side), `load` reads it back from the `{prefix}config` value a node sees,
//! `prune` drops all but the last `keep_revisions`.
//!
//! One etcd request is limited by its `--max-request-bytes` (1.5 MiB by
//! default), so file contents travel apart from the config key:
//!
//! - `{prefix}blobs/{sha256}/{i:08}`: a file's content in chunks of
//!   [`CHUNK`] bytes, addressed by its SHA-256 and written first, one
//!   request per chunk; a blob already stored is not sent again.
//! - `{prefix}config`: the small [`Manifest`] (names, sizes, SHA-256,
//!   geo checksum, who and when), written last with its copy under
//!   `{prefix}revisions/` in one transaction, so a node never sees a
//!   manifest before its chunks.
//!
//! A node reads the chunks a few per request (gRPC responses are limited
//! too) and checks each file's SHA-256.

use super::*;
use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp};

/// Bytes per chunk: well under etcd's default request limit.
pub(super) const CHUNK: usize = 768 * 1024;
/// Chunks per read: a response stays under the client's 4 MiB limit.
const CHUNKS_PER_GET: i64 = 3;
/// Blobs whose presence the manifest's transaction checks (etcd allows
/// 128 comparisons by default).
const MAX_COMPARES: usize = 100;

/// The value of `{prefix}config` and `{prefix}revisions/...`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    /// The config file's name among `files`.
    pub config: String,
    /// Every file of the revision, its content under `blobs/`.
    pub files: Vec<FileRef>,
    /// See [`Pushed::geo_sha256`].
    pub geo_sha256: Option<String>,
    /// See [`Pushed::by`].
    pub by: String,
    /// See [`Pushed::at_ms`].
    pub at_ms: u64,
}

/// One file of a manifest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct FileRef {
    /// Path relative to the config's folder.
    pub name: String,
    /// Length in bytes.
    pub size: u64,
    /// SHA-256 (hex) of the content: the blob's name.
    pub sha256: String,
    /// Chunks of the blob.
    pub chunks: u32,
}

/// The one-value layout of earlier versions (files inline, base64): read
/// so that a node upgraded under an old push still serves it.
#[derive(Deserialize)]
struct Inline {
    config: String,
    files: Vec<(String, String)>,
    geo_sha256: Option<String>,
    by: String,
    at_ms: u64,
}

fn sha256_of(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    data_encoding::HEXLOWER.encode(d.as_ref())
}

fn blob_dir(prefix: &str, sha: &str) -> String {
    format!("{prefix}blobs/{sha}/")
}

fn chunk_key(prefix: &str, sha: &str, i: u32) -> String {
    format!("{prefix}blobs/{sha}/{i:08}")
}

fn etcd(e: etcd_client::Error) -> String {
    format!("etcd: {e}")
}

/// The key ranges a node reads and watches: the whole prefix but the
/// blobs (`[start, end)` twice), so that a resync does not read megabytes
/// of zone content. For the node side (follow, shared).
pub(super) fn node_ranges(prefix: &str) -> [(Vec<u8>, Vec<u8>); 2] {
    let mut end = prefix.as_bytes().to_vec();
    // The prefix ends with '/': its range ends at the next byte.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let blobs = format!("{prefix}blobs/").into_bytes();
    let after_blobs = format!("{prefix}blobs0").into_bytes();
    [(prefix.as_bytes().to_vec(), blobs), (after_blobs, end)]
}

/// Whether every chunk of a blob is stored.
async fn has_blob(c: &mut Client, prefix: &str, f: &FileRef) -> Result<bool, String> {
    let r = c
        .get(
            blob_dir(prefix, &f.sha256),
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .map_err(etcd)?;
    Ok(r.count() == i64::from(f.chunks))
}

/// Write a blob's chunks, one request each.
async fn put_blob(c: &mut Client, prefix: &str, f: &FileRef, data: &[u8]) -> Result<(), String> {
    for (i, part) in data.chunks(CHUNK).enumerate() {
        c.put(chunk_key(prefix, &f.sha256, i as u32), part, None)
            .await
            .map_err(|e| format!("etcd, storing {}: {e}", f.name))?;
    }
    Ok(())
}

/// Store `p` under the prefix; the etcd revision that holds it.
pub(super) async fn store(
    c: &mut Client,
    settings: &FleetSettings,
    p: &Pushed,
) -> Result<i64, String> {
    let prefix = settings.prefix.as_str();
    let files: Vec<FileRef> = p
        .files
        .iter()
        .map(|(name, data)| FileRef {
            name: name.clone(),
            size: data.len() as u64,
            sha256: sha256_of(data),
            chunks: data.len().div_ceil(CHUNK) as u32,
        })
        .collect();
    let manifest = Manifest {
        config: p.config.clone(),
        files: files.clone(),
        geo_sha256: p.geo_sha256.clone(),
        by: p.by.clone(),
        at_ms: p.at_ms,
    };
    let v = serde_json::to_vec(&manifest).map_err(|e| e.to_string())?;
    let id = format!(
        "{}revisions/{:013}-{}",
        prefix,
        p.at_ms,
        &sha256_of(&v)[..12]
    );
    // Twice at most: a blob found stored may be pruned by another pusher
    // before the manifest lands; the transaction notices, and it is sent.
    for _ in 0..2 {
        for (f, (_, data)) in files.iter().zip(&p.files) {
            if f.chunks > 0 && !has_blob(c, prefix, f).await? {
                put_blob(c, prefix, f, data).await?;
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        let present: Vec<Compare> = files
            .iter()
            .filter(|f| f.chunks > 0 && seen.insert(&f.sha256))
            .take(MAX_COMPARES)
            .map(|f| {
                let last = chunk_key(prefix, &f.sha256, f.chunks - 1);
                Compare::version(last, CompareOp::Greater, 0)
            })
            .collect();
        let txn = Txn::new().when(present).and_then(vec![
            TxnOp::put(format!("{prefix}config"), v.clone(), None),
            TxnOp::put(id.clone(), v.clone(), None),
        ]);
        let r = c.txn(txn).await.map_err(etcd)?;
        if r.succeeded() {
            return Ok(r.header().map_or(0, |h| h.revision()));
        }
    }
    Err("a stored file vanished twice while pushing (another push pruning it?)".into())
}

/// The pushed config whose `{prefix}config` value is `v`: its files read
/// from their chunks and checked against their SHA-256.
pub(super) async fn load(
    c: &mut Client,
    settings: &FleetSettings,
    v: &[u8],
) -> Result<Pushed, String> {
    let m = match serde_json::from_slice::<Manifest>(v) {
        Ok(m) => m,
        Err(e) => return inline(v).map_err(|_| format!("not a pushed config: {e}")),
    };
    let mut files = Vec::with_capacity(m.files.len());
    for f in &m.files {
        let data = read_blob(c, &settings.prefix, f).await?;
        // Hashing megabytes: not on a runtime thread.
        let (data, sha) = tokio::task::spawn_blocking(move || {
            let sha = sha256_of(&data);
            (data, sha)
        })
        .await
        .map_err(|e| e.to_string())?;
        if data.len() as u64 != f.size || sha != f.sha256 {
            return Err(format!(
                "file {:?}: read {} bytes with SHA-256 {sha}, the push stored {} bytes with {}",
                f.name,
                data.len(),
                f.size,
                f.sha256
            ));
        }
        files.push((f.name.clone(), data));
    }
    Ok(Pushed {
        config: m.config,
        files,
        geo_sha256: m.geo_sha256,
        by: m.by,
        at_ms: m.at_ms,
    })
}

/// A blob's content, [`CHUNKS_PER_GET`] chunks per request.
async fn read_blob(c: &mut Client, prefix: &str, f: &FileRef) -> Result<Vec<u8>, String> {
    let mut data = Vec::with_capacity(f.size as usize);
    let end = format!("{prefix}blobs/{}0", f.sha256);
    for i in (0..f.chunks).step_by(CHUNKS_PER_GET as usize) {
        let r = c
            .get(
                chunk_key(prefix, &f.sha256, i),
                Some(
                    GetOptions::new()
                        .with_range(end.as_str())
                        .with_limit(CHUNKS_PER_GET),
                ),
            )
            .await
            .map_err(etcd)?;
        let want = (f.chunks - i).min(CHUNKS_PER_GET as u32);
        let mut got = 0;
        for kv in r.kvs().iter().take(want as usize) {
            if kv.key() != chunk_key(prefix, &f.sha256, i + got).as_bytes() {
                break;
            }
            data.extend_from_slice(kv.value());
            got += 1;
        }
        if got < want {
            return Err(format!(
                "file {:?}: its content (blob {}) is no longer in etcd: pruned by later pushes?",
                f.name, f.sha256
            ));
        }
    }
    Ok(data)
}

/// A value in the earlier one-value layout.
fn inline(v: &[u8]) -> Result<Pushed, String> {
    let p: Inline = serde_json::from_slice(v).map_err(|e| e.to_string())?;
    let files = p
        .files
        .into_iter()
        .map(|(n, d)| {
            b64()
                .decode(d.as_bytes())
                .map(|b| (n.clone(), b))
                .map_err(|e| format!("file {n:?}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Pushed {
        config: p.config,
        files,
        geo_sha256: p.geo_sha256,
        by: p.by,
        at_ms: p.at_ms,
    })
}

/// What `prune` dropped (the revisions past `keep_revisions`).
#[derive(Debug, Default)]
pub struct Pruned {
    /// Revisions (manifests) deleted.
    pub revisions: usize,
    /// Blobs deleted.
    pub blobs: usize,
    /// The revision below which etcd's history was compacted, if it was.
    pub compacted: Option<i64>,
}

/// Keep the last `keep_revisions` pushes: delete older manifests, the
/// blobs no kept manifest names (and that are older than the oldest kept
/// one, so that a push in flight keeps its fresh blobs), and compact
/// etcd's history below the oldest kept push unless `compact_history` is
/// off.
pub(super) async fn prune(c: &mut Client, settings: &FleetSettings) -> Result<Pruned, String> {
    let prefix = settings.prefix.as_str();
    let r = c
        .get(
            format!("{prefix}revisions/"),
            Some(GetOptions::new().with_prefix()),
        )
        .await
        .map_err(etcd)?;
    let mut revs: Vec<(i64, Vec<u8>, Option<Manifest>)> = r
        .kvs()
        .iter()
        .map(|kv| {
            let m = serde_json::from_slice(kv.value()).ok();
            (kv.mod_revision(), kv.key().to_vec(), m)
        })
        .collect();
    revs.sort_by_key(|r| r.0);
    let mut out = Pruned::default();
    let drop_n = revs.len().saturating_sub(settings.keep_revisions);
    for (_, key, _) in &revs[..drop_n] {
        c.delete(key.clone(), None).await.map_err(etcd)?;
        out.revisions += 1;
    }
    let kept = &revs[drop_n..];
    let Some(oldest) = kept.first().map(|r| r.0) else {
        return Ok(out);
    };
    let named: std::collections::HashSet<&str> = kept
        .iter()
        .filter_map(|r| r.2.as_ref())
        .flat_map(|m| m.files.iter().map(|f| f.sha256.as_str()))
        .collect();
    out.blobs = drop_blobs(c, prefix, &named, oldest).await?;
    // Only when a revision was dropped: compacting at the newest push
    // would cancel every node's watch that has not caught up with it.
    if settings.compact_history && drop_n > 0 {
        match c.compact(oldest, None).await {
            Ok(_) => out.compacted = Some(oldest),
            // Already compacted there (no new oldest since the last push).
            Err(e) if e.to_string().contains("compacted") => {}
            Err(e) => return Err(format!("etcd compaction: {e}")),
        }
    }
    Ok(out)
}

/// Delete the blobs not in `named` whose chunks all predate `oldest`.
async fn drop_blobs(
    c: &mut Client,
    prefix: &str,
    named: &std::collections::HashSet<&str>,
    oldest: i64,
) -> Result<usize, String> {
    let dir = format!("{prefix}blobs/");
    let r = c
        .get(
            dir.as_str(),
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await
        .map_err(etcd)?;
    // Per blob: its newest chunk's revision.
    let mut newest: BTreeMap<String, i64> = BTreeMap::new();
    for kv in r.kvs() {
        let Some(sha) = kv
            .key_str()
            .ok()
            .and_then(|k| k.strip_prefix(dir.as_str()))
            .and_then(|k| k.split('/').next())
        else {
            continue;
        };
        let e = newest.entry(sha.to_string()).or_default();
        *e = (*e).max(kv.mod_revision());
    }
    let mut n = 0;
    for (sha, rev) in newest {
        if named.contains(sha.as_str()) || rev >= oldest {
            continue;
        }
        c.delete(
            blob_dir(prefix, &sha),
            Some(DeleteOptions::new().with_prefix()),
        )
        .await
        .map_err(etcd)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ranges_cover_the_prefix_but_the_blobs() {
        let [(a, b), (c, d)] = node_ranges("/m/");
        let inside = |k: &str, (s, e): (&[u8], &[u8])| s <= k.as_bytes() && k.as_bytes() < e;
        for k in [
            "/m/config",
            "/m/nodes/a",
            "/m/revisions/1",
            "/m/weights/x",
            "/m/a",
        ] {
            assert!(
                inside(k, (&a, &b)) || inside(k, (&c, &d)),
                "{k} not covered"
            );
        }
        for k in ["/m/blobs/ab/00000000", "/n/config", "/m"] {
            assert!(!inside(k, (&a, &b)) && !inside(k, (&c, &d)), "{k} covered");
        }
    }
}
