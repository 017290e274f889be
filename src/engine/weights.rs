//! Runtime weights: the operator's weight factors by address (or address
//! and port), a value the daemon owns like the overrides, so they survive
//! reloads; and their application to an engine's pools through
//! [`Engine::rebalance`] (`balance`), the one place effective weights are
//! computed. Everything here runs off the query path.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::Engine;
use crate::health::CheckSpec;

/// Largest runtime weight accepted: a factor, not a configured weight.
pub const MAX_RUNTIME_WEIGHT: f64 = 100.0;

/// (address, port) to runtime weight; port None covers every port.
pub type WeightMap = BTreeMap<(IpAddr, Option<u16>), f64>;

/// The runtime weights in force. Setting one and publishing a new engine
/// both happen under its lock, so no engine is published without them.
#[derive(Debug, Default)]
pub struct RuntimeWeights {
    map: Mutex<WeightMap>,
}

/// A runtime weight from its text: `Ok(None)` clears (`clear`, `none`, or
/// `1`, the neutral factor); `Ok(Some(w))` for 0 ≤ w ≤ 100.
pub fn parse_weight(s: &str) -> Result<Option<f64>, String> {
    let s = s.trim();
    if matches!(s, "clear" | "none") {
        return Ok(None);
    }
    let w: f64 = s.parse().map_err(|_| {
        format!("bad weight {s:?}: a number from 0 to {MAX_RUNTIME_WEIGHT}, or clear")
    })?;
    if !w.is_finite() || !(0.0..=MAX_RUNTIME_WEIGHT).contains(&w) {
        return Err(format!(
            "bad weight {s:?}: a number from 0 to {MAX_RUNTIME_WEIGHT}, or clear"
        ));
    }
    Ok(if w == 1.0 { None } else { Some(w) })
}

/// The runtime weight that applies to a member checked as `spec`: one for
/// its address and port wins over one for the whole address; else 1.
pub fn weight_for(map: &WeightMap, spec: &CheckSpec) -> f64 {
    if let Some(p) = spec.effective_port() {
        if let Some(&w) = map.get(&(spec.addr, Some(p))) {
            return w;
        }
    }
    map.get(&(spec.addr, None)).copied().unwrap_or(1.0)
}

/// How many pool members a runtime weight for `addr` (or `addr` on
/// `port`) covers; setting one that covers none is an error (clearing
/// always works).
pub fn covered(
    e: &Engine,
    addr: IpAddr,
    port: Option<u16>,
    weight: Option<f64>,
) -> Result<usize, String> {
    let n = e
        .pools
        .iter()
        .flat_map(|p| p.v4.iter().chain(p.v6.iter()))
        .filter(|m| {
            m.addr == addr
                && (port.is_none() || e.checks[m.health as usize].effective_port() == port)
        })
        .count();
    if n == 0 && weight.is_some() {
        return Err(match port {
            Some(p) => format!("no pool has a member {addr} on port {p}"),
            None => format!("no pool has a member {addr}"),
        });
    }
    Ok(n)
}

impl RuntimeWeights {
    /// None in force.
    pub fn new() -> RuntimeWeights {
        RuntimeWeights::default()
    }

    fn lock(&self) -> MutexGuard<'_, WeightMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the weights in force, for `/status`.
    pub fn snapshot(&self) -> WeightMap {
        self.lock().clone()
    }

    /// Put the weights into a freshly built engine (not yet serving), then
    /// run `publish` (the swap) before anyone can set another.
    pub fn apply_then<R>(&self, e: &Engine, publish: impl FnOnce() -> R) -> R {
        let map = self.lock();
        for (pool, c) in e.rebalance(&map, crate::balance::now_ms()) {
            log_panic(pool, c);
        }
        publish()
    }

    /// Bring `e`'s decisions up to date with its health table: recompute
    /// every pool if a state, override or signal changed since the last
    /// time (the table's generation moved). The refresher does this after
    /// every change; `/status`, `/metrics` and the override API do it too,
    /// so what they show and what answers use agree.
    pub fn catch_up(&self, e: &Engine) {
        let g = e.health.generation();
        if e.decided.load(std::sync::atomic::Ordering::Acquire) != g {
            self.rebalance(e, |_| true);
            e.decided.store(g, std::sync::atomic::Ordering::Release);
        }
    }

    /// Recompute the decisions of the serving engine `e` (or of the pools
    /// `which` picks) with the weights in force; log panic transitions.
    pub fn rebalance(&self, e: &Engine, which: impl Fn(&crate::pool::Pool) -> bool) {
        let map = self.lock();
        for (pool, c) in e.rebalance_only(&map, crate::balance::now_ms(), which) {
            log_panic(pool, c);
        }
    }

    /// Set (`Some`) or clear (`None`) the runtime weight of `addr`, or of
    /// `addr` on one port, in the map and in the serving engine (loaded
    /// under the lock, so a reload cannot publish an engine without it).
    /// Returns how many pool members it covers. Setting one for an address
    /// that no member has is an error; clearing always works.
    pub fn set(
        &self,
        engine: &ArcSwap<Engine>,
        addr: IpAddr,
        port: Option<u16>,
        weight: Option<f64>,
    ) -> Result<usize, String> {
        let mut map = self.lock();
        let e = engine.load();
        let matched = covered(&e, addr, port, weight)?;
        let prev = match weight {
            Some(w) => map.insert((addr, port), w),
            None => map.remove(&(addr, port)),
        };
        for (pool, c) in e.rebalance_only(&map, crate::balance::now_ms(), |p| {
            p.v4.iter().chain(&p.v6).any(|m| m.addr == addr)
        }) {
            log_panic(pool, c);
        }
        let what = match port {
            Some(p) => format!("{addr} port {p}"),
            None => addr.to_string(),
        };
        tracing::info!(
            "pool: runtime weight for {what}: {} (was {})",
            weight.unwrap_or(1.0),
            prev.unwrap_or(1.0)
        );
        Ok(matched)
    }
}

/// Say once that a pool family entered or left panic.
pub fn log_panic(pool: &str, c: crate::balance::PanicChange) {
    let family = if c.v6 { "AAAA" } else { "A" };
    if c.entered {
        tracing::warn!(
            "pool {pool} ({family}): panic: too few members pass their checks; answering with every member not taken out by the operator"
        );
    } else {
        tracing::info!("pool {pool} ({family}): panic over: enough members pass their checks");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        assert_eq!(parse_weight("2"), Ok(Some(2.0)));
        assert_eq!(parse_weight("0"), Ok(Some(0.0)));
        assert_eq!(parse_weight("0.25"), Ok(Some(0.25)));
        assert_eq!(parse_weight("100"), Ok(Some(100.0)));
        assert_eq!(parse_weight("1"), Ok(None));
        assert_eq!(parse_weight("clear"), Ok(None));
        for bad in ["-1", "abc", "NaN", "inf", "100.5", ""] {
            let e = parse_weight(bad).unwrap_err();
            assert!(e.contains("bad weight"), "{bad}: {e}");
        }
    }
}
