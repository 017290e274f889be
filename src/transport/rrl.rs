//! Response rate limiting for UDP, in the manner of BIND and Knot RRL: a
//! token bucket per client prefix (/24 for IPv4, /56 for IPv6 by default)
//! and kind of identical response, so that a spoofed flood cannot use the
//! server as an amplifier against one network.
//!
//! As BIND and Knot do, responses are counted by category
//! ([`response_key`]): the prefix, the response kind (answer, NODATA,
//! NXDOMAIN, referral, error) and what makes responses of that kind
//! identical: QNAME and QTYPE for answers and NODATA, the zone (the owner
//! of the SOA in the authority section) for NXDOMAIN, the delegation point
//! for referrals, and nothing more for errors. A resolver's prefix asking
//! for many different names is therefore not limited, while a flood of one
//! response (the amplification attack) is. Over the limit a response is dropped, except every `slip`-th
//! one, which is sent truncated (TC=1, no records) so that a real client
//! behind that prefix retries over TCP, which is never limited.
//!
//! Each UDP worker owns a `Limiter`: a fixed table allocated once (no lock,
//! no allocation per query). The kernel spreads a client's datagrams over
//! the workers of a listen address by source port (SO_REUSEPORT), so each
//! worker refills at `responses_per_second / workers`; together they allow
//! the configured rate to a client that varies its source port, as spoofed
//! floods and resolvers (RFC 5452) do. A client that always uses one source
//! port reaches one worker and gets that worker's share.
//!
//! The table is hashed with a per-process random seed and is 2-way set
//! associative; a prefix that loses its slot to another starts over with a
//! full bucket (it is only ever limited less, never more).
//!
//! A bucket is kept as one u64 clock value in nanoseconds (GCRA, the token
//! bucket's equivalent), so it never wraps: a client silent for any length of
//! time finds its bucket full (finding E8: a u32 millisecond stamp left a
//! bucket silent for 2^31 ms empty until the clock wrapped).

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::time::Instant;

pub use crate::config::RrlConfig;

/// What to do with one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Under the limit: send the response.
    Send,
    /// Over the limit: send nothing.
    Drop,
    /// Send it truncated: see `meridian_wire::truncate`.
    Slip,
}

#[derive(Clone, Copy, Default)]
struct Bucket {
    /// Hash of the prefix; 0 = empty.
    tag: u64,
    /// The bucket as a "theoretical arrival time" (GCRA, the token bucket
    /// written as one clock value): nanoseconds since the limiter started at
    /// which the bucket will be full again. A u64 never wraps (584 years),
    /// so a bucket silent for any time is full when its client returns.
    tat: u64,
}

/// One worker's rate limiter.
pub struct Limiter {
    /// The `[server.rrl]` settings it was built with (the worker rebuilds it when they change).
    pub cfg: RrlConfig,
    /// Nanoseconds one response costs (1 s / this worker's rate).
    interval: u64,
    /// How far ahead of now a bucket may run: (burst - 1) responses, where
    /// the burst is one second's worth.
    tolerance: u64,
    table: Box<[Bucket]>,
    mask: usize,
    seed: u64,
    limited: u32,
    epoch: Instant,
    /// Responses dropped, not yet added to the shared metrics.
    pub dropped: u64,
    /// Responses sent truncated (slipped), not yet added to the shared metrics.
    pub slipped: u64,
}

impl Limiter {
    /// `share`: the number of workers this worker shares its port with.
    pub fn new(cfg: RrlConfig, share: usize) -> Limiter {
        let rate = cfg.responses_per_second as f64 / share.max(1) as f64;
        let n = cfg.table_size.next_power_of_two().max(2);
        let interval = (1e9 / rate).round().max(1.0) as u64;
        let burst = rate.max(1.0);
        Limiter {
            cfg,
            interval,
            tolerance: ((burst - 1.0) * interval as f64) as u64,
            table: vec![Bucket::default(); n].into_boxed_slice(),
            mask: n - 1,
            seed: std::collections::hash_map::RandomState::new().hash_one(0x6d65_7269_6469_616eu64),
            limited: 0,
            epoch: Instant::now(),
            dropped: 0,
            slipped: 0,
        }
    }

    /// The clock the buckets use, in milliseconds since the limiter
    /// started; read once per batch of datagrams.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The prefix of `src` that is limited as one client, hashed.
    fn tag(&self, src: IpAddr) -> u64 {
        let h = match src.to_canonical() {
            IpAddr::V4(a) => {
                let bits = u32::from(a);
                let p = self.cfg.ipv4_prefix as u32;
                let masked = if p == 0 {
                    0
                } else {
                    bits & (u32::MAX << (32 - p))
                };
                mix(self.seed ^ (masked as u64) ^ (4u64 << 56))
            }
            IpAddr::V6(a) => {
                let bits = u128::from(a);
                let p = self.cfg.ipv6_prefix as u32;
                let masked = if p == 0 {
                    0
                } else {
                    bits & (u128::MAX << (128 - p))
                };
                let hi = mix(self.seed ^ (masked >> 64) as u64 ^ (6u64 << 56));
                mix(hi ^ masked as u64)
            }
        };
        h | 1
    }

