//! Zone data: master files (RFC 1035 §5) compiled into a name table with
//! zone cuts (RFC 1034 §4.2.1), empty non-terminals and wildcards (RFC 4592)
//! made explicit, and each RRset's RDATA kept in wire form for rendering.
//!
//! Invariants: a zone is immutable once the engine is built (a reload
//! builds a new one); every node's name is inside the zone and unique; a
//! node's RRsets have distinct types, and an RRset's records distinct RDATA.

mod build;
pub mod parse;
pub mod stamp;

pub use stamp::FileStamp;

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::path::Path;

use hickory_proto::rr::Name;

use crate::error::LocatedError;
pub use meridian_wire::name::{is_subdomain, label_count, name_text, parent};
pub use meridian_wire::rdata::{Packed, Piece, RRset};

/// Names to values, hashed with FxHash for the per-query lookups. Maps are
/// built at load time and never grow from queries, so hostile query names
/// cannot lengthen their probe chains.
pub type NameMap<V> = HashMap<Box<[u8]>, V, BuildHasherDefault<rustc_hash::FxHasher>>;

/// Node indices, hashed by their node's name (FxHash: built at load time
/// and never grown by queries, so hostile names cannot lengthen probes).
#[derive(Clone, Default)]
pub struct NodeIndex(hashbrown::HashTable<u32>);

impl std::fmt::Debug for NodeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeIndex({} names)", self.0.len())
    }
}

#[inline]
fn name_hash(name: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(name);
    h.finish()
}

impl NodeIndex {
    /// The node named `name`; `name_of` gives a node's name.
    #[inline]
    fn find<'n>(&self, name: &[u8], name_of: impl Fn(u32) -> &'n [u8]) -> Option<u32> {
        self.0
            .find(name_hash(name), |&i| name_of(i) == name)
            .copied()
    }

    /// Add node `id`, named `name` (not yet indexed).
    fn insert<'n>(&mut self, name: &[u8], id: u32, name_of: impl Fn(u32) -> &'n [u8]) {
        self.0
            .insert_unique(name_hash(name), id, |&i| name_hash(name_of(i)));
    }
}

/// The zone that holds `name` (lower-cased wire): the index of its longest
/// suffix in `index` (apex → place in the zone list).
pub fn zone_of(index: &NameMap<usize>, name: &[u8]) -> Option<usize> {
    let mut w = name;
    loop {
        if let Some(&i) = index.get(w) {
            return Some(i);
        }
        w = parent(w)?;
    }
}

/// Where a type at a node was first defined, for error messages: 8
/// octets, the file as an index into [`Zone::files`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The record type.
    pub rtype: u16,
    /// Index into [`Zone::files`].
    pub file: u16,
    /// Line in that file.
    pub line: u32,
}

/// One owner name, as stored: 16 octets, its name and RRsets in the
/// zone's shared buffers. Nodes with no RRsets are empty non-terminals.
#[derive(Debug, Clone, Copy)]
struct NodeRec {
    /// Offset of the lower-cased wire name in [`Zone::names`].
    name_off: u32,
    /// Index of the first RRset in [`Zone::sets`].
    sets_off: u32,
    /// Index into the engine's dynamic bindings; `NO_BINDING` for none.
    dynamic: u32,
    /// RRsets at this name.
    nsets: u16,
    /// Name length (at most 255).
    name_len: u8,
    /// A delegation point: NS below the apex.
    cut: bool,
}

const NO_BINDING: u32 = u32::MAX;

/// One RRset, as stored: its records in [`Zone::data`].
#[derive(Debug, Clone, Copy)]
struct SetRec {
    ttl: u32,
    data_off: u32,
    data_len: u32,
    rtype: u16,
}

/// A view of one node of a zone.
#[derive(Debug, Clone, Copy)]
pub struct Node<'z> {
    zone: &'z Zone,
    rec: &'z NodeRec,
    id: u32,
}

impl<'z> Node<'z> {
    /// The node's index in its zone.
    pub fn id(self) -> u32 {
        self.id
    }

