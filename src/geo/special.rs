//! Special-purpose address blocks (IANA registry, RFC 6890 and successors):
//! addresses that are not globally routable and so say nothing about where a
//! client is. RFC 7871 §10: an ECS address there is ignored and the answer's
//! scope covers the whole block, so the partition never lets a public block
//! cover special space.
//!
//! IPv6 choices: everything outside 2000::/3 (global unicast) is special; the
//! registry blocks inside it are kept as their own blocks so scopes line up
//! with them. 2001::/23 (IETF protocol assignments) is special as a whole:
//! it holds Teredo, ORCHID, AMT and AS112 service addresses, none of which
//! locate a client, and treating some of it as public would buy nothing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::partition::{for_each_cidr, host_mask, largest_aligned};

/// IPv4 special blocks (start, prefix length), sorted, disjoint.
const V4: &[(u32, u8)] = &[
    (0x0000_0000, 8),  // 0.0.0.0/8 "this network"
    (0x0A00_0000, 8),  // 10.0.0.0/8 private
    (0x6440_0000, 10), // 100.64.0.0/10 CGNAT shared space
    (0x7F00_0000, 8),  // 127.0.0.0/8 loopback
    (0xA9FE_0000, 16), // 169.254.0.0/16 link-local
    (0xAC10_0000, 12), // 172.16.0.0/12 private
    (0xC000_0000, 24), // 192.0.0.0/24 IETF protocol assignments
    (0xC000_0200, 24), // 192.0.2.0/24 TEST-NET-1
    (0xC058_6300, 24), // 192.88.99.0/24 6to4 relay anycast (deprecated)
    (0xC0A8_0000, 16), // 192.168.0.0/16 private
    (0xC612_0000, 15), // 198.18.0.0/15 benchmarking
    (0xC633_6400, 24), // 198.51.100.0/24 TEST-NET-2
    (0xCB00_7100, 24), // 203.0.113.0/24 TEST-NET-3
    (0xE000_0000, 4),  // 224.0.0.0/4 multicast
    (0xF000_0000, 4),  // 240.0.0.0/4 reserved, incl. broadcast
];

/// IPv6 registry blocks inside 2000::/3, sorted, disjoint.
const V6_IN_GLOBAL: &[(u128, u8)] = &[
    (0x2001_0000 << 96, 23), // 2001::/23 IETF protocol assignments
    (0x2001_0db8 << 96, 32), // 2001:db8::/32 documentation
    (0x2002 << 112, 16),     // 2002::/16 6to4
];

/// IPv6 registry blocks outside 2000::/3, sorted, disjoint. The rest of the
/// non-global space is cut into maximal aligned blocks between them.
const V6_OUTSIDE: &[(u128, u8)] = &[
    (0, 128),                // ::/128 unspecified
    (1, 128),                // ::1/128 loopback
    (0xffff << 32, 96),      // ::ffff:0:0/96 IPv4-mapped
    (0x0064_ff9b << 96, 96), // 64:ff9b::/96 NAT64 well-known prefix
    (0x0100 << 112, 64),     // 100::/64 discard-only
    (0xfc00 << 112, 7),      // fc00::/7 unique local
    (0xfe80 << 112, 10),     // fe80::/10 link-local
    (0xff00 << 112, 8),      // ff00::/8 multicast
];

/// 2000::/3, the only globally routable unicast space.
const GLOBAL_UNICAST: (u128, u8) = (0x2000 << 112, 3);

fn contains(net: (u128, u8), bits: u32, a: u128) -> bool {
    a & !host_mask(net.1, bits) == net.0
}

/// The special-purpose block enclosing `addr`, or None for public space.
/// Allocation-free: called per query for ECS addresses.
pub fn special_block(addr: IpAddr) -> Option<IpNet> {
    match addr {
        IpAddr::V4(a) => {
            let a = u32::from(a) as u128;
            let &(s, l) = V4.iter().find(|&&n| contains((n.0 as u128, n.1), 32, a))?;
            Some(IpNet::V4(Ipv4Net::new(Ipv4Addr::from(s), l).ok()?))
        }
        IpAddr::V6(a) => {
            let (s, l) = special_v6(u128::from(a))?;
            Some(IpNet::V6(Ipv6Net::new(Ipv6Addr::from(s), l).ok()?))
        }
    }
}

