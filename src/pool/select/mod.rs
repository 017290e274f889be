//! Picking members for one answer, by mode (all, rotate, one, some): a
//! weighted shuffle (Efraimidis–Spirakis keys; Fisher–Yates when the
//! weights are equal), smooth weighted round robin (nginx), a weighted
//! pick, weighted sampling without replacement, and for sticky names the
//! top one or K of weighted rendezvous hashing ([`super::sticky`]). The
//! caller passes its [`Selector`] in, and a predicate that says which
//! members are usable.
//!
//! Weights are the members' effective weights ([`Member::effective`], one
//! relaxed load each). If every usable member has effective weight 0, they
//! are picked as if the weights were equal: weights never empty an answer.
//!
//! Picking allocates nothing and takes no lock; `rotate` reads the pool's
//! order in force (lock-free, [`Rotation::with_order`]) and does one relaxed
//! atomic add on its shared counter.

use std::num::NonZeroU64;

use super::sticky::{exponential, pair, rank};
use super::{Member, Mode, Rotation, MAX_MEMBERS, MAX_SOME};

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
/// (`Pool::rotation`), used by `rotate` (and its even-weights flag by
/// `all`). `sticky` is the hash of the client's block for a sticky `one` or
/// `some` name ([`super::sticky::block_key`]): the same block and usable
/// members give the same answer, in rank order.
pub fn select(
    s: &mut Selector,
    members: &[Member],
    rotation: &Rotation,
    mode: Mode,
    up: &impl Fn(&Member) -> bool,
    sticky: Option<NonZeroU64>,
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
        Mode::All if rotation.even() => {
            out[..n].copy_from_slice(&cand[..n]);
            for i in (1..n).rev() {
                let j = rng.usize(..=i);
                out.swap(i, j);
            }
            n
        }
        Mode::All => weighted_shuffle(members, &cand[..n], rng, out),
        // Sticky names are `one` and `some` only (config checks it).
        Mode::P2c => {
            out[0] = cand[p2c(members, &cand[..n], rng)];
            1
        }
        Mode::One => match sticky {
            Some(block) => rendezvous(members, &cand[..n], block.get(), 1, out),
            None => {
                out[0] = cand[weighted_pick(members, &cand[..n], rng)];
                1
            }
        },
        Mode::Some(k) if sticky.is_some() => {
            let block = sticky.map_or(0, NonZeroU64::get);
            rendezvous(members, &cand[..n], block, k as usize, out)
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

/// Every candidate, in the order of Efraimidis–Spirakis keys: each gets an
/// exponential variate divided by its weight, and the keys sorted
/// ascending. That is sequential weighted sampling without replacement, so
/// the first address (and each later one among those left) follows the
/// weights exactly; weight-0 members come last, in uniform order. O(n log
/// n) with n <= [`MAX_MEMBERS`], on the stack.
#[inline(never)]
fn weighted_shuffle(
    members: &[Member],
    cand: &[u16],
    rng: &mut fastrand::Rng,
    out: &mut [u16; MAX_MEMBERS],
) -> usize {
    let mut keys = [0u64; MAX_MEMBERS];
    for (i, (k, &c)) in keys.iter_mut().zip(cand).enumerate() {
        let r = rank(exponential(rng.u64(..)), members[c as usize].effective());
        // Positive floats order as their bits; the low 8 bits (far below
        // any difference that matters) carry the candidate's index.
        *k = (r.to_bits() & !0xFF) | i as u64;
    }
    let keys = &mut keys[..cand.len()];
    keys.sort_unstable();
    for (o, &k) in out.iter_mut().zip(keys.iter()) {
        *o = cand[(k & 0xFF) as usize];
    }
    cand.len()
}

/// The `k` candidates (at most [`MAX_SOME`]) with the lowest rendezvous
/// ranks for `block`, lowest first: each member's rank depends only on the
/// block, its own address and its weight, so a member leaving or coming
/// back moves only the blocks it wins.
#[inline(never)]
fn rendezvous(
    members: &[Member],
    cand: &[u16],
    block: u64,
    k: usize,
    out: &mut [u16; MAX_MEMBERS],
) -> usize {
    let k = k.clamp(1, MAX_SOME).min(cand.len());
    let rank_of = |c: u16| {
        let m = &members[c as usize];
        rank(exponential(pair(block, m.key)), m.effective())
    };
    if k == 1 {
        // The lowest rank, chosen without a branch (a compare and two
        // selects), so the members' hashes and logarithms overlap.
        let (mut best, mut best_r) = (cand[0], rank_of(cand[0]));
        for &c in &cand[1..] {
            let r = rank_of(c);
            let lower = r < best_r;
            best = if lower { c } else { best };
            best_r = if lower { r } else { best_r };
        }
        out[0] = best;
        return 1;
    }
    // Every rank first, then the K lowest (the ranks overlap in the
    // pipeline; the insertion below branches).
    let mut ranks = [0f64; MAX_MEMBERS];
    for (r, &c) in ranks.iter_mut().zip(cand) {
        *r = rank_of(c);
    }
    let ranks = &ranks[..cand.len()];
    let mut best = [(f64::INFINITY, 0u16); MAX_SOME];
    let mut have = 0;
    for (&r, &c) in ranks.iter().zip(cand) {
        if have == k && r >= best[k - 1].0 {
            continue;
        }
        // Insert in order (k <= 8: a short shift).
        let mut j = have.min(k - 1);
        while j > 0 && best[j - 1].0 > r {
            best[j] = best[j - 1];
            j -= 1;
        }
        best[j] = (r, c);
        have = (have + 1).min(k);
    }
    for (o, b) in out.iter_mut().zip(&best[..k]) {
        *o = b.1;
    }
    k
}

/// Round-trip estimates that differ by at most this many µs are the same
/// for balancing (`pick = "p2c"` and `latency_aware`, issue #31). Check
/// round trips to identical members on one host or LAN differ by tens to
/// hundreds of µs, and by milliseconds when the prober waits for a CPU;
/// the peak-EWMA keeps such a slow sample for seconds (it decays with
/// `latency_decay`, 10 s). Measured on a shared 2-core machine at load
/// average 4–5: steady loopback TCP estimates 0.12–0.65 ms, and single slow
/// probes (the first after start, above all) holding one member's
/// estimate at 1.3 ms alone and 2.9 ms with other tests running. p2c's
/// comparison is a cliff just past the floor (the slower member loses every
/// draw), so the floor sits well above those stalls: 5 ms. That is still
/// far below the tens of ms a queueing member shows, and below what a DNS
/// answer, cached for its TTL by a whole resolver's clients, can act on.
pub const NOISE_FLOOR_US: u64 = 5_000;

/// ... and so do estimates within this percentage of the lower one: WAN
/// round trips jitter by a few ms to tens of ms, roughly in proportion to
/// their length, and the effective weight's other factors (load, slow
/// start) are coarser than 20 % too.
pub const NOISE_BAND_PCT: u64 = 20;

/// Are round-trip estimates `a` and `b` (µs) equal within the noise: is
/// their difference at most [`NOISE_FLOOR_US`] or [`NOISE_BAND_PCT`] of the
/// lower? Integer arithmetic only (p2c runs it per answer).
#[inline]
pub fn same_rtt(a: u64, b: u64) -> bool {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let d = hi - lo;
    d <= NOISE_FLOOR_US || d * 100 <= lo * NOISE_BAND_PCT
}

/// The power of two choices: two candidates drawn by weight (distinct when
/// there are two), and the one with the lower round-trip estimate ÷ weight
/// kept. Estimates equal within the noise ([`same_rtt`]), or a member
/// without one, are a tie: the first draw stays, so ties split in
/// proportion to the weights and identical members evenly. Index into
/// `cand`.
fn p2c(members: &[Member], cand: &[u16], rng: &mut fastrand::Rng) -> usize {
    let a = weighted_pick(members, cand, rng);
    if cand.len() < 2 {
        return a;
    }
    // The second draw among the others.
    let b = weighted_pick_skipping(members, cand, a, rng);
    let (wa, ra) = members[cand[a] as usize].weight_and_rtt();
    let (wb, rb) = members[cand[b] as usize].weight_and_rtt();
    if ra == 0 || rb == 0 || same_rtt(ra, rb) {
        return a;
    }
    // ra / wa > rb / wb, without division (each product < 2^58).
    if rb * wa < ra * wb {
        b
    } else {
        a
    }
}

/// Index into `cand` chosen with probability proportional to effective
/// weight; uniformly if every candidate has weight 0.
fn weighted_pick(members: &[Member], cand: &[u16], rng: &mut fastrand::Rng) -> usize {
    weighted_pick_skipping(members, cand, usize::MAX, rng)
}

/// [`weighted_pick`] leaving out `cand[skip]` (`usize::MAX`: none), without
/// copying the candidates.
fn weighted_pick_skipping(
    members: &[Member],
    cand: &[u16],
    skip: usize,
    rng: &mut fastrand::Rng,
) -> usize {
    let weight = |i: usize, c: u16| {
        if i == skip {
            0
        } else {
            members[c as usize].effective()
        }
    };
    let total: u64 = cand.iter().enumerate().map(|(i, &c)| weight(i, c)).sum();
    if total == 0 {
        // Every weight 0: as if they were equal.
        let n = cand.len() - usize::from(skip < cand.len());
        let i = rng.usize(..n);
        return if i >= skip { i + 1 } else { i };
    }
    let mut r = rng.u64(..total);
    for (i, &c) in cand.iter().enumerate() {
        let w = weight(i, c);
        if r < w {
            return i;
        }
        r -= w;
    }
    cand.len() - 1
}

#[cfg(test)]
mod tests;
