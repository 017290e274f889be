//! The answer function: query bytes in, response bytes out, into a reused
//! buffer with no allocation. It implements authoritative lookup (RFC 1034
//! §4.3.2), negative answers (RFC 2308 §3, §5), wildcards (RFC 4592), ANY
//! (RFC 8482), EDNS (RFC 6891) and the ECS echo and scope (RFC 7871 §7.2).
//!
//! A truncated UDP answer (TC set) holds the header, the question and the
//! OPT record (with the ECS echo) and nothing else; the client retries over TCP.

use std::net::IpAddr;

use crate::engine::{AllDown, Binding, Engine, Target};
use crate::geo::special::special_block;
use crate::pool::{select, Selector, MAX_MEMBERS, RR_TTL_AT};
use meridian_wire::ecs::{ClientSubnet, Scope};
use meridian_wire::edns::{opt_len, put_opt};
use meridian_wire::writer::{Header, Section, Writer};
use meridian_wire::*;

use crate::zone::{Chunk, Node, RRset, Zone};

/// Most CNAMEs followed inside a zone before giving up (loop protection).
pub mod prerender;

pub use crate::metrics::Outcome;

/// Build the serving state from a config and render its static answers:
/// what `serve`, a reload, the benchmark and the fuzz target run.
pub fn load(
    path: &std::path::Path,
    prev: Option<&Engine>,
) -> Result<Engine, crate::error::LocatedError> {
    let t0 = std::time::Instant::now();
    let mut engine = Engine::load_with(path, prev)?;
    prerender::prerender(&mut engine);
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

const MAX_CHAIN: usize = 8;

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
/// the selector that picks pool members (its generator and rotation cursors).
#[derive(Default)]
pub struct Scratch {
    /// The query being answered.
    pub query: Query,
    /// Picks pool members for this thread.
    pub selector: Selector,
}

/// Result of resolving inside the zones.
struct Resolved {
    rcode: u16,
    aa: bool,
    scope: Scope,
    pool: Option<(u32, u32)>,
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
        let Scratch { query: q, selector } = scratch;
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
        if q.opcode() != 0 {
            outcome.rcode = RCODE_NOTIMP;
            return Some(self.error(&mut w, req, Some(q.question_end), q.edns, RCODE_NOTIMP));
        }
        // The UDP limit: the client's size (512 without EDNS), capped by ours.
        let limit = if t.tcp {
            out_len(w.buf.len())
        } else {
            let client = q.edns.map(|e| e.udp_size.max(512)).unwrap_or(512);
            (client.min(self.payload) as usize).min(w.buf.len())
        };
        w.len = 12;
        w.put(&req[12..q.question_end]);
        w.add_name_targets(12);
        let qend = w.len;

        // Classes other than IN, and zone transfers: not served here.
        let r = if q.qclass != CLASS_IN || q.qtype == TYPE_AXFR || q.qtype == TYPE_IXFR {
            Resolved {
                rcode: RCODE_REFUSED,
                aa: false,
                scope: Scope::GLOBAL,
                pool: None,
            }
        } else {
            self.resolve(&mut w, q, t.src, selector)
        };
        outcome.pool = r.pool;

        let ecs = q.edns.and_then(|e| e.ecs);
        let opt_octets = q.edns.map(|_| opt_len(ecs.as_ref())).unwrap_or(0);
        let mut tc = false;
        if w.overflow || w.len + opt_octets > limit {
            // RFC 2181 §9: drop whole sections rather than send a partial RRset.
            w.truncate(qend);
            w.an = 0;
            w.ns = 0;
            w.ar = 0;
            tc = true;
            outcome.truncated = true;
        }
        if let Some(e) = q.edns {
            put_opt(
                &mut w,
                self.payload,
                e.dnssec_ok,
                0,
                ecs.map(|c| (c, r.scope)),
            );
            w.ar += 1;
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
            put_opt(w, self.payload, e.dnssec_ok, (rcode >> 4) as u8, ecs);
            ar = 1;
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

    fn resolve(&self, w: &mut Writer, q: &Query, src: IpAddr, sel: &mut Selector) -> Resolved {
        let name = &q.qname;
        // Longest zone suffix. DS belongs to the parent side of a cut (RFC
        // 4035 §3.1.4.1): at the apex of a zone whose parent zone we serve
        // too, with the delegation in it, the parent answers.
        let mut zone = None;
        for i in 0..=name.nlabels {
            if let Some(&zi) = self.zone_index.get(name.suffix(i)) {
                if zone.is_none() {
                    zone = Some((zi, i));
                    if !(i == 0 && q.qtype == TYPE_DS) {
                        break;
                    }
                } else {
                    // The closest enclosing zone, if it delegates this name.
                    if self.zones[zi].get(name.as_bytes()).is_some_and(|n| n.cut) {
                        zone = Some((zi, i));
                    }
                    break;
                }
            }
        }
        let Some((zi, apex_at)) = zone else {
            return Resolved {
                rcode: RCODE_REFUSED,
                aa: false,
                scope: Scope::GLOBAL,
                pool: None,
            };
        };
        let z = &self.zones[zi];
        let mut ctx = Ctx {
            engine: self,
            sel,
            zone: z,
            src,
            ecs: q.edns.and_then(|e| e.ecs),
            scope: Scope::GLOBAL,
            pool: None,
            qname: name.as_bytes(),
            chain: [&[]; MAX_CHAIN],
        };
        let rcode = ctx.lookup(w, name, apex_at, Owner::Qname, q.qtype, 0);
        let aa = rcode != LookupRc::Referral;
        Resolved {
            rcode: rcode.rcode(),
            aa,
            scope: ctx.scope,
            pool: ctx.pool,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LookupRc {
    NoError,
    NxDomain,
    Referral,
    ServFail,
}

impl LookupRc {
    fn rcode(self) -> u16 {
        match self {
            LookupRc::NoError | LookupRc::Referral => RCODE_NOERROR,
            LookupRc::NxDomain => RCODE_NXDOMAIN,
            LookupRc::ServFail => RCODE_SERVFAIL,
        }
    }
}

struct Ctx<'e, 's> {
    engine: &'e Engine,
    /// This thread's random generator and rotation cursors.
    sel: &'s mut Selector,
    zone: &'e Zone,
    src: IpAddr,
    ecs: Option<ClientSubnet>,
    scope: Scope,
    pool: Option<(u32, u32)>,
    /// The query name (lower-cased wire), to stop a CNAME loop back to it.
    qname: &'e [u8],
    /// CNAME targets already looked up in this answer (loop protection).
    chain: [&'e [u8]; MAX_CHAIN],
}

impl<'e> Ctx<'e, '_> {
    /// Look `name` up in the zone; `apex_at` is the label index of the apex.
    fn lookup(
        &mut self,
        w: &mut Writer,
        name: &WireName,
        apex_at: usize,
        owner: Owner,
        qtype: u16,
        depth: usize,
    ) -> LookupRc {
        let z = self.zone;
        // Walk down from the apex: stop at a zone cut or at the closest encloser.
        let mut encloser = z.apex_node();
        let mut exact = apex_at == 0;
        for i in (0..apex_at).rev() {
            match z.get(name.suffix(i)) {
                Some(node) => {
                    // The parent side answers DS at a cut; we have none, so NODATA.
                    if node.cut && !(i == 0 && qtype == TYPE_DS) {
                        self.referral(w, node);
                        return LookupRc::Referral;
                    }
                    encloser = node;
                    if i == 0 {
                        exact = true;
                    }
                }
                None => break,
            }
        }
        if exact {
            if depth == 0 {
                if let Some(p) = encloser.prerendered(qtype) {
                    w.put(&p.bytes);
                    w.an += p.an;
                    w.ns += p.ns;
                    w.ar += p.ar;
                    return if p.rcode == RCODE_NXDOMAIN {
                        LookupRc::NxDomain
                    } else {
                        LookupRc::NoError
                    };
                }
            }
            return self.answer_node(w, encloser, owner, qtype, depth);
        }
        // RFC 4592 §3.3.1: the source of synthesis is *.<closest encloser>.
        let mut wild = [0u8; MAX_NAME + 2];
        let enc = &encloser.name;
        if enc.len() + 2 <= MAX_NAME {
            wild[0] = 1;
            wild[1] = b'*';
            wild[2..2 + enc.len()].copy_from_slice(enc);
            if let Some(node) = z.get(&wild[..2 + enc.len()]) {
                return self.answer_node(w, node, owner, qtype, depth);
            }
        }
        self.negative(w);
        LookupRc::NxDomain
    }

    fn answer_node(
        &mut self,
        w: &mut Writer,
        node: &'e Node,
        owner: Owner,
        qtype: u16,
        depth: usize,
    ) -> LookupRc {
        if let Some(b) = node.dynamic {
            let binding = &self.engine.bindings[b as usize];
            let family = match qtype {
                TYPE_A => Some(false),
                TYPE_AAAA => Some(true),
                // RFC 8482 §4.1: answer ANY with one RRset; the addresses are it
                // (IPv4, or IPv6 for a pool that has no IPv4 members).
                TYPE_ANY => Some(matches!(binding.target,
                    Target::Pool(p) if self.engine.pools[p].v4.is_empty())),
                _ => None,
            };
            if let Some(v6) = family {
                return self.dynamic(w, b, binding, owner, v6);
            }
        }
        if let Some(cname) = node.rrset(TYPE_CNAME) {
            if qtype != TYPE_CNAME {
                owner.write_rrset(w, cname);
                return self.follow(w, cname, qtype, depth);
            }
        }
        if qtype == TYPE_ANY {
            if let Some(set) = node.rrsets.first() {
                owner.write_rrset(w, set);
                return LookupRc::NoError;
            }
        } else if let Some(set) = node.rrset(qtype) {
            owner.write_rrset(w, set);
            return LookupRc::NoError;
        }
        self.negative(w);
        LookupRc::NoError
    }

    /// Follow a CNAME inside the zone (RFC 1034 §4.3.2 step 3a).
    fn follow(&mut self, w: &mut Writer, cname: &'e RRset, qtype: u16, depth: usize) -> LookupRc {
        let Some(Chunk::Name(target)) = cname.rdatas.first().and_then(|r| r.0.first()) else {
            return LookupRc::NoError;
        };
        // `depth` links have been followed so far: at most MAX_CHAIN in all.
        if depth >= MAX_CHAIN || !meridian_wire::name::is_subdomain(target, &self.zone.origin) {
            return LookupRc::NoError;
        }
        // A loop: the target is already in the answer (each CNAME once).
        let seen = &self.chain[..depth];
        if **target == *self.qname || seen.iter().any(|&n| *n == **target) {
            return LookupRc::NoError;
        }
        self.chain[depth] = &target[..];
        let mut tn = WireName::default();
        if !tn.set(target) {
            return LookupRc::NoError;
        }
        let apex_at = tn.nlabels - self.zone.origin_labels;
        let (mark, overflow) = (w.len, w.overflow);
        let (ns, ar) = (w.ns, w.ar);
        match self.lookup(w, &tn, apex_at, Owner::Name(target), qtype, depth + 1) {
            // A referral inside a chain: the resolver chases the target
            // itself. Take the referral's records out of the message too.
            LookupRc::Referral => {
                w.truncate(mark);
                w.overflow = overflow;
                w.ns = ns;
                w.ar = ar;
                LookupRc::NoError
            }
            rc => rc,
        }
    }

    /// NXDOMAIN / NODATA authority: the SOA with the negative TTL (RFC 2308 §3).
    fn negative(&mut self, w: &mut Writer) {
        self.negative_ttl(w, self.zone.negative_ttl);
    }

    fn negative_ttl(&mut self, w: &mut Writer, ttl: u32) {
        let z = self.zone;
        if let Some(soa) = z.apex_node().rrset(TYPE_SOA) {
            w.put_rrset(Section::Authority, &z.origin, soa, ttl.min(z.negative_ttl));
        }
        // A negative answer never depends on the client (RFC 7871 §7.4).
        self.scope = Scope::GLOBAL;
    }

    fn referral(&mut self, w: &mut Writer, cut: &Node) {
        let Some(ns) = cut.rrset(TYPE_NS) else { return };
        w.put_rrset(Section::Authority, &cut.name, ns, ns.ttl);
        // Glue: addresses of in-bailiwick name servers.
        for rd in &ns.rdatas {
            if let Some(Chunk::Name(target)) = rd.0.first() {
                if meridian_wire::name::is_subdomain(target, &cut.name) {
                    if let Some(node) = self.zone.get(target) {
                        for t in [TYPE_A, TYPE_AAAA] {
                            if let Some(set) = node.rrset(t) {
                                w.put_rrset(Section::Additional, target, set, set.ttl);
                            }
                        }
                    }
                }
            }
        }
        self.scope = Scope::GLOBAL;
    }

    /// A pool or geo answer.
    fn dynamic(
        &mut self,
        w: &mut Writer,
        b: u32,
        binding: &Binding,
        owner: Owner,
        v6: bool,
    ) -> LookupRc {
        let e = self.engine;
        let up = |m: &crate::pool::Member| e.member_up(m);
        let (list, scope): (&[usize], Scope) = match &binding.target {
            Target::Pool(p) => (std::slice::from_ref(p), Scope::GLOBAL),
            Target::Geo(map) => {
                let (addr, scope) = geo_client(self.ecs, self.src);
                let (d, len) = map.decide(addr);
                let scope = if map.is_uniform() {
                    0
                } else {
                    scope.unwrap_or(len)
                };
                (map.decision(d), Scope::new(scope))
            }
        };
        // Pools that have this family at all, in failover order.
        let mut chosen = None;
        let mut degraded = false;
        let mut any_family = false;
        for (k, &p) in list.iter().enumerate() {
            let pool = &e.pools[p];
            if pool.family(v6).is_empty() {
                continue;
            }
            any_family = true;
            let (is_up, n_up) = pool.is_up(v6, &up);
            if is_up {
                degraded = k > 0 || n_up < pool.family(v6).len();
                chosen = Some(p);
                break;
            }
        }
        if !any_family {
            self.negative(w);
            return LookupRc::NoError;
        }
        let mut out = [0u16; MAX_MEMBERS];
        let (pool_idx, n, ttl) = match chosen {
            Some(p) => {
                let members = e.pools[p].family(v6);
                let slot = binding.slot + v6 as usize;
                let n = select(
                    self.sel,
                    members,
                    binding.mode,
                    &up,
                    slot,
                    e.generation,
                    &mut out,
                );
                let ttl = if degraded {
                    binding.degraded_ttl
                } else {
                    binding.ttl
                };
                (p, n, ttl)
            }
            None => match binding.when_all_down {
                AllDown::All => {
                    let Some(&p) = list.iter().find(|&&p| !e.pools[p].family(v6).is_empty()) else {
                        unreachable!("any_family checked above")
                    };
                    let members = e.pools[p].family(v6);
                    let slot = binding.slot + v6 as usize;
                    // Regardless of health, but not members the operator
                    // drained (unless that leaves none).
                    let kept = |m: &crate::pool::Member| !e.health.is_drained(m.health);
                    let mut n = select(
                        self.sel,
                        members,
                        binding.mode,
                        &kept,
                        slot,
                        e.generation,
                        &mut out,
                    );
                    if n == 0 {
                        n = select(
                            self.sel,
                            members,
                            binding.mode,
                            &|_| true,
                            slot,
                            e.generation,
                            &mut out,
                        );
                    }
                    (p, n, binding.degraded_ttl)
                }
                AllDown::Empty => {
                    // Resolvers cache this NODATA for every client (RFC 7871
                    // §7.4): keep it short so repair shows quickly.
                    self.negative_ttl(w, binding.degraded_ttl);
                    return LookupRc::NoError;
                }
                AllDown::Servfail => {
                    self.scope = Scope::GLOBAL;
                    return LookupRc::ServFail;
                }
            },
        };
        let members = e.pools[pool_idx].family(v6);
        let ttl = ttl.to_be_bytes();
        for &i in &out[..n] {
            // Copy the member's pre-rendered record and patch its TTL.
            let rr = members[i as usize].rr();
            match owner {
                Owner::Qname => w.put(rr),
                Owner::Name(name) => {
                    w.put_name(name);
                    w.put(&rr[2..]);
                }
            }
            if !w.overflow {
                let at = w.len - rr.len() + RR_TTL_AT;
                w.buf[at..at + 4].copy_from_slice(&ttl);
            }
            w.an += 1;
        }
        self.scope = self.scope.max(scope);
        self.pool = Some((b, pool_idx as u32));
        LookupRc::NoError
    }
}

/// The address a geo answer is decided on, and the scope the ECS rules force
/// (None: the length of the partition block holding the address).
///
/// - ECS with SOURCE > 0 and a globally routable address: that address.
/// - ECS address in special-purpose space (private, loopback, CGNAT,
///   documentation, IPv4-mapped...): the transport source address, with the
///   scope covering the whole special block (RFC 7871 §10).
/// - SOURCE 0 or no ECS: the source address, scope 0 (§7.1.2).
///
/// A dual-stack socket reports an IPv4 client as `::ffff:a.b.c.d`; the
/// source is unmapped so it is located as the IPv4 address it is. Shared
/// with `meridian lookup`. No allocation.
#[inline]
pub fn geo_client(ecs: Option<ClientSubnet>, src: IpAddr) -> (IpAddr, Option<u8>) {
    let src = src.to_canonical();
    match ecs {
        Some(c) if c.source() > 0 => match special_block(c.addr()) {
            Some(blk) => (src, Some(blk.prefix_len())),
            None => (c.addr(), None),
        },
        _ => (src, Some(0)),
    }
}

impl Owner<'_> {
    fn write_rrset(self, w: &mut Writer, set: &RRset) {
        match self {
            Owner::Qname => {
                // The owner is the question's name: its first label is at 12.
                for rd in &set.rdatas {
                    w.put_u16(0xC00C);
                    w.put_rr_body(set.rtype, set.ttl, rd);
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
