//! Divided health checks: the probe results checkers share through etcd,
//! how a node holds them (judged by their local arrival, never by the
//! checker's clock), and who checks what (rendezvous hashing).

use super::*;

/// A probe result as shared in etcd.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Shared {
    pub(super) up: bool,
    /// When the checker probed, by its own clock.
    pub(super) at_ms: u64,
    /// The check's interval (0 from a node that did not say), for the
    /// freshness window of `fleet status`.
    #[serde(default)]
    pub(super) interval_ms: u64,
}

/// A shared result as this node holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Received {
    pub(super) up: bool,
    /// The checker's time of the probe (tells a new result from a repeat).
    pub(super) at_ms: u64,
    /// When the watch event arrived here, by the local clock.
    pub(super) received_ms: u64,
}

/// How long a result counts after its probe: three intervals plus 1 s.
pub(super) fn fresh_window(interval_ms: u64) -> u64 {
    3 * interval_ms + 1000
}

/// `s` from a checker, arriving at local time `now`; the same result seen
/// again (a resync) keeps its first arrival.
pub(super) fn receive(prev: Option<&Received>, s: Shared, now: u64) -> Received {
    match prev {
        Some(p) if p.at_ms == s.at_ms && p.up == s.up => *p,
        _ => Received {
            up: s.up,
            at_ms: s.at_ms,
            received_ms: now,
        },
    }
}

/// The fresh results of an entry's `assigned` checkers at local time
/// `now`: whether up, and when it arrived. Judged by the arrival, not by
/// `at_ms`, so a checker's skewed clock does not make its results stale
/// (or fresh for longer).
pub(super) fn fresh_results(
    results: Option<&std::collections::HashMap<String, Received>>,
    assigned: &[&str],
    now: u64,
    window: u64,
) -> Vec<(bool, u64)> {
    results
        .map(|m| {
            m.iter()
                .filter(|(n, r)| {
                    assigned.contains(&n.as_str()) && now.saturating_sub(r.received_ms) <= window
                })
                .map(|(_, r)| (r.up, r.received_ms))
                .collect()
        })
        .unwrap_or_default()
}

/// An entry's name in etcd: address, port and check, the same on every
/// node with the same config.
pub(super) fn entry_key(s: &crate::health::CheckSpec) -> String {
    let port = s
        .effective_port()
        .map_or(String::from("-"), |p| p.to_string());
    let check = s.check.as_ref().map_or("", |c| c.name.as_str());
    format!("{}#{port}#{check}", s.addr)
}

/// Rendezvous score of (entry, node): FNV-1a, stable across nodes and
/// builds, so every node computes the same assignment.
pub(super) fn score(entry: &str, node: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in entry.bytes().chain([0xFF]).chain(node.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Mixed once more so that similar names spread.
    h ^= h >> 33;
    h.wrapping_mul(0xff51_afd7_ed55_8ccd)
}

/// The `k` nodes of `live` that probe `entry` (highest scores).
pub fn checkers_of<'a>(entry: &str, live: impl Iterator<Item = &'a str>, k: usize) -> Vec<&'a str> {
    let mut v: Vec<(u64, &str)> = live.map(|n| (score(entry, n), n)).collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.into_iter().take(k).map(|(_, n)| n).collect()
}

/// A shared result's key (after `health/`: `{entry}/{node}`) and value.
pub(super) fn shared_result<'k>(key: &'k str, value: &[u8]) -> Option<(&'k str, &'k str, Shared)> {
    let (entry, node) = key.rsplit_once('/')?;
    Some((entry, node, serde_json::from_slice(value).ok()?))
}
