//! Record data ready to write: RDATA as chunks of raw octets and names, so
//! the writer can compress the names that RFC 3597 §4 allows it to.

/// The records of one owner and type (RFC 2181 §5), one TTL for all, as
/// stored in a zone: each record's packed RDATA ([`RdataBuf`] form) behind
/// its big-endian u16 length, one after another in one buffer.
#[derive(Debug, Clone, Copy)]
pub struct RRset<'a> {
    /// TYPE.
    pub rtype: u16,
    /// TTL in seconds.
    pub ttl: u32,
    /// The records, length-prefixed.
    pub data: &'a [u8],
}

impl<'a> RRset<'a> {
    /// The records' RDATA, in order.
    #[inline]
    pub fn records(self) -> Records<'a> {
        Records(self.data)
    }

    /// The first record's RDATA.
    pub fn first(self) -> Option<Packed<'a>> {
        self.records().next()
    }
}

/// Append one record's packed RDATA to an RRset's buffer.
pub fn push_record(data: &mut Vec<u8>, packed: &[u8]) {
    data.extend_from_slice(&(packed.len() as u16).to_be_bytes());
    data.extend_from_slice(packed);
}

/// Split a big-endian u16 header (its length in the bits of `len_mask`)
/// and the body it announces off the front of `buf`.
#[inline]
fn take_prefixed<'a>(buf: &mut &'a [u8], len_mask: u16) -> Option<(u16, &'a [u8])> {
    let (h, rest) = buf.split_first_chunk::<2>()?;
    let h = u16::from_be_bytes(*h);
    let body = rest.get(..(h & len_mask) as usize)?;
    *buf = &rest[body.len()..];
    Some((h, body))
}

/// Iterator over the records of an [`RRset`].
#[derive(Debug, Clone)]
pub struct Records<'a>(&'a [u8]);

impl<'a> Iterator for Records<'a> {
    type Item = Packed<'a>;

    #[inline]
    fn next(&mut self) -> Option<Packed<'a>> {
        let (_, body) = take_prefixed(&mut self.0, u16::MAX)?;
        Some(Packed(body))
    }
}

/// Builds the packed form of one record's RDATA: chunks, each a big-endian
/// u16 header (high bit set: a compressible name; low 15 bits: its length)
/// followed by its octets. A zone keeps every record this way in one
/// buffer, so a record costs its octets plus two per chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RdataBuf(Vec<u8>);

const NAME_BIT: u16 = 0x8000;
const MAX_CHUNK: usize = 0x7FFF;

impl RdataBuf {
    /// An empty RDATA.
    pub fn new() -> RdataBuf {
        RdataBuf::default()
    }

    /// Start again with an empty RDATA (keeps the allocation).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Append raw octets (split into chunks of at most 32,767).
    pub fn push_bytes(&mut self, b: &[u8]) {
        for part in b.chunks(MAX_CHUNK) {
            self.0.extend_from_slice(&(part.len() as u16).to_be_bytes());
            self.0.extend_from_slice(part);
        }
    }

    /// Append a lower-cased wire name the writer may compress (RFC 3597 §4
    /// allows it only in the well-known types).
    pub fn push_name(&mut self, name: &[u8]) {
        debug_assert!(name.len() <= 255);
        self.0
            .extend_from_slice(&(name.len() as u16 | NAME_BIT).to_be_bytes());
        self.0.extend_from_slice(name);
    }

    /// The packed octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The RDATA as a view.
    pub fn packed(&self) -> Packed<'_> {
        Packed(&self.0)
    }
}

/// One record's RDATA in the packed form of [`RdataBuf`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packed<'a>(pub &'a [u8]);

/// A piece of packed RDATA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Octets copied as they are.
    Bytes(&'a [u8]),
    /// A lower-cased wire name the writer may compress.
    Name(&'a [u8]),
}

impl<'a> Packed<'a> {
    /// The chunks in order.
    #[inline]
    pub fn pieces(self) -> Pieces<'a> {
        Pieces(self.0)
    }

    /// The first chunk, if it is a name (the target of NS, CNAME, PTR).
    pub fn first_name(self) -> Option<&'a [u8]> {
        match self.pieces().next() {
            Some(Piece::Name(n)) => Some(n),
            _ => None,
        }
    }

    /// The RDATA when it is one piece of octets (no name, at most 32,767
    /// octets): what goes on the wire as it is.
    #[inline]
    pub fn plain(self) -> Option<&'a [u8]> {
        match self.0 {
            [] => Some(&[]),
            [h, l, rest @ ..]
                if h & 0x80 == 0 && usize::from(u16::from_be_bytes([*h, *l])) == rest.len() =>
            {
                Some(rest)
            }
            _ => None,
        }
    }

    /// The RDATA as it goes on the wire, names uncompressed.
    pub fn to_wire(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.0.len());
        for p in self.pieces() {
            match p {
                Piece::Bytes(b) | Piece::Name(b) => v.extend_from_slice(b),
            }
        }
        v
    }
}

/// Iterator over the chunks of a [`Packed`].
#[derive(Debug, Clone)]
pub struct Pieces<'a>(&'a [u8]);

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    #[inline]
    fn next(&mut self) -> Option<Piece<'a>> {
        let (h, body) = take_prefixed(&mut self.0, !NAME_BIT)?;
        Some(if h & NAME_BIT != 0 {
            Piece::Name(body)
        } else {
            Piece::Bytes(body)
        })
    }
}

#[cfg(test)]
mod packed_tests {
    use super::*;

    #[test]
    fn pieces_round_trip() {
        let mut b = RdataBuf::new();
        b.push_bytes(&[0, 10]);
        b.push_name(b"\x04mail\x07example\x00");
        let p: Vec<Piece<'_>> = b.packed().pieces().collect();
        assert_eq!(
            p,
            [
                Piece::Bytes(&[0, 10]),
                Piece::Name(b"\x04mail\x07example\x00")
            ]
        );
        assert_eq!(b.packed().to_wire(), b"\x00\x0a\x04mail\x07example\x00");
        assert_eq!(b.packed().first_name(), None);
    }

    #[test]
    fn long_bytes_split_into_chunks() {
        let mut b = RdataBuf::new();
        b.push_bytes(&vec![7u8; 40_000]);
        assert_eq!(b.packed().pieces().count(), 2);
        assert_eq!(b.packed().to_wire(), vec![7u8; 40_000]);
    }
}
