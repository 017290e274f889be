//! A signed zone's signatures, made off the query path (RFC 4035 §2.2) and
//! published atomically for answers to copy:
//!
//! - **static**: one RRSIG per key for every authoritative RRset (not the
//!   NS of a cut, not glue), at load, and again in the background once the
//!   earliest signature has `refresh` left (each signature's expiration
//!   jittered by up to a quarter of `refresh`, so they do not all come due
//!   at once);
//! - **dynamic**: the RRsets a pool or geo name can answer with: per
//!   (name, pool, family) the set of usable members for `all`/`rotate`
//!   (with the `when_all_down` sets), every member alone for `one`, every
//!   K-subset for `some K` (bounded by `max_subsets`). Made again after
//!   a balancing refresh that changed a member's filter decision or drain
//!   (or when they come due), reusing the signatures of sets already
//!   signed; until a new set is signed, answers serve the last signed one
//!   (its fallback), never an unsigned one.
//!
//! The DNSKEY, CDS and CDNSKEY RRsets (RFC 7344) are put at the apex by
//! [`apex_sets`] and signed by the KSKs (or CSKs); everything else by the
//! ZSKs (the KSKs when there are none).
//!
//! Invariants: an RRSIG here covers exactly the octets answers write;
//! readers only `load` the published tables (no lock on the query path).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustc_hash::FxHasher;

use super::{AllDown, Binding, Engine, Target};
use crate::config::dnssec::ZoneDnssec;
use crate::dnssec::keys::KeyPair;
use crate::dnssec::sign::{self, Validity};
use crate::pool::{Member, Mode, MAX_MEMBERS};
use crate::zone::Zone;
use meridian_wire::*;

mod dynamic;
use dynamic::candidate_sets;
pub use dynamic::{binding_pools, choose, set_key, DynKey, DynSigs, Fallback};

type Fx = BuildHasherDefault<FxHasher>;

/// TYPE codes of the apex key RRsets.
pub const TYPE_DNSKEY: u16 = 48;
/// Child DS (RFC 7344).
pub const TYPE_CDS: u16 = 59;
/// Child DNSKEY (RFC 7344).
pub const TYPE_CDNSKEY: u16 = 60;

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A list of RRSIG RDATAs, each behind its big-endian u16 length.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sigs<'a>(pub &'a [u8]);

impl<'a> Sigs<'a> {
    /// The RRSIG RDATAs.
    pub fn iter(self) -> impl Iterator<Item = &'a [u8]> {
        let mut b = self.0;
        std::iter::from_fn(move || {
            let (h, rest) = b.split_first_chunk::<2>()?;
            let n = u16::from_be_bytes(*h) as usize;
            let (rd, rest) = rest.split_at_checked(n)?;
            b = rest;
            Some(rd)
        })
    }

    /// Nothing to write.
    pub fn is_empty(self) -> bool {
        self.0.is_empty()
    }
}

fn push_sig(out: &mut Vec<u8>, rd: &[u8]) {
    out.extend_from_slice(&(rd.len() as u16).to_be_bytes());
    out.extend_from_slice(rd);
}

/// Which keys sign what, and the validity of new signatures.
pub struct Keys<'a> {
    /// The zone's apex (lower-cased wire): the signer name.
    pub apex: &'a [u8],
    /// Sign the DNSKEY, CDS and CDNSKEY RRsets.
    pub ksk: Vec<&'a KeyPair>,
    /// Sign everything else.
    pub zsk: Vec<&'a KeyPair>,
    /// Seconds a new signature is valid.
    pub validity: u64,
    /// Largest jitter taken off a signature's validity.
    pub jitter: u64,
    /// Re-sign once a signature has this long left.
    pub refresh: u64,
}

