//! Records as read → a flat [`Zone`] (RFC 1035 §5 data, RFC 1034 §3.6.2
//! CNAME rules, RFC 2181 §5.2 RRset TTLs, RFC 2308 §5 negative TTL).
//!
//! Records arrive one by one from the parser, in file order, and are
//! staged as fixed-size entries over one buffer of RDATA. `finish` groups
//! them by node and type (a stable sort, so the order first seen is kept),
//! drops duplicates and writes each RRset once into the zone's buffers.
//! Staging rather than growing a list per node keeps the heap to a few
//! large buffers, which a reload then frees whole.

use std::path::{Path, PathBuf};

use super::parse::Record;
use super::{label_count, name_text, NodeIndex, Origin, SetRec, Zone, NO_BINDING};
use crate::error::LocatedError;
use meridian_wire::name::is_subdomain;
use meridian_wire::rdata::{push_record, Packed, Piece};
use meridian_wire::{TYPE_CNAME, TYPE_NS, TYPE_SOA};

/// One record waiting for `finish`.
#[derive(Debug, Clone, Copy)]
struct Staged {
    node: u32,
    off: u32,
    ttl: u32,
    line: u32,
    len: u16,
    rtype: u16,
    file: u16,
}

/// An RRset with more records than this is deduplicated through a hash set.
const LINEAR_DEDUP: usize = 16;

pub(super) struct Builder {
    zone: Zone,
    staged: Vec<Staged>,
    stage: Vec<u8>,
    /// First line read from each file of `zone.files`.
    first_line: Vec<usize>,
    /// The SOA's TTL, MINIMUM and where it was.
    soa: Option<(u32, u32, u16, u32)>,
}

impl Builder {
    pub(super) fn new(origin: &[u8]) -> Builder {
        let mut zone = Zone {
            origin: origin.into(),
            origin_labels: label_count(origin),
            origin_text: name_text(origin),
            names: Vec::new(),
            nodes: Vec::new(),
            sets: Vec::new(),
            origins: Vec::new(),
            data: Vec::new(),
            index: NodeIndex::default(),
            negative_ttl: 0,
            apex: 0,
            record_count: 0,
            sources: Vec::new(),
            files: Vec::new(),
        };
        zone.apex = zone.node_id(origin);
        Builder {
            zone,
            staged: Vec::new(),
            stage: Vec::new(),
            first_line: Vec::new(),
            soa: None,
        }
    }

    fn file_index(&mut self, file: &Path, line: usize) -> u16 {
        // Records come in runs from one file: try the last one first.
        let found = match self.zone.files.last() {
            Some(f) if f == file => Some(self.zone.files.len() - 1),
            _ => self.zone.files.iter().position(|f| f == file),
        };
        let i = found.unwrap_or_else(|| {
            self.zone.files.push(PathBuf::from(file));
            self.first_line.push(line);
            self.zone.files.len() - 1
        });
        u16::try_from(i).unwrap_or(u16::MAX)
    }

    /// Take one record: checks that need only the record itself happen now.
    pub(super) fn add(&mut self, r: Record<'_>) -> Result<(), LocatedError> {
        let z = &self.zone;
        if !is_subdomain(r.owner, &z.origin) {
            return Err(LocatedError::new(
                r.file,
                r.line,
                format!(
                    "{} is outside the zone {}",
                    name_text(r.owner),
                    z.origin_text
                ),
            ));
        }
        if r.rtype == TYPE_SOA && r.owner != &*z.origin {
            return Err(LocatedError::new(
                r.file,
                r.line,
                format!("SOA at {} is not at the zone apex", name_text(r.owner)),
            ));
        }
        let len = u16::try_from(r.rdata.len())
            .map_err(|_| LocatedError::new(r.file, r.line, "RDATA longer than 65,535 octets"))?;
        let node = self.zone.node_id(r.owner);
        let file = self.file_index(r.file, r.line);
        let line = u32::try_from(r.line).unwrap_or(u32::MAX);
        if r.rtype == TYPE_SOA && self.soa.is_none() {
            self.soa = Some((r.ttl, soa_minimum(Packed(r.rdata)), file, line));
        }
        self.staged.push(Staged {
            node,
            off: u32::try_from(self.stage.len())
                .map_err(|_| LocatedError::new(r.file, r.line, "zone larger than 4 GiB"))?,
            ttl: r.ttl,
            line,
            len,
            rtype: r.rtype,
            file,
        });
        self.stage.extend_from_slice(r.rdata);
        Ok(())
    }

    fn err(&self, s: &Staged, msg: String) -> LocatedError {
        LocatedError::new(&self.zone.files[s.file as usize], s.line as usize, msg)
    }

