//! Zone data: master files (RFC 1035 §5) compiled into a name table with
//! zone cuts (RFC 1034 §4.2.1), empty non-terminals and wildcards (RFC 4592)
//! made explicit, and each RRset's RDATA kept in wire form for rendering.

pub mod parse;
pub mod stamp;

pub use stamp::FileStamp;

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::path::Path;

use hickory_proto::rr::{Name, RData};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use crate::error::LocatedError;
pub use meridian_wire::name::{is_subdomain, label_count, name_text, parent};
pub use meridian_wire::rdata::{Chunk, RRset, Rdata};
use meridian_wire::{TYPE_ANY, TYPE_CNAME, TYPE_DS, TYPE_NS, TYPE_SOA};
use parse::{SourceRdata, SourceRecord};

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
    /// The index of the node named `name` in `nodes`.
    #[inline]
    pub fn find(&self, nodes: &[Node], name: &[u8]) -> Option<u32> {
        self.0
            .find(name_hash(name), |&i| &*nodes[i as usize].name == name)
            .copied()
    }

    /// Add node `id` (already in `nodes`, under a name not yet indexed).
    pub fn insert(&mut self, nodes: &[Node], id: u32) {
        let h = name_hash(&nodes[id as usize].name);
        self.0
            .insert_unique(h, id, |&i| name_hash(&nodes[i as usize].name));
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

/// The sections of one answer at a node, ready to copy after the question.
/// The zone only stores them (the answer layer renders them), so that a
/// query for a static name costs one copy; the question has the same length
/// whatever its case, so compression pointers into it stay valid.
#[derive(Debug, Clone)]
pub struct Prerendered {
    /// The query type this answers; [`Prerendered::OTHER`] for every type the node lacks.
    pub qtype: u16,
    /// The response code.
    pub rcode: u16,
    /// Records in the answer section.
    pub an: u16,
    /// Records in the authority section.
    pub ns: u16,
    /// Records in the additional section.
    pub ar: u16,
    /// The sections, as written after the question.
    pub bytes: Box<[u8]>,
}

impl Prerendered {
    /// Stands for "a type the node has no RRset of".
    pub const OTHER: u16 = 0;

    /// Types whose answers differ from the OTHER answer at a name without them.
    pub fn is_special(qtype: u16) -> bool {
        qtype == TYPE_CNAME || qtype == TYPE_ANY || qtype == TYPE_DS
    }
}

/// A node's pre-rendered answers in one allocation: a count, then one
/// 16-octet entry per answer (qtype, rcode, an, ns, ar, length, offset),
/// then the answers' bytes. One allocation instead of one per answer keeps
/// a large zone small; empty (no allocation) until rendered.
#[derive(Debug, Clone, Default)]
pub struct PreSet(Box<[u8]>);

/// One answer of a [`PreSet`].
#[derive(Debug, Clone, Copy)]
pub struct Pre<'a> {
    /// The response code.
    pub rcode: u16,
    /// Records in the answer section.
    pub an: u16,
    /// Records in the authority section.
    pub ns: u16,
    /// Records in the additional section.
    pub ar: u16,
    /// The sections, as written after the question.
    pub bytes: &'a [u8],
}

const PRE_ENTRY: usize = 16;

impl PreSet {
    /// Pack `answers` (each at most 65,535 octets).
    pub fn new(answers: &[Prerendered]) -> PreSet {
        if answers.is_empty() {
            return PreSet::default();
        }
        let head = 2 + PRE_ENTRY * answers.len();
        let mut v = Vec::with_capacity(head + answers.iter().map(|p| p.bytes.len()).sum::<usize>());
        v.extend_from_slice(&(answers.len() as u16).to_ne_bytes());
        let mut off = head as u32;
        for p in answers {
            for x in [p.qtype, p.rcode, p.an, p.ns, p.ar, p.bytes.len() as u16] {
                v.extend_from_slice(&x.to_ne_bytes());
            }
            v.extend_from_slice(&off.to_ne_bytes());
            off += p.bytes.len() as u32;
        }
        for p in answers {
            v.extend_from_slice(&p.bytes);
        }
        PreSet(v.into_boxed_slice())
    }