impl<'a> Keys<'a> {
    /// The roles of a zone's signing keys (RFC 6781 §3.1): KSKs (flag 257)
    /// sign the key RRsets, ZSKs the rest; an algorithm with only one kind
    /// uses it for both (a CSK), so every algorithm signs every RRset.
    pub fn of(apex: &'a [u8], cfg: &'a ZoneDnssec) -> Keys<'a> {
        let refs = |v: Vec<&'a Arc<KeyPair>>| v.into_iter().map(|k| &**k).collect();
        let (ksk, zsk) = (refs(cfg.key_set_keys()), refs(cfg.zone_keys()));
        let (validity, refresh) = (cfg.validity.as_secs(), cfg.refresh.as_secs());
        Keys {
            apex,
            ksk,
            zsk,
            validity,
            // Never so much that a new signature is already due.
            jitter: (refresh / 4).min((validity - refresh) / 2).min(86_400),
            refresh,
        }
    }

    /// Validity for a new signature at `now`, jittered.
    pub fn validity_at(&self, now: u64) -> Validity {
        let j = if self.jitter > 0 {
            fastrand::u64(0..=self.jitter)
        } else {
            0
        };
        Validity::starting(now, self.validity - j)
    }

    /// Appends to `out` one RRSIG per key of the role for `rtype`.
    pub fn sign_into(
        &self,
        owner: &[u8],
        rtype: u16,
        ttl: u32,
        records: &[&[u8]],
        v: Validity,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let keys = if matches!(rtype, TYPE_DNSKEY | TYPE_CDS | TYPE_CDNSKEY) {
            &self.ksk
        } else {
            &self.zsk
        };
        sign_with(
            keys.iter().copied(),
            self.apex,
            owner,
            rtype,
            ttl,
            records,
            v,
            out,
        )
    }
}

/// Appends to `out` one RRSIG of the RRset per key of `keys`, signed as
/// zone `apex`, each behind its length.
#[allow(clippy::too_many_arguments)]
fn sign_with<'k>(
    keys: impl Iterator<Item = &'k KeyPair>,
    apex: &[u8],
    owner: &[u8],
    rtype: u16,
    ttl: u32,
    records: &[&[u8]],
    v: Validity,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    for k in keys {
        push_sig(out, &sign::rrsig(k, apex, owner, rtype, ttl, records, v)?);
    }
    Ok(())
}

/// The apex RRsets a signed zone adds (RFC 4034 §2, RFC 7344 §3): every
/// listed key's DNSKEY, and CDS (SHA-256) and CDNSKEY for the KSKs, at
/// `ttl`.
pub fn apex_sets(cfg: &ZoneDnssec, ttl: u32) -> Vec<(u16, u32, Vec<Vec<u8>>)> {
    let dnskey: Vec<Vec<u8>> = cfg
        .keys
        .iter()
        .chain(cfg.publish.iter())
        .map(|k| k.dnskey.rdata())
        .collect();
    let entry = cfg.entry_keys();
    let cdnskey: Vec<Vec<u8>> = entry.iter().map(|k| k.dnskey.rdata()).collect();
    let cds: Vec<Vec<u8>> = entry
        .iter()
        .map(|k| k.dnskey.ds_rdata(crate::dnssec::keys::DigestType::Sha256))
        .collect();
    vec![
        (TYPE_DNSKEY, ttl, dnskey),
        (TYPE_CDS, ttl, cds),
        (TYPE_CDNSKEY, ttl, cdnskey),
    ]
}

/// Signatures of a zone's static RRsets, by RRset index.
#[derive(Debug, Default)]
pub struct StaticSigs {
    offs: Vec<u32>,
    data: Vec<u8>,
    /// Unix seconds at which to sign again (the earliest expiration less
    /// `refresh`).
    pub refresh_at: u64,
    /// Signatures made.
    pub count: usize,
    /// Time signing took, in milliseconds.
    pub ms: u64,
    /// The earliest expiration of these signatures (Unix seconds).
    pub earliest: u64,
}

impl StaticSigs {
    /// The RRSIGs of RRset `set` (empty for an unsigned one).
    #[inline]
    pub fn get(&self, set: u32) -> Sigs<'_> {
        let i = set as usize;
        match (self.offs.get(i), self.offs.get(i + 1)) {
            (Some(&a), Some(&b)) => Sigs(&self.data[a as usize..b as usize]),
            _ => Sigs(&[]),
        }
    }
}