/// The prefix length of the largest block around the public address `addr`
/// that lies inside `addr/len` and holds no special-purpose address: `len`
/// unless special blocks sit inside `addr/len` (only when `len` is shorter
/// than /24 for IPv4, /32 for IPv6). An answer decided on `addr/len` but
/// not on special clients inside it holds only there (RFC 7871 §7.2.1:
/// scopes must not overlap). Allocation-free.
pub fn public_len(addr: IpAddr, len: u8) -> u8 {
    match addr {
        IpAddr::V4(a) if len < 24 => {
            let v4 = V4.iter().map(|&(s, l)| (u128::from(s), l));
            public_around(
                u128::from(u32::from(a)),
                len,
                32,
                (0, u128::from(u32::MAX)),
                v4,
            )
        }
        IpAddr::V6(a) if len < 32 => {
            // Everything outside 2000::/3 is special too.
            let g = (
                GLOBAL_UNICAST.0,
                GLOBAL_UNICAST.0 | host_mask(GLOBAL_UNICAST.1, 128),
            );
            public_around(u128::from(a), len, 128, g, V6_IN_GLOBAL.iter().copied())
        }
        _ => len,
    }
}

/// [`public_len`] over the special blocks `special` (aligned, so each is
/// inside `addr/len` or disjoint from it) and the public range `public`.
fn public_around(
    a: u128,
    len: u8,
    bits: u32,
    public: (u128, u128),
    special: impl Iterator<Item = (u128, u8)>,
) -> u8 {
    let m = host_mask(len, bits);
    let (start, end) = (a & !m, a | m);
    let (mut lo, mut hi) = (start.max(public.0), end.min(public.1));
    for (s, l) in special {
        let e = s | host_mask(l, bits);
        if s < start || e > end {
            continue;
        }
        if e < a {
            lo = lo.max(e + 1);
        } else if s > a {
            hi = hi.min(s - 1);
        }
    }
    largest_aligned(a, lo, hi, bits)
}

fn special_v6(a: u128) -> Option<(u128, u8)> {
    if let Some(&n) = V6_OUTSIDE.iter().find(|&&n| contains(n, 128, a)) {
        return Some(n);
    }
    if contains(GLOBAL_UNICAST, 128, a) {
        return V6_IN_GLOBAL.iter().copied().find(|&n| contains(n, 128, a));
    }
    // Residual non-global space: bounded by the listed blocks and 2000::/3.
    let (mut lo, mut hi) = (0u128, u128::MAX);
    for &n in V6_OUTSIDE.iter().chain(std::iter::once(&GLOBAL_UNICAST)) {
        let end = n.0 | host_mask(n.1, 128);
        if end < a {
            lo = lo.max(end + 1);
        } else if n.0 > a {
            hi = hi.min(n.0 - 1);
        }
    }
    let len = largest_aligned(a, lo, hi, 128);
    Some((a & !host_mask(len, 128), len))
}

