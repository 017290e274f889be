//! Building queries (RFC 1035 §4.1, RFC 6891 §6.1.2, RFC 7871 §6): the one
//! builder that `meridian lookup`, pre-rendering, the tools, the tests and
//! the fuzz corpus use. Every field can be set to any value, valid or not,
//! so tests can build the malformed queries they need.

use std::net::IpAddr;

use crate::name::from_text;
use crate::{CLASS_IN, OPT_ECS, TYPE_OPT};

/// A query with one question and, optionally, an OPT record.
#[derive(Clone, Debug)]
pub struct QueryBuilder {
    /// The message ID.
    pub id: u16,
    /// The raw flag word (0x0100 = RD; the opcode is bits 11-14).
    pub flags: u16,
    /// The question's name in wire form, uncompressed, case as given.
    pub qname: Vec<u8>,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// The OPT record; None sends none.
    pub opt: Option<Opt>,
}

/// The fields of an OPT pseudo-record in a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opt {
    /// The requestor's UDP payload size (the CLASS field).
    pub udp_size: u16,
    /// The upper 8 bits of the extended rcode (0 in a query).
    pub ext_rcode: u8,
    /// The EDNS version.
    pub version: u8,
    /// The flags word (0x8000 = DO).
    pub flags: u16,
    /// The options, already encoded (see [`option`] and [`ecs_option`]).
    pub options: Vec<u8>,
}

impl Default for Opt {
    fn default() -> Opt {
        Opt {
            udp_size: 1232,
            ext_rcode: 0,
            version: 0,
            flags: 0,
            options: Vec::new(),
        }
    }
}

impl QueryBuilder {
    /// A query for `name` (text, "www.example.test" or with the final dot)
    /// and `qtype`, class IN, ID 0, no flags, no OPT.
    ///
    /// # Panics
    /// If `name` is not a valid text name (an empty label, a label over 63
    /// octets, or more than 255 octets in all): builders are for tools and
    /// tests, whose names are literals. Use [`QueryBuilder::wire`] otherwise.
    pub fn new(name: &str, qtype: u16) -> QueryBuilder {
        let qname = from_text(name).unwrap_or_else(|| panic!("not a domain name: {name:?}"));
        QueryBuilder::wire(qname, qtype)
    }

    /// A query for a name already in wire form (not checked).
    pub fn wire(qname: Vec<u8>, qtype: u16) -> QueryBuilder {
        QueryBuilder {
            id: 0,
            flags: 0,
            qname,
            qtype,
            qclass: CLASS_IN,
            opt: None,
        }
    }

    /// Set the ID.
    pub fn id(mut self, id: u16) -> Self {
        self.id = id;
        self
    }

    /// Set the raw flag word.
    pub fn flags(mut self, flags: u16) -> Self {
        self.flags = flags;
        self
    }

    /// Set RD (recursion desired).
    pub fn rd(mut self) -> Self {
        self.flags |= 0x0100;
        self
    }

    /// Set QCLASS.
    pub fn class(mut self, qclass: u16) -> Self {
        self.qclass = qclass;
        self
    }

    /// Add an OPT record with UDP size `udp_size`, version 0, no options.
    pub fn edns(mut self, udp_size: u16) -> Self {
        self.opt = Some(Opt {
            udp_size,
            ..Opt::default()
        });
        self
    }

    /// Set the whole OPT record.
    pub fn opt(mut self, opt: Opt) -> Self {
        self.opt = Some(opt);
        self
    }

    /// Add an ECS option for `addr/source` (address masked to `source`),
    /// adding an OPT record (1232 octets) if there is none.
    pub fn ecs(mut self, addr: IpAddr, source: u8) -> Self {
        let o = self.opt.get_or_insert_with(Opt::default);
        o.options.extend_from_slice(&ecs_for(addr, source));
        self
    }

    /// Append an already encoded EDNS option, adding an OPT record if
    /// there is none.
    pub fn option(mut self, encoded: &[u8]) -> Self {
        let o = self.opt.get_or_insert_with(Opt::default);
        o.options.extend_from_slice(encoded);
        self
    }

    /// The query's length in octets.
    pub fn wire_len(&self) -> usize {
        12 + self.qname.len() + 4 + self.opt.as_ref().map_or(0, |o| 11 + o.options.len())
    }

