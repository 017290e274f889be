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
//! Invariants: allocates nothing per query; writes only through the `Writer`,
//! which holds the one size limit of every response (`Engine::limit`): the
//! client's UDP size (512 without EDNS, RFC 1035 §4.2.1; at least 512 with
//! it, RFC 6891 §6.2.5) capped by ours, or 65535 over TCP. Records, options
//! and TSIG all stop at it; an NSID that does not fit is left out (RFC 5001
//! §2.3), anything else that does not fit makes the answer truncated.
//! A truncated UDP answer (TC set) holds the header, the question and the
//! OPT record (with the ECS echo) and nothing else: whole sections are
//! dropped, never part of an RRset (RFC 2181 §9); the client retries over TCP.

use std::net::IpAddr;

use crate::engine::Engine;
use crate::pool::Selector;
use meridian_wire::ecs::Scope;
use meridian_wire::edns::{ede_len, opt_len, put_ede, put_opt, put_option};
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
    /// Over TCP: the response may take 65535 octets.
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
        match parsed {
            Err(Reject::Drop) => return None,
            Err(Reject::FormErr { question_end, edns }) => {
                outcome.rcode = RCODE_FORMERR;
                let mut w = self.writer(out, t, edns);
                return Some(self.error(&mut w, req, question_end, edns, RCODE_FORMERR, true));
            }
            Err(Reject::BadVers { question_end, edns }) => {
                outcome.rcode = RCODE_BADVERS;
                let mut w = self.writer(out, t, Some(edns));
                return Some(self.error(
                    &mut w,
                    req,
                    Some(question_end),
                    Some(edns),
                    RCODE_BADVERS,
                    true,
                ));
            }
            Err(Reject::NotImp { edns }) => {
                outcome.rcode = RCODE_NOTIMP;
                let mut w = self.writer(out, t, edns);
                return Some(self.error(&mut w, req, None, edns, RCODE_NOTIMP, true));
            }
            Ok(()) => {}
        }
        outcome.qtype = q.qtype;
        outcome.ecs = q.edns.and_then(|e| e.ecs).is_some();
        let limit = self.limit(t, q.edns).min(out.len());
        if let Some(at) = q.tsig {
            outcome.rcode = RCODE_NOTAUTH;
            let mut w = Writer::new(&mut out[..limit]);
            let (len, tc) = self.badkey(&mut w, req, q, at);
            outcome.truncated = tc;
            return Some(len);
        }
        if q.opcode() != 0 {
            outcome.rcode = RCODE_NOTIMP;
            let mut w = Writer::new(&mut out[..limit]);
            return Some(self.error(
                &mut w,
                req,
                Some(q.question_end),
                q.edns,
                RCODE_NOTIMP,
                true,
            ));
        }
        let ecs = q.edns.and_then(|e| e.ecs);
        let nsid = self.nsid_for(q.edns);
        // The OPT, its ECS echo and the cookie go in every answer to an EDNS
        // query, so the records leave room for them.
        let reserve = q
            .edns
            .map_or(0, |e| opt_len(ecs.as_ref()) + cookie::octets(e.cookie));
        let mut w = Writer::new(&mut out[..limit.saturating_sub(reserve)]);
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
            self.resolve(&mut w, q, t.src, selector, denial)
        };
        outcome.pool = r.pool;

        let tc = w.overflow;
        if tc {
            // RFC 2181 §9: drop whole sections rather than send a partial RRset.
            w.rewind(question);
            outcome.truncated = true;
        }
        // The OPT's room back: the same message, up to the limit.
        let m = w.mark();
        let mut w = Writer::resume(&mut out[..limit], m);
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
            // RFC 8914 §4: why, for the error rcodes; the NSID gives way to it.
            let ede = match r.rcode {
                RCODE_REFUSED if q.qtype == TYPE_AXFR || q.qtype == TYPE_IXFR => {
                    Some((EDE_PROHIBITED, ""))
                }
                RCODE_REFUSED if r.unsupported => Some((EDE_NOT_SUPPORTED, "")),
                RCODE_REFUSED => Some((EDE_NOT_AUTHORITATIVE, "")),
                RCODE_SERVFAIL => Some((EDE_OTHER, "no pool member is up")),
                _ => None,
            };
            put_nsid(&mut w, opt_at, nsid, ede.map_or(0, |(_, t)| ede_len(t)));
            if let Some((info, text)) = ede {
                put_ede(&mut w, opt_at, info, text);
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

    /// A writer over `out` up to the limit for a query with `edns`.
    fn writer<'o>(&self, out: &'o mut [u8], t: Transport, edns: Option<Edns>) -> Writer<'o> {
        let n = self.limit(t, edns).min(out.len());
        Writer::new(&mut out[..n])
    }

    /// The size limit of the response to a query with `edns`: 65535 over
    /// TCP; over UDP the client's size, 512 without EDNS (RFC 1035 §4.2.1)
    /// and at least 512 with it (RFC 6891 §6.2.5), capped by ours.
    #[inline]
    fn limit(&self, t: Transport, edns: Option<Edns>) -> usize {
        if t.tcp {
            return 65535;
        }
        let client = edns.map_or(512, |e| e.udp_size.max(512));
        client.min(self.settings.edns_udp_payload) as usize
    }

    /// RFC 8945 §5.2.1: we hold no keys, so no key matches: NOTAUTH, with
    /// an unsigned TSIG saying BADKEY, last. When it does not fit under the
    /// limit, the NSID goes first; then the TSIG, and the answer is the
    /// truncated form (TC; the client may retry over TCP). Returns the
    /// length and whether it is truncated.
    fn badkey(&self, w: &mut Writer, req: &[u8], q: &Query, at: usize) -> (usize, bool) {
        let nsid = self.nsid_for(q.edns).is_some();
        for with_nsid in [true, false] {
            if !with_nsid && !nsid {
                break;
            }
            let len = self.error(
                w,
                req,
                Some(q.question_end),
                q.edns,
                RCODE_NOTAUTH,
                with_nsid,
            );
            if !meridian_wire::tsig::put_badkey(w, req, at) {
                return (len, false); // malformed: cannot happen after parse_query
            }
            if !w.overflow {
                let ar = u16::from_be_bytes([w.buf[10], w.buf[11]]) + 1;
                w.buf[10..12].copy_from_slice(&ar.to_be_bytes());
                return (w.len, false);
            }
        }
        let len = self.error(w, req, Some(q.question_end), q.edns, RCODE_NOTAUTH, false);
        w.buf[2] |= 0x02; // TC
        (len, true)
    }

    /// An error response echoing what parsed of the query, with the NSID
    /// if asked for, `nsid` allows it and it fits. Starts the message over.
    fn error(
        &self,
        w: &mut Writer,
        req: &[u8],
        question_end: Option<usize>,
        edns: Option<Edns>,
        rcode: u16,
        nsid: bool,
    ) -> usize {
        w.restart(12);
        let mut qd = 0;
        if let Some(qe) = question_end {
            // At most 12 + 255 + 4 octets: it always fits in 512.
            w.put(&req[12..qe]);
            w.add_name_targets(12);
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
            let ede = (rcode == RCODE_FORMERR).then_some("malformed query");
            if nsid {
                let after = ede.map_or(0, ede_len);
                put_nsid(w, opt_at, self.nsid_for(Some(e)), after);
            }
            if let Some(text) = ede {
                put_ede(w, opt_at, EDE_OTHER, text);
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

/// The NSID option, when asked for and it fits under the limit with `after`
/// octets to spare; else left out (RFC 5001 §2.3 lets a server omit it).
fn put_nsid(w: &mut Writer, opt_at: usize, nsid: Option<&[u8]>, after: usize) {
    if let Some(n) = nsid.filter(|n| w.fits(4 + n.len() + after)) {
        put_option(w, opt_at, OPT_NSID, &[n]);
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
