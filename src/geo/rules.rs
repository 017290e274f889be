//! Rules -> GeoMap: which pools (an ordered failover list) serve a client,
//! compiled into the exact partition so each answer carries the widest
//! scope that is right for every address in it (RFC 7871 §7.2.1, §7.4), and
//! special-purpose space never shares a block with public space (§10).
//!
//! Precedence: longest-prefix CIDR override (`nets`), then subdivision,
//! country, continent, default. In nearest mode, coordinates replace the
//! name rules: pools are ordered by great-circle distance.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::db::{GeoDb, Location};
use super::partition::{partition, Segment, Table};
use super::special::{special_block, special_blocks};

/// Geo rules. Every `Vec<usize>` is an ordered failover list of pool
/// indices. Keys are matched case-insensitively: "DE", "EU", "US-CA".
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// CIDR overrides; the longest prefix wins, the first listed on a tie.
    pub nets: Vec<(IpNet, Vec<usize>)>,
    /// "US-CA" style keys; a client's most specific subdivision is tried first.
    pub subdivision: HashMap<String, Vec<usize>>,
    /// ISO 3166-1 alpha-2 country keys ("DE").
    pub country: HashMap<String, Vec<usize>>,
    /// Continent code keys ("EU": AF, AN, AS, EU, NA, OC, SA).
    pub continent: HashMap<String, Vec<usize>>,
    /// Pools for a client no other rule matches (never empty).
    pub default: Vec<usize>,
    /// Nearest mode: (pool, latitude, longitude) per site.
    pub nearest: Option<Vec<(usize, f64, f64)>>,
}

/// Which rule chose the pools.
#[derive(Debug, Clone, PartialEq)]
enum Matched<'a> {
    Subdivision(&'a str),
    Country(&'a str),
    Continent(&'a str),
    Nearest(f64, f64),
    Default,
}

impl fmt::Display for Matched<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matched::Subdivision(s) => write!(f, "subdivision {s}"),
            Matched::Country(s) => write!(f, "country {s}"),
            Matched::Continent(s) => write!(f, "continent {s}"),
            Matched::Nearest(lat, lon) => write!(f, "nearest to {lat:.4},{lon:.4}"),
            Matched::Default => write!(f, "default"),
        }
    }
}

impl RuleSet {
    /// Upper-case keys and host bits cleared, so matching is exact.
    fn normalized(&self) -> RuleSet {
        let up = |m: &HashMap<String, Vec<usize>>| {
            m.iter()
                .map(|(k, v)| (k.trim().to_ascii_uppercase(), v.clone()))
                .collect()
        };
        RuleSet {
            nets: self
                .nets
                .iter()
                .map(|(n, p)| (n.trunc(), p.clone()))
                .collect(),
            subdivision: up(&self.subdivision),
            country: up(&self.country),
            continent: up(&self.continent),
            default: self.default.clone(),
            nearest: self.nearest.clone(),
        }
    }

    /// The CIDR override for `addr`: longest prefix, first listed on a tie.
    pub fn net_override(&self, addr: IpAddr) -> Option<(IpNet, &[usize])> {
        let mut best: Option<(IpNet, &[usize])> = None;
        for (net, pools) in &self.nets {
            let net = net.trunc();
            if net.contains(&addr) && best.is_none_or(|(b, _)| net.prefix_len() > b.prefix_len()) {
                best = Some((net, pools));
            }
        }
        best
    }

    /// Pools for a client at `loc` (None: not in the database), nets aside.
    fn choose<'l>(&self, loc: Option<&'l Location>) -> (Vec<usize>, Matched<'l>) {
        if let Some(sites) = &self.nearest {
            return match loc.and_then(|l| l.coords) {
                Some((lat, lon)) => (by_distance(sites, lat, lon), Matched::Nearest(lat, lon)),
                None => (self.default.clone(), Matched::Default),
            };
        }
        if let Some(l) = loc {
            for s in l.subdivisions.iter().rev() {
                if let Some(p) = self.subdivision.get(s) {
                    return (p.clone(), Matched::Subdivision(s));
                }
            }
            if let Some(c) = l.country.as_deref() {
                if let Some(p) = self.country.get(c) {
                    return (p.clone(), Matched::Country(c));
                }
            }
            if let Some(c) = l.continent.as_deref() {
                if let Some(p) = self.continent.get(c) {
                    return (p.clone(), Matched::Continent(c));
                }
            }
        }
        (self.default.clone(), Matched::Default)
    }
}

