//! Builds the immutable serving state from a config file: zones, pools,
//! names bound to pools or geo rules, and the geo decision blocks. A new
//! `Engine` is built for every reload and swapped in whole; `weights` holds
//! the operator's runtime weights and applies them to an engine's pools.

mod build;
pub mod registry;
pub mod signed;
pub mod weights;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{ServerSettings, Source};
use crate::error::LocatedError;
use crate::geo::{GeoDb, GeoMap, GeoTable, Schema};
use crate::health::{CheckSpec, HealthTable};
use crate::pool::{Member, Mode, Pool, Sticky};
use crate::zone::{FileStamp, Zone};

pub use crate::pool::AllDown;
pub use weights::{parse_weight, weight_for, RuntimeWeights, WeightMap, MAX_RUNTIME_WEIGHT};

/// Where a bound name's addresses come from.
#[derive(Debug, Clone)]
pub enum Target {
    /// One pool for every client: an index into `Engine::pools`.
    Pool(usize),
    /// Pools chosen by the client's (or its ECS subnet's) location: the
    /// compiled geo rules, whose decisions are ordered lists of indexes into
    /// `Engine::pools` (the first pool that is up serves).
    Geo(Box<GeoMap>),
}

/// A name answered from pools.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The bound name: lower-cased presentation form with the trailing dot.
    pub name: String,
    /// How members are picked from the serving pool (`mode`).
    pub mode: Mode,
    /// `sticky = true` (`one` and `some`): the client block's prefix
    /// lengths; the same block gets the same members.
    pub sticky: Option<Sticky>,
    /// TTL of the answer records in seconds (`ttl`, 1..=86400; default 30).
    pub ttl: u32,
    /// TTL in seconds while degraded: when a fallback pool serves, some
    /// members of the serving pool are down, or every pool is down
    /// (`degraded_ttl`; default the smaller of 10 and `ttl`).
    pub degraded_ttl: u32,
    /// What to answer when no candidate pool is up (`when_all_down`).
    pub when_all_down: AllDown,
    /// Spillover factor for the failover list (None: hard failover).
    pub spillover: Option<f64>,
    /// The pool, or the geo rules, the addresses come from.
    pub target: Target,
}

impl Binding {
    /// Does the name have addresses of this family? For a geo name every
    /// decision agrees (the build refuses a map where they do not, RFC
    /// 7871 §7.4), so one decision answers for all.
    pub fn has_family(&self, pools: &[Pool], v6: bool) -> bool {
        let list: &[usize] = match &self.target {
            Target::Pool(p) => std::slice::from_ref(p),
            Target::Geo(m) => m
                .used_decisions()
                .first()
                .map_or(&[][..], |&d| m.decision(d)),
        };
        list.iter().any(|&p| !pools[p].family(v6).is_empty())
    }
}

/// What one part of a build cost.
#[derive(Debug, Clone)]
pub struct BuildCost {
    /// "zones", "pools and checks", "names", "geo tables".
    pub part: &'static str,
    /// Wall time, in milliseconds.
    pub ms: f64,
    /// Change of the resident set size, in KiB (the first part includes
    /// what reading the config cost).
    pub rss_kib: i64,
}

