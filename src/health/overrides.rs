//! Operator overrides (up, down, drain) by address, or address and port.
//! The daemon owns one [`Overrides`] value; it outlives every engine, so
//! overrides survive reloads whatever the new config changes.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::{override_name, CheckSpec, HealthTable, OVR_NONE};

/// (address, port) to override; port None covers every port of the address.
pub type OverrideMap = BTreeMap<(IpAddr, Option<u16>), u8>;

/// How many entries an override for `addr` (or `addr` on `port`) covers;
/// setting one that covers none is an error (clearing always works).
pub fn covered(
    specs: &[CheckSpec],
    addr: IpAddr,
    port: Option<u16>,
    state: u8,
) -> Result<usize, String> {
    let n = specs
        .iter()
        .filter(|s| s.addr == addr && (port.is_none() || s.effective_port() == port))
        .count();
    if n == 0 && state != OVR_NONE {
        return Err(match port {
            Some(p) => format!("no member {addr} is checked on port {p}"),
            None => format!("no pool has a member {addr}"),
        });
    }
    Ok(n)
}

/// What [`Overrides::set`] needs of the serving engine (which lives in a
/// higher layer): its health table and the specs it was built from.
pub trait Served {
    /// The table the answer path reads.
    fn health_table(&self) -> &HealthTable;
    /// The specs, in table order.
    fn check_specs(&self) -> &[CheckSpec];
}

/// The overrides in force. Setting one and publishing a new engine both
/// happen under its lock, so no engine is published without them.
#[derive(Debug, Default)]
pub struct Overrides {
    map: Mutex<OverrideMap>,
}

impl Overrides {
    /// None in force.
    pub fn new() -> Overrides {
        Overrides::default()
    }

    fn lock(&self) -> MutexGuard<'_, OverrideMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the overrides in force, for `/status`.
    pub fn snapshot(&self) -> OverrideMap {
        self.lock().clone()
    }

    /// Put the overrides into a freshly built table, then run `publish`
    /// (the swap) before anyone can set another.
    pub fn apply_then<R>(
        &self,
        table: &HealthTable,
        specs: &[CheckSpec],
        publish: impl FnOnce() -> R,
    ) -> R {
        let map = self.lock();
        for (i, s) in specs.iter().enumerate() {
            table.set_override(i as u32, override_for(&map, s));
        }
        publish()
    }

    /// Set (or with `OVR_NONE` clear) an override for `addr`, or for `addr`
    /// on one port, and write it into the table of the serving engine,
    /// loaded from `serving` under the lock: a reload publishes under the
    /// same lock, so it cannot replace the engine between the load and the
    /// write and leave the override only in the old one. Returns how many
    /// entries (distinct address, port, check) it covers now. Setting one
    /// for an address that no member has is an error; clearing always works.
    pub fn set<E: Served>(
        &self,
        serving: &ArcSwap<E>,
        addr: IpAddr,
        port: Option<u16>,
        state: u8,
    ) -> Result<usize, String> {
        let mut map = self.lock();
        let engine = serving.load();
        let (table, specs) = (engine.health_table(), engine.check_specs());
        let matched = covered(specs, addr, port, state)?;
        let what = match port {
            Some(p) => format!("{addr} port {p}"),
            None => addr.to_string(),
        };
        let prev = if state == OVR_NONE {
            map.remove(&(addr, port))
        } else {
            map.insert((addr, port), state)
        };
        for (i, s) in specs.iter().enumerate() {
            if s.addr == addr {
                table.set_override(i as u32, override_for(&map, s));
            }
        }
        tracing::info!(
            "health: operator override for {what}: {} (was {})",
            override_name(state),
            override_name(prev.unwrap_or(OVR_NONE))
        );
        Ok(matched)
    }
}

/// The override that applies to `spec`: one for its address and port wins
/// over one for the whole address.
pub fn override_for(map: &OverrideMap, spec: &CheckSpec) -> u8 {
    if let Some(p) = spec.effective_port() {
        if let Some(&o) = map.get(&(spec.addr, Some(p))) {
            return o;
        }
    }
    map.get(&(spec.addr, None)).copied().unwrap_or(OVR_NONE)
}
