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
//! Invariants: allocates nothing (members are picked into a fixed array and
//! copied from their pre-rendered records); writes only through the
//! `Writer`; a pool answer has scope 0, and the answer keeps the longest
//! scope of the geo decisions in it.

use std::net::IpAddr;

use super::lookup::{Ctx, LookupRc};
use super::Owner;
use crate::engine::{AllDown, Binding, Target};
use crate::geo::special::special_block;
use crate::pool::{select, MAX_MEMBERS, RR_TTL_AT, SHARE_ONE};
use meridian_wire::ecs::{ClientSubnet, Scope};
use meridian_wire::writer::Writer;

impl Ctx<'_, '_> {
    /// A pool or geo answer.
    pub(super) fn dynamic(
        &mut self,
        w: &mut Writer,
        b: u32,
        binding: &Binding,
        owner: Owner,
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
            return LookupRc::NoError;
        }
        let mut out = [0u16; MAX_MEMBERS];
        let (pool_idx, n, ttl) = match chosen {
            Some(p) => {
                let members = e.pools[p].family(v6);
                let rotation = e.pools[p].rotation(v6);
                let n = select(self.sel, members, rotation, binding.mode, &up, &mut out);
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
                    let mut n = select(self.sel, members, rotation, binding.mode, &kept, &mut out);
                    if n == 0 {
                        n = select(
                            self.sel,
                            members,
                            rotation,
                            binding.mode,
                            &|_| true,
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
