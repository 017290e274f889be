//! Reproducible query files for the benchmark workloads (`meridian-loadgen gen`).
//!
//! The same seed always gives the same files (a fixed splitmix64 generator, no
//! external RNG whose stream could change between versions). Files carry no
//! comment lines, so the ones without ECS also work as dnsperf `-d` input.
//!
//! * `static.txt`    `www.ZONE A` (a static record)
//! * `pool.txt`      `one.ZONE A` and `shuffle.ZONE A` (pool answers)
//! * `geo-noecs.txt` `geo.ZONE A` without ECS (located by the source, 127.0.0.1)
//! * `geo-ecs.txt`   `geo.ZONE A SUBNET`: distinct IPv4 /24s drawn uniformly from
//!   the public IPv4 space (special-use ranges skipped), plus a share of IPv6
//!   /56s from the five RIR /12 blocks.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// Special-use IPv4 ranges (RFC 6890 and friends) that real clients never come from.
const SPECIAL_V4: [(u32, u8); 15] = [
    (0x0000_0000, 8),  // 0.0.0.0/8 "this network"
    (0x0a00_0000, 8),  // 10.0.0.0/8 private
    (0x6440_0000, 10), // 100.64.0.0/10 CGNAT
    (0x7f00_0000, 8),  // 127.0.0.0/8 loopback
    (0xa9fe_0000, 16), // 169.254.0.0/16 link-local
    (0xac10_0000, 12), // 172.16.0.0/12 private
    (0xc000_0000, 24), // 192.0.0.0/24 IETF protocol assignments
    (0xc000_0200, 24), // 192.0.2.0/24 TEST-NET-1
    (0xc058_6300, 24), // 192.88.99.0/24 6to4 relay anycast
    (0xc0a8_0000, 16), // 192.168.0.0/16 private
    (0xc612_0000, 15), // 198.18.0.0/15 benchmarking
    (0xc633_6400, 24), // 198.51.100.0/24 TEST-NET-2
    (0xcb00_7100, 24), // 203.0.113.0/24 TEST-NET-3
    (0xe000_0000, 4),  // 224.0.0.0/4 multicast
    (0xf000_0000, 4),  // 240.0.0.0/4 reserved, broadcast
];

/// The RIR IPv6 blocks (APNIC, ARIN, LACNIC, RIPE NCC, AFRINIC), top 16 bits of each /12.
const RIR_V6: [u16; 5] = [0x2400, 0x2600, 0x2800, 0x2a00, 0x2c00];

/// splitmix64: tiny, fast and stable forever.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0), without modulo bias worth caring about here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

pub fn is_special_v4(addr: u32) -> bool {
    SPECIAL_V4
        .iter()
        .any(|&(net, len)| addr >> (32 - len) == net >> (32 - len))
}

/// `n` distinct client subnets: IPv4 /24s and about `v6_percent` % IPv6 /56s, in random order.
pub fn subnets(seed: u64, n: usize, v6_percent: u32) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut seen4 = HashSet::new();
    let mut seen6 = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        if rng.below(100) < v6_percent as u64 {
            // 16 bits of block, then 44 random bits below the /12: a /56.
            let block = RIR_V6[rng.below(RIR_V6.len() as u64) as usize] as u64;
            let prefix56 = (block << 40) | rng.below(1 << 44);
            if seen6.insert(prefix56) {
                let addr = Ipv6Addr::from((prefix56 as u128) << 72);
                out.push(format!("{addr}/56"));
            }
        } else {
            let net = (rng.next_u64() as u32) & 0xffff_ff00;
            if !is_special_v4(net) && seen4.insert(net) {
                out.push(format!("{}/24", Ipv4Addr::from(net)));
            }
        }
    }
    out
}

/// The generated files, as (file name, contents).
pub fn files(zone: &str, seed: u64, n: usize, v6_percent: u32) -> Vec<(&'static str, String)> {
    let zone = zone.trim_end_matches('.');
    let mut ecs = String::new();
    for s in subnets(seed, n, v6_percent) {
        let _ = writeln!(ecs, "geo.{zone} A {s}");
    }
    vec![
        ("static.txt", format!("www.{zone} A\n")),
        ("pool.txt", format!("one.{zone} A\nshuffle.{zone} A\n")),
        ("geo-noecs.txt", format!("geo.{zone} A\n")),
        ("geo-ecs.txt", ecs),
    ]
}

/// Writes the files into `dir` (created if missing) and returns their paths.
pub fn write(
    dir: &Path,
    zone: &str,
    seed: u64,
    n: usize,
    v6_percent: u32,
) -> io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (name, text) in files(zone, seed, n, v6_percent) {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        paths.push(p.display().to_string());
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::parse_file;

    #[test]
    fn special_ranges() {
        for a in [
            "10.1.2.0",
            "127.0.0.0",
            "192.168.5.0",
            "172.31.0.0",
            "100.127.0.0",
            "224.0.0.0",
            "255.255.255.0",
            "198.19.0.0",
            "0.1.0.0",
        ] {
            assert!(is_special_v4(a.parse::<Ipv4Addr>().unwrap().into()), "{a}");
        }
        for a in [
            "8.8.8.0",
            "172.32.0.0",
            "100.128.0.0",
            "198.20.0.0",
            "223.255.255.0",
        ] {
            assert!(!is_special_v4(a.parse::<Ipv4Addr>().unwrap().into()), "{a}");
        }
    }

    #[test]
    fn subnets_are_reproducible_distinct_and_public() {
        let a = subnets(7, 2000, 10);
        assert_eq!(a, subnets(7, 2000, 10));
        assert_ne!(a, subnets(8, 2000, 10));
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 2000);
        let v6 = a.iter().filter(|s| s.ends_with("/56")).count();
        assert!((100..=300).contains(&v6), "about 10 % IPv6: {v6}");
        let mut first_octets = HashSet::new();
        for s in &a {
            if let Some(v4) = s.strip_suffix("/24") {
                let ip: Ipv4Addr = v4.parse().unwrap();
                assert!(!is_special_v4(ip.into()) && ip.octets()[3] == 0, "{s}");
                first_octets.insert(ip.octets()[0]);
            } else {
                let ip: Ipv6Addr = s.strip_suffix("/56").unwrap().parse().unwrap();
                assert!(RIR_V6.contains(&(ip.segments()[0] & 0xfff0)), "{s}");
                assert_eq!(u128::from(ip) & ((1u128 << 72) - 1), 0, "{s}");
            }
        }
        assert!(first_octets.len() > 150, "spread over the space");
    }

    #[test]
    fn files_parse_back() {
        for (name, text) in files("example.test.", 1, 50, 10) {
            let qs = parse_file(&text).unwrap();
            match name {
                "geo-ecs.txt" => {
                    assert_eq!(qs.len(), 50);
                    assert!(qs
                        .iter()
                        .all(|q| q.name == "geo.example.test" && q.ecs.is_some()));
                }
                "pool.txt" => assert_eq!(qs.len(), 2),
                _ => assert!(qs.len() == 1 && qs[0].ecs.is_none()),
            }
        }
    }
}
