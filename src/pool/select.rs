//! Picking members for one answer, by mode (all, rotate, one, some): a
//! shuffle (Fisher–Yates), smooth weighted round robin (nginx), a weighted
//! pick, and weighted sampling without replacement. The caller passes its
//! [`Selector`] in, and a predicate that says which members are usable.
//!
//! Invariant: after a selector's first rotate answer for a (slot, pool) in a
//! generation, picking allocates nothing.

use super::{Member, Mode, MAX_MEMBERS};

/// The state one answering thread keeps for picking: its random generator
/// and its rotation cursors. Each thread owns one, so picking takes no lock
/// and touches no shared cache line; tests seed one to get exact results.
pub struct Selector {
    rng: fastrand::Rng,
    generation: u64,
    /// Smooth weighted round robin counters: per rotation slot, one entry per
    /// pool answered through it (a geo name's slot sees several pools).
    cursors: Vec<Vec<Cursor>>,
}

/// Rotation state of one pool family at one slot.
struct Cursor {
    /// Which member list (its address; stable until the next reload).
    members: *const Member,
    current: Vec<i64>,
}

impl Selector {
    /// A selector seeded from the process's generator.
    pub fn new() -> Selector {
        Selector::with_rng(fastrand::Rng::new())
    }

    /// A selector with a given generator (tests: a fixed seed).
    pub fn with_rng(rng: fastrand::Rng) -> Selector {
        Selector {
            rng,
            generation: u64::MAX,
            cursors: Vec::new(),
        }
    }
}

impl Default for Selector {
    fn default() -> Selector {
        Selector::new()
    }
}

/// Pick members of `members` by `mode` into `out` (indices into `members`).
/// `up` says which members may be used. `slot` names this name and family's
/// rotation cursor; `generation` resets cursors after a reload.
pub fn select(
    s: &mut Selector,
    members: &[Member],
    mode: Mode,
    up: &impl Fn(&Member) -> bool,
    slot: usize,
    generation: u64,
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
            if s.generation != generation {
                s.generation = generation;
                s.cursors.clear();
            }
            if s.cursors.len() <= slot {
                s.cursors.resize_with(slot + 1, Vec::new);
            }
            // Allocated once per (slot, pool) and generation: a geo name
            // whose clients get different pools keeps one cursor per pool.
            let at = &mut s.cursors[slot];
            let k = match at.iter().position(|c| c.members == members.as_ptr()) {
                Some(k) => k,
                None => {
                    at.push(Cursor {
                        members: members.as_ptr(),
                        current: vec![0; members.len()],
                    });
                    at.len() - 1
                }
            };
            let cur = &mut at[k].current;
            // Smooth weighted round robin (nginx): the first member.
            let mut total = 0i64;
            let mut best = 0usize;
            for (k, &c) in cand[..n].iter().enumerate() {
                let w = members[c as usize].weight as i64;
                cur[c as usize] += w;
                total += w;
                if cur[c as usize] > cur[cand[best] as usize] {
                    best = k;
                }
            }
            cur[cand[best] as usize] -= total;
            for i in 0..n {
                out[i] = cand[(best + i) % n];
            }
            n
        }
    }
}

/// Index into `cand` chosen with probability proportional to weight.
fn weighted_pick(members: &[Member], cand: &[u16], rng: &mut fastrand::Rng) -> usize {
    let total: u64 = cand
        .iter()
        .map(|&c| members[c as usize].weight as u64)
        .sum();
    let mut r = rng.u64(..total);
    for (i, &c) in cand.iter().enumerate() {
        let w = members[c as usize].weight as u64;
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
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        let firsts: Vec<u16> = (0..7)
            .map(|_| {
                select(&mut sel, &m, Mode::Rotate, &|_| true, 0, 7, &mut out);
                out[0]
            })
            .collect();
        assert_eq!(firsts, vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn pools_sharing_a_slot_rotate_independently() {
        // A geo name uses one slot for every pool its clients are sent to.
        let a = members(&[5, 1, 1]);
        let b = members(&[1, 1]);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        let mut fa = Vec::new();
        let mut fb = Vec::new();
        for _ in 0..7 {
            select(&mut sel, &a, Mode::Rotate, &|_| true, 3, 9, &mut out);
            fa.push(out[0]);
            select(&mut sel, &b, Mode::Rotate, &|_| true, 3, 9, &mut out);
            fb.push(out[0]);
        }
        assert_eq!(fa, vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(fb, vec![0, 1, 0, 1, 0, 1, 0]);
        // A new generation (a reload) starts over.
        select(&mut sel, &a, Mode::Rotate, &|_| true, 3, 10, &mut out);
        assert_eq!(out[..3], [0, 1, 2]);
    }

    #[test]
    fn rotate_skips_members_that_are_down() {
        let m = members(&[1, 1, 1]);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        let up = |x: &Member| x.health != 1;
        let firsts: Vec<u16> = (0..4)
            .map(|_| {
                assert_eq!(select(&mut sel, &m, Mode::Rotate, &up, 0, 11, &mut out), 2);
                out[0]
            })
            .collect();
        assert_eq!(firsts, vec![0, 2, 0, 2]);
    }

    #[test]
    fn some_is_distinct() {
        let m = members(&[1, 2, 3, 4]);
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
        for _ in 0..1000 {
            let n = select(&mut sel, &m, Mode::Some(2), &|_| true, 0, 1, &mut out);
            assert_eq!(n, 2);
            assert_ne!(out[0], out[1]);
        }
    }
}