/// Is `name` at or below a cut strictly under the apex (glue or the NS
/// of a delegation: not signed)?
fn below_cut(zone: &Zone, name: &[u8]) -> bool {
    let mut n = crate::zone::parent(name);
    while let Some(p) = n {
        if p.len() < zone.origin.len() {
            break;
        }
        if zone.get(p).is_some_and(|x| x.cut()) {
            return true;
        }
        if p == &*zone.origin {
            break;
        }
        n = crate::zone::parent(p);
    }
    false
}

/// Signs every authoritative RRset of `zone` (on up to four threads).
pub fn sign_static(zone: &Zone, keys: &Keys<'_>, now: u64) -> Result<StaticSigs, String> {
    let t0 = std::time::Instant::now();
    let nodes: Vec<crate::zone::Node<'_>> = zone.nodes().collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let chunk = nodes.len().div_ceil(threads).max(1);
    type Part = Result<(Vec<(u32, u32, u32)>, Vec<u8>, u64, usize), String>;
    let parts: Vec<Part> = std::thread::scope(|s| {
        let handles: Vec<_> = nodes
            .chunks(chunk)
            .map(|nodes| {
                s.spawn(move || -> Part {
                    let mut idx = Vec::new();
                    let mut data = Vec::new();
                    let mut earliest = u64::MAX;
                    let mut count = 0;
                    for node in nodes {
                        if node.name() != &*zone.origin && below_cut(zone, node.name()) {
                            continue;
                        }
                        for (i, set) in node.rrsets_indexed() {
                            let signed = if node.cut() {
                                set.rtype == TYPE_DS
                            } else {
                                !matches!(set.rtype, TYPE_RRSIG | TYPE_NSEC | 50 | 51)
                            };
                            if !signed {
                                continue;
                            }
                            let wire: Vec<Vec<u8>> = set.records().map(|r| r.to_wire()).collect();
                            let recs: Vec<&[u8]> = wire.iter().map(|r| &r[..]).collect();
                            let v = keys.validity_at(now);
                            earliest = earliest.min(u64::from(v.expiration));
                            let start = data.len() as u32;
                            keys.sign_into(node.name(), set.rtype, set.ttl, &recs, v, &mut data)?;
                            count += 1;
                            idx.push((i, start, data.len() as u32));
                        }
                    }
                    Ok((idx, data, earliest, count))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("signing thread panicked".into()))
            })
            .collect()
    });
    let mut spans = vec![(0u32, 0u32); zone.set_count()];
    let mut data = Vec::new();
    let mut earliest = u64::MAX;
    let mut count = 0;
    for p in parts {
        let (idx, d, e, c) = p?;
        let base = data.len() as u32;
        data.extend_from_slice(&d);
        for (i, a, b) in idx {
            spans[i as usize] = (base + a, base + b);
        }
        earliest = earliest.min(e);
        count += c;
    }
    // Rewrite as one offset table: entry i spans offs[i]..offs[i+1].
    let mut offs = Vec::with_capacity(spans.len() + 1);
    let mut packed = Vec::with_capacity(data.len());
    for (a, b) in spans {
        offs.push(packed.len() as u32);
        packed.extend_from_slice(&data[a as usize..b as usize]);
    }
    offs.push(packed.len() as u32);
    Ok(StaticSigs {
        offs,
        data: packed,
        refresh_at: refresh_time(earliest, keys.refresh),
        count,
        ms: t0.elapsed().as_millis() as u64,
        earliest,
    })
}

fn refresh_time(earliest: u64, refresh: u64) -> u64 {
    if earliest == u64::MAX {
        u64::MAX
    } else {
        earliest.saturating_sub(refresh)
    }
}

impl Engine {
    /// The signing state of zone `zi`, if it is signed.
    #[inline]
    pub fn signer(&self, zi: usize) -> Option<&ZoneSigner> {
        self.signers.get(zi).and_then(|s| s.as_deref())
    }

    /// Sign again what needs it, off the query path: the dynamic RRsets of
    /// every signed zone (sets new since the last call, and those near
    /// expiry), and a zone's static RRsets once they come due. Called after
    /// every balancing refresh; the pool sets are made again only when the
    /// members' state ([`Engine::member_state`]) moved or signatures come
    /// due. Errors are logged; the last signed state keeps serving.
    pub fn refresh_signatures(&self, now: u64) {
        let state = self.member_state();
        for (zi, s) in self.signers.iter().enumerate() {
            let Some(s) = s else { continue };
            let keys = Keys::of(&self.zones[zi].origin, &s.cfg);
            if s.statics.load().refresh_at <= now {
                match sign_static(&self.zones[zi], &keys, now) {
                    Ok(st) => {
                        tracing::info!(
                            "zone {}: re-signed {} RRsets in {} ms",
                            self.zones[zi].origin_text,
                            st.count,
                            st.ms
                        );
                        s.statics.store(Arc::new(st));
                    }
                    Err(e) => tracing::error!(
                        "zone {}: re-signing failed, the old signatures keep serving: {e}",
                        self.zones[zi].origin_text
                    ),
                }
            }
            // Balancing refreshes come with every probe's signals; the sets
            // only change with the members' filter decisions.
            let prev = s.dynamic.load();
            if prev.state == state && prev.refresh_at > now {
                continue;
            }
            match self.sign_dynamic(zi, &keys, &prev, s.cfg.max_subsets, state, now) {
                Ok(d) => s.dynamic.store(Arc::new(d)),
                Err(e) => tracing::error!(
                    "zone {}: signing pool answers failed, the last signed ones keep serving: {e}",
                    self.zones[zi].origin_text
                ),
            }
        }
    }

    /// What the sets of members answers can hold depend on: every
    /// member's filter decision and drain override, hashed.
    pub fn member_state(&self) -> u64 {
        use std::hash::Hasher;
        let mut h = FxHasher::default();
        for p in &self.pools {
            for m in p.v4.iter().chain(p.v6.iter()) {
                h.write_u8(u8::from(m.usable()) | u8::from(self.health.is_drained(m.health)) << 1);
            }
        }
        h.finish()
    }

    /// The dynamic signatures of zone `zi` for the members' current state
    /// (`state`, [`Engine::member_state`]), reusing `prev`'s where still
    /// fresh.
    pub fn sign_dynamic(
        &self,
        zi: usize,
        keys: &Keys<'_>,
        prev: &DynSigs,
        limit: u64,
        state: u64,
        now: u64,
    ) -> Result<DynSigs, String> {
        let zone = &self.zones[zi];
        let t0 = std::time::Instant::now();
        let mut next = DynSigs::default();
        let mut earliest = u64::MAX;
        for node in zone.nodes() {
            let Some(bi) = node.dynamic() else { continue };
            let b = &self.bindings[bi as usize];
            let ttl = b.ttl.max(b.degraded_ttl);
            for p in binding_pools(b) {
                for v6 in [false, true] {
                    let members = self.pools[p].family(v6);
                    if members.is_empty() {
                        continue;
                    }
                    for (k, set) in candidate_sets(self, b, members, limit)
                        .into_iter()
                        .enumerate()
                    {
                        let key = DynKey {
                            node: node.id(),
                            pool: p as u32,
                            v6,
                            set: set_key(members, &set),
                        };
                        let start = next.data.len() as u32;
                        let fresh = prev
                            .map
                            .get(&key)
                            .filter(|&&(_, _, x)| u64::from(x) > now + keys.refresh);
                        let exp = match fresh {
                            Some(&(a, b, x)) => {
                                next.data
                                    .extend_from_slice(&prev.data[a as usize..b as usize]);
                                x
                            }
                            None => {
                                let recs: Vec<&[u8]> = set
                                    .iter()
                                    .map(|&i| &members[i as usize].rr()[12..])
                                    .collect();
                                let rtype = if v6 { TYPE_AAAA } else { TYPE_A };
                                let v = keys.validity_at(now);
                                keys.sign_into(node.name(), rtype, ttl, &recs, v, &mut next.data)?;
                                next.made += 1;
                                v.expiration
                            }
                        };
                        earliest = earliest.min(u64::from(exp));
                        let span = (start, next.data.len() as u32);
                        next.map.insert(key, (span.0, span.1, exp));
                        if k == 0 {
                            next.fallback.insert(
                                (node.id(), p as u32, v6),
                                Fallback {
                                    members: set.into_boxed_slice(),
                                    span,
                                },
                            );
                        }
                    }
                }
            }
        }
        next.state = state;
        next.refresh_at = refresh_time(earliest, keys.refresh);
        next.earliest = earliest;
        next.ms = t0.elapsed().as_millis() as u64;
        Ok(next)
    }
}

/// A signed zone's keys and published signatures.
pub struct ZoneSigner {
    /// Unique per signer (and so per key set): keys cached signatures.
    pub id: u64,
    /// The zone's apex (lower-cased wire): the signer name.
    pub apex: Box<[u8]>,
    /// NSECs signed on the query path (denial cache misses, all threads).
    pub online: std::sync::atomic::AtomicU64,
    /// The checked `dnssec` table.
    pub cfg: Arc<ZoneDnssec>,
    /// Its zone keys ([`ZoneDnssec::zone_keys`]): what signs online.
    zsk: Box<[Arc<KeyPair>]>,
    /// Static RRsets' signatures.
    pub statics: ArcSwap<StaticSigs>,
    /// Pool and geo answers' signatures.
    pub dynamic: ArcSwap<DynSigs>,
}

impl std::fmt::Debug for ZoneSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneSigner")
            .field("static", &self.statics.load().count)
            .field("dynamic", &self.dynamic.load().count())
            .finish()
    }
}