    /// Charge one response to `src`'s prefix at time `now` (milliseconds,
    /// see `now_ms`), every response of the prefix in one bucket.
    #[inline]
    pub fn check(&mut self, src: IpAddr, now: u64) -> Verdict {
        let tag = self.tag(src);
        self.charge(tag, now)
    }

    /// Charge the response `resp` to its category (`src`'s prefix and
    /// [`response_key`]) at time `now` (milliseconds, see `now_ms`).
    #[inline]
    pub fn check_response(&mut self, src: IpAddr, resp: &[u8], now: u64) -> Verdict {
        let tag = mix(self.tag(src) ^ response_key(resp)) | 1;
        self.charge(tag, now)
    }

    #[inline]
    fn charge(&mut self, tag: u64, now: u64) -> Verdict {
        let now = now.saturating_mul(1_000_000);
        let i = (tag as usize) & self.mask;
        let j = i ^ 1;
        let slot = if self.table[i].tag == tag {
            i
        } else if self.table[j].tag == tag {
            j
        } else {
            // Take the empty one, or the one that is fuller (older) of the two.
            let age = |b: &Bucket| if b.tag == 0 { 0 } else { b.tat.max(1) };
            let k = if age(&self.table[i]) <= age(&self.table[j]) {
                i
            } else {
                j
            };
            self.table[k] = Bucket { tag, tat: now };
            k
        };
        let b = &mut self.table[slot];
        // A bucket that has been full since before `now` starts from now.
        let tat = b.tat.max(now);
        if tat - now <= self.tolerance {
            b.tat = tat + self.interval;
            return Verdict::Send;
        }
        if self.cfg.slip > 0 {
            self.limited += 1;
            if self.limited >= self.cfg.slip {
                self.limited = 0;
                self.slipped += 1;
                return Verdict::Slip;
            }
        }
        self.dropped += 1;
        Verdict::Drop
    }
}

/// The kind of a response, as RRL categories count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Kind {
    /// NOERROR with answer records.
    Answer = 1,
    /// NOERROR, authoritative, no answer records.
    NoData = 2,
    /// NXDOMAIN.
    NxDomain = 3,
    /// NOERROR, not authoritative, no answer records: a delegation.
    Referral = 4,
    /// Any other RCODE (FORMERR, SERVFAIL, REFUSED, NOTIMP, ...).
    Error = 5,
}

/// The kind of `resp` from its header (None if it has no header).
pub fn kind(resp: &[u8]) -> Option<Kind> {
    if resp.len() < 12 {
        return None;
    }
    let aa = resp[2] & 0x04 != 0;
    let ancount = u16::from_be_bytes([resp[6], resp[7]]);
    Some(match resp[3] & 0x0F {
        0 if ancount > 0 => Kind::Answer,
        0 if aa => Kind::NoData,
        0 => Kind::Referral,
        3 => Kind::NxDomain,
        _ => Kind::Error,
    })
}

/// The category of the response `resp` (a hash, without the client):
/// kind, plus QNAME and QTYPE for answers and NODATA, the owner of the first
/// authority record (the zone's SOA, or the delegation's NS) for NXDOMAIN
/// and referrals, nothing for errors. Names are compared case-insensitively.
/// Reads only `resp`, allocates nothing.
pub fn response_key(resp: &[u8]) -> u64 {
    let Some(kind) = kind(resp) else { return 0 };
    let k = mix(kind as u64);
    let qdcount = u16::from_be_bytes([resp[4], resp[5]]);
    if kind == Kind::Error || qdcount != 1 {
        return k;
    }
    let Some(qend) = meridian_wire::name::skip_name(resp, 12) else {
        return k;
    };
    match kind {
        Kind::Answer | Kind::NoData => {
            let qtype = match resp.get(qend..qend + 2) {
                Some(t) => u16::from_be_bytes([t[0], t[1]]) as u64,
                None => return k,
            };
            mix(k ^ hash_name(resp, 12) ^ (qtype << 48))
        }
        // ANCOUNT is 0: the authority section starts after the question.
        _ => mix(k ^ hash_name(resp, qend + 4)),
    }
}

/// A hash of the name at `at` in `msg`, lower-cased, following compression
/// pointers (only backwards, as `skip_name` checks); a bad name hashes what
/// was read.
fn hash_name(msg: &[u8], at: usize) -> u64 {
    let mut h = 0x6e61_6d65u64;
    let mut word = 0u64;
    let mut n = 0u32;
    let mut i = at;
    let mut run = at;
    let mut total = 0usize;
    while let Some(&l) = msg.get(i) {
        if l & 0xC0 == 0xC0 {
            let Some(&lo) = msg.get(i + 1) else { break };
            let ptr = ((l as usize & 0x3F) << 8) | lo as usize;
            if ptr >= run {
                break;
            }
            run = ptr;
            i = ptr;
            continue;
        }
        if l & 0xC0 != 0 || l == 0 {
            break;
        }
        total += l as usize + 1;
        let Some(label) = msg.get(i..i + 1 + l as usize) else {
            break;
        };
        if total > 255 {
            break;
        }
        for &b in label {
            word = (word << 8) | b.to_ascii_lowercase() as u64;
            n += 1;
            if n == 8 {
                h = mix(h ^ word);
                word = 0;
                n = 0;
            }
        }
        i += 1 + l as usize;
    }
    mix(h ^ word ^ ((n as u64) << 60))
}