/// The immutable serving state built from one config file: the zones, the
/// pools, the names bound to pools or geo rules, the geo decision blocks, the
/// health table and the checked `[server]` settings.
///
/// An `Engine` never changes once built. A reload builds a new one from the
/// config (carrying health state over, see [`HealthTable::new`]) and swaps
/// it in whole through `ServerState::engine`, so each query is answered
/// against one config from start to end, and a failed reload leaves the old
/// engine serving. What does change while it serves lives outside it or
/// behind atomics: member health in the shared [`HealthTable`], rotation
/// cursors and random generators per worker thread.
pub struct Engine {
    /// The config file this engine was built from (reloads read it again).
    pub config_path: PathBuf,
    /// The served zones, in config order; shared with the previous engine
    /// when a reload kept them.
    pub zones: Vec<Arc<Zone>>,
    /// Zone apex (lower-cased wire) to index in `zones`.
    pub zone_index: crate::zone::NameMap<usize>,
    /// Each zone's checked `dnssec` table (its keys and signing settings),
    /// indexed like `zones`; None for an unsigned zone. Nothing is signed
    /// with them yet (#17).
    pub dnssec: Vec<Option<Arc<crate::config::dnssec::ZoneDnssec>>>,
    /// Each signed zone's published signatures (static and dynamic),
    /// indexed like `zones`; see [`signed`].
    pub signers: Vec<Option<Box<signed::ZoneSigner>>>,
    /// Every `[pool.NAME]`, in name order; `Target` and geo decisions index into it.
    pub pools: Vec<Pool>,
    /// Dynamic answers per pool, indexed like `pools`; a reload carries
    /// each pool's counter over by name (see `metrics::PoolCounters`).
    pub pool_answers: crate::metrics::PoolCounters,
    /// Every `[name.NAME]`; a zone node's `dynamic` field is an index into
    /// it.
    pub bindings: Vec<Binding>,
    /// The `[geo]` database, if configured; dropped before serving (the
    /// decision blocks compiled from it are all the query path needs).
    pub geo: Option<Arc<GeoDb>>,
    /// Path of the `[geo] database` file, resolved against the config's
    /// folder; watched so that a new file triggers a reload.
    pub geo_path: Option<PathBuf>,
    /// Member health, indexed by `Member::health`; shared with the checkers,
    /// which write it while the engine serves.
    pub health: Arc<HealthTable>,
    /// Distinct health check targets, in health-table order.
    pub checks: Arc<[CheckSpec]>,
    /// Distinguishes engines across reloads (shown by `/status`).
    pub generation: u64,
    /// Zones read from their files by this build (the others were kept).
    pub zones_loaded: usize,
    /// Time and memory per part of the build, in order.
    pub build_cost: Vec<BuildCost>,
    /// The geo database as it was when this engine's tables were built
    /// (with its schema): a reload over the same one keeps the tables.
    pub geo_stamp: Option<(FileStamp, Schema)>,
    /// Geo tables compiled by this build (the others were kept).
    pub geo_tables_built: usize,
    /// Things the config allows but that are likely mistakes, each
    /// `file:line: message` (`check` prints them, `serve` logs them).
    pub warnings: Vec<String>,
    /// How long loading took (zones, database, decision blocks, pre-rendering).
    pub load_ms: u64,
    /// The checked `[server]` table.
    pub settings: ServerSettings,
    /// The checked `[api]` table with its tokens (a reload reads the token
    /// file again).
    pub api: crate::config::ApiSettings,
    /// The checked `[fleet]` table (None: a single node). Read at start.
    pub fleet: Option<crate::config::fleet::FleetSettings>,
    /// Held while a refresh publishes decisions, so two never interleave.
    pub refresh: std::sync::Mutex<()>,
    /// The health generation the last full refresh saw (`u64::MAX`: none).
    pub decided: std::sync::atomic::AtomicU64,
    /// Fleet mode: the members registered in etcd (#31), shared by every
    /// engine after the first, so a reload keeps them.
    pub registry: Arc<registry::Registry>,
    /// (pool, address) → the etcd key of each member from the registry.
    pub registered: std::collections::HashMap<(String, std::net::IpAddr), String>,
}

/// Overrides are written into the serving engine's table.
impl crate::health::overrides::Served for Engine {
    fn health_table(&self) -> &HealthTable {
        &self.health
    }
    fn check_specs(&self) -> &[CheckSpec] {
        &self.checks
    }
}

impl Engine {
    /// Load and check everything a config refers to.
    pub fn load(path: &Path) -> Result<Engine, LocatedError> {
        Self::load_with(path, None)
    }

