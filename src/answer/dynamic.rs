//! Pool and geo answers: the addresses of a name bound to a pool or a geo
//! map. A geo map's decision block gives the ordered failover list and the
//! ECS scope resolvers cache by (RFC 7871 §7.2.1, §7.3): the block's prefix
//! length; 0 for a uniform map or when no usable ECS address came (§7.1.2);
//! the whole special block for a special-purpose ECS address (§10).
//!
//! Failover: the first pool in the list whose family is up (its published
//! filter decision, see `balance`: `min_up` usable members) answers; with
//! `spillover`, each pool keeps min(1, healthy share × factor) of what
//! reaches it and the rest goes on down the list, split at random per query
//! (the decision block, and so the scope, stays the same). A degraded
//! answer (a later pool, members out, or a pool in panic) has the degraded
//! TTL. With none up, `when_all_down` decides: every member but the
//! drained ones, NODATA with the degraded TTL, or SERVFAIL.
//!
//! Sticky names (`one`/`some` with `sticky = true`) pick by the client's
//! block ([`sticky_block`]): the block of the sticky prefix holding the ECS
//! address, or else the resolver's address. An answer decided on an ECS
//! block holds only inside it (and outside special space), one decided on
//! the resolver for a special-purpose ECS address only inside that special
//! block, so the scope is the longer of that and the geo decision's (RFC
//! 7871 §7.2.1: SCOPE covers every address that gets this answer, and the
//! blocks handed out never overlap); 0 only without a usable ECS subnet.
//!
//! Invariants: allocates nothing (members are picked into a fixed array and
//! copied from their pre-rendered records); writes only through the
//! `Writer`; a pool answer has scope 0 (a sticky one: its client block or
//! special block), and the answer keeps the longest scope of the decisions
//! in it.

use std::net::IpAddr;
use std::num::NonZeroU64;

use super::lookup::{Ctx, LookupRc};
use super::signing::{put_sigs, Deny};
use super::Owner;
use crate::engine::{AllDown, Binding, Target};
use crate::geo::special::{public_len, special_block};
use crate::pool::sticky::block_key;
use crate::pool::{select, Sticky, MAX_MEMBERS, RR_TTL_AT, SHARE_ONE};
use meridian_wire::ecs::{ClientSubnet, Scope};
use meridian_wire::writer::{Section, Writer};

