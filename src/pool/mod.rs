//! Address pools and the answer modes that pick from them: the whole set
//! in a weighted shuffle (`all`), rotated by smooth weighted round robin
//! (`rotate`), one weighted pick (`one`) or K weighted picks without
//! replacement (`some`); `one` and `some` may be sticky: the same client
//! block gets the same members, by weighted rendezvous hashing ([`sticky`]).
//!
//! Randomness is per thread: each worker has its own generator. Rotation is
//! one order per pool and family, shared by every worker: the smooth weighted
//! round robin sequence of one period is computed off the query path (when
//! the pool is built, and again whenever its effective weights change,
//! [`Pool::publish`]) and published whole; a shared counter (one relaxed
//! `fetch_add` per rotate answer) indexes it, so clients see the same
//! sequence whatever worker answers them.
//!
//! Effective weights: each member's configured weight times the factors
//! that change at run time (slow start, latency, load, the operator's
//! runtime weight), computed by `balance` and published with
//! [`Pool::publish`] as one relaxed atomic per member (weight in
//! thousandths, [`WEIGHT_UNIT`], and the filter's [`OUT`] bit), with the
//! family's [`Gate`] (see [`policy`]).

pub mod policy;
pub mod select;
pub mod sticky;

pub use policy::{Cap, Gate, GateCell, MemberReport, Policy, Report, Standing, SHARE_ONE};
pub use select::{select, Selector};
pub use sticky::Sticky;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwapOption;

/// What to answer when every candidate pool is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllDown {
    /// Every member of the first pool, regardless of health (fail open).
    All,
    /// NODATA with the SOA.
    Empty,
    /// SERVFAIL: let resolvers try again (or elsewhere).
    Servfail,
}

/// Most members of one family a pool may hold (answers are built on the stack).
pub const MAX_MEMBERS: usize = 256;
/// Most members `some` may return.
pub const MAX_SOME: usize = 8;

/// How an answer picks from the members of the pool that serves it (the
/// `mode` of a `[name.NAME]`). Only members that are up are picked; each
/// mode answers with the pre-rendered records of the members it picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every member that is up, in a weighted random order (`all`): each
    /// position is drawn in proportion to weight among the members not yet
    /// placed, so the first address follows the weights; equal weights give
    /// a uniform shuffle.
    All,
    /// Every member that is up, led by the one a smooth weighted round robin
    /// picks next (so each member leads answers in proportion to its weight),
    /// the others following in config order (`rotate`).
    Rotate,
    /// One member, picked at random in proportion to weight (`one`).
    One,
    /// One member: two drawn in proportion to weight, and of those the
    /// one with the lower check round-trip estimate ÷ weight (`one` with
    /// `pick = "p2c"`; "the power of two choices", whose randomness keeps
    /// independent servers from herding onto one member).
    P2c,
    /// K members (1..=[`MAX_SOME`]), picked in proportion to weight without
    /// replacement and shuffled (`some`, with `count`; default 2).
    Some(u8),
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::All => f.write_str("all"),
            Mode::Rotate => f.write_str("rotate"),
            Mode::One => f.write_str("one"),
            Mode::P2c => f.write_str("one (pick p2c)"),
            Mode::Some(k) => write!(f, "some (count {k})"),
        }
    }
}

/// Effective weights are kept in thousandths of a configured weight unit,
/// so fractional runtime weights (0.5, 1.25) stay integers on the query path.
pub const WEIGHT_UNIT: u64 = 1000;

/// One member's decision as [`Pool::publish`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Published {
    /// Effective weight, in [`WEIGHT_UNIT`]s.
    pub eff: u64,
    /// May answers use it?
    pub usable: bool,
    /// Its check round-trip estimate in µs (0: none).
    pub rtt_us: u32,
}

/// The bit of a member's word that takes it out of the answers.
pub const OUT: u64 = 1 << 63;
/// The member's word holds its effective weight in its low 34 bits (at
/// most 65,535 × [`WEIGHT_UNIT`] × 100 < 2^33)...
pub const WEIGHT_MASK: u64 = (1 << 34) - 1;
/// ... and its check round-trip estimate in µs (0: none; at most 2^24 − 1,
/// 16.7 s) in 24 bits from here, for `pick = "p2c"`.
pub const RTT_SHIFT: u32 = 34;
/// Largest round-trip estimate a word holds, in µs.
pub const RTT_MAX_US: u32 = (1 << 24) - 1;

/// Offset of the TTL in [`Member::rr`] (after pointer, type and class).
pub const RR_TTL_AT: usize = 6;

