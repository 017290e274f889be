//! Address pools and the answer modes that pick from them: the whole set
//! shuffled (`all`), rotated by smooth weighted round robin (`rotate`), one
//! weighted pick (`one`) or K weighted picks without replacement (`some`).
//!
//! Randomness and rotation state are per thread: each worker has its own
//! generator and its own rotation cursors, so no lock or shared cache line is
//! touched per query. With several workers, each one rotates on its own.

use std::cell::RefCell;
use std::net::IpAddr;

/// Most members of one family a pool may hold (answers are built on the stack).
pub const MAX_MEMBERS: usize = 256;
/// Most members `some` may return.
pub const MAX_SOME: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    All,
    Rotate,
    One,
    Some(u8),
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::All => f.write_str("all"),
            Mode::Rotate => f.write_str("rotate"),
            Mode::One => f.write_str("one"),
            Mode::Some(k) => write!(f, "some (count {k})"),
        }
    }
}

/// Offset of the TTL in [`Member::rr`] (after pointer, type and class).
pub const RR_TTL_AT: usize = 6;

#[derive(Debug, Clone)]
pub struct Member {
    pub addr: IpAddr,
    pub weight: u32,
    /// Index into the health table.
    pub health: u32,
    /// The answer record, pre-rendered: owner pointer to the question
    /// (0xC00C), type, class IN, TTL 0 (patched per answer), RDLENGTH, RDATA.
    rr: [u8; 28],
    rr_len: u8,
}

impl Member {
    pub fn new(addr: IpAddr, weight: u32, health: u32) -> Member {
        let mut rr = [0u8; 28];
        let (rtype, len) = match addr {
            IpAddr::V4(a) => {
                rr[12..16].copy_from_slice(&a.octets());
                (crate::wire::TYPE_A, 4u8)
            }
            IpAddr::V6(a) => {
                rr[12..28].copy_from_slice(&a.octets());
                (crate::wire::TYPE_AAAA, 16)
            }
        };
        rr[0..2].copy_from_slice(&0xC00Cu16.to_be_bytes());
        rr[2..4].copy_from_slice(&rtype.to_be_bytes());
        rr[4..6].copy_from_slice(&crate::wire::CLASS_IN.to_be_bytes());
        rr[10..12].copy_from_slice(&u16::from(len).to_be_bytes());
        Member {
            addr,
            weight,
            health,
            rr,
            rr_len: 12 + len,
        }
    }

    /// The pre-rendered record; its TTL is at `RR_TTL_AT`.
    #[inline]
    pub fn rr(&self) -> &[u8] {
        &self.rr[..self.rr_len as usize]
    }
}

#[derive(Debug, Clone)]
pub struct Pool {
    pub name: String,
    pub v4: Vec<Member>,
    pub v6: Vec<Member>,
    pub location: Option<(f64, f64)>,
    /// Members that must be up for the pool to be up (count, or fraction < 1).
    pub min_up: f64,
}

impl Pool {
    pub fn family(&self, v6: bool) -> &[Member] {
        if v6 {
            &self.v6
        } else {
            &self.v4
        }
    }

    /// Is this family of the pool up, given each member's state?
    pub fn is_up(&self, v6: bool, up: &impl Fn(&Member) -> bool) -> (bool, usize) {
        let members = self.family(v6);
        let n = members.iter().filter(|m| up(m)).count();
        let need = if self.min_up < 1.0 {
            (self.min_up * members.len() as f64).ceil().max(1.0) as usize
        } else {
            self.min_up as usize
        };
        (n >= need && n > 0, n)
    }
}

/// A fast non-cryptographic generator (wyrand), one per thread.
pub struct Rng(u64);

impl Rng {
    pub fn seeded() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let local = 0u8;
        Rng(t ^ (&local as *const u8 as u64).rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xA076_1D64_78BD_642F);
        let t = (self.0 as u128).wrapping_mul((self.0 ^ 0xE703_7ED1_A0B4_28DB) as u128);
        ((t >> 64) ^ t) as u64
    }

    /// Uniform in 0..n (n > 0), by multiply-shift.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

struct ThreadState {
    rng: Rng,
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

thread_local! {
    static STATE: RefCell<ThreadState> = RefCell::new(ThreadState {
        rng: Rng::seeded(),
        generation: u64::MAX,
        cursors: Vec::new(),
    });
}

/// Pick members of `members` by `mode` into `out` (indices into `members`).
/// `up` says which members may be used. `slot` names this name and family's
/// rotation cursor; `generation` resets cursors after a reload.
pub fn select(
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
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let rng = &mut s.rng as *mut Rng;
        // SAFETY: `rng` and `cursors` are disjoint fields of the same borrow.
        let rng = unsafe { &mut *rng };
        match mode {
            Mode::All => {
                out[..n].copy_from_slice(&cand[..n]);
                for i in (1..n).rev() {
                    let j = rng.below(i as u64 + 1) as usize;
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
                    let j = rng.below(i as u64 + 1) as usize;
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
    })
}

/// Index into `cand` chosen with probability proportional to weight.
fn weighted_pick(members: &[Member], cand: &[u16], rng: &mut Rng) -> usize {
    let total: u64 = cand
        .iter()
        .map(|&c| members[c as usize].weight as u64)
        .sum();
    let mut r = rng.below(total);
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
        let firsts: Vec<u16> = (0..7)
            .map(|_| {
                select(&m, Mode::Rotate, &|_| true, 0, 7, &mut out);
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
        let mut fa = Vec::new();
        let mut fb = Vec::new();
        for _ in 0..7 {
            select(&a, Mode::Rotate, &|_| true, 3, 9, &mut out);
            fa.push(out[0]);
            select(&b, Mode::Rotate, &|_| true, 3, 9, &mut out);
            fb.push(out[0]);
        }
        assert_eq!(fa, vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(fb, vec![0, 1, 0, 1, 0, 1, 0]);
        // A new generation (a reload) starts over.
        select(&a, Mode::Rotate, &|_| true, 3, 10, &mut out);
        assert_eq!(out[..3], [0, 1, 2]);
    }

    #[test]
    fn rotate_skips_members_that_are_down() {
        let m = members(&[1, 1, 1]);
        let mut out = [0u16; MAX_MEMBERS];
        let up = |x: &Member| x.health != 1;
        let firsts: Vec<u16> = (0..4)
            .map(|_| {
                assert_eq!(select(&m, Mode::Rotate, &up, 0, 11, &mut out), 2);
                out[0]
            })
            .collect();
        assert_eq!(firsts, vec![0, 2, 0, 2]);
    }

    #[test]
    fn some_is_distinct() {
        let m = members(&[1, 2, 3, 4]);
        let mut out = [0u16; MAX_MEMBERS];
        for _ in 0..1000 {
            let n = select(&m, Mode::Some(2), &|_| true, 0, 1, &mut out);
            assert_eq!(n, 2);
            assert_ne!(out[0], out[1]);
        }
    }
}