/// Every special block, sorted by family then address: exactly the blocks
/// [`special_block`] returns. Used to build the partition's class layer.
pub fn special_blocks() -> Vec<IpNet> {
    let mut out: Vec<IpNet> = V4
        .iter()
        .map(|&(s, l)| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(s), l).unwrap()))
        .collect();
    let mut v6: Vec<(u128, u8)> = V6_IN_GLOBAL.iter().chain(V6_OUTSIDE).copied().collect();
    // Gaps between the listed blocks outside 2000::/3 are special too.
    let mut barriers: Vec<(u128, u8)> = V6_OUTSIDE.to_vec();
    barriers.push(GLOBAL_UNICAST);
    barriers.sort();
    let mut next = 0u128; // first address not yet accounted for
    let mut done = false;
    for &(s, l) in &barriers {
        if s > next {
            for_each_cidr(next, s - 1, 128, |bs, bl| v6.push((bs, bl)));
        }
        let end = s | host_mask(l, 128);
        if end == u128::MAX {
            done = true;
        } else {
            next = end + 1;
        }
    }
    if !done {
        for_each_cidr(next, u128::MAX, 128, |bs, bl| v6.push((bs, bl)));
    }
    v6.sort();
    out.extend(
        v6.into_iter()
            .map(|(s, l)| IpNet::V6(Ipv6Net::new(Ipv6Addr::from(s), l).unwrap())),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(s: &str) -> Option<String> {
        special_block(s.parse().unwrap()).map(|n| n.to_string())
    }

    #[test]
    fn known_blocks() {
        assert_eq!(sb("10.1.2.3").as_deref(), Some("10.0.0.0/8"));
        assert_eq!(sb("100.100.0.1").as_deref(), Some("100.64.0.0/10"));
        assert_eq!(sb("255.255.255.255").as_deref(), Some("240.0.0.0/4"));
        assert_eq!(sb("198.19.0.1").as_deref(), Some("198.18.0.0/15"));
        assert_eq!(sb("8.8.8.8"), None);
        assert_eq!(sb("203.0.0.1"), None);
        assert_eq!(sb("::1").as_deref(), Some("::1/128"));
        assert_eq!(sb("::").as_deref(), Some("::/128"));
        assert_eq!(sb("::ffff:8.8.8.8").as_deref(), Some("::ffff:0.0.0.0/96"));
        assert_eq!(sb("2001:db8::1").as_deref(), Some("2001:db8::/32"));
        assert_eq!(sb("2001:0:1::1").as_deref(), Some("2001::/23"));
        assert_eq!(sb("2002:808:808::1").as_deref(), Some("2002::/16"));
        assert_eq!(sb("fd00::1").as_deref(), Some("fc00::/7"));
        assert_eq!(sb("fe80::1").as_deref(), Some("fe80::/10"));
        assert_eq!(sb("ff02::1").as_deref(), Some("ff00::/8"));
        assert_eq!(sb("4000::1").as_deref(), Some("4000::/2"));
        assert_eq!(sb("8000::1").as_deref(), Some("8000::/2")); // fc00::/7 is inside 8000::/1
        assert_eq!(sb("2001:4860::1"), None);
        assert_eq!(sb("2001:200::1"), None);
    }

    #[test]
    fn public_len_stops_at_special_blocks() {
        let pl = |s: &str, len| public_len(s.parse().unwrap(), len);
        assert_eq!(pl("20.1.2.3", 24), 24);
        assert_eq!(pl("20.1.2.3", 8), 8);
        assert_eq!(pl("192.0.1.0", 20), 24); // between 192.0.0.0/24 and 192.0.2.0/24
        assert_eq!(pl("192.0.8.0", 20), 21);
        assert_eq!(pl("100.1.0.0", 8), 10); // 100.64.0.0/10 above it
        assert_eq!(pl("100.200.0.0", 8), 9);
        assert_eq!(pl("11.0.0.0", 4), 8); // 10.0.0.0/8 below it
        assert_eq!(pl("2001:200::", 16), 23);
        assert_eq!(pl("2001:4860::", 16), 18);
        assert_eq!(pl("2a00:1450::", 16), 16);
        // Only 2000::/3 is public, and 2002::/16 (6to4) ends at 2003::.
        assert_eq!(pl("2a00:1450::", 2), 5);
        assert_eq!(pl("3fff::", 1), 4);
        assert_eq!(pl("2a00:1450::", 56), 56);
        // Every answer is public and exactly special-free and maximal.
        for (a, len) in [("192.0.8.0", 20u8), ("100.200.0.0", 8), ("2001:4860::", 16)] {
            let ip: IpAddr = a.parse().unwrap();
            let got = public_len(ip, len);
            let net = IpNet::new(ip, got).unwrap().trunc();
            assert!(special_blocks()
                .iter()
                .all(|s| !net.contains(s) && !s.contains(&net)));
            let wider = IpNet::new(ip, got - 1).unwrap().trunc();
            assert!(got == len || special_blocks().iter().any(|s| wider.contains(s)));
        }
    }

    #[test]
    fn residual_blocks_avoid_listed_ones() {
        // ::2 sits between ::1/128 and ::ffff:0:0/96.
        assert_eq!(sb("::2").as_deref(), Some("::2/127"));
        // fe00:: sits between fc00::/7 and fe80::/10.
        assert_eq!(sb("fe00::1").as_deref(), Some("fe00::/9"));
    }

    #[test]
    fn list_matches_lookup() {
        let blocks = special_blocks();
        for w in blocks.windows(2) {
            if let (IpNet::V6(a), IpNet::V6(b)) = (w[0], w[1]) {
                assert!(a.broadcast() < b.network(), "{a} overlaps {b}");
            }
        }
        for n in &blocks {
            for a in [n.network(), n.broadcast()] {
                assert_eq!(special_block(a), Some(*n), "{a} in {n}");
            }
        }
        // Outside 2000::/3 everything is covered.
        let covered: u128 = blocks
            .iter()
            .filter_map(|n| match n {
                IpNet::V6(n) if !contains(GLOBAL_UNICAST, 128, u128::from(n.network())) => {
                    Some(1u128.checked_shl(128 - n.prefix_len() as u32).unwrap_or(0))
                }
                _ => None,
            })
            .fold(0u128, |a, b| a.wrapping_add(b));
        assert_eq!(covered, (7u128 << 125));
    }
}
