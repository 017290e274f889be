//! Sticky answers (`sticky = true` on `one` and `some` names): weighted
//! rendezvous hashing of (client block, member), and the exponential keys
//! that weighted choices share with the weighted `all` shuffle.
//!
//! Each member gets the score −ln(u) / weight, u = hash(client block,
//! member) mapped into (0, 1); the lowest scores win (the same order as the
//! textbook −weight / ln(u), highest first). A member's score for a block
//! does not depend on the other members, so removing one member moves only
//! the blocks it held (each to its runner-up), and its return takes exactly
//! those blocks back; modulo hashing would move about (n − 1) / n of them.
//!
//! The hash is a fixed-key splitmix64 finaliser chain: no per-process seed,
//! so a block gets the same member after a restart and from every server of
//! the NS set that has the same pool. Nothing here allocates or locks.

use std::net::IpAddr;
use std::num::NonZeroU64;

/// A sticky name's client block: the prefix lengths hashed for an IPv4 and
/// an IPv6 client address (`sticky_prefix`, default /24 and /56).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sticky {
    /// Prefix length of an IPv4 block, 1..=32.
    pub v4: u8,
    /// Prefix length of an IPv6 block, 1..=128.
    pub v6: u8,
}

impl Default for Sticky {
    /// /24 and /56: what resolvers commonly send as ECS, and what one site
    /// usually holds.
    fn default() -> Sticky {
        Sticky { v4: 24, v6: 56 }
    }
}

impl Sticky {
    /// The sticky prefix length for `addr`'s family.
    #[inline]
    pub fn prefix_for(&self, addr: IpAddr) -> u8 {
        if addr.is_ipv4() {
            self.v4
        } else {
            self.v6
        }
    }
}

/// The splitmix64 finaliser: a bijection of u64 with full avalanche.
#[inline(always)]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

// Fixed keys (digits of pi): separate the families and the two kinds of
// hashed address, so a block and a member never share an input.
const K4: u64 = 0x243F_6A88_85A3_08D3;
const K6: u64 = 0x1319_8A2E_0370_7344;
const KM: u64 = 0xA409_3822_299F_31D0;

/// The hash of the block `addr`/`len`, of which only the first `known`
/// bits are known (an ECS SOURCE shorter than the block): bits past the
/// shorter of the two are cleared, so unknown bits never count. Lengths
/// are clamped to the family's width. Never 0, so that an optional key
/// fits one register (a hash of 0 counts as 1: one block in 2^64 shares).
#[inline]
pub fn block_key(addr: IpAddr, len: u8, known: u8) -> NonZeroU64 {
    NonZeroU64::new(hash_block(addr, len, known)).unwrap_or(NonZeroU64::MIN)
}

#[inline]
fn hash_block(addr: IpAddr, len: u8, known: u8) -> u64 {
    match addr {
        IpAddr::V4(a) => {
            let len = len.min(32);
            let keep = u32::from(len.min(known));
            let bits = u32::from(a) & u32::MAX.checked_shl(32 - keep).unwrap_or(0);
            mix(K4 ^ u64::from(bits) ^ (u64::from(len) << 32))
        }
        IpAddr::V6(a) => {
            let len = len.min(128);
            let keep = u32::from(len.min(known));
            let mask = u128::MAX.checked_shl(128 - keep).unwrap_or(0);
            let bits = u128::from(a) & mask;
            let k = mix(K6 ^ (bits >> 64) as u64);
            mix(mix(k ^ bits as u64) ^ u64::from(len))
        }
    }
}

/// A member's own hash, computed once when the member is built.
pub(crate) fn member_key(addr: IpAddr) -> u64 {
    let b = match addr {
        IpAddr::V4(a) => hash_block(IpAddr::V4(a), 32, 32),
        IpAddr::V6(a) => hash_block(IpAddr::V6(a), 128, 128),
    };
    mix(b ^ KM)
}

/// The rendezvous hash of (block, member).
#[inline(always)]
pub(crate) fn pair(block: u64, member: u64) -> u64 {
    mix(block ^ member)
}

/// Rank of a member of weight 0: after every member with a weight, so it is
/// chosen only when no member with a weight is left (and then by its
/// exponential, as if all weights were equal). Exponentials of 64-bit
/// hashes stay below 38, and weights are at least 1.
const ZERO_WEIGHT: f64 = 1.0e6;

