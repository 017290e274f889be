//! The answer pipeline: query bytes in, response bytes out, into a reused
//! buffer. It parses the query, refuses other classes and zone transfers,
//! answers a TSIG-signed query NOTAUTH/BADKEY (RFC 8945 §5.2.1: no keys),
//! hands the question to the zone walk (`lookup`), then sizes the message,
//! appends the OPT record and writes the header (RFC 1035 §4.1). EDNS is
//! RFC 6891; the ECS option is echoed with the answer's scope (RFC 7871 §7.2),
//! the NSID sent when asked (RFC 5001 §2.3), and errors carry an Extended
//! DNS Error (RFC 8914 §4). Class CH answers the identity queries
//! (`id.server`, `hostname.bind`, `version.bind` TXT) and nothing else.
//!
//! Invariants: allocates nothing per query; writes only through the `Writer`.
//! A truncated UDP answer (TC set) holds the header, the question and the
//! OPT record (with the ECS echo) and nothing else: whole sections are
//! dropped, never part of an RRset (RFC 2181 §9); the client retries over TCP.

use std::net::IpAddr;

use crate::engine::Engine;
use crate::pool::Selector;
use meridian_wire::ecs::Scope;
use meridian_wire::edns::{opt_len, put_ede, put_opt, put_option};
use meridian_wire::writer::{Header, Section, Writer};
use meridian_wire::*;

use crate::zone::RRset;

mod cookie;
mod dynamic;
mod lookup;
mod signing;

pub use crate::metrics::Outcome;
pub use dynamic::{geo_client, sticky_block};

/// Build the serving state from a config: what `serve`, a reload, the
/// benchmark and the fuzz target run.
pub fn load(
    path: &std::path::Path,
    prev: Option<&Engine>,
) -> Result<Engine, crate::error::LocatedError> {
    let t0 = std::time::Instant::now();
    let mut engine = Engine::load_with(path, prev)?;
    engine.load_ms = t0.elapsed().as_millis() as u64;
    let (blocks, bytes) = engine.geo_blocks();
    tracing::info!(
        "loaded {} in {} ms: {} zone(s), {} geo decision block(s) in {} KiB",
        path.display(),
        engine.load_ms,
        engine.zones.len(),
        blocks,
        bytes / 1024
    );
    Ok(engine)
}

/// Transport facts the answer depends on.
#[derive(Clone, Copy, Debug)]
pub struct Transport {
    /// The client's address (the datagram's or connection's source): what
    /// geo decisions use unless the query carries a usable ECS address.
    pub src: IpAddr,
    /// Over TCP: no UDP size limit applies to the response.
    pub tcp: bool,
}

/// Per-thread scratch space, reused across queries: the parsed query and
/// the selector that picks pool members (its generator).
#[derive(Default)]
pub struct Scratch {
    /// The query being answered.
    pub query: Query,
    /// Picks pool members for this thread.
    pub selector: Selector,
    /// The query carried a valid server cookie (RFC 7873): RRL exempts it.
    pub cookie_valid: bool,
    /// Signatures of the NSECs this thread made (compact denial).
    pub denial: signing::DenialCache,
}

/// Result of resolving inside the zones.
struct Resolved {
    rcode: u16,
    aa: bool,
    scope: Scope,
    pool: Option<(u32, u32)>,
    /// Signed with compact denial (RFC 9824): the CO bit is answered.
    compact: bool,
    /// Refused for its type (RRSIG in a signed zone): EDE Not Supported.
    unsupported: bool,
}

impl Resolved {
    /// REFUSED: not a zone or class we serve.
    fn refused() -> Resolved {
        Resolved {
            rcode: RCODE_REFUSED,
            aa: false,
            scope: Scope::GLOBAL,
            pool: None,
            compact: false,
            unsupported: false,
        }
    }
}

/// How the owner of answer records is written.
#[derive(Clone, Copy)]
enum Owner<'a> {
    /// The query name: a pointer to offset 12.
    Qname,
    Name(&'a [u8]),
}

