//! meridian-wire: the DNS message format as meridian speaks it, with no I/O
//! and no allocation on the query path.
//!
//! - [`query`]: parse a query: header, one question, OPT (RFC 1035 §4.1, RFC 6891 §6.1);
//! - [`ecs`]: EDNS Client Subnet validation and echo (RFC 7871 §6, §7.2);
//! - [`name`]: wire names and the one bounds-checked name skipper (RFC 1035 §3.1, §4.1.4);
//! - [`rdata`]: record data as chunks the writer may compress (RFC 3597 §4);
//! - [`writer`]: a compressing response writer and the header (RFC 1035 §4.1);
//! - [`edns`]: the OPT record of a response (RFC 6891 §6.1.2);
//! - [`truncate`]: the truncated (TC) form of a response (RFC 2181 §9);
//! - [`tsig`]: the BADKEY answer to a TSIG-signed query (RFC 8945 §5.2.1);
//! - [`build`]: the query builder for tools, tests and `meridian lookup`.
//!
//! Everything that reads a message reads through bounds checks, so no input
//! can make it panic; the fuzz targets in `fuzz/` hold it to that.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;

pub mod build;
pub mod cookie;
pub mod ecs;
pub mod edns;
pub mod name;
pub mod query;
pub mod rdata;
pub mod truncate;
pub mod tsig;
pub mod writer;

pub use build::QueryBuilder;
pub use ecs::{ClientSubnet, EcsError, Scope};
pub use name::WireName;
pub use query::{parse_query, Edns, Query, Reject};
pub use rdata::{Packed, Piece, RRset, RdataBuf};
pub use writer::{Header, Section, Writer};

/// The longest domain name in wire form (RFC 1035 §3.1).
pub const MAX_NAME: usize = 255;
/// The most labels a name can have, the root included.
pub const MAX_LABELS: usize = 128;

/// TYPE A (RFC 1035).
pub const TYPE_A: u16 = 1;
/// TYPE NS (RFC 1035).
pub const TYPE_NS: u16 = 2;
/// TYPE CNAME (RFC 1035).
pub const TYPE_CNAME: u16 = 5;
/// TYPE SOA (RFC 1035).
pub const TYPE_SOA: u16 = 6;
/// TYPE MX (RFC 1035).
pub const TYPE_MX: u16 = 15;
/// TYPE SRV (RFC 2782).
pub const TYPE_SRV: u16 = 33;
/// TYPE TXT (RFC 1035).
pub const TYPE_TXT: u16 = 16;
/// TYPE AAAA (RFC 3596).
pub const TYPE_AAAA: u16 = 28;
/// TYPE OPT (RFC 6891).
pub const TYPE_OPT: u16 = 41;
/// TYPE DS (RFC 4034).
pub const TYPE_DS: u16 = 43;
/// TYPE RRSIG (RFC 4034).
pub const TYPE_RRSIG: u16 = 46;
/// TYPE NSEC (RFC 4034).
pub const TYPE_NSEC: u16 = 47;
/// TYPE DNAME (RFC 6672).
pub const TYPE_DNAME: u16 = 39;
/// TYPE TSIG (RFC 8945).
pub const TYPE_TSIG: u16 = 250;
/// QTYPE IXFR (RFC 1995).
pub const TYPE_IXFR: u16 = 251;
/// QTYPE AXFR (RFC 5936).
pub const TYPE_AXFR: u16 = 252;
/// QTYPE ANY ("*", RFC 1035; answered per RFC 8482).
pub const TYPE_ANY: u16 = 255;
/// CLASS IN.
pub const CLASS_IN: u16 = 1;
/// CLASS CH (Chaos, RFC 1035 §3.2.4).
pub const CLASS_CH: u16 = 3;
/// QCLASS ANY ("*", RFC 1035 §3.2.5).
pub const CLASS_ANY: u16 = 255;

/// RCODE NOERROR.
pub const RCODE_NOERROR: u16 = 0;
/// RCODE FORMERR.
pub const RCODE_FORMERR: u16 = 1;
/// RCODE SERVFAIL.
pub const RCODE_SERVFAIL: u16 = 2;
/// RCODE NXDOMAIN.
pub const RCODE_NXDOMAIN: u16 = 3;
/// RCODE NOTIMP.
pub const RCODE_NOTIMP: u16 = 4;
/// RCODE REFUSED.
pub const RCODE_REFUSED: u16 = 5;
/// RCODE NOTAUTH (RFC 8945 §5.2: a TSIG that does not verify).
pub const RCODE_NOTAUTH: u16 = 9;
/// Extended rcode 16 (RFC 6891 §6.1.3): upper bits 1, header bits 0.
pub const RCODE_BADVERS: u16 = 16;

/// EDNS option code of ECS (RFC 7871 §6).
pub const OPT_ECS: u16 = 8;
/// EDNS option code NSID (RFC 5001).
pub const OPT_NSID: u16 = 3;
/// EDNS option code Extended DNS Error (RFC 8914).
pub const OPT_EDE: u16 = 15;

/// The name of an rcode as dig prints it ("NOERROR", "BADVERS"); None for
/// one without a name here.
pub fn rcode_name(rcode: u16) -> Option<&'static str> {
    Some(match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        16 => "BADVERS",
        _ => return None,
    })
}