/// −ln(u) for u = `h` mapped into (0, 1): an exponential variate (rate 1).
///
/// Computed from the float's exponent and an odd series for ln of the
/// mantissa reduced to [√½, √2) (four terms, error below 1e-8 of the
/// result's unit, so shares are exact to well under any test's
/// resolution). It never increases as `h` grows, so equal weights rank
/// exactly by hash; it costs one division and no libm call.
#[inline(always)]
pub(crate) fn exponential(h: u64) -> f64 {
    // u in (0, 1), exactly representable (52 bits and a half): never 0
    // (infinite) nor 1 (0, which would tie).
    let u = ((h >> 12) as f64 + 0.5) * (1.0 / (1u64 << 52) as f64);
    let bits = u.to_bits();
    let e0 = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let m0 = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    // Without a branch (it would be taken at random, half the time): above
    // √2 the mantissa is halved and the exponent raised, by arithmetic.
    let hi = u64::from(m0 > std::f64::consts::SQRT_2);
    let m = f64::from_bits(m0.to_bits() - (hi << 52));
    let e = e0 + hi as i64;
    // ln m = 2 atanh(s), s = (m − 1) / (m + 1), |s| <= 0.172.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let ln_m = s * (2.0 + s2 * (2.0 / 3.0 + s2 * (2.0 / 5.0 + s2 * (2.0 / 7.0))));
    -(e as f64 * std::f64::consts::LN_2 + ln_m)
}

/// The rank of a member of effective weight `w` whose exponential is `x`:
/// lower wins. P(lowest) = w / (sum of weights), and the order of the
/// ranks is weighted sampling without replacement (Efraimidis–Spirakis).
#[inline(always)]
pub(crate) fn rank(x: f64, w: u64) -> f64 {
    if w > 0 {
        x / w as f64
    } else {
        ZERO_WEIGHT + x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_matches_ln_and_is_monotone() {
        let mut worst: f64 = 0.0;
        let mut prev = f64::INFINITY;
        // A sweep across the whole range, in increasing h.
        for i in 0..200_000u64 {
            let h = i.wrapping_mul(u64::MAX / 200_000);
            let x = exponential(h);
            assert!(x <= prev, "not monotone at {h:#x}");
            prev = x;
            let u = ((h >> 12) as f64 + 0.5) / (1u64 << 52) as f64;
            worst = worst.max((x - (-u.ln())).abs() / (-u.ln()).max(1e-12));
        }
        assert!(worst < 1e-7, "relative error {worst}");
        // The ends: finite, positive.
        assert!(exponential(0).is_finite() && exponential(0) > 36.0);
        assert!(exponential(u64::MAX) > 0.0);
        // Around an octave boundary, where the reduction switches.
        for h in [1u64 << 62, (1u64 << 63) - 1, 1 << 63, (1 << 63) + 2048] {
            assert!(exponential(h) >= exponential(h + 4096), "{h:#x}");
        }
    }

    #[test]
    fn blocks_mask_unknown_bits() {
        let a: IpAddr = "198.51.100.77".parse().unwrap();
        let b: IpAddr = "198.51.100.0".parse().unwrap();
        assert_eq!(block_key(a, 24, 32), block_key(b, 24, 32));
        assert_ne!(block_key(a, 24, 32), block_key(b, 32, 32));
        assert_ne!(block_key(a, 24, 32), block_key(a, 20, 32));
        // A /20 source: the block is still a /24, its unknown bits zero.
        let c: IpAddr = "198.51.96.0".parse().unwrap();
        assert_eq!(block_key(a, 24, 20), block_key(c, 24, 32));
        let a: IpAddr = "2001:db8:1:2ff::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:200::".parse().unwrap();
        assert_eq!(block_key(a, 56, 128), block_key(b, 56, 128));
        assert_ne!(block_key(a, 64, 128), block_key(b, 64, 128));
        // Families never collide on the same bits.
        let v4: IpAddr = "0.0.0.0".parse().unwrap();
        let v6: IpAddr = "::".parse().unwrap();
        assert_ne!(block_key(v4, 24, 32), block_key(v6, 24, 128));
    }

    #[test]
    fn pair_hash_bits_are_uniform() {
        // Each of the 64 output bits is set about half the time over
        // consecutive /24 blocks and one member (4.5 sigma of a binomial).
        let m = member_key("192.0.2.1".parse().unwrap());
        let n = 20_000u32;
        let mut ones = [0u32; 64];
        for b in 0..n {
            let k = block_key(
                IpAddr::from((0x0A00_0000u32 + (b << 8)).to_be_bytes()),
                24,
                32,
            );
            let h = pair(k.get(), m);
            for (i, o) in ones.iter_mut().enumerate() {
                *o += (h >> i) as u32 & 1;
            }
        }
        let sigma = (f64::from(n) * 0.25).sqrt();
        for (i, &o) in ones.iter().enumerate() {
            let d = (f64::from(o) - f64::from(n) / 2.0).abs();
            assert!(d < 4.5 * sigma, "bit {i}: {o} of {n}");
        }
    }
}