impl Engine {
    /// Answer one query. Returns the response length, or None to send nothing.
    pub fn answer(
        &self,
        req: &[u8],
        t: Transport,
        scratch: &mut Scratch,
        out: &mut [u8],
        outcome: &mut Outcome,
    ) -> Option<usize> {
        let Scratch {
            query: q,
            selector,
            cookie_valid,
            denial,
        } = scratch;
        *cookie_valid = false;
        *outcome = Outcome::default();
        let parsed = parse_query(req, q);
        let mut w = Writer::new(out);
        match parsed {
            Err(Reject::Drop) => return None,
            Err(Reject::FormErr { question_end, edns }) => {
                outcome.rcode = RCODE_FORMERR;
                return Some(self.error(&mut w, req, question_end, edns, RCODE_FORMERR));
            }
            Err(Reject::BadVers { question_end, edns }) => {
                outcome.rcode = RCODE_BADVERS;
                return Some(self.error(
                    &mut w,
                    req,
                    Some(question_end),
                    Some(edns),
                    RCODE_BADVERS,
                ));
            }
            Err(Reject::NotImp { edns }) => {
                outcome.rcode = RCODE_NOTIMP;
                return Some(self.error(&mut w, req, None, edns, RCODE_NOTIMP));
            }
            Ok(()) => {}
        }
        outcome.qtype = q.qtype;
        outcome.ecs = q.edns.and_then(|e| e.ecs).is_some();
        if let Some(at) = q.tsig {
            // RFC 8945 §5.2.1: we hold no keys, so no key matches: NOTAUTH,
            // with an unsigned TSIG saying BADKEY.
            outcome.rcode = RCODE_NOTAUTH;
            let len = self.error(&mut w, req, Some(q.question_end), q.edns, RCODE_NOTAUTH);
            if meridian_wire::tsig::put_badkey(&mut w, req, at) {
                let ar = u16::from_be_bytes([w.buf[10], w.buf[11]]) + 1;
                w.buf[10..12].copy_from_slice(&ar.to_be_bytes());
                return Some(w.len);
            }
            return Some(len);
        }
        if q.opcode() != 0 {
            outcome.rcode = RCODE_NOTIMP;
            return Some(self.error(&mut w, req, Some(q.question_end), q.edns, RCODE_NOTIMP));
        }
        // The UDP limit: the client's size (512 without EDNS), capped by ours.
        let limit = if t.tcp {
            out_len(w.buf.len())
        } else {
            let client = q.edns.map(|e| e.udp_size.max(512)).unwrap_or(512);
            (client.min(self.settings.edns_udp_payload) as usize).min(w.buf.len())
        };
        let ecs = q.edns.and_then(|e| e.ecs);
        let nsid = self.nsid_for(q.edns);
        let opt_octets = q
            .edns
            .map(|e| {
                opt_len(ecs.as_ref()) + nsid.map_or(0, |n| 4 + n.len()) + cookie::octets(e.cookie)
            })
            .unwrap_or(0);
        w.len = 12;
        w.put(&req[12..q.question_end]);
        w.add_name_targets(12);
        let question = w.mark();

        // Classes other than IN, and zone transfers: not served here. QCLASS
        // ANY (RFC 1035 §3.2.5) matches IN, the only class of our zones; the
        // question echoes it, the records say IN.
        let class_ok = q.qclass == CLASS_IN || q.qclass == CLASS_ANY;
        let r = if q.qclass == CLASS_CH {
            self.chaos(&mut w, q)
        } else if !class_ok || q.qtype == TYPE_AXFR || q.qtype == TYPE_IXFR {
            Resolved::refused()
        } else {
            // Optional additional records must leave room for the OPT.
            self.resolve(
                &mut w,
                q,
                t.src,
                selector,
                denial,
                limit.saturating_sub(opt_octets),
            )
        };
        outcome.pool = r.pool;

        let mut tc = false;
        if w.overflow || w.len + opt_octets > limit {
            // RFC 2181 §9: drop whole sections rather than send a partial RRset.
            w.rewind(question);
            tc = true;
            outcome.truncated = true;
        }
        if let Some(e) = q.edns {
            let opt_at = w.len;
            put_opt(
                &mut w,
                self.settings.edns_udp_payload,
                e.dnssec_ok,
                0,
                ecs.map(|c| (c, r.scope)),
            );
            w.ar += 1;
            if e.compact_ok && r.compact && !w.overflow {
                // RFC 9824 §4: the CO bit back, the NXDOMAIN rcode restored.
                w.buf[opt_at + 7] |= 0x40;
            }
            *cookie_valid = self.put_cookie(&mut w, opt_at, req, e.cookie, t.src);
            if let Some(n) = nsid {
                put_option(&mut w, opt_at, OPT_NSID, &[n]);
            }
            // RFC 8914 §4: why, for the error rcodes (small: they fit).
            match r.rcode {
                RCODE_REFUSED if q.qtype == TYPE_AXFR || q.qtype == TYPE_IXFR => {
                    put_ede(&mut w, opt_at, EDE_PROHIBITED, "");
                }
                RCODE_REFUSED if r.unsupported => {
                    put_ede(&mut w, opt_at, EDE_NOT_SUPPORTED, "");
                }
                RCODE_REFUSED => {
                    put_ede(&mut w, opt_at, EDE_NOT_AUTHORITATIVE, "");
                }
                RCODE_SERVFAIL => {
                    put_ede(&mut w, opt_at, EDE_OTHER, "no pool member is up");
                }
                _ => {}
            }
            if ecs.is_some() {
                outcome.scope = Some(r.scope.prefix_len());
            }
        }
        outcome.rcode = r.rcode;
        let len = w.len;
        let (an, ns, ar) = (w.an, w.ns, w.ar);
        Header {
            id: q.id,
            query_flags: q.flags,
            aa: r.aa,
            tc,
            rcode: r.rcode,
            counts: [1, an, ns, ar],
        }
        .write(w.buf);
        Some(len)
    }

