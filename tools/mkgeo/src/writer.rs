//! A small MaxMind DB v2 writer: binary search tree, 16-byte separator, data
//! section, metadata (MaxMind DB File Format Specification 2.0).
//!
//! Output depends only on the input, so the file is byte-identical across
//! runs: no hash-map iteration order, no clock.

use std::collections::BTreeMap;

/// Marker that starts the metadata section (spec "Database Metadata").
const METADATA_MARKER: &[u8] = b"\xAB\xCD\xEFMaxMind.com";
/// All-zero gap between the search tree and the data section.
const SEPARATOR_LEN: usize = 16;

/// A data-section value (spec "Output Data Section"); only the types we emit.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Double(f64),
    U16(u16),
    U32(u32),
    U64(u64),
    /// Keys in a BTreeMap so the encoding order is fixed.
    Map(BTreeMap<String, Value>),
    Array(Vec<Value>),
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(s.to_string())
    }

    pub fn map<'a>(pairs: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        Value::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
}

/// Metadata fields the caller chooses; the rest are computed.
pub struct Meta {
    pub database_type: String,
    pub description: String,
    pub build_epoch: u64,
}

/// One search-tree record while building.
#[derive(Clone, Copy, PartialEq)]
enum Rec {
    Empty,
    Node(u32),
    Data(u32),
}

/// IPv6-keyed search tree under construction (IPv4 lives at ::/96).
pub struct Tree {
    nodes: Vec<[Rec; 2]>,
    data: Vec<Vec<u8>>,
    /// Encoded record -> index in `data`, so identical records are stored once.
    dedup: BTreeMap<Vec<u8>, u32>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            nodes: vec![[Rec::Empty; 2]],
            data: Vec::new(),
            dedup: BTreeMap::new(),
        }
    }
}

impl Tree {
    /// Insert `key/len` (128-bit key space) with `value`. Overlapping or
    /// duplicate networks are an error: the source must be unambiguous.
    pub fn insert(&mut self, key: u128, len: u8, value: &Value) -> Result<(), String> {
        if len == 0 || len > 128 {
            return Err(format!("prefix length {len} cannot be stored (1..=128)"));
        }
        let mut bytes = Vec::new();
        encode(value, &mut bytes);
        let next = self.data.len() as u32;
        let data_ix = *self.dedup.entry(bytes.clone()).or_insert(next);
        if data_ix == next {
            self.data.push(bytes);
        }

        let mut node = 0usize;
        for depth in 0..len {
            let bit = ((key >> (127 - depth)) & 1) as usize;
            let last = depth + 1 == len;
            match self.nodes[node][bit] {
                Rec::Data(_) => return Err("overlaps a network listed before it".into()),
                Rec::Node(_) if last => return Err("contains a network listed before it".into()),
                Rec::Node(n) => node = n as usize,
                Rec::Empty if last => self.nodes[node][bit] = Rec::Data(data_ix),
                Rec::Empty => {
                    let n = self.nodes.len() as u32;
                    self.nodes.push([Rec::Empty; 2]);
                    self.nodes[node][bit] = Rec::Node(n);
                    node = n as usize;
                }
            }
        }
        Ok(())
    }