/// One address of a pool, with its answer record rendered once at build
/// time, so that answering copies bytes and patches the TTL.
#[derive(Debug)]
pub struct Member {
    /// The member's address; its family decides A or AAAA.
    pub addr: IpAddr,
    /// Configured relative weight for `rotate`, `one` and `some`
    /// (1..=65535; default 1).
    pub weight: u32,
    /// The weight answers use, in [`WEIGHT_UNIT`]s (`weight` times the
    /// factors of the choice stage), and the [`OUT`] bit of the filter
    /// stage: one word, so answers read a member's gate and weight
    /// together. Written only by [`Pool::publish`] (and at build).
    eff: AtomicU64,
    /// When the member last became usable (`balance` clock, ms; 0 while it
    /// is out): the start of its slow-start ramp. Off the query path.
    pub since: AtomicU64,
    /// Index into the health table.
    pub health: u32,
    /// The member's own hash, for sticky answers ([`sticky::pair`]).
    key: u64,
    /// The answer record, pre-rendered: owner pointer to the question
    /// (0xC00C), type, class IN, TTL 0 (patched per answer), RDLENGTH, RDATA.
    rr: [u8; 28],
    rr_len: u8,
    /// A registry member's hold (issue #31; `Hold::None` for config members).
    pub hold: Hold,
}

/// Why the filter holds a pool member from a registry (`members_from`)
/// out, whatever its checks say; `balance` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Hold {
    /// No hold: a config member, or a registered one already proven.
    #[default]
    None,
    /// Registered but not yet passing: out (not counted for panic) until
    /// its first passing check.
    Unproven,
    /// Its registration vanished: ejected, under the cap and panic like a
    /// failing check, until it leaves the pool.
    Gone,
}

impl Member {
    /// A member at `addr` with its record pre-rendered; `health` is its index
    /// into the health table.
    pub fn new(addr: IpAddr, weight: u32, health: u32) -> Member {
        let mut rr = [0u8; 28];
        let (rtype, len) = match addr {
            IpAddr::V4(a) => {
                rr[12..16].copy_from_slice(&a.octets());
                (meridian_wire::TYPE_A, 4u8)
            }
            IpAddr::V6(a) => {
                rr[12..28].copy_from_slice(&a.octets());
                (meridian_wire::TYPE_AAAA, 16)
            }
        };
        rr[0..2].copy_from_slice(&0xC00Cu16.to_be_bytes());
        rr[2..4].copy_from_slice(&rtype.to_be_bytes());
        rr[4..6].copy_from_slice(&meridian_wire::CLASS_IN.to_be_bytes());
        rr[10..12].copy_from_slice(&u16::from(len).to_be_bytes());
        Member {
            addr,
            weight,
            eff: AtomicU64::new(u64::from(weight) * WEIGHT_UNIT),
            since: AtomicU64::new(0),
            health,
            key: sticky::member_key(addr),
            rr,
            rr_len: 12 + len,
            hold: Hold::None,
        }
    }

    /// The effective weight answers use, in [`WEIGHT_UNIT`]s (0: only when
    /// every usable member of the family has 0). One relaxed load.
    #[inline]
    pub fn effective(&self) -> u64 {
        self.eff.load(Ordering::Relaxed) & WEIGHT_MASK
    }

    /// The effective weight and the check round-trip estimate (µs, 0:
    /// none), from one relaxed load (`pick = "p2c"`).
    #[inline]
    pub fn weight_and_rtt(&self) -> (u64, u64) {
        let w = self.eff.load(Ordering::Relaxed);
        (w & WEIGHT_MASK, (w >> RTT_SHIFT) & u64::from(RTT_MAX_US))
    }

    /// May answers use this member (the filter stage's decision)? One
    /// relaxed load.
    #[inline]
    pub fn usable(&self) -> bool {
        self.eff.load(Ordering::Relaxed) & OUT == 0
    }

    /// The member's own hash (of its address): sticky answers rank by it,
    /// and a signed pool keys a set of members by their sum.
    #[inline]
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The pre-rendered record; its TTL is at `RR_TTL_AT`.
    #[inline]
    pub fn rr(&self) -> &[u8] {
        &self.rr[..self.rr_len as usize]
    }
}

impl Clone for Member {
    fn clone(&self) -> Member {
        Member {
            addr: self.addr,
            weight: self.weight,
            eff: AtomicU64::new(self.eff.load(Ordering::Relaxed)),
            since: AtomicU64::new(self.since.load(Ordering::Relaxed)),
            health: self.health,
            key: self.key,
            rr: self.rr,
            rr_len: self.rr_len,
            hold: self.hold,
        }
    }
}

