//! The dynamic RRsets a signed zone serves: which member sets a pool or
//! geo name can answer with (`all`/`rotate` usable sets, one member each
//! for `one`, p2c and sticky, every K-subset for `some K`), their keys
//! (order-free sums of the members' hashes) and the table of their
//! signatures with the last signed set per (node, pool, family) as
//! fallback.

use super::*;

/// One signed dynamic RRset: which (node, pool, family) and which members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DynKey {
    /// The bound name's node in the zone.
    pub node: u32,
    /// Index into `Engine::pools`.
    pub pool: u32,
    /// AAAA (true) or A.
    pub v6: bool,
    /// The set of members: the wrapping sum of their keys ([`set_key`]).
    pub set: u64,
}

/// A set of members, order-free: the wrapping sum of their own hashes.
#[inline]
pub fn set_key(members: &[Member], idx: &[u16]) -> u64 {
    idx.iter()
        .fold(0u64, |a, &i| a.wrapping_add(members[i as usize].key()))
}

/// A (node, pool, family)'s last signed set, served while its current one
/// is not signed yet.
#[derive(Debug, Clone)]
pub struct Fallback {
    /// The members, as indices into the pool's family.
    pub members: Box<[u16]>,
    pub(super) span: (u32, u32),
}

/// Signatures of a zone's dynamic RRsets.
#[derive(Debug, Default)]
pub struct DynSigs {
    /// Each set's RRSIGs (a span of `data`) and their expiration.
    pub(super) map: HashMap<DynKey, (u32, u32, u32), Fx>,
    pub(super) fallback: HashMap<(u32, u32, bool), Fallback, Fx>,
    pub(super) data: Vec<u8>,
    /// The members' state these were made for ([`Engine::member_state`]).
    pub state: u64,
    /// Unix seconds at which to sign again.
    pub refresh_at: u64,
    /// Signatures made by the last refresh (the others were kept).
    pub made: usize,
    /// The earliest expiration of these signatures (Unix seconds).
    pub earliest: u64,
    /// Time the last refresh took, in milliseconds.
    pub ms: u64,
}

impl DynSigs {
    /// Sets signed in all.
    pub fn count(&self) -> usize {
        self.map.len()
    }

    /// The RRSIGs of one set.
    #[inline]
    pub fn get(&self, k: &DynKey) -> Option<Sigs<'_>> {
        self.map
            .get(k)
            .map(|&(a, b, _)| Sigs(&self.data[a as usize..b as usize]))
    }

    /// The last signed set of (node, pool, family), with its RRSIGs.
    pub fn fallback(&self, node: u32, pool: u32, v6: bool) -> Option<(&[u16], Sigs<'_>)> {
        self.fallback.get(&(node, pool, v6)).map(|f| {
            (
                &f.members[..],
                Sigs(&self.data[f.span.0 as usize..f.span.1 as usize]),
            )
        })
    }
}

/// Binomial coefficient, saturating.
pub fn choose(n: usize, k: usize) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * (n - i) as u128 / (i + 1) as u128;
        if c > u64::MAX as u128 {
            return u64::MAX;
        }
    }
    c as u64
}

/// Every K-subset of 0..n, in lexicographic order.
pub(super) fn subsets(n: usize, k: usize, f: &mut impl FnMut(&[u16])) {
    if k == 0 || k > n {
        return;
    }
    let mut c: Vec<u16> = (0..k as u16).collect();
    loop {
        f(&c);
        let mut i = k;
        loop {
            if i == 0 {
                return;
            }
            i -= 1;
            if (c[i] as usize) < n - k + i {
                break;
            }
            if i == 0 {
                return;
            }
        }
        c[i] += 1;
        for j in i + 1..k {
            c[j] = c[j - 1] + 1;
        }
    }
}

/// The pools a binding can answer from.
pub fn binding_pools(b: &Binding) -> Vec<usize> {
    match &b.target {
        Target::Pool(p) => vec![*p],
        Target::Geo(map) => {
            let mut v: Vec<usize> = Vec::new();
            for &d in map.used_decisions() {
                for &p in map.decision(d) {
                    if !v.contains(&p) {
                        v.push(p);
                    }
                }
            }
            v
        }
    }
}

/// The member sets of one (binding, pool, family) answers can hold now,
/// the first being the fallback.
pub(super) fn candidate_sets(
    e: &Engine,
    b: &Binding,
    members: &[Member],
    limit: u64,
) -> Vec<Vec<u16>> {
    let n = members.len().min(MAX_MEMBERS);
    let pick = |f: &dyn Fn(&Member) -> bool| -> Vec<u16> {
        (0..n as u16).filter(|&i| f(&members[i as usize])).collect()
    };
    let usable = pick(&|m| m.usable());
    let all: Vec<u16> = (0..n as u16).collect();
    let kept = pick(&|m| !e.health.is_drained(m.health));
    let mut out: Vec<Vec<u16>> = Vec::new();
    let add = |s: Vec<u16>, out: &mut Vec<Vec<u16>>| {
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    };
    let fallback_first = if usable.is_empty() {
        all.clone()
    } else {
        usable.clone()
    };
    match b.mode {
        Mode::All | Mode::Rotate => {
            add(fallback_first, &mut out);
            add(usable, &mut out);
            if b.when_all_down == AllDown::All {
                add(kept, &mut out);
                add(all, &mut out);
            }
        }
        Mode::One | Mode::P2c => {
            let first = fallback_first[0];
            add(vec![first], &mut out);
            for i in 0..n as u16 {
                add(vec![i], &mut out);
            }
        }
        Mode::Some(k) => {
            let k = k as usize;
            if n <= k {
                add(all, &mut out);
            } else {
                let first: Vec<u16> = fallback_first.iter().copied().take(k).collect();
                add(first, &mut out);
                for s in [usable, kept] {
                    if s.len() < k {
                        add(s, &mut out);
                    }
                }
                if choose(n, k) <= limit {
                    // Subsets are distinct: only the few sets above can
                    // repeat one.
                    let before = out.len();
                    subsets(n, k, &mut |s| {
                        if !out[..before].iter().any(|o| o == s) {
                            out.push(s.to_vec());
                        }
                    });
                }
            }
        }
    }
    out
}