impl<'e, const S: bool> Ctx<'e, '_, S> {
    /// A pool or geo answer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dynamic(
        &mut self,
        w: &mut Writer,
        b: u32,
        binding: &Binding,
        node: crate::zone::Node<'e>,
        owner: Owner<'e>,
        qtype: u16,
        v6: bool,
    ) -> LookupRc {
        let e = self.engine;
        let up = |m: &crate::pool::Member| m.usable();
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
        // A sticky name's block, and the scope it needs (0 without ECS).
        let (block, scope) = match binding.sticky {
            Some(st) => {
                let (key, len) = sticky_block(self.ecs, self.src, st);
                (Some(key), scope.max(Scope::new(len)))
            }
            None => (None, scope),
        };
        // Pools that have this family at all, in failover order; each
        // pool's filter decision is published (`balance`), one load each.
        let mut chosen = None;
        let mut degraded = false;
        let mut any_family = false;
        if let Some(factor) = binding.spillover {
            // Spillover (Envoy's priority levels): pool i keeps min(1,
            // healthy share × factor) of what reaches it, the rest goes on
            // down the list; a random split per query inside one decision
            // block, so the block (and its scope) never changes.
            let keep = |g: crate::pool::Gate| {
                if g.up {
                    (f64::from(g.share) / f64::from(SHARE_ONE) * factor).min(1.0)
                } else {
                    0.0
                }
            };
            let mut rest = 1.0;
            for &p in list {
                let pool = &e.pools[p];
                if !pool.family(v6).is_empty() {
                    any_family = true;
                    rest -= rest * keep(pool.gate(v6));
                }
            }
            let served = 1.0 - rest;
            if served > 0.0 {
                // Normalised when the list as a whole is short (Envoy does).
                let mut r = self.sel.unit() * served;
                let mut left = 1.0;
                for (k, &p) in list.iter().enumerate() {
                    let pool = &e.pools[p];
                    if pool.family(v6).is_empty() {
                        continue;
                    }
                    let g = pool.gate(v6);
                    let share = left * keep(g);
                    left -= share;
                    if share > 0.0 {
                        // The last pool with a share takes what rounding
                        // leaves over.
                        degraded =
                            k > 0 || g.panic || usize::from(g.usable) < pool.family(v6).len();
                        chosen = Some(p);
                        if r < share {
                            break;
                        }
                    }
                    r -= share;
                }
            }
        } else {
            for (k, &p) in list.iter().enumerate() {
                let pool = &e.pools[p];
                if pool.family(v6).is_empty() {
                    continue;
                }
                any_family = true;
                let g = pool.gate(v6);
                if g.up {
                    degraded = k > 0 || g.panic || usize::from(g.usable) < pool.family(v6).len();
                    chosen = Some(p);
                    break;
                }
            }
        }
        if !any_family {
            self.negative(w);
            self.nodata(w, node, owner, qtype, false);
            return LookupRc::NoError;
        }
        let mut out = [0u16; MAX_MEMBERS];
        let (pool_idx, n, ttl) = match chosen {
            Some(p) => {
                let members = e.pools[p].family(v6);
                let rotation = e.pools[p].rotation(v6);
                let mode = binding.mode;
                let n = select(self.sel, members, rotation, mode, &up, block, &mut out);
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
                    let rotation = e.pools[p].rotation(v6);
                    // Regardless of health, but not members the operator
                    // drained (unless that leaves none).
                    let kept = |m: &crate::pool::Member| !e.health.is_drained(m.health);
                    let mode = binding.mode;
                    let mut n = select(self.sel, members, rotation, mode, &kept, block, &mut out);
                    if n == 0 {
                        let all = |_: &crate::pool::Member| true;
                        n = select(self.sel, members, rotation, mode, &all, block, &mut out);
                    }
                    (p, n, binding.degraded_ttl)
                }
                AllDown::Empty => {
                    // Resolvers cache this NODATA for every client (RFC 7871
                    // §7.4): keep it short so repair shows quickly.
                    self.negative_ttl(w, binding.degraded_ttl);
                    self.nodata(w, node, owner, qtype, true);
                    return LookupRc::NoError;
                }
                AllDown::Servfail => {
                    self.scope = Scope::GLOBAL;
                    return LookupRc::ServFail;
                }
            },
        };
        let members = e.pools[pool_idx].family(v6);
        let ttl_n = ttl;
        let ttl = ttl.to_be_bytes();
        let mark = w.mark();
        put_members(w, members, &out[..n], owner, ttl);
        if let (true, Some(s)) = (S, self.signer) {
            // The RRSIGs of exactly this set of members; until a new set
            // is signed (a refresh just changed it), the last signed one.
            let sigs = s.dynamic.load();
            let key = crate::engine::signed::DynKey {
                node: node.id(),
                pool: pool_idx as u32,
                v6,
                set: crate::engine::signed::set_key(members, &out[..n]),
            };
            match sigs.get(&key) {
                Some(list) => put_sigs(w, owner, Section::Answer, ttl_n, list),
                None => {
                    if let Some((set, list)) = sigs.fallback(node.id(), pool_idx as u32, v6) {
                        w.rewind(mark);
                        put_members(w, members, set, owner, ttl);
                        put_sigs(w, owner, Section::Answer, ttl_n, list);
                    }
                }
            }
        }
        self.scope = self.scope.max(scope);
        self.pool = Some((b, pool_idx as u32));
        LookupRc::NoError
    }

    /// NODATA at a pool or geo name: its static types and, unless no
    /// member answers (`none_up`), its address families, but never the
    /// query's type.
    fn nodata(
        &mut self,
        w: &mut Writer,
        node: crate::zone::Node<'e>,
        owner: Owner<'e>,
        qtype: u16,
        none_up: bool,
    ) {
        if !S {
            return;
        }
        let extra = if none_up { [0, 0] } else { self.families(node) };
        self.deny(w, owner, Deny::NoData(Some(node), extra), qtype);
    }
}

/// Copy the pre-rendered records of `members[set]`, owned by `owner`,
/// with the TTL patched in (answer section).
#[inline(always)]
fn put_members(
    w: &mut Writer,
    members: &[crate::pool::Member],
    set: &[u16],
    owner: Owner,
    ttl: [u8; 4],
) {
    for &i in set {
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

/// A sticky name's client block: its hash, and the scope the answer then
/// needs (RFC 7871 §7.2.1: every client inside the scope gets this answer).
///
/// - ECS with SOURCE > 0 and a globally routable address: the block of
///   the sticky prefix holding that address is hashed. With a SOURCE
///   shorter than the prefix only the known bits are hashed (the rest are
///   zero, as on the wire): the answer is that of the first block of the
///   subnet, and the scope, longer than SOURCE, is a hint (resolvers cache
///   it at SOURCE, §7.3.1). The scope is the prefix, or, when the block
///   holds special-purpose space (a prefix shorter than /24 or /32), the
///   largest special-free block around the address ([`public_len`]): so the
///   blocks meridian hands out stay one partition whatever SOURCE resolvers
///   send, and never overlap a special block decided otherwise (§7.2.1).
/// - ECS address in special-purpose space: ignored (§10); the resolver's
///   address masked to the sticky prefix is hashed, and the scope is the
///   whole special block, as for geo, since that answer holds for every
///   client of the block behind this resolver. Never 0: resolvers would
///   cache it for every client.
/// - No ECS or SOURCE 0: the resolver's block is hashed, scope 0 (§7.1.2;
///   without ECS no option is echoed at all).
///
/// Shared with `meridian lookup`. No allocation.
#[inline]
pub fn sticky_block(ecs: Option<ClientSubnet>, src: IpAddr, st: Sticky) -> (NonZeroU64, u8) {
    let resolver = || {
        let src = src.to_canonical();
        let len = st.prefix_for(src);
        block_key(src, len, len)
    };
    match ecs {
        Some(c) if c.source() > 0 => match special_block(c.addr()) {
            None => {
                let len = st.prefix_for(c.addr());
                (
                    block_key(c.addr(), len, c.source()),
                    public_len(c.addr(), len),
                )
            }
            Some(blk) => (resolver(), blk.prefix_len()),
        },
        _ => (resolver(), 0),
    }
}
