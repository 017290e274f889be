//! The zone walk: which zone answers (longest suffix, with DS answered by
//! the parent side of a cut, RFC 4035 §3.1.4.1) and what it holds for the
//! name. Authoritative lookup (RFC 1034 §4.3.2): exact match, referral at a
//! zone cut with in-bailiwick glue (required) and sibling glue (where it
//! fits, RFC 9471), addresses of in-zone MX, SRV and NS targets in the
//! additional section where they fit (RFC 1035 §3.3.9, RFC 2782), CNAME
//! chains inside the zone (step 3a), wildcard synthesis from the closest
//! encloser (RFC 4592 §3.3.1), ANY answered with one RRset, the smallest
//! (RFC 8482 §4.1), ANY, NSEC and RRSIG at an alias not followed (RFC 2181
//! §10.1), and negative answers with the SOA and its negative TTL (RFC
//! 2308 §3, §5). In a signed zone, NSEC (DO=1) is answered with the name's
//! own NSEC and RRSIG is refused (`signing`). Names bound to a pool or geo
//! map go to `dynamic`.
//!
//! Invariants: allocates nothing (the CNAME chain is a fixed array);
//! writes only through the `Writer`; a chain follows at most `MAX_CHAIN`
//! CNAMEs, each once; a negative answer or a referral has scope 0.

use std::net::IpAddr;

use super::signing::{DenialCache, Deny};
use super::{Owner, Resolved};
use crate::engine::{Engine, Target};
use crate::pool::Selector;
use crate::zone::{Node, RRset, Zone};
use meridian_wire::ecs::{ClientSubnet, Scope};
use meridian_wire::writer::{Section, Writer};
use meridian_wire::*;

/// Most CNAMEs followed inside a zone before giving up (loop protection).
const MAX_CHAIN: usize = 8;

/// The target name of an NS, MX or SRV record (lower-cased wire form).
fn target(rtype: u16, rd: meridian_wire::Packed<'_>) -> Option<&[u8]> {
    match rtype {
        // The SRV target is not compressible (RFC 2782): plain octets.
        TYPE_SRV => rd.plain().and_then(|p| p.get(6..)),
        _ => rd.pieces().find_map(|p| match p {
            meridian_wire::Piece::Name(n) => Some(n),
            meridian_wire::Piece::Bytes(_) => None,
        }),
    }
}

/// An RRset's size in a message before name compression: per record a
/// two-octet owner pointer, the 10 fixed octets and the RDATA (packed form,
/// within two octets a chunk of the wire form).
fn wire_size(set: RRset<'_>) -> usize {
    set.records().map(|rd| 12 + rd.0.len()).sum()
}