    #[inline]
    fn u16_at(&self, i: usize) -> u16 {
        u16::from_ne_bytes([self.0[i], self.0[i + 1]])
    }

    /// The answers: (qtype, answer).
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = (u16, Pre<'_>)> {
        let n = if self.0.is_empty() {
            0
        } else {
            self.u16_at(0) as usize
        };
        (0..n).map(move |k| {
            let e = 2 + k * PRE_ENTRY;
            let len = self.u16_at(e + 10) as usize;
            let off = u32::from_ne_bytes([
                self.0[e + 12],
                self.0[e + 13],
                self.0[e + 14],
                self.0[e + 15],
            ]) as usize;
            (
                self.u16_at(e),
                Pre {
                    rcode: self.u16_at(e + 2),
                    an: self.u16_at(e + 4),
                    ns: self.u16_at(e + 6),
                    ar: self.u16_at(e + 8),
                    bytes: &self.0[off..off + len],
                },
            )
        })
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

/// One owner name. Nodes with no RRsets are empty non-terminals.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Lower-cased wire name.
    pub name: Box<[u8]>,
    /// The RRsets owned by this name, one per type, in the order first seen.
    pub rrsets: Vec<RRset>,
    /// A delegation point: NS below the apex.
    pub cut: bool,
    /// Index into the engine's dynamic bindings (pool or geo name).
    pub dynamic: Option<u32>,
    /// Where each type came from, for error messages.
    pub origins: Vec<Origin>,
    /// Answers rendered at load time by `answer::prerender`; empty until then.
    pub pre: PreSet,
}

impl Node {
    /// The pre-rendered answer for `qtype`, if this name has one.
    #[inline]
    pub fn prerendered(&self, qtype: u16) -> Option<Pre<'_>> {
        let mut other = None;
        for (t, p) in self.pre.iter() {
            if t == qtype {
                return Some(p);
            }
            if t == Prerendered::OTHER {
                other = Some(p);
            }
        }
        if Prerendered::is_special(qtype) || self.rrset(qtype).is_some() {
            return None;
        }
        other
    }

    /// This name's RRset of type `rtype`, if it has one.
    pub fn rrset(&self, rtype: u16) -> Option<&RRset> {
        self.rrsets.iter().find(|r| r.rtype == rtype)
    }
}

