//! `meridian fleet status`: the registered nodes and the shared results,
//! read once from etcd and printed as tables.

use super::*;

/// The registered nodes of the fleet `settings` names (for `meridian fleet
/// status`), by name.
pub(super) async fn nodes(
    c: &mut Client,
    settings: &FleetSettings,
) -> Result<Vec<NodeInfo>, String> {
    let r = c
        .get(
            format!("{}nodes/", settings.prefix),
            Some(GetOptions::new().with_prefix()),
        )
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    let mut v: Vec<NodeInfo> = r
        .kvs()
        .iter()
        .filter_map(|kv| serde_json::from_slice(kv.value()).ok())
        .collect();
    v.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(v)
}

/// The check results the fleet's checkers share, by entry (address#port#
/// check): each reporting node, its last result and when (Unix ms).
pub(super) async fn shared_results(
    c: &mut Client,
    settings: &FleetSettings,
) -> Result<BTreeMap<String, Vec<(String, Shared)>>, String> {
    let prefix = format!("{}health/", settings.prefix);
    let r = c
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    let mut out: BTreeMap<String, Vec<(String, Shared)>> = BTreeMap::new();
    for kv in r.kvs() {
        let Ok(key) = std::str::from_utf8(kv.key()) else {
            continue;
        };
        let Some((entry, node, sh)) = key
            .strip_prefix(prefix.as_str())
            .and_then(|k| shared_result(k, kv.value()))
        else {
            continue;
        };
        out.entry(entry.to_string())
            .or_default()
            .push((node.to_string(), sh));
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(out)
}

/// The `[fleet]` table of the config file `path`, checked (for the
/// `meridian fleet` commands); an error when it has none.
pub fn settings_of(path: &std::path::Path) -> Result<FleetSettings, String> {
    let src = crate::config::Source::read(path).map_err(|e| e.to_string())?;
    let cfg = src.parse().map_err(|e| e.to_string())?;
    let f = cfg
        .fleet
        .ok_or_else(|| format!("{}: no [fleet] table", path.display()))?;
    crate::config::fleet::check(&src, f.get_ref()).map_err(|e| e.to_string())
}

/// `meridian fleet status`: every registered node, its last contact, the
/// revision, engine generation and config it serves, and its view of
/// member health, as a table, with each node's last refused revision; then each checked member's shared results (who reported
/// what, how long ago).
pub async fn status_table(settings: &FleetSettings) -> Result<String, String> {
    let mut c = connect(settings).await?;
    let explained = |e: String| super::link::explain(&e, settings);
    let nodes = nodes(&mut c, settings).await.map_err(explained)?;
    let now = now_ms();
    let mut out = format!(
        "{:<16} {:>10} {:>9} {:>9} {:>12} {:>8} {:>6}  {}\n",
        "NODE", "CONTACT", "REVISION", "SOURCE", "GENERATION", "ENTRIES", "DOWN", "CONFIG"
    );
    for n in &nodes {
        let age = now.saturating_sub(n.contact_ms) as f64 / 1000.0;
        out += &format!(
            "{:<16} {:>9.1}s {:>9} {:>9} {:>12} {:>8} {:>6}  {}\n",
            n.node,
            age,
            n.revision,
            if n.source.is_empty() { "?" } else { &n.source },
            n.generation,
            n.entries,
            n.down,
            n.config
        );
    }
    out += &format!(
        "{} node(s) registered in etcd {} under {}\n",
        nodes.len(),
        settings.endpoints.join(","),
        settings.prefix
    );
    out += &refusals(&nodes);
    // What the checkers report, member by member: the results every other
    // node takes its majority from.
    let shared = shared_results(&mut c, settings).await.map_err(explained)?;
    if !shared.is_empty() {
        out += &format!("\n{:<40} {:>4} {:>4}  RESULTS\n", "MEMBER", "UP", "DOWN");
        for (entry, rs) in &shared {
            out += &result_row(entry, rs, now);
        }
    }
    Ok(out)
}

/// Each node's last refused revision and why, under the node table.
pub(super) fn refusals(nodes: &[NodeInfo]) -> String {
    let mut out = String::new();
    for n in nodes {
        if let Some(r) = &n.refused {
            let now = if r.revision > n.revision {
                "still serving"
            } else {
                "now serving"
            };
            out += &format!(
                "{} refused revision {} ({now} {}): {}\n",
                n.node, r.revision, n.revision, r.why
            );
        }
    }
    out
}

/// One member's line of `fleet status`: the fresh shared results counted
/// in UP and DOWN, as the nodes count them, and every result with its age
/// (the stale ones marked). Ages compare the checker's clock with this
/// host's (a one-off read has no arrival time).
pub(super) fn result_row(entry: &str, rs: &[(String, Shared)], now: u64) -> String {
    let (mut ups, mut downs) = (0, 0);
    let each: Vec<String> = rs
        .iter()
        .map(|(n, sh)| {
            let age_ms = now.saturating_sub(sh.at_ms);
            // A node that did not say its interval: the default one (10 s).
            let interval = if sh.interval_ms == 0 {
                10_000
            } else {
                sh.interval_ms
            };
            let fresh = age_ms <= fresh_window(interval);
            match (fresh, sh.up) {
                (true, true) => ups += 1,
                (true, false) => downs += 1,
                (false, _) => {}
            }
            let age = age_ms as f64 / 1000.0;
            let stale = if fresh { "" } else { " (stale)" };
            format!(
                "{n} {} {age:.1}s ago{stale}",
                if sh.up { "up" } else { "down" }
            )
        })
        .collect();
    format!("{entry:<40} {ups:>4} {downs:>4}  {}\n", each.join(", "))
}