impl Engine {
    // One caller (`Engine::answer`): inlined, it passes nothing through the
    // stack.
    #[inline(always)]
    pub(super) fn resolve(
        &self,
        w: &mut Writer,
        q: &Query,
        src: IpAddr,
        sel: &mut Selector,
        dc: &mut DenialCache,
    ) -> Resolved {
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
                    if self.zones[zi].get(name.as_bytes()).is_some_and(|n| n.cut()) {
                        zone = Some((zi, i));
                    }
                    break;
                }
            }
        }
        let Some((zi, apex_at)) = zone else {
            return Resolved::refused();
        };
        // QTYPE=RRSIG in a signed zone: REFUSED, as Knot's online signing
        // answers. Denials and pool answers are signed per answer, so a
        // name has no fixed set of RRSIGs to hand out.
        if q.qtype == TYPE_RRSIG && self.signer(zi).is_some() {
            return Resolved {
                unsupported: true,
                ..Resolved::refused()
            };
        }
        // DNSSEC records only for DO=1 (RFC 4035 §3.2.1). The walk is
        // compiled twice: the unsigned one holds no signing code at all.
        let signer = if q.edns.is_some_and(|e| e.dnssec_ok) {
            self.signer(zi)
        } else {
            None
        };
        match signer {
            None => self.walk::<false>(w, q, zi, apex_at, src, sel, dc, None),
            Some(s) => self.walk::<true>(w, q, zi, apex_at, src, sel, dc, Some(s)),
        }
    }

    /// The zone walk for one answer; `S`: signed (DO=1 to a signed zone).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn walk<const S: bool>(
        &self,
        w: &mut Writer,
        q: &Query,
        zi: usize,
        apex_at: usize,
        src: IpAddr,
        sel: &mut Selector,
        dc: &mut DenialCache,
        signer: Option<&crate::engine::signed::ZoneSigner>,
    ) -> Resolved {
        let name = &q.qname;
        let mut ctx = Ctx::<S> {
            engine: self,
            sel,
            signer,
            statics: if S {
                signer.map(|s| s.statics.load())
            } else {
                None
            },
            dc,
            zone: &self.zones[zi],
            src,
            ecs: q.edns.and_then(|e| e.ecs),
            scope: Scope::GLOBAL,
            pool: None,
            qname: name.as_bytes(),
            chain: [&[]; MAX_CHAIN],
            denials: 0,
        };
        let rcode = ctx.lookup(w, name, apex_at, Owner::Qname, q.qtype, 0);
        let aa = rcode != LookupRc::Referral;
        // RFC 9824 §3: a compact denial says NOERROR unless the query set
        // the Compact Answers OK bit.
        let rcode = match rcode {
            LookupRc::NxDomain if S && !q.edns.is_some_and(|e| e.compact_ok) => RCODE_NOERROR,
            rc => rc.rcode(),
        };
        Resolved {
            rcode,
            aa,
            scope: ctx.scope,
            pool: ctx.pool,
            compact: S,
            unsupported: false,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum LookupRc {
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

/// One answer's walk: the zone, the client, and what the answer so far
/// decided (ECS scope, pool used).
pub(super) struct Ctx<'e, 's, const S: bool> {
    pub(super) engine: &'e Engine,
    /// This thread's random generator and rotation cursors.
    pub(super) sel: &'s mut Selector,
    /// The zone's signer when the answer is signed (DO=1, signed zone).
    pub(super) signer: Option<&'e crate::engine::signed::ZoneSigner>,
    /// Its static signatures, loaded once per answer.
    pub(super) statics: Option<arc_swap::Guard<std::sync::Arc<crate::engine::signed::StaticSigs>>>,
    /// This thread's cache of NSEC signatures.
    pub(super) dc: &'s mut DenialCache,
    zone: &'e Zone,
    pub(super) src: IpAddr,
    pub(super) ecs: Option<ClientSubnet>,
    pub(super) scope: Scope,
    pub(super) pool: Option<(u32, u32)>,
    /// The query name (lower-cased wire), to stop a CNAME loop back to it.
    pub(super) qname: &'e [u8],
    /// CNAME targets already looked up in this answer (loop protection).
    chain: [&'e [u8]; MAX_CHAIN],
    /// Negative answers written so far.
    denials: u32,
}

impl<'e, const S: bool> Ctx<'e, '_, S> {
    /// The TTL of negative answers (RFC 2308 §5, RFC 9077).
    pub(super) fn zone_negative_ttl(&self) -> u32 {
        self.zone.negative_ttl
    }

    /// Look `name` up in the zone; `apex_at` is the label index of the apex.
    fn lookup(
        &mut self,
        w: &mut Writer,
        name: &WireName,
        apex_at: usize,
        owner: Owner<'e>,
        qtype: u16,
        depth: usize,
    ) -> LookupRc {
        let z = self.zone;
        // Walk down from the apex: stop at a zone cut or at the closest encloser.
        let mut encloser = z.apex_node();
        let mut exact = apex_at == 0;
        // The label index of the next closer name (RFC 5155 §1.3) when
        // the walk stops short.
        let mut next_closer = 0;
        for i in (0..apex_at).rev() {
            next_closer = i;
            match z.get(name.suffix(i)) {
                Some(node) => {
                    // The parent side answers DS at a cut; we have none, so NODATA.
                    if node.cut() && !(i == 0 && qtype == TYPE_DS) {
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
            return self.answer_node(w, encloser, owner, qtype, depth);
        }
        // RFC 4592 §3.3.1: the source of synthesis is *.<closest encloser>.
        let mut wild = [0u8; MAX_NAME + 2];
        let enc = encloser.name();
        if enc.len() + 2 <= MAX_NAME {
            wild[0] = 1;
            wild[1] = b'*';
            wild[2..2 + enc.len()].copy_from_slice(enc);
            if let Some(node) = z.get(&wild[..2 + enc.len()]) {
                let (ar, denials) = (w.ar, self.denials);
                let rc = self.answer_node(w, node, owner, qtype, depth);
                // A positive answer from the wildcard proves that no closer
                // name exists (not after additional records: sections stay
                // in order).
                // An NSEC asked for is the synthesized name's own (signed
                // at it, not from the wildcard): it needs no proof.
                let own_nsec = S && qtype == TYPE_NSEC;
                if rc == LookupRc::NoError && self.denials == denials && w.ar == ar && !own_nsec {
                    self.wildcard_proof(w, name.suffix(next_closer));
                }
                return rc;
            }
        }
        if S && qtype == TYPE_NSEC {
            self.nsec_answer(w, owner, Deny::NxDomain);
            return LookupRc::NoError;
        }
        self.negative(w);
        self.deny(w, owner, Deny::NxDomain, qtype);
        LookupRc::NxDomain
    }

    fn answer_node(
        &mut self,
        w: &mut Writer,
        node: Node<'e>,
        owner: Owner<'e>,
        qtype: u16,
        depth: usize,
    ) -> LookupRc {
        if S && qtype == TYPE_NSEC {
            let extra = self.families(node);
            self.nsec_answer(w, owner, Deny::NoData(Some(node), extra));
            return LookupRc::NoError;
        }
        if let Some(b) = node.dynamic() {
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
                return self.dynamic(w, b, binding, node, owner, qtype, v6);
            }
        }
        if qtype == TYPE_ANY {
            return self.any(w, node, owner, qtype);
        }
        // One pass over the RRsets (the common case: the first matches). A
        // CNAME is alone at its name among data (the zone builder enforces
        // it), so it is the first set there.
        for (i, set) in node.rrsets_indexed() {
            if set.rtype == qtype {
                owner.write_rrset(w, set);
                self.sign_static(w, owner, Section::Answer, i, set.ttl);
                if matches!(qtype, TYPE_NS | TYPE_MX | TYPE_SRV) {
                    self.target_addresses(w, set, qtype);
                }
                return LookupRc::NoError;
            }
            if set.rtype == TYPE_CNAME {
                // NSEC and RRSIG may sit beside a CNAME (RFC 2181 §10.1, RFC
                // 4035 §2.5): they are the alias's own, never followed. Here
                // the zone is unsigned or the query DO=0, so NODATA.
                if matches!(qtype, TYPE_NSEC | TYPE_RRSIG) {
                    break;
                }
                owner.write_rrset(w, set);
                self.sign_static(w, owner, Section::Answer, i, set.ttl);
                return self.follow(w, set, qtype, depth);
            }
        }
        self.negative(w);
        if S {
            let extra = self.families(node);
            self.deny(w, owner, Deny::NoData(Some(node), extra), qtype);
        }
        LookupRc::NoError
    }

    /// The address types a pool or geo name answers (for its NSEC bitmap).
    pub(super) fn families(&self, node: Node<'e>) -> [u16; 2] {
        let Some(b) = node.dynamic() else {
            return [0, 0];
        };
        let binding = &self.engine.bindings[b as usize];
        let has = |v6, t| {
            if binding.has_family(&self.engine.pools, v6) {
                t
            } else {
                0
            }
        };
        [has(false, TYPE_A), has(true, TYPE_AAAA)]
    }

    /// ANY: one RRset (RFC 8482 §4.1), the smallest on the wire (ties: the
    /// first), so ANY amplifies as little as it can; at an alias, the CNAME
    /// alone (RFC 1034 §4.3.2 step 3a).
    fn any(&mut self, w: &mut Writer, node: Node<'e>, owner: Owner<'e>, qtype: u16) -> LookupRc {
        let mut best: Option<(usize, u32, RRset<'e>)> = None;
        for (i, set) in node.rrsets_indexed() {
            if set.rtype == TYPE_CNAME {
                best = Some((0, i, set));
                break;
            }
            let size = wire_size(set);
            if best.is_none_or(|(b, _, _)| size < b) {
                best = Some((size, i, set));
            }
        }
        match best {
            Some((_, i, set)) => {
                owner.write_rrset(w, set);
                self.sign_static(w, owner, Section::Answer, i, set.ttl);
            }
            None => {
                self.negative(w);
                self.deny(w, owner, Deny::NoData(Some(node), [0, 0]), qtype);
            }
        }
        LookupRc::NoError
    }

    /// RFC 1035 §3.3.9, RFC 2782: addresses of the in-zone targets of an
    /// NS, MX or SRV RRset, where they fit.
    fn target_addresses(&mut self, w: &mut Writer, set: RRset<'e>, qtype: u16) {
        for rd in set.records() {
            if let Some(t) = target(qtype, rd) {
                self.addresses(w, t, false);
            }
        }
    }

    /// Follow a CNAME inside the zone (RFC 1034 §4.3.2 step 3a).
    fn follow(&mut self, w: &mut Writer, cname: RRset<'e>, qtype: u16, depth: usize) -> LookupRc {
        let Some(target) = cname.first().and_then(|r| r.first_name()) else {
            return LookupRc::NoError;
        };
        // `depth` links have been followed so far: at most MAX_CHAIN in all.
        if depth >= MAX_CHAIN || !meridian_wire::name::is_subdomain(target, &self.zone.origin) {
            return LookupRc::NoError;
        }
        // A loop: the target is already in the answer (each CNAME once).
        let seen = &self.chain[..depth];
        if target == self.qname || seen.contains(&target) {
            return LookupRc::NoError;
        }
        self.chain[depth] = target;
        let mut tn = WireName::default();
        if !tn.set(target) {
            return LookupRc::NoError;
        }
        let apex_at = tn.nlabels - self.zone.origin_labels;
        let mark = w.mark();
        match self.lookup(w, &tn, apex_at, Owner::Name(target), qtype, depth + 1) {
            // A referral inside a chain: the resolver chases the target
            // itself. Take the referral's records out of the message too.
            LookupRc::Referral => {
                w.rewind(mark);
                LookupRc::NoError
            }
            rc => rc,
        }
    }

    /// NXDOMAIN / NODATA authority: the SOA with the negative TTL (RFC 2308 §3).
    pub(super) fn negative(&mut self, w: &mut Writer) {
        self.negative_ttl(w, self.zone.negative_ttl);
    }

    pub(super) fn negative_ttl(&mut self, w: &mut Writer, ttl: u32) {
        let z = self.zone;
        if S {
            self.denials += 1;
        }
        if let Some((i, soa)) = z.apex_node().rrset_indexed(TYPE_SOA) {
            let ttl = ttl.min(z.negative_ttl);
            w.put_rrset(Section::Authority, &z.origin, soa, ttl);
            self.sign_static(w, Owner::Name(&z.origin), Section::Authority, i, ttl);
        }
        // A negative answer never depends on the client (RFC 7871 §7.4).
        self.scope = Scope::GLOBAL;
    }

    fn referral(&mut self, w: &mut Writer, cut: Node<'e>) {
        let Some(ns) = cut.rrset(TYPE_NS) else { return };
        w.put_rrset(Section::Authority, cut.name(), ns, ns.ttl);
        self.referral_proof(w, cut);
        // RFC 9471: glue for name servers below the cut is required (if it
        // does not fit, the answer is truncated); then the addresses of
        // other in-zone name servers (sibling glue, in-zone data) where
        // they fit.
        for required in [true, false] {
            for rd in ns.records() {
                if let Some(target) = rd.first_name() {
                    if meridian_wire::name::is_subdomain(target, cut.name()) == required {
                        self.addresses(w, target, required);
                    }
                }
            }
        }
        self.scope = Scope::GLOBAL;
    }

    /// The A and AAAA RRsets of `target` in the additional section, if it
    /// is a static name of this zone, each with its RRSIGs when signing
    /// (RFC 4035 §3.1.1; glue has none). Optional ones that do not fit under
    /// the writer's limit (the OPT's room kept) are left out, without TC, and none after them; RRSIGs that do not fit
    /// are dropped, the RRset kept (§3.1.1 allows it), and nothing follows.
    fn addresses(&mut self, w: &mut Writer, target: &[u8], required: bool) {
        // Past the limit already: the answer is truncated anyway.
        if w.overflow || !meridian_wire::name::is_subdomain(target, &self.zone.origin) {
            return;
        }
        let Some(node) = self.zone.get(target) else {
            return;
        };
        for t in [TYPE_A, TYPE_AAAA] {
            let Some((i, set)) = node.rrset_indexed(t) else {
                continue;
            };
            let mark = w.mark();
            w.put_rrset(Section::Additional, target, set, set.ttl);
            if !required && w.overflow {
                w.rewind(mark);
                return;
            }
            // Required ones are glue, which has no RRSIGs.
            if S && !required {
                let mark = w.mark();
                self.sign_static(w, Owner::Name(target), Section::Additional, i, set.ttl);
                if w.overflow {
                    w.rewind(mark);
                    return;
                }
            }
        }
    }
}