/// A `[pool.NAME]`: addresses answered together, split by family (an A
/// query uses `v4`, AAAA uses `v6`), with what it takes for the pool to
/// count as up. Geo names list several pools in failover order: the first
/// one that is up for the queried family serves.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The pool's name, the key of its `[pool.NAME]` table.
    pub name: String,
    /// IPv4 members, in config order (at most [`MAX_MEMBERS`]).
    pub v4: Vec<Member>,
    /// IPv6 members, in config order (at most [`MAX_MEMBERS`]).
    pub v6: Vec<Member>,
    /// (latitude, longitude) in degrees, for `nearest` geo rules (`location`).
    pub location: Option<(f64, f64)>,
    /// Members that must be up for the pool to be up (count, or fraction < 1).
    pub min_up: f64,
    /// The `rotate` order of `v4` and `v6`; filled by [`Pool::seal`].
    pub rotation: [Rotation; 2],
    /// Ejection cap, panic, slow start, latency (`[pool.NAME]` keys).
    pub policy: Policy,
    /// The published filter decision of `v4` and `v6`.
    pub gate: [GateCell; 2],
    /// The last refresh of `v4` and `v6`, for `/status`.
    pub report: [Report; 2],
}

/// Longest rotation period kept (entries of a `u16`): weights whose sum
/// (divided by their greatest common divisor) is larger are scaled down to
/// fit, which keeps their proportions to within one part in this.
pub const MAX_PERIOD: u64 = 1 << 16;

/// The `rotate` order of one pool family: the members that lead one period
/// of smooth weighted round robin (nginx), and the shared counter that says
/// where the next answer is in it. The period of the configured weights is
/// kept inline; when effective weights differ from them, a period built
/// from those is published whole (an `ArcSwap`) and a flag says to use it,
/// so pools without runtime weights pay nothing for them.
///
/// It also says whether the family's effective weights are all equal, so
/// that `all` keeps its plain uniform shuffle then (one flag load) and pays
/// for the weighted one only when weights differ.
#[derive(Debug, Default)]
pub struct Rotation {
    configured: Box<[u16]>,
    effective: ArcSwapOption<Box<[u16]>>,
    reweighed: AtomicBool,
    /// Every member's effective weight is the same (false is always safe:
    /// the weighted shuffle of equal weights is uniform too).
    even: AtomicBool,
    next: AtomicU64,
}

impl Clone for Rotation {
    fn clone(&self) -> Rotation {
        Rotation {
            configured: self.configured.clone(),
            effective: ArcSwapOption::new(self.effective.load_full()),
            reweighed: AtomicBool::new(self.reweighed.load(Ordering::Relaxed)),
            even: AtomicBool::new(self.even.load(Ordering::Relaxed)),
            next: AtomicU64::new(0),
        }
    }
}

impl Rotation {
    /// One period of smooth weighted round robin over `members`' weights.
    pub fn new(members: &[Member]) -> Rotation {
        let w: Vec<u64> = members.iter().map(|m| u64::from(m.weight)).collect();
        Rotation {
            even: AtomicBool::new(w.windows(2).all(|p| p[0] == p[1])),
            configured: Self::period(w),
            ..Rotation::default()
        }
    }

    /// Are the family's effective weights all equal (as of the last
    /// [`Pool::publish`])? One relaxed load.
    #[inline]
    pub fn even(&self) -> bool {
        self.even.load(Ordering::Relaxed)
    }

    /// Recompute the order from `members`' effective weights and publish it
    /// (the counter goes on where it was); back to the configured order
    /// when they are the configured weights again.
    pub fn rebuild(&self, members: &[Member]) {
        let even = members
            .windows(2)
            .all(|p| p[0].effective() == p[1].effective());
        self.even.store(even, Ordering::Relaxed);
        let configured = members
            .iter()
            .all(|m| m.effective() == u64::from(m.weight) * WEIGHT_UNIT);
        if configured {
            self.reweighed.store(false, Ordering::Release);
            self.effective.store(None);
        } else {
            let w = members.iter().map(|m| m.effective()).collect();
            self.effective
                .store(Some(std::sync::Arc::new(Self::period(w))));
            self.reweighed.store(true, Ordering::Release);
        }
    }