impl ZoneSigner {
    /// Signs one record set online (the NSEC of a denial): RRSIG RDATAs by
    /// the ZSKs, appended to `out` behind their lengths.
    pub fn sign_online(
        &self,
        owner: &[u8],
        rtype: u16,
        ttl: u32,
        rdata: &[u8],
        now: u64,
        out: &mut Vec<u8>,
    ) -> Result<Validity, String> {
        // Online signatures are short-lived: the cache keeps them for
        // `refresh`, a resolver for their TTL.
        let v = Validity::starting(now, self.cfg.validity.as_secs());
        let keys = self.zsk.iter().map(|k| &**k);
        sign_with(keys, &self.apex, owner, rtype, ttl, &[rdata], v, out)?;
        Ok(v)
    }
}

/// Does the apex already hold exactly these RRsets?
fn apex_has(zone: &Zone, sets: &[(u16, u32, Vec<Vec<u8>>)]) -> bool {
    sets.iter().all(|(t, ttl, want)| {
        let have: Vec<Vec<u8>> = zone
            .apex_node()
            .rrset(*t)
            .map(|s| {
                if s.ttl != *ttl {
                    return vec![];
                }
                s.records().map(|r| r.to_wire()).collect()
            })
            .unwrap_or_default();
        have == *want
    })
}