/// Pools ordered by great-circle distance from (lat, lon); ties keep the
/// order of `sites`; a pool listed at several sites appears once, nearest.
fn by_distance(sites: &[(usize, f64, f64)], lat: f64, lon: f64) -> Vec<usize> {
    let mut d: Vec<(f64, usize, usize)> = sites
        .iter()
        .enumerate()
        .map(|(i, &(pool, la, lo))| (haversine(lat, lon, la, lo), i, pool))
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut seen = HashSet::new();
    d.into_iter()
        .map(|x| x.2)
        .filter(|p| seen.insert(*p))
        .collect()
}

/// Central angle between two points (radians); monotonic in distance.
fn haversine(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * a.sqrt().min(1.0).asin()
}

/// A decision worked out the slow, direct way.
struct Direct<'r> {
    pools: Vec<usize>,
    rule: String,
    located: Option<(Location, u8)>,
    net: Option<(IpNet, &'r [usize])>,
}

/// Evaluate normalized rules for one address, without the partition.
fn direct<'r>(rules: &'r RuleSet, db: Option<&GeoDb>, addr: IpAddr) -> Direct<'r> {
    let located = db.and_then(|d| d.lookup(addr));
    if let Some((net, pools)) = rules.net_override(addr) {
        return Direct {
            pools: pools.to_vec(),
            rule: format!("nets {net}"),
            located,
            net: Some((net, pools)),
        };
    }
    let (pools, m) = rules.choose(located.as_ref().map(|l| &l.0));
    let rule = m.to_string();
    Direct {
        pools,
        rule,
        located,
        net: None,
    }
}

/// The slow reference evaluation: (pools, rule that matched). The partition
/// must agree with it for every address; `explain` reports it.
pub fn decide_direct(db: Option<&GeoDb>, rules: &RuleSet, addr: IpAddr) -> (Vec<usize>, String) {
    let rules = rules.normalized();
    let d = direct(&rules, db, addr);
    (d.pools, d.rule)
}

/// Pool lists, each stored once, numbered in order of first use.
#[derive(Default)]
struct Interner {
    ids: HashMap<Vec<usize>, u32>,
    lists: Vec<Vec<usize>>,
}

impl Interner {
    fn id(&mut self, pools: &[usize]) -> u32 {
        if let Some(&id) = self.ids.get(pools) {
            return id;
        }
        let id = self.lists.len() as u32;
        self.ids.insert(pools.to_vec(), id);
        self.lists.push(pools.to_vec());
        id
    }
}

/// Compiled rules: per-query decision and scope in one table lookup.
#[derive(Clone)]
pub struct GeoMap {
    v4: Table<u32>,
    v6: Table<u128>,
    /// Decision `id` is `pools[offsets[id]..offsets[id + 1]]`.
    pools: Box<[usize]>,
    offsets: Box<[u32]>,
    uniform: bool,
    rules: RuleSet,
}

impl fmt::Debug for GeoMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeoMap")
            .field("blocks_v4", &self.v4.len())
            .field("blocks_v6", &self.v6.len())
            .field("decisions", &(self.offsets.len() - 1))
            .field("uniform", &self.uniform)
            .finish()
    }
}