    /// Group, check and store the staged records; `file` is the zone's
    /// top-level file, named when the SOA is missing.
    pub(super) fn finish(mut self, file: &Path) -> Result<Zone, LocatedError> {
        let staged = std::mem::take(&mut self.staged);
        let stage = std::mem::take(&mut self.stage);
        let rdata = |s: &Staged| &stage[s.off as usize..s.off as usize + s.len as usize];
        // Stable: within a node the records stay in file order.
        let mut order: Vec<u32> = (0..staged.len() as u32).collect();
        order.sort_by_key(|&i| staged[i as usize].node);

        let mut data = Vec::with_capacity(stage.len() + 2 * staged.len());
        let mut sets = Vec::new();
        let mut origins = Vec::new();
        let mut error: Option<(u32, LocatedError)> = None;
        let mut types: Vec<u16> = Vec::new();
        let mut seen: std::collections::HashSet<&[u8], rustc_hash::FxBuildHasher> =
            Default::default();
        let mut records = 0usize;
        let mut g = 0;
        while g < order.len() {
            let node = staged[order[g] as usize].node;
            let end = g + order[g..]
                .iter()
                .position(|&i| staged[i as usize].node != node)
                .unwrap_or(order.len() - g);
            let group = &order[g..end];
            g = end;

            // RFC 1034 §3.6.2: CNAME and other data cannot share a name;
            // one SOA per zone. Reported at the first record that breaks it.
            let (mut cname, mut other, mut soas) = (false, false, 0);
            for &i in group {
                let s = &staged[i as usize];
                let bad = if cname || (s.rtype == TYPE_CNAME && other) {
                    let f = &staged[group[0] as usize];
                    Some(format!(
                        "CNAME at {} cannot coexist with other data (other data at {}:{})",
                        name_text(self.name_of(node)),
                        self.zone.files[f.file as usize].display(),
                        f.line
                    ))
                } else if s.rtype == TYPE_SOA && soas > 0 {
                    Some("a zone has exactly one SOA record".to_string())
                } else {
                    None
                };
                if let Some(msg) = bad {
                    if error.as_ref().is_none_or(|(k, _)| i < *k) {
                        error = Some((i, self.err(s, msg)));
                    }
                    break;
                }
                cname |= s.rtype == TYPE_CNAME;
                other |= s.rtype != TYPE_CNAME;
                soas += (s.rtype == TYPE_SOA) as u32;
            }
            if error.is_some() {
                continue;
            }

            types.clear();
            for &i in group {
                let t = staged[i as usize].rtype;
                if !types.contains(&t) {
                    types.push(t);
                }
            }
            let sets_off = sets.len() as u32;
            for &t in &types {
                let mut of_type = group
                    .iter()
                    .map(|&i| &staged[i as usize])
                    .filter(|s| s.rtype == t);
                let first = of_type.clone().next().expect("a type of this group");
                let n = of_type.clone().count();
                let off = data.len();
                let mut ttl = first.ttl;
                seen.clear();
                for s in of_type.by_ref() {
                    // RFC 2181 §5.2: one TTL per RRset; use the smallest.
                    ttl = ttl.min(s.ttl);
                    let rd = rdata(s);
                    let dup = if n <= LINEAR_DEDUP {
                        meridian_wire::rdata::RRset {
                            rtype: t,
                            ttl,
                            data: &data[off..],
                        }
                        .records()
                        .any(|p| p.0 == rd)
                    } else {
                        !seen.insert(rd)
                    };
                    if !dup {
                        push_record(&mut data, rd);
                        records += 1;
                    }
                }
                sets.push(SetRec {
                    ttl,
                    data_off: off as u32,
                    data_len: (data.len() - off) as u32,
                    rtype: t,
                });
                origins.push(Origin {
                    rtype: t,
                    file: first.file,
                    line: first.line,
                });
            }
            let rec = &mut self.zone.nodes[node as usize];
            rec.sets_off = sets_off;
            rec.nsets = types.len() as u16;
        }
        if let Some((_, e)) = error {
            return Err(e);
        }
        drop(seen);
        drop(order);
        drop(staged);
        drop(stage);

        let z = &mut self.zone;
        data.shrink_to_fit();
        sets.shrink_to_fit();
        origins.shrink_to_fit();
        z.data = data;
        z.sets = sets;
        z.origins = origins;
        z.record_count = records;
        z.names.shrink_to_fit();
        z.nodes.shrink_to_fit();
        let Some((soa_ttl, minimum, soa_file, soa_line)) = self.soa else {
            // Point at the first record of the file, where the SOA belongs.
            let line = z
                .files
                .iter()
                .position(|f| f == file)
                .map_or(1, |i| self.first_line[i]);
            return Err(LocatedError::new(
                file,
                line,
                format!("zone {} has no SOA at its apex", z.origin_text),
            ));
        };
        if z.apex_node().rrset(TYPE_NS).is_none() {
            // The SOA may come from an $INCLUDEd file: name that file.
            return Err(LocatedError::new(
                &z.files[soa_file as usize],
                soa_line as usize,
                format!("zone {} has no NS records at its apex", z.origin_text),
            ));
        }
        z.negative_ttl = soa_ttl.min(minimum);
        for id in 0..z.nodes.len() as u32 {
            let cut = id != z.apex && z.node_at(id).rrset(TYPE_NS).is_some();
            z.nodes[id as usize].cut = cut;
        }
        debug_assert!(z.nodes.iter().all(|n| n.dynamic == NO_BINDING));
        let names = &z.names;
        let nodes = &z.nodes;
        z.index.0.shrink_to_fit(|&i| {
            let n = &nodes[i as usize];
            super::name_hash(&names[n.name_off as usize..n.name_off as usize + n.name_len as usize])
        });
        Ok(self.zone)
    }

    fn name_of(&self, node: u32) -> &[u8] {
        self.zone.node_at(node).name()
    }
}

/// The MINIMUM field of packed SOA RDATA (its last four octets).
fn soa_minimum(rd: Packed<'_>) -> u32 {
    match rd.pieces().last() {
        Some(Piece::Bytes(b)) if b.len() >= 4 => u32::from_be_bytes([
            b[b.len() - 4],
            b[b.len() - 3],
            b[b.len() - 2],
            b[b.len() - 1],
        ]),
        _ => 0,
    }
}