    /// Load, keeping health state from `prev` for checks that did not
    /// change. Static answers are not rendered yet: `answer::load` does
    /// both, for serving.
    pub fn load_with(path: &Path, prev: Option<&Engine>) -> Result<Engine, LocatedError> {
        let src = Source::read(path)?;
        let cfg = src.parse()?;
        build::build(&src, cfg, prev)
    }

    /// Decision blocks over every geo name, and the octets they take.
    pub fn geo_blocks(&self) -> (usize, usize) {
        let (mut blocks, mut bytes) = (0usize, 0usize);
        for t in self.geo_tables() {
            let (v4, v6) = t.block_count();
            blocks += v4 + v6;
            bytes += t.table_bytes();
        }
        (blocks, bytes)
    }

    /// The distinct geo tables, in binding order of first use (names whose
    /// rules have one shape share a table).
    pub fn geo_tables(&self) -> Vec<&Arc<GeoTable>> {
        let mut out: Vec<&Arc<GeoTable>> = Vec::new();
        for b in &self.bindings {
            if let Target::Geo(m) = &b.target {
                if !out.iter().any(|t| Arc::ptr_eq(t, m.table())) {
                    out.push(m.table());
                }
            }
        }
        out
    }

    /// The served zone that holds `name` (lower-cased wire), if any.
    pub fn zone_for(&self, name: &[u8]) -> Option<&Zone> {
        crate::zone::zone_of(&self.zone_index, name).map(|i| &*self.zones[i])
    }

    /// May answers use this member (the published filter decision)?
    #[inline]
    pub fn member_up(&self, m: &Member) -> bool {
        m.usable()
    }

    /// Recompute and publish every pool's balancing decisions (off the
    /// query path; see `balance`) with the runtime weights `weights` at
    /// balancing time `now_ms`. Refreshes of one engine never overlap.
    /// Returns the pools that entered or left panic, to log once each.
    pub fn rebalance(
        &self,
        weights: &WeightMap,
        now_ms: u64,
    ) -> Vec<(&str, crate::balance::PanicChange)> {
        self.rebalance_only(weights, now_ms, |_| true)
    }

    /// [`Engine::rebalance`] for the pools `which` picks.
    pub fn rebalance_only(
        &self,
        weights: &WeightMap,
        now_ms: u64,
        which: impl Fn(&Pool) -> bool,
    ) -> Vec<(&str, crate::balance::PanicChange)> {
        let h = &self.health;
        self.rebalance_with(
            weights,
            now_ms,
            &|i| h.rtt_estimate_us(i).map(|us| f64::from(us) / 1e6),
            &|i| h.load(i).map(f64::from),
            which,
        )
    }

    /// [`Engine::rebalance_only`] with the measured signals given: each
    /// health entry's check round-trip estimate (seconds) and damped
    /// reported load (0..=1). The simulator (`tools/sim`) passes its own.
    pub fn rebalance_with(
        &self,
        weights: &WeightMap,
        now_ms: u64,
        rtt: &dyn Fn(u32) -> Option<f64>,
        load: &dyn Fn(u32) -> Option<f64>,
        which: impl Fn(&Pool) -> bool,
    ) -> Vec<(&str, crate::balance::PanicChange)> {
        let _one = self.refresh.lock().unwrap_or_else(|e| e.into_inner());
        let runtime = |m: &Member| {
            if weights.is_empty() {
                1.0
            } else {
                weight_for(weights, &self.checks[m.health as usize])
            }
        };
        let inputs = crate::balance::Inputs {
            health: &self.health,
            now_ms,
            runtime: &runtime,
            rtt,
            load,
        };
        let mut changes = Vec::new();
        for p in self.pools.iter().filter(|p| which(p)) {
            for c in crate::balance::refresh(p, &inputs) {
                changes.push((p.name.as_str(), c));
            }
        }
        // Signed answers follow the decisions just published.
        if self.signers.iter().any(Option::is_some) {
            self.refresh_signatures(signed::unix_now());
        }
        changes
    }
}
