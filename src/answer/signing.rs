//! DNSSEC in answers (RFC 4035 §3.1), for a DO=1 query to a signed zone:
//! each authoritative RRset is followed by its RRSIGs (copied from the
//! tables `engine::signed` publishes), and denial of existence is compact
//! (RFC 9824 §3): one NSEC at the denied name, `\000.<name>` next, whose
//! bitmap lists the name's types (NXNAME for a name that does not exist).
//! A wildcard answer carries an NSEC covering the next closer name (RFC
//! 4035 §3.1.3.3), minimally (RFC 4470 §3); an insecure referral the NSEC
//! at the cut, without DS (RFC 4035 §3.1.4.1). A query for NSEC gets that
//! same NSEC, with NSEC in its bitmap (RFC 4035 §2.3), as its answer.
//!
//! The NSECs are the one thing signed per query; their RRSIGs are kept in
//! a per-thread [`DenialCache`] of fixed size, so a name signed once is
//! copied after that; a hit compares the whole NSEC, not only its hash. A
//! cache miss signs (tens of microseconds) and may grow the slot's
//! buffers; nothing else here allocates.

use super::lookup::Ctx;
use super::Owner;
use crate::engine::signed::{unix_now, Sigs, ZoneSigner};
use crate::zone::Node;
use meridian_wire::writer::{Section, Writer};
use meridian_wire::*;

use crate::dnssec::sign::{compact_nsec, put_type_bitmap, Validity, TYPE_NXNAME};

/// Slots in a thread's denial cache.
const SLOTS: usize = 1024;

#[derive(Default)]
struct Slot {
    tag: u64,
    signer: u64,
    ttl: u32,
    /// Unix seconds after which the entry is signed again.
    fresh_until: u64,
    /// The NSEC signed: its owner, then its RDATA. A hit compares them,
    /// since two NSECs may share a 64-bit tag.
    nsec: Vec<u8>,
    owner_len: usize,
    sigs: Vec<u8>,
}

impl Slot {
    /// Does the slot hold the signatures of exactly this NSEC?
    fn holds(&self, t: u64, signer: u64, owner: &[u8], rdata: &[u8], ttl: u32) -> bool {
        self.tag == t
            && self.signer == signer
            && self.ttl == ttl
            && self.owner_len == owner.len()
            && self.nsec.len() == owner.len() + rdata.len()
            && self.nsec[..owner.len()] == *owner
            && self.nsec[owner.len()..] == *rdata
    }
}

/// A thread's cache of online NSEC signatures, direct-mapped by a hash of
/// (signer, owner, RDATA, TTL); a slot's buffers are reused.
pub struct DenialCache {
    slots: Box<[Slot]>,
    rdata: Vec<u8>,
}

impl Default for DenialCache {
    fn default() -> Self {
        DenialCache {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            rdata: Vec::with_capacity(600),
        }
    }
}

fn tag(signer: u64, owner: &[u8], rdata: &[u8], ttl: u32) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write_u64(signer);
    h.write(owner);
    h.write(rdata);
    h.write_u32(ttl);
    // Never 0: an empty slot does not match.
    h.finish() | 1
}

/// Signs an NSEC's RDATA into a buffer at a time: its validity.
type SignFn<'a> = dyn FnMut(&[u8], &mut Vec<u8>, u64) -> Result<Validity, String> + 'a;

impl DenialCache {
    /// The slot holding the RRSIGs of the NSEC (`owner`, `self.rdata`,
    /// `ttl`), signed now if not cached.
    fn sigs(&mut self, s: &ZoneSigner, owner: &[u8], ttl: u32) -> Option<usize> {
        let t = tag(s.id, owner, &self.rdata, ttl);
        let refresh = s.cfg.refresh.as_secs();
        self.slot(t, s.id, owner, ttl, refresh, &mut |rdata, out, now| {
            let v = s.sign_online(owner, TYPE_NSEC, ttl, rdata, now, out)?;
            s.online.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(v)
        })
    }

    /// The slot for tag `t` if it holds this NSEC and is fresh, else the
    /// slot refilled by `sign`.
    fn slot(
        &mut self,
        t: u64,
        signer: u64,
        owner: &[u8],
        ttl: u32,
        refresh: u64,
        sign: &mut SignFn<'_>,
    ) -> Option<usize> {
        let at = (t as usize) % SLOTS;
        let slot = &mut self.slots[at];
        let now = unix_now();
        if !slot.holds(t, signer, owner, &self.rdata, ttl) || slot.fresh_until <= now {
            slot.sigs.clear();
            slot.tag = 0;
            let v = sign(&self.rdata, &mut slot.sigs, now).ok()?;
            slot.nsec.clear();
            slot.nsec.extend_from_slice(owner);
            slot.nsec.extend_from_slice(&self.rdata);
            slot.owner_len = owner.len();
            slot.ttl = ttl;
            slot.tag = t;
            slot.signer = signer;
            slot.fresh_until = u64::from(v.expiration).saturating_sub(refresh);
        }
        Some(at)
    }
}

