//! Record data ready to write: RDATA as chunks of raw octets and names, so
//! the writer can compress the names that RFC 3597 §4 allows it to.

/// A piece of RDATA: raw octets, or a domain name the renderer may compress
/// (RFC 3597 §4 allows compression only in the well-known types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Octets copied as they are.
    Bytes(Box<[u8]>),
    /// A lower-cased wire name the writer may compress.
    Name(Box<[u8]>),
}

/// The RDATA of one record, as chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rdata(pub Vec<Chunk>);

/// The records of one owner and type (RFC 2181 §5): one TTL for all.
#[derive(Debug, Clone)]
pub struct RRset {
    /// TYPE.
    pub rtype: u16,
    /// TTL in seconds.
    pub ttl: u32,
    /// The records' RDATA.
    pub rdatas: Vec<Rdata>,
}
