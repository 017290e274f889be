//! Record data ready to write: RDATA as chunks of raw octets and names, so
//! the writer can compress the names that RFC 3597 §4 allows it to.

/// A piece of RDATA: raw octets, or a domain name the renderer may compress
/// (RFC 3597 §4 allows compression only in the well-known types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    Bytes(Box<[u8]>),
    Name(Box<[u8]>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rdata(pub Vec<Chunk>);

#[derive(Debug, Clone)]
pub struct RRset {
    pub rtype: u16,
    pub ttl: u32,
    pub rdatas: Vec<Rdata>,
}
