//! Picking members for one answer, by mode (all, rotate, one, some): a
//! shuffle (Fisher–Yates), smooth weighted round robin (nginx), a weighted
//! pick, and weighted sampling without replacement. The caller passes its
//! [`Selector`] in, and a predicate that says which members are usable.
//!
//! Weights are the members' effective weights ([`Member::effective`], one
//! relaxed load each). If every usable member has effective weight 0, they
//! are picked as if the weights were equal: weights never empty an answer.
//!
//! Picking allocates nothing and takes no lock; `rotate` reads the pool's
//! order in force (lock-free, [`Rotation::with_order`]) and does one relaxed
//! atomic add on its shared counter.

use super::{Member, Mode, Rotation, MAX_MEMBERS};

/// The state one answering thread keeps for picking: its random generator.
/// Each thread owns one, so picking takes no lock; tests seed one to get
/// exact results.
pub struct Selector {
    rng: fastrand::Rng,
}

impl Selector {
    /// A selector seeded from the process's generator.
    pub fn new() -> Selector {
        Selector::with_rng(fastrand::Rng::new())
    }

    /// A selector with a given generator (tests: a fixed seed).
    pub fn with_rng(rng: fastrand::Rng) -> Selector {
        Selector { rng }
    }

    /// A uniform number in [0, 1) (spillover's split).
    #[inline]
    pub fn unit(&mut self) -> f64 {
        self.rng.f64()
    }
}

impl Default for Selector {
    fn default() -> Selector {
        Selector::new()
    }
}

/// Pick members of `members` by `mode` into `out` (indices into `members`).
/// `up` says which members may be used; `rotation` is the family's order
/// (`Pool::rotation`), used by `rotate`.
pub fn select(
    s: &mut Selector,
    members: &[Member],
    rotation: &Rotation,
    mode: Mode,
    up: &impl Fn(&Member) -> bool,
    out: &mut [u16; MAX_MEMBERS],
) -> usize {
    let mut cand = [0u16; MAX_MEMBERS];
    let mut n = 0;
    for (i, m) in members.iter().enumerate().take(MAX_MEMBERS) {
        if up(m) {
            cand[n] = i as u16;
            n += 1;
        }
    }
    if n == 0 {
        return 0;
    }
    let rng = &mut s.rng;
    match mode {
        Mode::All => {
            out[..n].copy_from_slice(&cand[..n]);
            for i in (1..n).rev() {
                let j = rng.usize(..=i);
                out.swap(i, j);
            }
            n
        }
        Mode::One => {
            out[0] = cand[weighted_pick(members, &cand[..n], rng)];
            1
        }
        Mode::Some(k) => {
            let k = (k as usize).min(n);
            let mut pool = cand;
            let mut left = n;
            for o in out.iter_mut().take(k) {
                let i = weighted_pick(members, &pool[..left], rng);
                *o = pool[i];
                pool[i] = pool[left - 1];
                left -= 1;
            }
            for i in (1..k).rev() {
                let j = rng.usize(..=i);
                out.swap(i, j);
            }
            k
        }
        Mode::Rotate => {
            let lead = rotate_lead(rotation, &cand[..n], members.len());
            for i in 0..n {
                out[i] = cand[(lead + i) % n];
            }
            n
        }
    }
}

/// The index into `cand` (the `n` usable members, of `len`) of the next
/// leader in the shared smooth weighted round robin order; when members
/// are down, the next one in the order that is up (so the others keep
/// their relative shares).
#[inline]
fn rotate_lead(rotation: &Rotation, cand: &[u16], len: usize) -> usize {
    rotation.with_order(|order| rotate_in(rotation, order, cand, len))
}

#[inline]
fn rotate_in(rotation: &Rotation, order: &[u16], cand: &[u16], len: usize) -> usize {
    let n = cand.len();
    let at = rotation.take(order);
    if n == len || order.is_empty() {
        return match order.get(at) {
            Some(&m) if (m as usize) < n => m as usize,
            _ => 0,
        };
    }
    let mut is_up = [0u64; MAX_MEMBERS / 64];
    for &c in cand {
        is_up[c as usize / 64] |= 1 << (c % 64);
    }
    let pick = (0..order.len())
        .map(|k| order[(at + k) % order.len()] as usize)
        .find(|&m| m < MAX_MEMBERS && is_up[m / 64] & (1 << (m % 64)) != 0);
    match pick {
        Some(p) => cand.iter().position(|&c| c as usize == p).unwrap_or(0),
        // Only members of weight 0 are up: they lead in turn.
        None => at % n,
    }
}

