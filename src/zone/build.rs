//! Records as read → a flat [`Zone`] (RFC 1035 §5 data, RFC 1034 §3.6.2
//! CNAME rules, RFC 2181 §5.2 RRset TTLs, RFC 2308 §5 negative TTL).
//!
//! Records arrive one by one from the parser, in file order. Those of one
//! owner name usually come together: they are gathered until the name
//! changes, then checked, grouped by type (in the order first seen) and
//! written once into the zone's buffers, so building costs little more
//! than the zone itself. Records of a name that was already written
//! ("late", when a file interleaves names) wait until `finish`, which
//! rewrites that name's RRsets at the end of the buffers.
//!
//! Invariants: a node's RRsets are contiguous in `sets`; a CNAME is alone
//! at its name; one SOA per zone; an RRset holds each RDATA once, with the
//! smallest TTL given to any of its records.

use std::path::{Path, PathBuf};

use super::parse::Record;
use super::{label_count, name_text, NodeIndex, Origin, SetRec, Zone, NO_BINDING};
use crate::error::LocatedError;
use meridian_wire::name::is_subdomain;
use meridian_wire::rdata::{push_record, Packed, Piece, RRset};
use meridian_wire::{TYPE_CNAME, TYPE_NS, TYPE_SOA};

/// One record waiting to be written, its RDATA in a staging buffer.
#[derive(Debug, Clone, Copy)]
struct Staged {
    node: u32,
    off: u32,
    ttl: u32,
    line: u32,
    /// Position in the zone's records, for reporting the first error.
    seq: u32,
    len: u16,
    rtype: u16,
    file: u16,
}

/// Records gathered with their RDATA.
#[derive(Debug, Default)]
struct Batch {
    recs: Vec<Staged>,
    bytes: Vec<u8>,
}

impl Batch {
    fn rdata(&self, s: &Staged) -> &[u8] {
        &self.bytes[s.off as usize..s.off as usize + s.len as usize]
    }

    fn push(&mut self, mut s: Staged, rdata: &[u8]) {
        s.off = self.bytes.len() as u32;
        self.recs.push(s);
        self.bytes.extend_from_slice(rdata);
    }

    fn clear(&mut self) {
        self.recs.clear();
        self.bytes.clear();
    }
}

/// An RRset with more records than this is deduplicated through a hash set.
const LINEAR_DEDUP: usize = 16;

