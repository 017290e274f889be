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
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;

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

/// Numbers pools in order of first use (see `RuleSet::shape`).
#[derive(Default)]
struct Labeler {
    pools: Vec<usize>,
}

impl Labeler {
    fn label(&mut self, p: usize) -> usize {
        match self.pools.iter().position(|&q| q == p) {
            Some(l) => l,
            None => {
                self.pools.push(p);
                self.pools.len() - 1
            }
        }
    }

    fn list(&mut self, v: &[usize]) -> Vec<usize> {
        v.iter().map(|&p| self.label(p)).collect()
    }
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

    /// The rules' shape and its labelling: the same rules with every pool
    /// replaced by a label (0, 1, ... in order of first use: default, nets
    /// in order, then subdivision, country and continent keys in sorted
    /// order, then nearest sites), and the pool of each label. Two rule
    /// sets with equal shapes partition the address space into the same
    /// blocks, because labels and pools correspond one to one.
    fn shape(&self) -> (RuleSet, Vec<usize>) {
        let mut l = Labeler::default();
        let keyed = |l: &mut Labeler, m: &HashMap<String, Vec<usize>>| {
            let sorted: BTreeMap<&String, &Vec<usize>> = m.iter().collect();
            sorted
                .into_iter()
                .map(|(k, v)| (k.clone(), l.list(v)))
                .collect::<HashMap<String, Vec<usize>>>()
        };
        let default = l.list(&self.default);
        let nets = self.nets.iter().map(|(n, v)| (*n, l.list(v))).collect();
        let subdivision = keyed(&mut l, &self.subdivision);
        let country = keyed(&mut l, &self.country);
        let continent = keyed(&mut l, &self.continent);
        let nearest = self.nearest.as_ref().map(|sites| {
            sites
                .iter()
                .map(|&(p, la, lo)| (l.label(p), la, lo))
                .collect()
        });
        let shape = RuleSet {
            nets,
            subdivision,
            country,
            continent,
            default,
            nearest,
        };
        (shape, l.pools)
    }