    /// Lower-cased wire name.
    #[inline]
    pub fn name(self) -> &'z [u8] {
        let o = self.rec.name_off as usize;
        &self.zone.names[o..o + self.rec.name_len as usize]
    }

    /// A delegation point: NS below the apex.
    #[inline]
    pub fn cut(self) -> bool {
        self.rec.cut
    }

    /// Index into the engine's dynamic bindings (pool or geo name).
    #[inline]
    pub fn dynamic(self) -> Option<u32> {
        (self.rec.dynamic != NO_BINDING).then_some(self.rec.dynamic)
    }

    /// The RRsets owned by this name, one per type, in the order first seen.
    #[inline]
    pub fn rrsets(self) -> impl Iterator<Item = RRset<'z>> + Clone {
        let z = self.zone;
        let o = self.rec.sets_off as usize;
        z.sets[o..o + self.rec.nsets as usize]
            .iter()
            .map(move |s| z.view(s))
    }

    /// The RRsets with their indices in the zone's RRset table (what a
    /// signed zone keys its signatures by, see [`Zone::set_count`]).
    #[inline]
    pub fn rrsets_indexed(self) -> impl Iterator<Item = (u32, RRset<'z>)> + Clone {
        let base = self.rec.sets_off;
        self.rrsets()
            .enumerate()
            .map(move |(k, s)| (base + k as u32, s))
    }

    /// This name's RRset of type `rtype` with its index, if it has one.
    #[inline]
    pub fn rrset_indexed(self, rtype: u16) -> Option<(u32, RRset<'z>)> {
        self.rrsets_indexed().find(|(_, s)| s.rtype == rtype)
    }

    /// This name's RRset of type `rtype`, if it has one.
    #[inline]
    pub fn rrset(self, rtype: u16) -> Option<RRset<'z>> {
        let o = self.rec.sets_off as usize;
        self.zone.sets[o..o + self.rec.nsets as usize]
            .iter()
            .find(|s| s.rtype == rtype)
            .map(|s| self.zone.view(s))
    }

    /// Where each type came from, for error messages.
    pub fn origins(self) -> &'z [Origin] {
        let o = self.rec.sets_off as usize;
        &self.zone.origins[o..o + self.rec.nsets as usize]
    }
}

/// One served zone, loaded from its master file: a table of nodes (every
/// owner name, plus the empty non-terminals between them and the apex)
/// indexed by lower-cased wire name. Immutable once the engine is built.
///
/// Stored flat, so that a large zone costs its octets rather than an
/// allocation per name and record: names in one buffer, nodes and RRsets
/// in arrays of fixed-size entries, and every record's RDATA in one buffer
/// (packed, see [`meridian_wire::rdata::RdataBuf`]).
#[derive(Debug, Clone)]
pub struct Zone {
    /// Lower-cased wire name of the apex.
    pub origin: Box<[u8]>,
    /// Labels in `origin`, the root label not counted.
    pub origin_labels: usize,
    /// The apex in presentation form, lower-cased, with the trailing dot.
    pub origin_text: String,
    names: Vec<u8>,
    nodes: Vec<NodeRec>,
    sets: Vec<SetRec>,
    /// One per entry of `sets`.
    origins: Vec<Origin>,
    data: Vec<u8>,
    /// Lower-cased wire name to node; the name itself is kept once, in `names`.
    index: NodeIndex,
    /// TTL for negative answers: min(SOA TTL, SOA MINIMUM) (RFC 2308 §5).
    pub negative_ttl: u32,
    /// Index of the apex node (which holds the SOA and NS).
    pub apex: u32,
    /// Distinct records loaded (duplicates in the file counted once).
    pub record_count: usize,
    /// The files read (the zone file and its `$INCLUDE`s), stamped.
    pub sources: Vec<FileStamp>,
    /// The files records came from; [`Origin::file`] indexes it.
    pub files: Vec<std::path::PathBuf>,
}

/// Lower-cased wire form of a name.
pub fn wire_name(name: &Name) -> Box<[u8]> {
    let mut v = Vec::with_capacity(name.len() + 2);
    for label in name.iter() {
        v.push(label.len() as u8);
        v.extend(label.iter().map(|b| b.to_ascii_lowercase()));
    }
    v.push(0);
    v.into_boxed_slice()
}

impl Zone {
    /// Load and validate a zone from its master file.
    pub fn load(origin: &Name, file: &Path) -> Result<Zone, LocatedError> {
        let origin = wire_name(origin);
        let mut b = build::Builder::new(&origin);
        let sources = parse::parse_zone_file(file, &origin, &mut |r| b.add(r))?;
        let mut zone = b.finish(file)?;
        zone.sources = sources;
        Ok(zone)
    }

    /// Load and validate a zone from text (`file` names it in messages).
    pub fn from_text(origin: &Name, file: &Path, text: &str) -> Result<Zone, LocatedError> {
        let origin = wire_name(origin);
        let mut b = build::Builder::new(&origin);
        parse::parse_zone_str(text, file, &origin, &mut |r| b.add(r))?;
        b.finish(file)
    }

    /// Every file the zone was read from still looks as it did (see
    /// [`FileStamp`]); false for a zone not read from files.
    pub fn sources_unchanged(&self) -> bool {
        !self.sources.is_empty() && self.sources.iter().all(FileStamp::unchanged)
    }