/// What a denial proves.
#[derive(Clone, Copy)]
pub(super) enum Deny<'n> {
    /// The name does not exist: NXNAME.
    NxDomain,
    /// The name exists (or is claimed to, for a wildcard or a pool with
    /// no usable member) with these RRsets, but not the query's type; the
    /// optional extra types are a pool's address families.
    NoData(Option<Node<'n>>, [u16; 2]),
}

/// Write `sigs` as RRSIG records owned by `owner` in section `s`.
pub(super) fn put_sigs(w: &mut Writer, owner: Owner, s: Section, ttl: u32, sigs: Sigs<'_>) {
    for rd in sigs.iter() {
        owner.put(w);
        w.put_raw_rr_body(s, TYPE_RRSIG, ttl, rd);
    }
}

/// The predecessor of a one-label-longer name in canonical order, for a
/// minimally covering NSEC (RFC 4470 §3.1.2, simplified): the first label
/// with its last octet lowered and 0xFF octets appended to 63. None when
/// the label ends in 0x00 (the name has no short predecessor here).
fn predecessor(name: &[u8], out: &mut [u8; MAX_NAME + 64]) -> Option<usize> {
    let len = *name.first()? as usize;
    if len == 0 || name[len] == 0 {
        return None;
    }
    let rest = &name[1 + len..];
    // Longest label that keeps the name within 255 octets.
    let room = MAX_NAME.saturating_sub(rest.len() + 1).min(63);
    if room < len {
        return None;
    }
    out[0] = room as u8;
    out[1..=len].copy_from_slice(&name[1..=len]);
    out[len] -= 1;
    out[len + 1..=room].fill(0xFF);
    out[room + 1..room + 1 + rest.len()].copy_from_slice(rest);
    Some(room + 1 + rest.len())
}