impl GeoMap {
    /// Build the partition of both families for `rules` over `db`.
    pub fn compile(db: Option<&GeoDb>, rules: &RuleSet) -> GeoMap {
        let rules = rules.normalized();
        let mut interner = Interner::default();
        let default_id = interner.id(&rules.default);

        // Database layer: one segment per network; records decided once.
        let (mut db4, mut db6) = (Vec::new(), Vec::new());
        if let Some(db) = db {
            let mut by_record: HashMap<usize, u32> = HashMap::new();
            db.for_each_leaf(|net, key, decode| {
                let id = *by_record
                    .entry(key)
                    .or_insert_with(|| interner.id(&rules.choose(Some(&decode())).0));
                push_net(net, id, &mut db4, &mut db6);
            });
        }
        disjoint(&mut db4);
        disjoint(&mut db6);

        // Override layers, longest prefix first (= highest priority).
        let (mut ov4, mut ov6) = (BTreeMap::new(), BTreeMap::new());
        let mut seen = HashSet::new();
        for (net, pools) in &rules.nets {
            if seen.insert(*net) {
                let id = interner.id(pools);
                let (v4, seg) = segment(*net, id);
                let by_len = if v4 { &mut ov4 } else { &mut ov6 };
                by_len
                    .entry(std::cmp::Reverse(net.prefix_len()))
                    .or_insert_with(Vec::new)
                    .push(seg);
            }
        }

        // Special classes: 1 + index of the block; 0 is public space.
        let (mut c4, mut c6) = (Vec::new(), Vec::new());
        for (i, net) in special_blocks().into_iter().enumerate() {
            push_net(net, i as u32 + 1, &mut c4, &mut c6);
        }

        let build = |ov: &BTreeMap<_, Vec<Segment>>, dbl: &Vec<Segment>, cls: &[Segment], bits| {
            let mut layers: Vec<&[Segment]> = ov.values().map(|v| v.as_slice()).collect();
            layers.push(dbl);
            partition(bits, &layers, default_id, cls)
        };
        for v in ov4.values_mut().chain(ov6.values_mut()) {
            v.sort_by_key(|s: &Segment| s.start);
        }
        let v4 = Table::new(&build(&ov4, &db4, &c4, 32));
        let v6 = Table::new(&build(&ov6, &db6, &c6, 128));

        let first = v4.iter().next().map(|b| b.2).unwrap_or(default_id);
        let uniform = !v4.any_other(first) && !v6.any_other(first);
        let mut pools = Vec::new();
        let mut offsets = vec![0u32];
        for l in &interner.lists {
            pools.extend_from_slice(l);
            offsets.push(pools.len() as u32);
        }
        GeoMap {
            v4,
            v6,
            pools: pools.into_boxed_slice(),
            offsets: offsets.into_boxed_slice(),
            uniform,
            rules,
        }
    }

    /// (decision id, scope prefix length) for a client address. Hot path:
    /// no allocation, no locks. IPv4-mapped IPv6 is special space here, so
    /// callers should unmap first if they mean IPv4.
    #[inline]
    pub fn decide(&self, addr: IpAddr) -> (u32, u8) {
        match addr {
            IpAddr::V4(a) => self.v4.lookup(u32::from(a)),
            IpAddr::V6(a) => self.v6.lookup(u128::from(a)),
        }
    }