    /// Write the query into `out`. Returns the length, or None if `out` is
    /// too small.
    pub fn write(&self, out: &mut [u8]) -> Option<usize> {
        let n = self.wire_len();
        let out = out.get_mut(..n)?;
        out[0..2].copy_from_slice(&self.id.to_be_bytes());
        out[2..4].copy_from_slice(&self.flags.to_be_bytes());
        out[4..6].copy_from_slice(&1u16.to_be_bytes());
        out[6..10].fill(0);
        let ar = u16::from(self.opt.is_some());
        out[10..12].copy_from_slice(&ar.to_be_bytes());
        let mut i = 12;
        out[i..i + self.qname.len()].copy_from_slice(&self.qname);
        i += self.qname.len();
        out[i..i + 2].copy_from_slice(&self.qtype.to_be_bytes());
        out[i + 2..i + 4].copy_from_slice(&self.qclass.to_be_bytes());
        i += 4;
        if let Some(o) = &self.opt {
            out[i] = 0;
            out[i + 1..i + 3].copy_from_slice(&TYPE_OPT.to_be_bytes());
            out[i + 3..i + 5].copy_from_slice(&o.udp_size.to_be_bytes());
            out[i + 5] = o.ext_rcode;
            out[i + 6] = o.version;
            out[i + 7..i + 9].copy_from_slice(&o.flags.to_be_bytes());
            out[i + 9..i + 11].copy_from_slice(&(o.options.len() as u16).to_be_bytes());
            out[i + 11..i + 11 + o.options.len()].copy_from_slice(&o.options);
        }
        Some(n)
    }

    /// The query as a new vector.
    pub fn build(&self) -> Vec<u8> {
        let mut v = vec![0; self.wire_len()];
        self.write(&mut v);
        v
    }
}

/// One EDNS option: OPTION-CODE, OPTION-LENGTH, the body.
pub fn option(code: u16, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + body.len());
    v.extend_from_slice(&code.to_be_bytes());
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// An ECS option with every field given, valid or not.
pub fn ecs_option(family: u16, source: u8, scope: u8, addr: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + addr.len());
    body.extend_from_slice(&family.to_be_bytes());
    body.push(source);
    body.push(scope);
    body.extend_from_slice(addr);
    option(OPT_ECS, &body)
}

/// (FAMILY, ADDRESS) of `addr/source` as a client sends them (RFC 7871
/// §6): the address masked to `source`, ceil(source/8) octets. `source` is
/// capped at the family's length.
pub fn ecs_fields(addr: IpAddr, source: u8) -> (u16, Vec<u8>) {
    let (family, bytes) = match addr {
        IpAddr::V4(a) => (1, a.octets().to_vec()),
        IpAddr::V6(a) => (2, a.octets().to_vec()),
    };
    let source = (source as usize).min(bytes.len() * 8);
    let n = source.div_ceil(8);
    let mut b = bytes[..n].to_vec();
    if !source.is_multiple_of(8) {
        b[n - 1] &= 0xFFu8 << (8 - source % 8);
    }
    (family, b)
}

/// A valid ECS option for `addr/source`, SCOPE 0.
pub fn ecs_for(addr: IpAddr, source: u8) -> Vec<u8> {
    let (f, b) = ecs_fields(addr, source);
    ecs_option(f, source, 0, &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{parse_query, Query};

    #[test]
    fn built_queries_parse() {
        let q = QueryBuilder::new("WwW.Example.test.", 28)
            .id(0x1234)
            .rd()
            .ecs("192.0.2.77".parse().unwrap(), 22)
            .build();
        let mut out = Query::default();
        parse_query(&q, &mut out).unwrap();
        assert_eq!(out.id, 0x1234);
        assert_eq!(out.flags, 0x0100);
        assert_eq!(out.qname.as_bytes(), b"\x03www\x07example\x04test\x00");
        assert_eq!(out.qtype, 28);
        let e = out.edns.unwrap();
        assert_eq!(e.udp_size, 1232);
        let c = e.ecs.unwrap();
        assert_eq!(c.source(), 22);
        assert_eq!(c.addr(), "192.0.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(
            q.len(),
            QueryBuilder::new("www.example.test", 28)
                .ecs(c.addr(), 22)
                .wire_len()
        );
    }

    #[test]
    fn root_and_bad_names() {
        assert_eq!(QueryBuilder::new(".", 2).qname, vec![0]);
        assert!(from_text("a..b").is_none());
        assert!(from_text(&"a".repeat(64)).is_none());
        let mut small = [0u8; 10];
        assert_eq!(QueryBuilder::new("a", 1).write(&mut small), None);
    }

    #[test]
    fn ecs_for_truncates_and_masks() {
        assert_eq!(
            ecs_for("85.214.7.9".parse().unwrap(), 24),
            vec![0, 8, 0, 7, 0, 1, 24, 0, 85, 214, 7]
        );
        assert_eq!(
            ecs_for("85.214.255.9".parse().unwrap(), 20),
            vec![0, 8, 0, 7, 0, 1, 20, 0, 85, 214, 0xf0]
        );
        assert_eq!(
            ecs_for("1.2.3.4".parse().unwrap(), 0),
            vec![0, 8, 0, 4, 0, 1, 0, 0]
        );
        let v6 = ecs_for("2a00:1450:4001:8ff::1".parse().unwrap(), 56);
        assert_eq!(&v6[..8], &[0, 8, 0, 11, 0, 2, 56, 0]);
        assert_eq!(&v6[8..], &[0x2a, 0x00, 0x14, 0x50, 0x40, 0x01, 0x08]);
    }
}