    #[inline]
    fn view(&self, s: &SetRec) -> RRset<'_> {
        let o = s.data_off as usize;
        RRset {
            rtype: s.rtype,
            ttl: s.ttl,
            data: &self.data[o..o + s.data_len as usize],
        }
    }

    #[inline]
    fn node_at(&self, id: u32) -> Node<'_> {
        Node {
            zone: self,
            rec: &self.nodes[id as usize],
            id,
        }
    }

    /// Every node, the empty non-terminals included.
    pub fn nodes(&self) -> impl Iterator<Item = Node<'_>> {
        (0..self.nodes.len() as u32).map(|i| self.node_at(i))
    }

    /// Entries in the RRset table: indices from [`Node::rrsets_indexed`]
    /// are below it.
    pub fn set_count(&self) -> usize {
        self.sets.len()
    }

    /// A copy whose apex holds `add` (type, TTL, each record's RDATA in wire
    /// form, no names) in place of any RRsets of those types: how a signed
    /// zone gets its DNSKEY, CDS and CDNSKEY RRsets (issue #17). The apex's
    /// RRsets move to the end of the table; the old entries stay unused.
    pub fn with_apex_sets(&self, add: &[(u16, u32, Vec<Vec<u8>>)]) -> Zone {
        let mut z = self.clone();
        let apex = z.nodes[z.apex as usize];
        let start = z.sets.len() as u32;
        let o = apex.sets_off as usize;
        for k in o..o + apex.nsets as usize {
            if !add.iter().any(|(t, _, _)| *t == z.sets[k].rtype) {
                let (s, g) = (z.sets[k], z.origins[k]);
                z.sets.push(s);
                z.origins.push(g);
            }
        }
        for (rtype, ttl, records) in add {
            if records.is_empty() {
                continue;
            }
            let data_off = z.data.len() as u32;
            for r in records {
                let mut b = meridian_wire::rdata::RdataBuf::new();
                b.push_bytes(r);
                meridian_wire::rdata::push_record(&mut z.data, b.as_bytes());
            }
            z.sets.push(SetRec {
                ttl: *ttl,
                data_off,
                data_len: z.data.len() as u32 - data_off,
                rtype: *rtype,
            });
            z.origins.push(Origin {
                rtype: *rtype,
                file: 0,
                line: 0,
            });
        }
        let rec = &mut z.nodes[z.apex as usize];
        rec.sets_off = start;
        rec.nsets = (z.sets.len() as u32 - start) as u16;
        z
    }

    /// How many nodes the zone has.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    fn find(&self, name: &[u8]) -> Option<u32> {
        let (nodes, names) = (&self.nodes, &self.names);
        self.index.find(name, |i| {
            let n = &nodes[i as usize];
            &names[n.name_off as usize..n.name_off as usize + n.name_len as usize]
        })
    }

    /// Find or create the node for `name`, with its empty non-terminal
    /// ancestors.
    pub fn node_id(&mut self, name: &[u8]) -> u32 {
        if let Some(id) = self.find(name) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(NodeRec {
            name_off: self.names.len() as u32,
            sets_off: 0,
            dynamic: NO_BINDING,
            nsets: 0,
            name_len: name.len() as u8,
            cut: false,
        });
        self.names.extend_from_slice(name);
        let (nodes, names) = (&self.nodes, &self.names);
        self.index.insert(name, id, |i| {
            let n = &nodes[i as usize];
            &names[n.name_off as usize..n.name_off as usize + n.name_len as usize]
        });
        if name != &*self.origin {
            if let Some(p) = parent(name) {
                let p = p.to_vec();
                self.node_id(&p);
            }
        }
        id
    }

    /// Bind node `id` to the engine's dynamic binding `b`.
    pub fn set_dynamic(&mut self, id: u32, b: u32) {
        self.nodes[id as usize].dynamic = b;
    }

    /// The node for `name` (lower-cased wire), if the zone has one.
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<Node<'_>> {
        self.find(name).map(|i| self.node_at(i))
    }

    /// The apex node.
    #[inline]
    pub fn apex_node(&self) -> Node<'_> {
        self.node_at(self.apex)
    }

    /// Octets held by the zone's tables (for `check`'s cost summary).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.names.capacity()
            + self.nodes.capacity() * size_of::<NodeRec>()
            + self.sets.capacity() * size_of::<SetRec>()
            + self.origins.capacity() * size_of::<Origin>()
            + self.data.capacity()
            + self.index.0.capacity() * (size_of::<u32>() + 1)
    }
}