    /// The pool failover list of decision `id`.
    #[inline]
    pub fn decision(&self, id: u32) -> &[usize] {
        let i = id as usize;
        &self.pools[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Every address gets the same decision: answers can use scope 0.
    pub fn is_uniform(&self) -> bool {
        self.uniform
    }

    /// Number of distinct decisions.
    pub fn decision_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of partition blocks (IPv4, IPv6).
    pub fn block_count(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// Bytes held by the IPv4 and IPv6 lookup tables.
    pub fn table_bytes(&self) -> usize {
        self.v4.heap_bytes() + self.v6.heap_bytes()
    }

    /// Every partition block with its decision id: IPv4 then IPv6, in order.
    pub fn blocks(&self) -> impl Iterator<Item = (IpNet, u32)> + '_ {
        let v4 = self
            .v4
            .iter()
            .map(|(s, l, id)| (IpNet::V4(Ipv4Net::new(s.into(), l).unwrap()), id));
        let v6 = self
            .v6
            .iter()
            .map(|(s, l, id)| (IpNet::V6(Ipv6Net::new(s.into(), l).unwrap()), id));
        v4.chain(v6)
    }

    /// Why `addr` gets its answer (for the `lookup` command). Pass the same
    /// database the map was compiled from.
    pub fn explain(&self, db: Option<&GeoDb>, addr: IpAddr) -> Decision {
        let (id, scope) = self.decide(addr);
        let d = direct(&self.rules, db, addr);
        let pools = self.decision(id).to_vec();
        Decision {
            addr,
            id,
            block: IpNet::new(addr, scope).unwrap().trunc(),
            consistent: d.pools == pools,
            pools,
            rule: d.rule,
            db_network: d
                .located
                .as_ref()
                .map(|(_, len)| IpNet::new(addr, *len).unwrap().trunc()),
            location: d.located.map(|l| l.0),
            override_net: d.net.map(|n| n.0),
            special: special_block(addr),
        }
    }
}

/// A network as a segment, and whether it is IPv4.
fn segment(net: IpNet, value: u32) -> (bool, Segment) {
    match net {
        IpNet::V4(n) => (
            true,
            Segment::cidr(u32::from(n.network()) as u128, n.prefix_len(), 32, value),
        ),
        IpNet::V6(n) => (
            false,
            Segment::cidr(u128::from(n.network()), n.prefix_len(), 128, value),
        ),
    }
}

/// Append `net` to its family's layer, extending the last segment instead
/// when `net` continues it with the same value: the union, and so the
/// partition, is unchanged, and the City database's millions of networks
/// shrink to the blocks that matter before the sort and the sweep.
fn push_net(net: IpNet, value: u32, v4: &mut Vec<Segment>, v6: &mut Vec<Segment>) {
    let (is_v4, s) = segment(net, value);
    let v = if is_v4 { v4 } else { v6 };
    if let Some(last) = v.last_mut() {
        if last.value == s.value && last.end.checked_add(1) == Some(s.start) {
            last.end = s.end;
            return;
        }
    }
    v.push(s);
}

/// Sort and drop segments overlapping an earlier one (a database tree's
/// leaves never overlap; this only guards the sweep's precondition).
fn disjoint(v: &mut Vec<Segment>) {
    v.sort_by_key(|s| s.start);
    let mut last_end: Option<u128> = None;
    v.retain(|s| {
        let keep = last_end.is_none_or(|e| s.start > e);
        if keep {
            last_end = Some(s.end);
        }
        keep
    });
}

/// A fully explained decision (`GeoMap::explain`); `Display` is one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The address decided for.
    pub addr: IpAddr,
    /// The decision id, as `GeoMap::decide` returns it.
    pub id: u32,
    /// The failover list of decision `id`: indexes into `Engine::pools`.
    pub pools: Vec<usize>,
    /// The partition block holding `addr`: its length is the ECS scope.
    pub block: IpNet,
    /// "nets 10.0.0.0/8", "subdivision US-CA", "country DE", "continent EU",
    /// "nearest to LAT,LON" or "default".
    pub rule: String,
    /// What the database says about `addr`, if it has it.
    pub location: Option<Location>,
    /// The database network holding `addr`.
    pub db_network: Option<IpNet>,
    /// The `nets` override that matched `addr`, if any.
    pub override_net: Option<IpNet>,
    /// The special-purpose block holding `addr`, if any (RFC 7871 §10).
    pub special: Option<IpNet>,
    /// The partition agrees with direct evaluation (always, unless a bug).
    pub consistent: bool,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: pools {:?} by {}; block {} (scope /{})",
            self.addr,
            self.pools,
            self.rule,
            self.block,
            self.block.prefix_len()
        )?;
        match (&self.location, &self.db_network) {
            (Some(l), Some(n)) => write!(f, "; db {n}: {l}")?,
            _ => write!(f, "; not in db")?,
        }
        if let Some(s) = self.special {
            write!(f, "; special-purpose {s}")?;
        }
        if !self.consistent {
            write!(f, "; INCONSISTENT with direct evaluation")?;
        }
        Ok(())
    }
}