/// The same keys, in the same roles, with the same settings.
fn same_keys(a: &ZoneDnssec, b: &ZoneDnssec) -> bool {
    let tags = |d: &ZoneDnssec| {
        let mut v: Vec<(u16, u8, bool)> = d
            .keys
            .iter()
            .map(|k| (k.tag, k.dnskey.algorithm, true))
            .chain(d.publish.iter().map(|k| (k.tag, k.dnskey.algorithm, false)))
            .collect();
        v.sort_unstable();
        v
    };
    tags(a) == tags(b) && a.validity == b.validity && a.refresh == b.refresh
}

/// Prepares every signed zone at load: puts the key RRsets at its apex,
/// refuses a `some K` pool whose C(n, K) sets exceed `max_subsets` (at the
/// name's line), and signs the static RRsets, reusing `prev`'s signatures
/// for a zone kept unchanged with the same keys.
pub fn build_signers(
    src: &crate::config::Source,
    zones: &mut [Arc<Zone>],
    dnssec: &[Option<Arc<ZoneDnssec>>],
    bindings: &[Binding],
    pools: &[crate::pool::Pool],
    name_spans: &[std::ops::Range<usize>],
    prev: Option<&Engine>,
) -> Result<Vec<Option<Box<ZoneSigner>>>, crate::error::LocatedError> {
    let now = unix_now();
    let mut out = Vec::with_capacity(zones.len());
    for (zi, cfg) in dnssec.iter().enumerate() {
        let Some(cfg) = cfg else {
            out.push(None);
            continue;
        };
        // `some K` bounds, for names in this zone.
        for (bi, b) in bindings.iter().enumerate() {
            let Mode::Some(k) = b.mode else { continue };
            let in_zone = zones[zi].nodes().any(|n| n.dynamic() == Some(bi as u32));
            if !in_zone {
                continue;
            }
            for p in binding_pools(b) {
                for v6 in [false, true] {
                    let n = pools[p].family(v6).len();
                    let c = choose(n, k as usize);
                    if n > k as usize && c > cfg.max_subsets {
                        return Err(src.err(
                            name_spans[bi].clone(),
                            format!(
                                "{}: a signed `some {k}` answer over pool {} ({n} {} members) needs {c} signed RRsets, more than the zone's dnssec max_subsets ({}); raise max_subsets, lower count or split the pool",
                                b.name,
                                pools[p].name,
                                if v6 { "IPv6" } else { "IPv4" },
                                cfg.max_subsets
                            ),
                        ));
                    }
                }
            }
        }
        let origin = zones[zi].origin.clone();
        let ttl = zones[zi]
            .apex_node()
            .rrset(TYPE_SOA)
            .map_or(3600, |s| s.ttl);
        let sets = apex_sets(cfg, ttl);
        let kept = apex_has(&zones[zi], &sets);
        if !kept {
            zones[zi] = Arc::new(zones[zi].with_apex_sets(&sets));
        }
        let reuse = prev.and_then(|p| {
            let pz = p.zone_index.get(&origin).copied()?;
            let ps = p.signer(pz)?;
            (kept && Arc::ptr_eq(&p.zones[pz], &zones[zi]) && same_keys(&ps.cfg, cfg))
                .then(|| ps.statics.load_full())
        });
        let statics = match reuse {
            Some(s) => s,
            None => {
                let keys = Keys::of(&origin, cfg);
                let st = sign_static(&zones[zi], &keys, now).map_err(|e| {
                    src.err(
                        0..0,
                        format!("zone {}: signing failed: {e}", zones[zi].origin_text),
                    )
                })?;
                tracing::debug!(
                    "zone {}: signed {} RRsets in {} ms",
                    zones[zi].origin_text,
                    st.count,
                    st.ms
                );
                Arc::new(st)
            }
        };
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        out.push(Some(Box::new(ZoneSigner {
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            online: Default::default(),
            apex: origin.clone(),
            cfg: cfg.clone(),
            zsk: cfg.zone_keys().into_iter().cloned().collect(),
            statics: ArcSwap::new(statics),
            dynamic: ArcSwap::new(Arc::new(DynSigs::default())),
        })));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::dynamic::subsets;
    use super::*;

    #[test]
    fn subsets_enumerate_c_n_k() {
        let mut v = Vec::new();
        subsets(5, 2, &mut |s| v.push(s.to_vec()));
        assert_eq!(v.len(), 10);
        assert_eq!(v[0], vec![0, 1]);
        assert_eq!(v[9], vec![3, 4]);
        assert_eq!(choose(5, 2), 10);
        assert_eq!(choose(64, 8), 4_426_165_368);
        let mut one = Vec::new();
        subsets(3, 3, &mut |s| one.push(s.to_vec()));
        assert_eq!(one, vec![vec![0, 1, 2]]);
    }
}
