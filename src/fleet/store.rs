//! Where a pushed revision lives in etcd: `store` writes one (the pusher's
//! side), `load` reads it back from the `{prefix}config` value a node sees.

use super::*;

/// Store `p` under the prefix; the etcd revision that holds it.
pub(super) async fn store(
    c: &mut Client,
    settings: &FleetSettings,
    p: &Pushed,
) -> Result<i64, String> {
    let v = serde_json::to_vec(p).map_err(|e| e.to_string())?;
    let r = c
        .put(format!("{}config", settings.prefix), v, None)
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    Ok(r.header().map_or(0, |h| h.revision()))
}

/// The pushed config whose `{prefix}config` value is `v`.
pub(super) async fn load(
    _c: &mut Client,
    _settings: &FleetSettings,
    v: &[u8],
) -> Result<Pushed, String> {
    serde_json::from_slice::<Pushed>(v).map_err(|e| format!("not a pushed config: {e}"))
}
