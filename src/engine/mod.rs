//! Builds the immutable serving state from a config file: zones, pools,
//! names bound to pools or geo rules, and the geo decision blocks. A new
//! `Engine` is built for every reload and swapped in whole.

mod build;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{ServerSettings, Source};
use crate::error::LocatedError;
use crate::geo::{GeoDb, GeoMap};
use crate::health::{CheckSpec, HealthTable};
use crate::pool::{Member, Mode, Pool};
use crate::zone::Zone;

/// What to answer when every candidate pool is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllDown {
    /// Every member of the first pool, regardless of health (fail open).
    All,
    /// NODATA with the SOA.
    Empty,
    Servfail,
}

#[derive(Debug, Clone)]
pub enum Target {
    Pool(usize),
    Geo(Box<GeoMap>),
}

/// A name answered from pools.
#[derive(Debug, Clone)]
pub struct Binding {
    pub name: String,
    pub mode: Mode,
    pub ttl: u32,
    pub degraded_ttl: u32,
    pub when_all_down: AllDown,
    pub target: Target,
    /// First of two rotation slots (IPv4, IPv6).
    pub slot: usize,
}

pub struct Engine {
    pub config_path: PathBuf,
    pub zones: Vec<Zone>,
    /// Zone apex (lower-cased wire) to index in `zones`.
    pub zone_index: crate::zone::NameMap<usize>,
    pub pools: Vec<Pool>,
    pub bindings: Vec<Binding>,
    pub geo: Option<Arc<GeoDb>>,
    pub geo_path: Option<PathBuf>,
    pub health: Arc<HealthTable>,
    /// Distinct health check targets, in health-table order.
    pub checks: Vec<CheckSpec>,
    /// `[server] edns_udp_payload`, here for the query path.
    pub payload: u16,
    /// Distinguishes engines across reloads (rotation restarts with a new one).
    pub generation: u64,
    /// How long loading took (zones, database, decision blocks, pre-rendering).
    pub load_ms: u64,
    /// The checked `[server]` table.
    pub settings: ServerSettings,
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
        for b in &self.bindings {
            if let Target::Geo(m) = &b.target {
                let (v4, v6) = m.block_count();
                blocks += v4 + v6;
                bytes += m.table_bytes();
            }
        }
        (blocks, bytes)
    }

    /// The served zone that holds `name` (lower-cased wire), if any.
    pub fn zone_for(&self, name: &[u8]) -> Option<&Zone> {
        let mut w = name;
        loop {
            if let Some(&i) = self.zone_index.get(w) {
                return Some(&self.zones[i]);
            }
            w = crate::zone::parent(w)?;
        }
    }

    /// Is this member usable right now?
    #[inline]
    pub fn member_up(&self, m: &Member) -> bool {
        self.health.is_up(m.health)
    }
}