impl<'e, const S: bool> Ctx<'e, '_, S> {
    /// The RRSIGs of static RRset `set` after it, if signing.
    #[inline]
    pub(super) fn sign_static(&self, w: &mut Writer, owner: Owner, s: Section, set: u32, ttl: u32) {
        if !S {
            return;
        }
        if let Some(st) = &self.statics {
            put_sigs(w, owner, s, ttl, st.get(set));
        }
    }

    /// The NSEC at `owner` (RDATA in the cache's buffer) with its RRSIGs,
    /// in section `sec`, at the negative TTL.
    fn put_nsec(&mut self, w: &mut Writer, owner: Owner<'_>, sec: Section) {
        let Some(s) = self.signer else { return };
        let ttl = self.zone_negative_ttl();
        let Some(at) = self.dc.sigs(s, owner.wire(self.qname), ttl) else {
            return;
        };
        let dc = &*self.dc;
        owner.put(w);
        w.put_raw_rr_body(sec, TYPE_NSEC, ttl, &dc.rdata);
        put_sigs(w, owner, sec, ttl, Sigs(&dc.slots[at].sigs));
    }

    /// The compact NSEC for a denial of `owner`, after the SOA the caller
    /// wrote.
    pub(super) fn deny(&mut self, w: &mut Writer, owner: Owner<'e>, what: Deny<'_>, qtype: u16) {
        if !S {
            return;
        }
        self.compact_rdata(owner, what, qtype);
        self.put_nsec(w, owner, Section::Authority);
    }

    /// QTYPE=NSEC (RFC 4035 §2.3): the NSEC that `owner`'s denials carry,
    /// as the answer, as Knot's online signing gives it. Its bitmap lists
    /// NSEC, so a NODATA with it would contradict itself; for a name that
    /// does not exist it is the NXNAME one.
    pub(super) fn nsec_answer(&mut self, w: &mut Writer, owner: Owner<'e>, what: Deny<'_>) {
        if !S {
            return;
        }
        self.compact_rdata(owner, what, 0);
        self.put_nsec(w, owner, Section::Answer);
    }

    /// The compact NSEC's RDATA for `owner` into the cache's buffer: the
    /// next name `\000.<owner>`, and the types `what` says, RRSIG and NSEC,
    /// less `qtype` (the type a NODATA denies; 0 for none).
    fn compact_rdata(&mut self, owner: Owner<'e>, what: Deny<'_>, qtype: u16) {
        let mut types = [0u16; 64];
        let mut n = 0;
        let mut add = |t: u16, types: &mut [u16; 64]| {
            if n < types.len() && t != qtype && !types[..n].contains(&t) {
                types[n] = t;
                n += 1;
            }
        };
        add(TYPE_RRSIG, &mut types);
        add(TYPE_NSEC, &mut types);
        match what {
            Deny::NxDomain => add(TYPE_NXNAME, &mut types),
            Deny::NoData(node, extra) => {
                if let Some(node) = node {
                    for s in node.rrsets() {
                        if !matches!(s.rtype, TYPE_RRSIG | TYPE_NSEC) {
                            add(s.rtype, &mut types);
                        }
                    }
                }
                for t in extra.into_iter().filter(|&t| t != 0) {
                    add(t, &mut types);
                }
            }
        }
        compact_nsec(owner.wire(self.qname), &types[..n], &mut self.dc.rdata);
    }

    /// RFC 4035 §3.1.3.3: a wildcard answer proves that the next closer
    /// name `nc` does not exist, with an NSEC from just before it to just
    /// after it (`nc` with a 0x00 octet on its first label), which covers
    /// every name under `nc` too.
    pub(super) fn wildcard_proof(&mut self, w: &mut Writer, nc: &[u8]) {
        if !S {
            return;
        }
        let mut pred = [0u8; MAX_NAME + 64];
        let Some(plen) = predecessor(nc, &mut pred) else {
            return;
        };
        let len = nc[0] as usize;
        if len >= 63 || nc.len() + 1 > MAX_NAME {
            return;
        }
        let rd = &mut self.dc.rdata;
        rd.clear();
        rd.push(len as u8 + 1);
        rd.extend_from_slice(&nc[1..=len]);
        rd.push(0);
        rd.extend_from_slice(&nc[1 + len..]);
        put_type_bitmap(&[TYPE_RRSIG, TYPE_NSEC], rd);
        self.put_nsec(w, Owner::Name(&pred[..plen]), Section::Authority);
    }

    /// A referral's DNSSEC part (RFC 4035 §3.1.4.1): the cut's DS RRset
    /// with its RRSIGs, or the NSEC proving it has none.
    pub(super) fn referral_proof(&mut self, w: &mut Writer, cut: Node<'e>) {
        if !S {
            return;
        }
        if let Some((i, ds)) = cut.rrset_indexed(TYPE_DS) {
            w.put_rrset(Section::Authority, cut.name(), ds, ds.ttl);
            self.sign_static(w, Owner::Name(cut.name()), Section::Authority, i, ds.ttl);
        } else {
            self.deny(
                w,
                Owner::Name(cut.name()),
                Deny::NoData(Some(cut), [0, 0]),
                TYPE_DS,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predecessor_sorts_just_before() {
        let mut out = [0u8; MAX_NAME + 64];
        let n = predecessor(b"\x03foo\x04test\x00", &mut out).unwrap();
        assert_eq!(out[0], 63);
        assert_eq!(&out[1..4], b"fon");
        assert!(out[4..64].iter().all(|&b| b == 0xFF));
        assert_eq!(&out[64..n], b"\x04test\x00");
        assert!(predecessor(b"\x02a\x00\x04test\x00", &mut out).is_none());
    }

    /// Two NSECs whose tags collide: the second is signed, never served
    /// the first one's signatures.
    #[test]
    fn a_tag_collision_signs_again() {
        let mut dc = DenialCache::default();
        let signed = std::cell::Cell::new(0);
        let mut sign = |rdata: &[u8], out: &mut Vec<u8>, now: u64| {
            signed.set(signed.get() + 1);
            out.extend_from_slice(rdata);
            Ok(Validity::starting(now, 86_400))
        };
        // Every lookup below forces tag 7: one slot, as on a collision.
        let mut get = |dc: &mut DenialCache, rdata: &[u8], owner: &[u8], ttl| {
            dc.rdata = rdata.to_vec();
            let at = dc.slot(7, 1, owner, ttl, 3600, &mut sign).unwrap();
            dc.slots[at].sigs.clone()
        };
        assert_eq!(get(&mut dc, b"first", b"\x01a\x00", 60), b"first");
        assert_eq!(get(&mut dc, b"first", b"\x01a\x00", 60), b"first");
        assert_eq!(signed.get(), 1, "the same NSEC again is a hit");
        // Other data, then another owner, then another TTL (the RRSIG's
        // original TTL): each signed anew.
        assert_eq!(get(&mut dc, b"second", b"\x01a\x00", 60), b"second");
        assert_eq!(get(&mut dc, b"second", b"\x01b\x00", 60), b"second");
        assert_eq!(signed.get(), 3);
        get(&mut dc, b"second", b"\x01b\x00", 30);
        assert_eq!(signed.get(), 4);
    }
}