    /// Serialize the whole database.
    pub fn finish(&self, meta: &Meta) -> Vec<u8> {
        // Data section: records in insertion order, offsets known up front.
        let mut offsets = Vec::with_capacity(self.data.len());
        let mut data_section = Vec::new();
        for d in &self.data {
            offsets.push(data_section.len() as u64);
            data_section.extend_from_slice(d);
        }

        let node_count = self.nodes.len() as u64;
        let max_value = node_count + SEPARATOR_LEN as u64 + data_section.len() as u64;
        let record_size: u16 = if max_value < 1 << 24 {
            24
        } else if max_value < 1 << 28 {
            28
        } else {
            32
        };

        let value_of = |r: Rec| -> u32 {
            match r {
                Rec::Empty => node_count as u32,
                Rec::Node(n) => n,
                Rec::Data(i) => (node_count + SEPARATOR_LEN as u64 + offsets[i as usize]) as u32,
            }
        };

        let mut out = Vec::new();
        for node in &self.nodes {
            let (l, r) = (value_of(node[0]), value_of(node[1]));
            match record_size {
                24 => {
                    out.extend_from_slice(&l.to_be_bytes()[1..]);
                    out.extend_from_slice(&r.to_be_bytes()[1..]);
                }
                28 => {
                    // Middle byte holds the high nibbles: left's on top.
                    out.extend_from_slice(&l.to_be_bytes()[1..]);
                    out.push((((l >> 24) & 0x0F) << 4) as u8 | ((r >> 24) & 0x0F) as u8);
                    out.extend_from_slice(&r.to_be_bytes()[1..]);
                }
                _ => {
                    out.extend_from_slice(&l.to_be_bytes());
                    out.extend_from_slice(&r.to_be_bytes());
                }
            }
        }
        out.extend_from_slice(&[0u8; SEPARATOR_LEN]);
        out.extend_from_slice(&data_section);

        out.extend_from_slice(METADATA_MARKER);
        let metadata = Value::map([
            ("binary_format_major_version", Value::U16(2)),
            ("binary_format_minor_version", Value::U16(0)),
            ("build_epoch", Value::U64(meta.build_epoch)),
            ("database_type", Value::str(&meta.database_type)),
            (
                "description",
                Value::map([("en", Value::str(&meta.description))]),
            ),
            ("ip_version", Value::U16(6)),
            ("languages", Value::Array(vec![Value::str("en")])),
            ("node_count", Value::U32(node_count as u32)),
            ("record_size", Value::U16(record_size)),
        ]);
        encode(&metadata, &mut out);
        out
    }
}

/// Encode one value (spec "Output Data Section": control byte, optional
/// extended type byte, size bytes, payload).
fn encode(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Str(s) => {
            control(2, s.len(), out);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Double(d) => {
            control(3, 8, out);
            out.extend_from_slice(&d.to_be_bytes());
        }
        Value::U16(n) => uint(5, *n as u64, out),
        Value::U32(n) => uint(6, *n as u64, out),
        Value::U64(n) => uint(9, *n, out),
        Value::Map(m) => {
            control(7, m.len(), out);
            for (k, v) in m {
                control(2, k.len(), out);
                out.extend_from_slice(k.as_bytes());
                encode(v, out);
            }
        }
        Value::Array(a) => {
            control(11, a.len(), out);
            for v in a {
                encode(v, out);
            }
        }
    }
}

/// Unsigned integers use the fewest big-endian bytes (0 is zero bytes).
fn uint(type_num: u8, n: u64, out: &mut Vec<u8>) {
    let bytes = n.to_be_bytes();
    let skip = (n.leading_zeros() / 8) as usize;
    control(type_num, 8 - skip, out);
    out.extend_from_slice(&bytes[skip..]);
}

fn control(type_num: u8, size: usize, out: &mut Vec<u8>) {
    let (size_bits, extra): (u8, Vec<u8>) = if size < 29 {
        (size as u8, vec![])
    } else if size < 285 {
        (29, vec![(size - 29) as u8])
    } else if size < 65_821 {
        (30, ((size - 285) as u16).to_be_bytes().to_vec())
    } else {
        (31, ((size - 65_821) as u32).to_be_bytes()[1..].to_vec())
    };
    if type_num <= 7 {
        out.push(type_num << 5 | size_bits);
    } else {
        // Extended type: type 0 in the control byte, real type - 7 next.
        out.push(size_bits);
        out.push(type_num - 7);
    }
    out.extend_from_slice(&extra);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bytes_follow_the_spec() {
        let mut out = Vec::new();
        control(2, 3, &mut out);
        assert_eq!(out, [0x43]);
        out.clear();
        control(2, 30, &mut out);
        assert_eq!(out, [0x5D, 1]);
        out.clear();
        control(11, 2, &mut out);
        assert_eq!(out, [0x02, 0x04]);
        out.clear();
        uint(5, 0, &mut out);
        assert_eq!(out, [0xA0]);
        out.clear();
        uint(6, 0x0102, &mut out);
        assert_eq!(out, [0xC2, 1, 2]);
    }

    #[test]
    fn overlaps_are_rejected() {
        let mut t = Tree::default();
        let v = Value::str("x");
        t.insert(0, 8, &v).unwrap();
        assert!(t.insert(0, 16, &v).is_err());
        assert!(t.insert(0, 4, &v).is_err());
        assert!(t.insert(0, 8, &v).is_err());
        t.insert(1 << 120, 8, &v).unwrap();
    }
}