/// One served zone, loaded from its master file: a table of nodes (every
/// owner name, plus the empty non-terminals between them and the apex)
/// indexed by lower-cased wire name. Immutable once the engine is built.
#[derive(Debug, Clone)]
pub struct Zone {
    /// Lower-cased wire name of the apex.
    pub origin: Box<[u8]>,
    /// Labels in `origin`, the root label not counted.
    pub origin_labels: usize,
    /// The apex in presentation form, lower-cased, with the trailing dot.
    pub origin_text: String,
    /// Every node of the zone; `index` and `apex` point into it.
    pub nodes: Vec<Node>,
    /// Lower-cased wire name to index in `nodes`; the name itself is kept
    /// once, in its node.
    pub index: NodeIndex,
    /// TTL for negative answers: min(SOA TTL, SOA MINIMUM) (RFC 2308 §5).
    pub negative_ttl: u32,
    /// Index in `nodes` of the apex node (which holds the SOA and NS).
    pub apex: u32,
    /// Distinct records loaded (duplicates in the file counted once).
    pub record_count: usize,
    /// The files read (the zone file and its `$INCLUDE`s), stamped.
    pub sources: Vec<FileStamp>,
    /// The files records came from; [`Origin::file`] indexes it.
    pub files: Vec<std::path::PathBuf>,
    /// Static answers are rendered into the nodes (see `answer::prerender`).
    pub prerendered: bool,
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

/// Turn parsed RDATA into chunks, marking names that may be compressed.
fn to_chunks(rtype: u16, rd: &SourceRdata) -> Result<Rdata, String> {
    let known = match rd {
        SourceRdata::Raw(b) => return Ok(Rdata(vec![Chunk::Bytes(b.clone().into())])),
        SourceRdata::Known(k) => k,
    };
    let chunks = match known {
        RData::NS(n) => vec![Chunk::Name(wire_name(&n.0))],
        RData::CNAME(n) => vec![Chunk::Name(wire_name(&n.0))],
        RData::PTR(n) => vec![Chunk::Name(wire_name(&n.0))],
        RData::MX(mx) => vec![
            Chunk::Bytes(mx.preference.to_be_bytes().to_vec().into()),
            Chunk::Name(wire_name(&mx.exchange)),
        ],
        RData::SOA(soa) => {
            let mut tail = Vec::with_capacity(20);
            tail.extend_from_slice(&soa.serial.to_be_bytes());
            tail.extend_from_slice(&soa.refresh.to_be_bytes());
            tail.extend_from_slice(&soa.retry.to_be_bytes());
            tail.extend_from_slice(&soa.expire.to_be_bytes());
            tail.extend_from_slice(&soa.minimum.to_be_bytes());
            vec![
                Chunk::Name(wire_name(&soa.mname)),
                Chunk::Name(wire_name(&soa.rname)),
                Chunk::Bytes(tail.into()),
            ]
        }
        other => {
            let mut buf = Vec::new();
            let mut enc = BinEncoder::new(&mut buf);
            // No compression: these octets are copied into other messages.
            enc.set_canonical_form(true);
            other
                .emit(&mut enc)
                .map_err(|e| format!("cannot encode type {rtype}: {e}"))?;
            vec![Chunk::Bytes(buf.into())]
        }
    };
    Ok(Rdata(chunks))
}

impl Zone {
    /// Load and validate a zone from its master file.
    pub fn load(origin: &Name, file: &Path) -> Result<Zone, LocatedError> {
        let (records, sources) = parse::parse_zone_file(file, origin)?;
        let mut zone = Zone::build(origin, file, records)?;
        zone.sources = sources;
        Ok(zone)
    }

    /// Every file the zone was read from still looks as it did (see
    /// [`FileStamp`]); false for a zone not read from files.
    pub fn sources_unchanged(&self) -> bool {
        !self.sources.is_empty() && self.sources.iter().all(FileStamp::unchanged)
    }