/// Index into `cand` chosen with probability proportional to effective
/// weight; uniformly if every candidate has weight 0.
fn weighted_pick(members: &[Member], cand: &[u16], rng: &mut fastrand::Rng) -> usize {
    let total: u64 = cand.iter().map(|&c| members[c as usize].effective()).sum();
    if total == 0 {
        return rng.usize(..cand.len());
    }
    let mut r = rng.u64(..total);
    for (i, &c) in cand.iter().enumerate() {
        let w = members[c as usize].effective();
        if r < w {
            return i;
        }
        r -= w;
    }
    cand.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn members(weights: &[u32]) -> Vec<Member> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Member::new(IpAddr::from([192, 0, 2, i as u8 + 1]), w, i as u32))
            .collect()
    }

    #[test]
    fn smooth_weighted_round_robin_order() {
        let m = members(&[5, 1, 1]);
        let rot = Rotation::new(&m);
        assert_eq!(rot.order()[..], [0, 0, 1, 0, 2, 0, 0]);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        let firsts: Vec<u16> = (0..14)
            .map(|_| {
                select(&mut sel, &m, &rot, Mode::Rotate, &|_| true, &mut out);
                out[0]
            })
            .collect();
        assert_eq!(firsts, [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn selectors_share_the_pool_order() {
        // Two threads' selectors, one pool: one sequence between them.
        let m = members(&[5, 1, 1]);
        let rot = Rotation::new(&m);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sels = [
            Selector::with_rng(fastrand::Rng::with_seed(1)),
            Selector::with_rng(fastrand::Rng::with_seed(2)),
        ];
        let firsts: Vec<u16> = (0..7)
            .map(|i| {
                select(
                    &mut sels[i % 2],
                    &m,
                    &rot,
                    Mode::Rotate,
                    &|_| true,
                    &mut out,
                );
                out[0]
            })
            .collect();
        assert_eq!(firsts, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn large_weights_are_reduced_and_scaled() {
        let rot = Rotation::new(&members(&[4000, 2000, 2000]));
        assert_eq!(rot.order()[..], [0, 1, 2, 0]);
        let rot = Rotation::new(&members(&[65535, 65534, 3]));
        assert!(rot.order().len() as u64 <= crate::pool::MAX_PERIOD + 3);
        assert!(rot.order().contains(&2));
    }

    #[test]
    fn rotate_skips_members_that_are_down() {
        let m = members(&[1, 1, 1]);
        let rot = Rotation::new(&m);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        let up = |x: &Member| x.health != 1;
        let firsts: Vec<u16> = (0..6)
            .map(|_| {
                assert_eq!(select(&mut sel, &m, &rot, Mode::Rotate, &up, &mut out), 2);
                assert_ne!(out[1], 1);
                out[0]
            })
            .collect();
        // Order 0 1 2: the turn of member 1 goes to the next one up.
        assert_eq!(firsts, [0, 2, 2, 0, 2, 2]);
    }

    fn pool(weights: &[u32]) -> crate::pool::Pool {
        let mut p = crate::pool::Pool {
            name: "p".into(),
            v4: members(weights),
            v6: Vec::new(),
            location: None,
            min_up: 1.0,
            rotation: Default::default(),
            policy: Default::default(),
            gate: Default::default(),
            report: Default::default(),
        };
        p.seal();
        p
    }

    /// Publish weights `f(member)` × configured, every member usable.
    fn reweigh(p: &crate::pool::Pool, f: impl Fn(&Member) -> f64) -> bool {
        let w: Vec<(u64, bool)> =
            p.v4.iter()
                .map(|m| {
                    let e = (f64::from(m.weight) * f(m) * crate::pool::WEIGHT_UNIT as f64) as u64;
                    (if f(m) > 0.0 { e.max(1) } else { 0 }, true)
                })
                .collect();
        p.publish(false, &w, p.gate(false))
    }

    #[test]
    fn reweigh_publishes_weights_and_order() {
        let p = pool(&[1, 1]);
        assert_eq!(p.rotation(false).order()[..], [0, 1]);
        // Runtime factor 3 on member 0: 3:1, smooth.
        assert!(reweigh(&p, |m| if m.health == 0 { 3.0 } else { 1.0 }));
        assert_eq!(p.v4[0].effective(), 3 * crate::pool::WEIGHT_UNIT);
        assert_eq!(p.rotation(false).order()[..], [0, 0, 1, 0]);
        assert!(!reweigh(&p, |m| if m.health == 0 { 3.0 } else { 1.0 }));
        // Factor 0: never leads, never picked while another is usable.
        reweigh(&p, |m| if m.health == 0 { 0.0 } else { 1.0 });
        assert_eq!(p.rotation(false).order()[..], [1]);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(3));
        for mode in [Mode::One, Mode::Rotate] {
            for _ in 0..200 {
                let rot = p.rotation(false);
                select(&mut sel, &p.v4, rot, mode, &|_| true, &mut out);
                assert_eq!(out[0], 1, "{mode}");
            }
        }
        // Only weight-0 members usable: picked as if equal, never nothing.
        let only0 = |m: &Member| m.health == 0;
        for mode in [Mode::One, Mode::Rotate, Mode::Some(2)] {
            let rot = p.rotation(false);
            assert_eq!(select(&mut sel, &p.v4, rot, mode, &only0, &mut out), 1);
            assert_eq!(out[0], 0);
        }
        // Every member at 0: equal shares.
        reweigh(&p, |_| 0.0);
        assert_eq!(p.rotation(false).order()[..], [0, 1]);
        let mut seen = [0; 2];
        for _ in 0..1000 {
            select(
                &mut sel,
                &p.v4,
                p.rotation(false),
                Mode::One,
                &|_| true,
                &mut out,
            );
            seen[out[0] as usize] += 1;
        }
        assert!(seen[0] > 400 && seen[1] > 400, "{seen:?}");
        // Back to the configured weights: the configured period again.
        let p = pool(&[2, 1]);
        reweigh(&p, |m| if m.health == 1 { 2.0 } else { 1.0 });
        assert_eq!(p.rotation(false).order()[..], [0, 1]);
        reweigh(&p, |_| 1.0);
        assert_eq!(p.rotation(false).order()[..], [0, 1, 0]);
    }

    #[test]
    fn some_is_distinct() {
        let m = members(&[1, 2, 3, 4]);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        for _ in 0..1000 {
            let n = select(
                &mut sel,
                &m,
                &Rotation::default(),
                Mode::Some(2),
                &|_| true,
                &mut out,
            );
            assert_eq!(n, 2);
            assert_ne!(out[0], out[1]);
        }
    }
}