    /// An error response echoing what parsed of the query.
    fn error(
        &self,
        w: &mut Writer,
        req: &[u8],
        question_end: Option<usize>,
        edns: Option<Edns>,
        rcode: u16,
    ) -> usize {
        w.len = 12;
        let mut qd = 0;
        if let Some(qe) = question_end {
            w.put(&req[12..qe]);
            qd = 1;
        }
        let mut ar = 0;
        if let Some(e) = edns {
            let ecs = e.ecs.map(|c| (c, Scope::GLOBAL));
            let opt_at = w.len;
            put_opt(
                w,
                self.settings.edns_udp_payload,
                e.dnssec_ok,
                (rcode >> 4) as u8,
                ecs,
            );
            ar = 1;
            if let Some(n) = self.nsid_for(Some(e)) {
                put_option(w, opt_at, OPT_NSID, &[n]);
            }
            if rcode == RCODE_FORMERR {
                put_ede(w, opt_at, EDE_OTHER, "malformed query");
            }
        }
        let id = u16::from_be_bytes([req[0], req[1]]);
        let flags = u16::from_be_bytes([req[2], req[3]]);
        Header {
            id,
            query_flags: flags,
            aa: false,
            tc: false,
            rcode: rcode & 0xF,
            counts: [qd, 0, 0, ar],
        }
        .write(w.buf);
        w.len
    }
}

/// EDE INFO-CODEs (RFC 8914 §4).
const EDE_OTHER: u16 = 0;
const EDE_PROHIBITED: u16 = 18;
const EDE_NOT_AUTHORITATIVE: u16 = 20;
const EDE_NOT_SUPPORTED: u16 = 21;

impl Engine {
    /// The NSID to send: when configured and asked for (RFC 5001 §2.3).
    fn nsid_for(&self, edns: Option<Edns>) -> Option<&[u8]> {
        self.settings
            .nsid
            .as_deref()
            .filter(|_| edns.is_some_and(|e| e.nsid))
    }

    /// Class CH: the identity queries (`id.server`, `hostname.bind`,
    /// `version.bind` TXT, as gdnsd and Knot answer them); anything else
    /// REFUSED. The TXT is written at the question's name, class CH, TTL 0.
    fn chaos(&self, w: &mut Writer, q: &Query) -> Resolved {
        let name = q.qname.as_bytes();
        let text = if name == b"\x07version\x04bind\x00" {
            self.settings.version.as_deref()
        } else if name == b"\x02id\x06server\x00" || name == b"\x08hostname\x04bind\x00" {
            self.settings.identity.as_deref()
        } else {
            None
        };
        let Some(text) = text else {
            return Resolved::refused();
        };
        if q.qtype == TYPE_TXT || q.qtype == TYPE_ANY {
            w.put_u16(0xC00C);
            w.put_u16(TYPE_TXT);
            w.put_u16(CLASS_CH);
            w.put_u32(0);
            w.put_u16(text.len() as u16 + 1);
            w.put(&[text.len() as u8]);
            w.put(text.as_bytes());
            w.an += 1;
        }
        Resolved {
            rcode: RCODE_NOERROR,
            aa: true,
            scope: Scope::GLOBAL,
            pool: None,
            compact: false,
            unsupported: false,
        }
    }
}

impl<'a> Owner<'a> {
    /// The wire name this stands for, given the query name.
    fn wire(self, qname: &'a [u8]) -> &'a [u8] {
        match self {
            Owner::Qname => qname,
            Owner::Name(n) => n,
        }
    }

    /// Write the owner of a record: a pointer to the question, or the name.
    fn put(self, w: &mut Writer) {
        match self {
            Owner::Qname => w.put_u16(0xC00C),
            Owner::Name(n) => w.put_name(n),
        }
    }

    fn write_rrset(self, w: &mut Writer, set: RRset<'_>) {
        match self {
            Owner::Qname => {
                // The owner is the question's name: its first label is at 12.
                for rd in set.records() {
                    if !w.put_plain_at_question(set.rtype, set.ttl, rd) {
                        w.put_u16(0xC00C);
                        w.put_rr_body(set.rtype, set.ttl, rd);
                    }
                    w.an += 1;
                }
            }
            Owner::Name(n) => w.put_rrset(Section::Answer, n, set, set.ttl),
        }
    }
}

fn out_len(n: usize) -> usize {
    n.min(65535)
}