    /// Validate `records` (read from `file`, for error messages) into a zone
    /// at `origin`: every owner inside the zone, one SOA at the apex, NS at the
    /// apex, no CNAME beside other data.
    pub fn build(
        origin: &Name,
        file: &Path,
        records: Vec<SourceRecord>,
    ) -> Result<Zone, LocatedError> {
        let origin_w = wire_name(origin);
        let mut zone = Zone {
            origin: origin_w.clone(),
            origin_labels: label_count(&origin_w),
            origin_text: name_text(&origin_w),
            nodes: Vec::new(),
            index: NodeIndex::default(),
            negative_ttl: 0,
            apex: 0,
            record_count: 0,
            sources: Vec::new(),
            prerendered: false,
            files: Vec::new(),
        };
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        zone.apex = zone.node_id(&origin_w);
        for rec in &records {
            let owner = wire_name(&rec.owner);
            if !is_subdomain(&owner, &origin_w) {
                return Err(LocatedError::new(
                    &rec.file,
                    rec.line,
                    format!(
                        "{} is outside the zone {}",
                        name_text(&owner),
                        zone.origin_text
                    ),
                ));
            }
            if rec.rtype == TYPE_SOA && owner != origin_w {
                return Err(LocatedError::new(
                    &rec.file,
                    rec.line,
                    format!("SOA at {} is not at the zone apex", name_text(&owner)),
                ));
            }
            let rdata = to_chunks(rec.rtype, &rec.rdata)
                .map_err(|m| LocatedError::new(&rec.file, rec.line, m))?;
            let id = zone.node_id(&owner) as usize;
            let node = &mut zone.nodes[id];
            // CNAME and other data cannot share a name (RFC 1034 §3.6.2).
            let has_cname = node.rrset(TYPE_CNAME).is_some();
            let has_other = node.rrsets.iter().any(|r| r.rtype != TYPE_CNAME);
            if has_cname || (rec.rtype == TYPE_CNAME && has_other) {
                let first = node
                    .origins
                    .first()
                    .map(|o| {
                        format!(
                            " (other data at {}:{})",
                            files[o.file as usize].display(),
                            o.line
                        )
                    })
                    .unwrap_or_default();
                return Err(LocatedError::new(
                    &rec.file,
                    rec.line,
                    format!(
                        "CNAME at {} cannot coexist with other data{}",
                        name_text(&owner),
                        first
                    ),
                ));
            }
            if !node.origins.iter().any(|o| o.rtype == rec.rtype) {
                let file = match files.iter().position(|f| *f == rec.file) {
                    Some(i) => i,
                    None => {
                        files.push(rec.file.clone());
                        files.len() - 1
                    }
                };
                node.origins.push(Origin {
                    rtype: rec.rtype,
                    file: u16::try_from(file).unwrap_or(u16::MAX),
                    line: u32::try_from(rec.line).unwrap_or(u32::MAX),
                });
            }
            match node.rrsets.iter_mut().find(|r| r.rtype == rec.rtype) {
                Some(set) => {
                    if rec.rtype == TYPE_SOA {
                        return Err(LocatedError::new(
                            &rec.file,
                            rec.line,
                            "a zone has exactly one SOA record",
                        ));
                    }
                    // RFC 2181 §5.2: one TTL per RRset; use the smallest.
                    set.ttl = set.ttl.min(rec.ttl);
                    if !set.rdatas.contains(&rdata) {
                        set.rdatas.push(rdata);
                        zone.record_count += 1;
                    }
                }
                None => {
                    node.rrsets.push(RRset {
                        rtype: rec.rtype,
                        ttl: rec.ttl,
                        rdatas: vec![rdata],
                    });
                    zone.record_count += 1;
                }
            }
        }
        zone.files = files;
        let apex = &zone.nodes[zone.apex as usize];
        let soa = records
            .iter()
            .find(|r| r.rtype == TYPE_SOA)
            .ok_or_else(|| {
                // Point at the first record of the file, where the SOA belongs.
                let line = records
                    .iter()
                    .find(|r| r.file == file)
                    .map(|r| r.line)
                    .unwrap_or(1);
                LocatedError::new(
                    file,
                    line,
                    format!("zone {} has no SOA at its apex", zone.origin_text),
                )
            })?;
        if apex.rrset(TYPE_NS).is_none() {
            // The SOA may come from an $INCLUDEd file: name that file.
            return Err(LocatedError::new(
                &soa.file,
                soa.line,
                format!("zone {} has no NS records at its apex", zone.origin_text),
            ));
        }
        let minimum = match &soa.rdata {
            SourceRdata::Known(RData::SOA(s)) => s.minimum,
            _ => soa.ttl,
        };
        zone.negative_ttl = soa.ttl.min(minimum);
        for node in zone.nodes.iter_mut() {
            node.cut = node.name != zone.origin && node.rrset(TYPE_NS).is_some();
        }
        Ok(zone)
    }

    /// Find or create the node for `name`, with its empty non-terminal ancestors.
    pub fn node_id(&mut self, name: &[u8]) -> u32 {
        if let Some(id) = self.index.find(&self.nodes, name) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            name: name.into(),
            ..Node::default()
        });
        self.index.insert(&self.nodes, id);
        if name != &*self.origin {
            if let Some(p) = parent(name) {
                let p = p.to_vec();
                self.node_id(&p);
            }
        }
        id
    }

    /// The node for `name` (lower-cased wire), if the zone has one.
    pub fn get(&self, name: &[u8]) -> Option<&Node> {
        self.index
            .find(&self.nodes, name)
            .map(|i| &self.nodes[i as usize])
    }

    /// The apex node.
    pub fn apex_node(&self) -> &Node {
        &self.nodes[self.apex as usize]
    }
}