pub(super) struct Builder {
    zone: Zone,
    /// The records of the name being read.
    group: Batch,
    /// Records of names already written.
    late: Batch,
    seq: u32,
    /// The first error, by position in the file.
    error: Option<(u32, LocatedError)>,
    /// First line read from each file of `zone.files`.
    first_line: Vec<usize>,
    /// The SOA's TTL, MINIMUM and where it was.
    soa: Option<(u32, u32, u16, u32)>,
    types: Vec<u16>,
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
            group: Batch::default(),
            late: Batch::default(),
            seq: 0,
            error: None,
            first_line: Vec::new(),
            soa: None,
            types: Vec::new(),
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
        let rec = Staged {
            node,
            off: 0,
            ttl: r.ttl,
            line,
            seq: self.seq,
            len,
            rtype: r.rtype,
            file,
        };
        self.seq = self.seq.saturating_add(1);
        if self.group.recs.first().is_some_and(|g| g.node != node) {
            self.flush_group();
        }
        if self.zone.nodes[node as usize].nsets > 0 {
            self.late.push(rec, r.rdata);
        } else {
            self.group.push(rec, r.rdata);
        }
        Ok(())
    }

    fn flush_group(&mut self) {
        let group = std::mem::take(&mut self.group);
        if self.check(&group.recs, (false, false, 0)) {
            self.write(&group, &group.recs);
        }
        self.group = group;
        self.group.clear();
    }

    fn note_error(&mut self, s: &Staged, msg: String) {
        if self.error.as_ref().is_none_or(|(k, _)| s.seq < *k) {
            let e = LocatedError::new(&self.zone.files[s.file as usize], s.line as usize, msg);
            self.error = Some((s.seq, e));
        }
    }

    /// Write the records `recs` (all of one node, in file order, checked,
    /// their RDATA in `batch`) as that node's RRsets.
    fn write(&mut self, batch: &Batch, recs: &[Staged]) {
        let Some(first) = recs.first() else { return };
        let node = first.node;
        let mut types = std::mem::take(&mut self.types);
        types.clear();
        for s in recs {
            if !types.contains(&s.rtype) {
                types.push(s.rtype);
            }
        }
        let z = &mut self.zone;
        let sets_off = z.sets.len() as u32;
        for &t in &types {
            let of_type = || recs.iter().filter(|s| s.rtype == t);
            let first = of_type().next().expect("a type of this node");
            let n = of_type().count();
            let off = z.data.len();
            let mut ttl = first.ttl;
            let mut seen: std::collections::HashSet<&[u8], rustc_hash::FxBuildHasher> =
                Default::default();
            for s in of_type() {
                // RFC 2181 §5.2: one TTL per RRset; use the smallest.
                ttl = ttl.min(s.ttl);
                let rd = batch.rdata(s);
                let dup = if n <= LINEAR_DEDUP {
                    let set = RRset {
                        rtype: t,
                        ttl,
                        data: &z.data[off..],
                    };
                    set.records().any(|p| p.0 == rd)
                } else {
                    !seen.insert(rd)
                };
                if !dup {
                    push_record(&mut z.data, rd);
                    z.record_count += 1;
                }
            }
            z.sets.push(SetRec {
                ttl,
                data_off: off as u32,
                data_len: (z.data.len() - off) as u32,
                rtype: t,
            });
            z.origins.push(Origin {
                rtype: t,
                file: first.file,
                line: first.line,
            });
        }
        let rec = &mut z.nodes[node as usize];
        rec.sets_off = sets_off;
        rec.nsets = types.len() as u16;
        self.types = types;
    }

    /// Rewrite the RRsets of names that got records after they were
    /// written: their old records first, then the late ones, in file order.
    fn merge_late(&mut self) {
        let mut late = std::mem::take(&mut self.late);
        // Stable: each name's late records stay in file order.
        late.recs.sort_by_key(|s| s.node);
        let mut both = Batch::default();
        let mut i = 0;
        while i < late.recs.len() {
            let node = late.recs[i].node;
            let end = i + late.recs[i..].iter().take_while(|s| s.node == node).count();
            both.clear();
            let n = self.zone.node_at(node);
            let mut before = (false, false, 0);
            for (set, o) in n.rrsets().zip(n.origins()) {
                before.0 |= set.rtype == TYPE_CNAME;
                before.1 |= set.rtype != TYPE_CNAME;
                before.2 += (set.rtype == TYPE_SOA) as u32;
                for rd in set.records() {
                    let s = Staged {
                        node,
                        off: 0,
                        ttl: set.ttl,
                        line: o.line,
                        seq: 0,
                        len: rd.0.len() as u16,
                        rtype: set.rtype,
                        file: o.file,
                    };
                    both.push(s, rd.0);
                }
            }
            let old = both.recs.len();
            for s in &late.recs[i..end] {
                both.push(*s, late.rdata(s));
            }
            // Only the late records are checked (against what the name
            // held); the old ones are written again with them.
            if self.check(&both.recs[old..], before) {
                // They were counted when first written.
                self.zone.record_count -= old;
                self.write(&both, &both.recs);
            }
            i = end;
        }
        late.clear();
    }

    /// RFC 1034 §3.6.2: CNAME and other data cannot share a name; one SOA
    /// per zone. `recs` are one node's records in file order, `before` what
    /// the node held already: (a CNAME, other data, SOAs). An error is
    /// noted at the first record that breaks a rule; false once the zone
    /// has an error (writing more would be wasted).
    fn check(&mut self, recs: &[Staged], before: (bool, bool, u32)) -> bool {
        let (mut cname, mut other, mut soas) = before;
        for s in recs {
            let bad = if cname || (s.rtype == TYPE_CNAME && other) {
                let node = self.zone.node_at(s.node);
                // Where the name's first record was: written, or in `recs`.
                let (file, line) = match node.origins().first() {
                    Some(o) => (o.file, o.line),
                    None => (recs[0].file, recs[0].line),
                };
                Some(format!(
                    "CNAME at {} cannot coexist with other data (other data at {}:{})",
                    name_text(node.name()),
                    self.zone.files[file as usize].display(),
                    line
                ))
            } else if s.rtype == TYPE_SOA && soas > 0 {
                Some("a zone has exactly one SOA record".to_string())
            } else {
                None
            };
            if let Some(msg) = bad {
                self.note_error(s, msg);
                break;
            }
            cname |= s.rtype == TYPE_CNAME;
            other |= s.rtype != TYPE_CNAME;
            soas += (s.rtype == TYPE_SOA) as u32;
        }
        self.error.is_none()
    }

    /// Write what is left and check the zone as a whole; `file` is the
    /// zone's top-level file, named when the SOA is missing.
    pub(super) fn finish(mut self, file: &Path) -> Result<Zone, LocatedError> {
        self.flush_group();
        self.group = Batch::default();
        if !self.late.recs.is_empty() {
            self.merge_late();
        }
        self.late = Batch::default();
        if let Some((_, e)) = self.error {
            return Err(e);
        }
        let z = &mut self.zone;
        z.data.shrink_to_fit();
        z.sets.shrink_to_fit();
        z.origins.shrink_to_fit();
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

#[cfg(test)]
mod tests {
    use super::super::Zone;
    use hickory_proto::rr::Name;
    use std::path::Path;

    fn zone(text: &str) -> Result<Zone, String> {
        let origin = Name::from_ascii("example.test.").unwrap();
        Zone::from_text(&origin, Path::new("z.zone"), text).map_err(|e| e.to_string())
    }

    const HEAD: &str = "$ORIGIN example.test.\n$TTL 300\n@ SOA ns hostmaster 1 2 3 4 60\n@ NS ns\nns A 192.0.2.53\n";

    /// One RRset as (type, ttl, records).
    type Set = (u16, u32, Vec<Vec<u8>>);

    /// Every name's RRsets, for comparing zones.
    fn dump(z: &Zone) -> Vec<(Vec<u8>, Vec<Set>)> {
        let mut v: Vec<_> = z
            .nodes()
            .map(|n| {
                let sets = n
                    .rrsets()
                    .map(|s| (s.rtype, s.ttl, s.records().map(|r| r.0.to_vec()).collect()))
                    .collect();
                (n.name().to_vec(), sets)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn interleaved_names_equal_grouped_names() {
        let grouped = zone(&format!(
            "{HEAD}a A 192.0.2.1\na A 192.0.2.2\na TXT \"x\"\nb A 192.0.2.3\n"
        ))
        .unwrap();
        let interleaved = zone(&format!(
            "{HEAD}a A 192.0.2.1\nb A 192.0.2.3\na TXT \"x\"\nb A 192.0.2.3\na 100 A 192.0.2.2\na A 192.0.2.1\n"
        ))
        .unwrap();
        let a = interleaved
            .get(b"\x01a\x07example\x04test\x00")
            .expect("a is a name");
        let types: Vec<u16> = a.rrsets().map(|s| s.rtype).collect();
        assert_eq!(types, [1, 16], "types in the order first seen");
        let set = a.rrset(1).unwrap();
        assert_eq!(set.records().count(), 2, "duplicates dropped");
        assert_eq!(set.ttl, 100, "the smallest TTL of the set");
        assert_eq!(interleaved.record_count, grouped.record_count);
        let mut g = dump(&grouped);
        // The TTL differs on purpose; everything else must match.
        for (name, sets) in g.iter_mut() {
            if name.starts_with(b"\x01a") {
                sets[0].1 = 100;
            }
        }
        assert_eq!(dump(&interleaved), g);
    }

    #[test]
    fn late_cname_conflict_names_both_lines() {
        let e = zone(&format!("{HEAD}a A 192.0.2.1\nb A 192.0.2.3\na CNAME b\n")).unwrap_err();
        assert!(
            e.contains("z.zone:8") && e.contains("other data at z.zone:6"),
            "{e}"
        );
        let e = zone(&format!("{HEAD}a CNAME b\nb A 192.0.2.3\na A 192.0.2.1\n")).unwrap_err();
        assert!(
            e.contains("z.zone:8") && e.contains("CNAME at a.example.test."),
            "{e}"
        );
    }

    #[test]
    fn the_first_error_in_the_file_wins() {
        // A late conflict (line 8) comes before a grouped one (line 10).
        let e = zone(&format!(
            "{HEAD}a A 192.0.2.1\nb A 192.0.2.3\na CNAME b\nc CNAME b\nc A 192.0.2.1\n"
        ))
        .unwrap_err();
        assert!(e.contains("z.zone:8"), "{e}");
        let e = zone(&format!("{HEAD}@ SOA ns hostmaster 2 2 3 4 60\n")).unwrap_err();
        assert!(
            e.contains("z.zone:6") && e.contains("exactly one SOA"),
            "{e}"
        );
    }

    #[test]
    fn large_rrsets_drop_duplicates_too() {
        let mut text = HEAD.to_string();
        for round in 0..2 {
            for i in 0..40 {
                text.push_str(&format!("big A 10.0.{round}.{i}\nbig A 10.0.0.{i}\n"));
            }
        }
        let z = zone(&text).unwrap();
        let big = z.get(b"\x03big\x07example\x04test\x00").unwrap();
        assert_eq!(big.rrset(1).unwrap().records().count(), 80);
    }
}