    /// A text that is equal for two normalized rule sets exactly when their
    /// rules are equal: the key under which compiled tables are shared.
    fn key(&self) -> String {
        let mut k = String::new();
        let _ = write!(k, "d{:?}|n{:?}", self.default, self.nets);
        for (tag, m) in [
            ("s", &self.subdivision),
            ("c", &self.country),
            ("k", &self.continent),
        ] {
            let sorted: BTreeMap<_, _> = m.iter().collect();
            let _ = write!(k, "|{tag}{sorted:?}");
        }
        if let Some(sites) = &self.nearest {
            k.push_str("|g");
            for (l, la, lo) in sites {
                let _ = write!(k, "{l}:{:x}:{:x},", la.to_bits(), lo.to_bits());
            }
        }
        k
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

/// A compiled partition in label space: every block's decision is a list
/// of labels. Shared (by `Arc`) by every name whose rules have one shape;
/// each name binds the labels to its own pools (see [`GeoMap`]).
pub struct GeoTable {
    v4: Table<u32>,
    v6: Table<u128>,
    /// Decision `id` is `labels[offsets[id]..offsets[id + 1]]`.
    labels: Box<[usize]>,
    offsets: Box<[u32]>,
    /// The decisions that some block has (others were interned but lost
    /// every block to a longer override or a special-use block).
    used: Box<[u32]>,
    uniform: bool,
    /// The normalized rules in label space.
    rules: RuleSet,
    /// The shape's key (see `RuleSet::key`).
    key: String,
}

impl GeoTable {
    /// Build the partition of both families for normalized, labelled rules.
    fn compile(db: Option<&GeoDb>, key: String, rules: RuleSet) -> GeoTable {
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
        let mut labels = Vec::new();
        let mut offsets = vec![0u32];
        for l in &interner.lists {
            labels.extend_from_slice(l);
            offsets.push(labels.len() as u32);
        }
        let mut seen = vec![false; interner.lists.len()];
        for (_, _, id) in v4.iter() {
            seen[id as usize] = true;
        }
        for (_, _, id) in v6.iter() {
            seen[id as usize] = true;
        }
        let used = (0..seen.len() as u32)
            .filter(|&i| seen[i as usize])
            .collect();
        GeoTable {
            v4,
            v6,
            labels: labels.into_boxed_slice(),
            offsets: offsets.into_boxed_slice(),
            used,
            uniform,
            rules,
            key,
        }
    }

    /// Bytes held by the IPv4 and IPv6 lookup tables.
    pub fn table_bytes(&self) -> usize {
        self.v4.heap_bytes() + self.v6.heap_bytes()
    }

    /// Number of partition blocks (IPv4, IPv6).
    pub fn block_count(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }
}

/// What [`TableCache::plan`] worked out: each name's shape key and
/// labelling, and the shapes that need a table.
pub struct Plan {
    named: Vec<(String, Vec<usize>)>,
    todo: Vec<(String, RuleSet)>,
}

impl Plan {
    /// Tables to compile (0: every shape has one; no database needed).
    pub fn tables_to_build(&self) -> usize {
        self.todo.len()
    }
}

/// Compiled tables by shape, so that names whose rules have one shape
/// share one table. One cache serves one database.
#[derive(Default)]
pub struct TableCache {
    by_shape: HashMap<String, Arc<GeoTable>>,
}

impl TableCache {
    /// An empty cache.
    pub fn new() -> TableCache {
        TableCache::default()
    }

    /// A cache holding `tables` (kept from a build over the same database).
    pub fn with(tables: impl IntoIterator<Item = Arc<GeoTable>>) -> TableCache {
        TableCache {
            by_shape: tables.into_iter().map(|t| (t.key.clone(), t)).collect(),
        }
    }

    /// Compile every rule set, each distinct shape once, the distinct ones
    /// in parallel on up to `threads` threads. Maps come back in order.
    pub fn compile_all(
        &mut self,
        db: Option<&GeoDb>,
        rules: &[&RuleSet],
        threads: usize,
    ) -> Vec<GeoMap> {
        let plan = self.plan(rules);
        self.build(plan, db, threads)
    }

    /// Work out each rule set's shape, and which shapes have no table yet.
    pub fn plan(&self, rules: &[&RuleSet]) -> Plan {
        // Per name only its key and labelling are kept; one shape per key.
        let mut named: Vec<(String, Vec<usize>)> = Vec::with_capacity(rules.len());
        let mut todo: Vec<(String, RuleSet)> = Vec::new();
        let mut queued = HashSet::new();
        for r in rules {
            let (shape, pools) = r.normalized().shape();
            let key = shape.key();
            if !self.by_shape.contains_key(&key) && queued.insert(key.clone()) {
                todo.push((key.clone(), shape));
            }
            named.push((key, pools));
        }
        Plan { named, todo }
    }

    /// Compile the tables `plan` lacks (in parallel on up to `threads`
    /// threads) over `db`, and bind every name. Maps come back in order.
    pub fn build(&mut self, plan: Plan, db: Option<&GeoDb>, threads: usize) -> Vec<GeoMap> {
        let Plan { named, todo } = plan;
        let threads = threads.clamp(1, todo.len().max(1));
        let mut built: Vec<(String, GeoTable)> = Vec::with_capacity(todo.len());
        std::thread::scope(|s| {
            let chunks: Vec<_> = todo.chunks(todo.len().div_ceil(threads).max(1)).collect();
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| {
                    s.spawn(move || {
                        chunk
                            .iter()
                            .map(|(k, r)| (k.clone(), GeoTable::compile(db, k.clone(), r.clone())))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                built.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
        });
        for (k, t) in built {
            self.by_shape.insert(k, Arc::new(t));
        }
        named
            .into_iter()
            .map(|(key, pools)| GeoMap::bind(self.by_shape[&key].clone(), pools))
            .collect()
    }

    /// Distinct tables compiled so far.
    pub fn len(&self) -> usize {
        self.by_shape.len()
    }

    /// No table compiled yet.
    pub fn is_empty(&self) -> bool {
        self.by_shape.is_empty()
    }
}

/// Compiled rules of one name: a shared [`GeoTable`] and this name's pool
/// for each label. Per query: decision and scope in one table lookup.
#[derive(Clone)]
pub struct GeoMap {
    table: Arc<GeoTable>,
    /// Decision `id` is `pools[table.offsets[id]..table.offsets[id + 1]]`:
    /// the table's label lists with each label replaced by its pool.
    pools: Box<[usize]>,
    /// The pool of each label.
    label_pools: Box<[usize]>,
}

impl fmt::Debug for GeoMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeoMap")
            .field("blocks_v4", &self.table.v4.len())
            .field("blocks_v6", &self.table.v6.len())
            .field("decisions", &(self.table.offsets.len() - 1))
            .field("uniform", &self.table.uniform)
            .finish()
    }
}

impl GeoMap {
    /// Build the partition of both families for `rules` over `db` (one
    /// name; [`TableCache`] shares tables between names).
    pub fn compile(db: Option<&GeoDb>, rules: &RuleSet) -> GeoMap {
        TableCache::new().compile_all(db, &[rules], 1).remove(0)
    }

    fn bind(table: Arc<GeoTable>, label_pools: Vec<usize>) -> GeoMap {
        let pools = table.labels.iter().map(|&l| label_pools[l]).collect();
        GeoMap {
            table,
            pools,
            label_pools: label_pools.into_boxed_slice(),
        }
    }

    /// The shared table.
    pub fn table(&self) -> &Arc<GeoTable> {
        &self.table
    }

    /// (decision id, scope prefix length) for a client address. Hot path:
    /// no allocation, no locks. IPv4-mapped IPv6 is special space here, so
    /// callers should unmap first if they mean IPv4.
    #[inline]
    pub fn decide(&self, addr: IpAddr) -> (u32, u8) {
        match addr {
            IpAddr::V4(a) => self.table.v4.lookup(u32::from(a)),
            IpAddr::V6(a) => self.table.v6.lookup(u128::from(a)),
        }
    }

    /// The pool failover list of decision `id`.
    #[inline]
    pub fn decision(&self, id: u32) -> &[usize] {
        let i = id as usize;
        let o = &self.table.offsets;
        &self.pools[o[i] as usize..o[i + 1] as usize]
    }

    /// Every address gets the same decision: answers can use scope 0.
    pub fn is_uniform(&self) -> bool {
        self.table.uniform
    }

    /// The decision ids that some block has, ascending.
    pub fn used_decisions(&self) -> &[u32] {
        &self.table.used
    }

    /// Number of distinct decisions.
    pub fn decision_count(&self) -> usize {
        self.table.offsets.len() - 1
    }

    /// Number of partition blocks (IPv4, IPv6).
    pub fn block_count(&self) -> (usize, usize) {
        self.table.block_count()
    }

    /// Bytes held by the (shared) IPv4 and IPv6 lookup tables.
    pub fn table_bytes(&self) -> usize {
        self.table.table_bytes()
    }

    /// Every partition block with its decision id: IPv4 then IPv6, in order.
    pub fn blocks(&self) -> impl Iterator<Item = (IpNet, u32)> + '_ {
        let v4 = self
            .table
            .v4
            .iter()
            .map(|(s, l, id)| (IpNet::V4(Ipv4Net::new(s.into(), l).unwrap()), id));
        let v6 = self
            .table
            .v6
            .iter()
            .map(|(s, l, id)| (IpNet::V6(Ipv6Net::new(s.into(), l).unwrap()), id));
        v4.chain(v6)
    }

    /// Why `addr` gets its answer (for the `lookup` command). Pass the same
    /// database the map was compiled from.
    pub fn explain(&self, db: Option<&GeoDb>, addr: IpAddr) -> Decision {
        let (id, scope) = self.decide(addr);
        let d = direct(&self.table.rules, db, addr);
        let pools = self.decision(id).to_vec();
        let direct_pools: Vec<usize> = d.pools.iter().map(|&l| self.label_pools[l]).collect();
        Decision {
            addr,
            id,
            block: IpNet::new(addr, scope).unwrap().trunc(),
            consistent: direct_pools == pools,
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