    /// One period over weights `w`: members of weight 0 never lead, unless
    /// every member has weight 0 (then all lead in turn, as if the weights
    /// were equal).
    fn period(mut w: Vec<u64>) -> Box<[u16]> {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        if w.iter().all(|&x| x == 0) {
            w.iter_mut().for_each(|x| *x = 1);
        }
        let g = w.iter().fold(0, |g, &x| gcd(g, x)).max(1);
        w.iter_mut().for_each(|x| *x /= g);
        let sum: u64 = w.iter().sum();
        if sum > MAX_PERIOD {
            // Scaled down, a member with a weight keeps at least one turn.
            w.iter_mut()
                .filter(|x| **x > 0)
                .for_each(|x| *x = (*x * MAX_PERIOD / sum).max(1));
        }
        let total: i64 = w.iter().map(|&x| x as i64).sum();
        let mut cur = vec![0i64; w.len()];
        let mut order = Vec::with_capacity(total as usize);
        for _ in 0..total {
            let mut best = 0;
            for (i, &x) in w.iter().enumerate() {
                cur[i] += x as i64;
                if cur[i] > cur[best] {
                    best = i;
                }
            }
            cur[best] -= total;
            order.push(best as u16);
        }
        order.into_boxed_slice()
    }

    /// Run `f` on the period in force: member indices, each leading in
    /// proportion to its weight. Lock-free: the configured period with one
    /// flag load, or the published effective one with one `ArcSwap` load.
    #[inline]
    pub fn with_order<R>(&self, f: impl FnOnce(&[u16]) -> R) -> R {
        if self.reweighed.load(Ordering::Acquire) {
            return self.with_effective(f);
        }
        f(&self.configured)
    }

    /// The published effective period (its guard's drop kept out of line).
    #[cold]
    #[inline(never)]
    fn with_effective<R>(&self, f: impl FnOnce(&[u16]) -> R) -> R {
        match &*self.effective.load() {
            Some(order) => f(order),
            None => f(&self.configured),
        }
    }

    /// A copy of the period in force (tests, diagnostics; allocates).
    pub fn order(&self) -> Vec<u16> {
        self.with_order(|o| o.to_vec())
    }

    /// The position of this answer in `order` (advances the shared counter).
    #[inline]
    pub fn take(&self, order: &[u16]) -> usize {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        (n % order.len().max(1) as u64) as usize
    }
}

impl Pool {
    /// Compute the rotation orders once the members are in (a pool is used
    /// only after this).
    pub fn seal(&mut self) {
        self.rotation = [Rotation::new(&self.v4), Rotation::new(&self.v6)];
        self.gate = [GateCell::new(self.v4.len()), GateCell::new(self.v6.len())];
    }

    /// Publish one family's decision (`balance::refresh` computes it, off
    /// the query path): each member's effective weight (`eff`, in
    /// [`WEIGHT_UNIT`]s) and whether answers may use it, then the family's
    /// [`Gate`]; the rotation order is rebuilt if a weight changed. True if
    /// any member's word changed.
    pub fn publish(&self, v6: bool, members: &[Published], gate: Gate) -> bool {
        let family = self.family(v6);
        let mut weights_changed = false;
        let mut changed = false;
        for (m, p) in family.iter().zip(members) {
            let rtt = u64::from(p.rtt_us.min(RTT_MAX_US));
            let word = p.eff.min(WEIGHT_MASK) | rtt << RTT_SHIFT | if p.usable { 0 } else { OUT };
            let old = m.eff.swap(word, Ordering::Relaxed);
            if old != word {
                changed = true;
                weights_changed |= old & WEIGHT_MASK != word & WEIGHT_MASK;
            }
        }
        if weights_changed {
            self.rotation[v6 as usize].rebuild(family);
        }
        self.gate[v6 as usize].store(gate);
        changed
    }

    /// The published filter decision of one family.
    #[inline]
    pub fn gate(&self, v6: bool) -> Gate {
        self.gate[v6 as usize].load()
    }

    /// The rotation of one family: `v6` if `v6`, else `v4`.
    pub fn rotation(&self, v6: bool) -> &Rotation {
        &self.rotation[v6 as usize]
    }

    /// The members of one family: `v6` if `v6`, else `v4`.
    pub fn family(&self, v6: bool) -> &[Member] {
        if v6 {
            &self.v6
        } else {
            &self.v4
        }
    }

    /// Members of one family that must be usable for it to count as up
    /// (`min_up`: a count, or a fraction of the family rounded up; >= 1).
    pub fn min_usable(&self, v6: bool) -> usize {
        let n = self.family(v6).len();
        if self.min_up < 1.0 {
            (self.min_up * n as f64).ceil().max(1.0) as usize
        } else {
            self.min_up as usize
        }
    }
}