/// The splitmix64 finalizer.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate: u32, slip: u32) -> RrlConfig {
        RrlConfig {
            responses_per_second: rate,
            slip,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            table_size: 1024,
            cookie_secret: None,
        }
    }

    #[test]
    fn bucket_allows_the_rate_then_limits() {
        let mut l = Limiter::new(cfg(10, 0), 1);
        let a: IpAddr = "192.0.2.7".parse().unwrap();
        let sent = (0..100).filter(|_| l.check(a, 0) == Verdict::Send).count();
        assert_eq!(sent, 10, "one second's burst");
        // 500 ms later: five more tokens.
        let sent = (0..100)
            .filter(|_| l.check(a, 500) == Verdict::Send)
            .count();
        assert_eq!(sent, 5);
        assert_eq!(l.dropped, 185);
    }

    #[test]
    fn prefixes_are_separate_and_same_prefix_is_shared() {
        let mut l = Limiter::new(cfg(5, 0), 1);
        let a: IpAddr = "192.0.2.7".parse().unwrap();
        let same: IpAddr = "192.0.2.200".parse().unwrap();
        let other: IpAddr = "192.0.3.7".parse().unwrap();
        for _ in 0..5 {
            assert_eq!(l.check(a, 0), Verdict::Send);
        }
        assert_eq!(l.check(same, 0), Verdict::Drop);
        assert_eq!(l.check(other, 0), Verdict::Send);
        // IPv6 /56: the low 72 bits do not matter.
        let v6a: IpAddr = "2001:db8:0:100::1".parse().unwrap();
        let v6b: IpAddr = "2001:db8:0:1ff:ffff::2".parse().unwrap();
        let v6c: IpAddr = "2001:db8:0:200::1".parse().unwrap();
        for _ in 0..5 {
            assert_eq!(l.check(v6a, 0), Verdict::Send);
        }
        assert_eq!(l.check(v6b, 0), Verdict::Drop);
        assert_eq!(l.check(v6c, 0), Verdict::Send);
        // A mapped IPv4 source is its IPv4 address.
        let mapped: IpAddr = "::ffff:192.0.2.9".parse().unwrap();
        assert_eq!(l.check(mapped, 0), Verdict::Drop);
    }

    #[test]
    fn slip_every_nth() {
        let mut l = Limiter::new(cfg(1, 3), 1);
        let a: IpAddr = "198.51.100.1".parse().unwrap();
        assert_eq!(l.check(a, 0), Verdict::Send);
        let v: Vec<Verdict> = (0..6).map(|_| l.check(a, 0)).collect();
        use Verdict::*;
        assert_eq!(v, [Drop, Drop, Slip, Drop, Drop, Slip]);
        assert_eq!((l.dropped, l.slipped), (4, 2));
    }

    #[test]
    fn share_divides_the_rate() {
        let mut l = Limiter::new(cfg(100, 0), 4);
        let a: IpAddr = "198.51.100.1".parse().unwrap();
        let sent = (0..1000).filter(|_| l.check(a, 0) == Verdict::Send).count();
        assert_eq!(sent, 25);
    }

    /// E8: a prefix silent for 2^31 ms + 1 s (24.9 days), then one query a
    /// second for an hour, is never limited (the u32 clock kept such a
    /// bucket empty until it wrapped: 5 sent, 3,595 limited).
    #[test]
    fn bucket_refills_after_a_long_silence() {
        let a: IpAddr = "192.0.2.7".parse().unwrap();
        for silence in [
            24 * 86_400_000u64,
            (1u64 << 31) + 1000,
            30 * 86_400_000,
            50 * 86_400_000,
            400 * 86_400_000,
        ] {
            let mut l = Limiter::new(cfg(10, 0), 1);
            for _ in 0..5 {
                assert_eq!(l.check(a, 0), Verdict::Send);
            }
            let sent = (0..3600u64)
                .filter(|s| l.check(a, (silence + s * 1000) as _) == Verdict::Send)
                .count();
            assert_eq!(sent, 3600, "after {silence} ms of silence");
            assert_eq!(l.dropped, 0);
        }
    }

    #[test]
    fn table_stays_fixed_under_many_prefixes() {
        let mut l = Limiter::new(cfg(1, 0), 1);
        let len = l.table.len();
        for i in 0..200_000u32 {
            l.check(IpAddr::from((i << 8).to_be_bytes()), (i / 1000) as u64);
        }
        assert_eq!(l.table.len(), len);
    }
}
