//! Spec 5, scope = the decision boundary, proved against the running server.
//!
//! For thousands of seeded random public addresses and for the addresses at
//! every database network's edges, query with ECS (/24, /32, random lengths;
//! IPv6 /56, /48, /64, /128) and check the returned block ADDRESS/SCOPE:
//!
//! - every address in it (first, last and random ones, asked with SOURCE =
//!   scope or a full-length SOURCE) gets the same answer set and exactly the
//!   same block back: blocks never overlap;
//! - it is the largest such block: the other half of its parent block is
//!   either split (a longer scope) or answered differently. Only where the
//!   parent holds no special-purpose space, which is never merged with
//!   public space (its ECS addresses are decided on the resolver).
//!
//! Runs over the bundled example, the precedence and nearest fixtures, and a
//! dense random database built with mkgeo (hundreds of adjacent networks).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::common::{Server, TempDir};
use crate::geo_common::*;
use ipnet::IpNet;

/// What one property run covers.
struct Run {
    server: SocketAddr,
    name: &'static str,
    /// Different pool lists always give different answer sets, so a sibling
    /// block with the same answer and scope proves the block not maximal.
    /// (False for nearest mode: lists can share a first pool.)
    strict_max: bool,
    /// An independent expectation: the IPv4 answer set for an address,
    /// worked out from the database's CSV and the rules by the test.
    oracle: Option<Box<dyn Fn(IpAddr) -> Vec<String>>>,
}

/// Counters, to show the run did real work.
#[derive(Default, Debug)]
struct Stats {
    samples: usize,
    queries: usize,
    longer_than_source: usize,
    shorter_than_source: usize,
    max_checked: usize,
    oracle_checked: usize,
}

fn overlaps_special(first: IpAddr, last: IpAddr) -> bool {
    meridian::geo::special_blocks()
        .iter()
        .any(|b| match (b, first, last) {
            (IpNet::V4(b), IpAddr::V4(f), IpAddr::V4(l)) => b.network() <= l && f <= b.broadcast(),
            (IpNet::V6(b), IpAddr::V6(f), IpAddr::V6(l)) => b.network() <= l && f <= b.broadcast(),
            _ => false,
        })
}

impl Run {
    /// Query `addr/len`, then prove the returned block.
    fn check(&self, c: &mut Client, rng: &mut Rng, st: &mut Stats, addr: IpAddr, len: u8) {
        let max = max_len(addr);
        let masked = block(addr, len).0;
        if meridian::geo::special_block(masked).is_some() {
            return; // decided on the resolver: tests/geo/ecs_client_address.rs
        }
        for qtype in [A, AAAA] {
            let (set, s) = c.geo(self.name, qtype, addr, len);
            st.samples += 1;
            st.queries += 1;
            assert!(!set.is_empty(), "{addr}/{len}: empty answer");
            if let (Some(o), A) = (&self.oracle, qtype) {
                assert_eq!(
                    set,
                    o(masked),
                    "{} {addr}/{len}: not the configured pools",
                    self.name
                );
                st.oracle_checked += 1;
            }
            assert!(
                s > 0,
                "{} {addr}/{len}: scope 0 for a tailored answer",
                self.name
            );
            if s > len {
                st.longer_than_source += 1;
            } else if s < len {
                st.shorter_than_source += 1;
            }
            let (first, last) = block(masked, s);
            let mut probes = vec![(first, s), (first, max), (last, max), (last, s)];
            for _ in 0..2 {
                probes.push((inside(rng, first, s), max));
            }
            let plen = s + rng.below((max - s) as u64 + 1) as u8;
            probes.push((inside(rng, first, s), plen));
            for (p, pl) in probes {
                let (set2, s2) = c.geo(self.name, qtype, p, pl);
                st.queries += 1;
                assert_eq!(
                    (&set2, s2),
                    (&set, s),
                    "{} {qtype}: {addr}/{len} got block {first}/{s} = {set:?}, but {p}/{pl} inside it got {set2:?} scope {s2}",
                    self.name
                );
            }
            // Maximality: the sibling half of the parent block.
            if s == 0 {
                continue;
            }
            let (pfirst, plast) = block(first, s - 1);
            if overlaps_special(pfirst, plast) {
                continue;
            }
            let sibling = if pfirst == first {
                step(last, 1)
            } else {
                pfirst
            };
            let (set3, s3) = c.geo(self.name, qtype, sibling, s);
            st.queries += 1;
            assert!(
                s3 >= s,
                "{} {qtype}: blocks overlap: {first}/{s} and {sibling}/{s} answered with scope {s3}",
                self.name
            );
            if self.strict_max && s3 == s {
                st.max_checked += 1;
                assert_ne!(
                    set3, set,
                    "{} {qtype}: {first}/{s} is not the largest block: its sibling {sibling}/{s} answers the same",
                    self.name
                );
            }
        }
    }
}

/// Networks (and their edges) of a mkgeo CSV.
fn csv_networks(text: &str) -> Vec<IpNet> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("network,"))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

fn edges(nets: &[IpNet]) -> Vec<IpAddr> {
    let mut v = Vec::new();
    for n in nets {
        let (f, l) = (n.network(), n.broadcast());
        v.extend([step(f, -1), f, step(f, 1), step(l, -1), l, step(l, 1)]);
    }
    v
}

/// The full property run for one name: the edges of `edge_nets`, then
/// `random` addresses (some anywhere, some inside `nets`).
fn prove(run: &Run, edge_nets: &[IpNet], nets: &[IpNet], seed: u64, random: usize) -> Stats {
    let mut c = Client::new(run.server);
    let mut rng = Rng(seed);
    let mut st = Stats::default();
    // Block edges of the database networks (and of nets overrides).
    for a in edges(edge_nets) {
        let lens: &[u8] = if a.is_ipv4() { &[32, 24] } else { &[128, 56] };
        for &l in lens {
            run.check(&mut c, &mut rng, &mut st, a, l);
        }
    }
    // Random public addresses anywhere, and inside the database's networks.
    for i in 0..random {
        let (addr, len) = match i % 8 {
            0 | 1 => (IpAddr::V4(rng.public_v4()), 24),
            2 => (IpAddr::V4(rng.public_v4()), 32),
            3 => (IpAddr::V4(rng.public_v4()), 1 + rng.below(32) as u8),
            4 => (IpAddr::V6(rng.public_v6()), 56),
            5 => (
                IpAddr::V6(rng.public_v6()),
                [48, 64, 128, 1 + rng.below(128) as u8][rng.below(4) as usize],
            ),
            _ => {
                let n = nets[rng.below(nets.len() as u64) as usize];
                let a = inside(&mut rng, n.network(), n.prefix_len());
                let len = match (a.is_ipv4(), rng.below(3)) {
                    (true, 0) => 24,
                    (true, 1) => 32,
                    (true, _) => 16 + rng.below(17) as u8,
                    (false, 0) => 56,
                    (false, 1) => 128,
                    (false, _) => 32 + rng.below(97) as u8,
                };
                (a, len)
            }
        };
        run.check(&mut c, &mut rng, &mut st, addr, len);
    }
    st
}

fn example_nets() -> Vec<IpNet> {
    csv_networks(&std::fs::read_to_string(crate::common::root().join("geo/example.csv")).unwrap())
}

#[test]
fn bundled_example_blocks_are_exact() {
    let s = Server::example();
    let run = Run {
        server: s.addr,
        name: "geo.example.test.",
        strict_max: true,
        oracle: Some(Box::new(csv_oracle(
            &std::fs::read_to_string(crate::common::root().join("geo/example.csv")).unwrap(),
            example_rule,
        ))),
    };
    let st = prove(
        &run,
        &example_nets(),
        &example_nets(),
        0x9e37_79b9_7f4a_7c15,
        2400,
    );
    eprintln!("{st:?}");
    assert!(st.samples > 4000 && st.max_checked > 1000, "{st:?}");
    assert!(st.oracle_checked > 2000, "{st:?}");
    assert!(
        st.longer_than_source > 0 && st.shorter_than_source > 1000,
        "{st:?}"
    );
}

#[test]
fn precedence_and_nearest_blocks_are_exact() {
    let s = Server::start(&rules_config(), &[]);
    let mut nets = example_nets();
    for n in [
        "8.8.8.0/24",
        "8.8.0.0/16",
        "8.128.0.0/24",
        "2001:4860:4860::/64",
        "85.214.0.0/16",
    ] {
        nets.push(n.parse().unwrap());
    }
    for (name, strict, seed) in [
        ("prec.geo.test.", true, 7u64),
        ("near.geo.test.", false, 11),
        ("geo.geo.test.", true, 13),
    ] {
        let run = Run {
            server: s.addr,
            name,
            strict_max: strict,
            oracle: None,
        };
        let st = prove(&run, &nets, &nets, seed, 600);
        eprintln!("{name}: {st:?}");
        assert!(st.samples > 1000, "{st:?}");
    }
}

/// A dense random database: hundreds of adjacent networks of random sizes
/// and continents, so block edges are everywhere.
fn dense_csv(rng: &mut Rng) -> String {
    let places = [
        ("NA", "US"),
        ("EU", "DE"),
        ("AS", "JP"),
        ("AS", "IN"),
        ("SA", "BR"),
        ("OC", "AU"),
        ("AF", "ZA"),
    ];
    let mut out = String::from("network,continent,country,subdivision,latitude,longitude\n");
    let row = |out: &mut String, net: String, rng: &mut Rng| {
        let (cont, cc) = places[rng.below(places.len() as u64) as usize];
        writeln!(out, "{net},{cont},{cc},,0,0").unwrap();
    };
    // IPv4: 11.0.0.0/8 and 151.0.0.0/8, networks /12../30 with random gaps.
    for base in [0x0B00_0000u32, 0x9700_0000] {
        let end = base + (1 << 24);
        let mut cur = base as u64;
        while cur < end as u64 {
            let len = 12 + rng.below(19) as u32;
            let size = 1u64 << (32 - len);
            cur = cur.div_ceil(size) * size;
            if cur + size > end as u64 {
                break;
            }
            row(
                &mut out,
                format!("{}/{len}", Ipv4Addr::from(cur as u32)),
                rng,
            );
            cur += size
                + if rng.below(3) == 0 {
                    size * rng.below(4)
                } else {
                    0
                };
        }
    }
    // IPv6: 2400::/16, networks /24../72.
    let base = 0x2400u128 << 112;
    let end = base + (1u128 << 112);
    let mut cur = base;
    let mut n = 0;
    while cur < end && n < 400 {
        let len = 24 + rng.below(49) as u32;
        let size = 1u128 << (128 - len);
        cur = cur.div_ceil(size) * size;
        if cur + size > end {
            break;
        }
        row(&mut out, format!("{}/{len}", Ipv6Addr::from(cur)), rng);
        cur += size
            + if rng.below(3) == 0 {
                size * rng.below(4) as u128
            } else {
                0
            };
        n += 1;
    }
    out
}

/// An IPv4 answer worked out from a mkgeo CSV's rows and a rule function
/// of (continent, country); `None` = not in the database.
fn csv_oracle(
    csv: &str,
    rule: fn(Option<(&str, &str)>) -> Vec<&'static str>,
) -> impl Fn(IpAddr) -> Vec<String> {
    let rows: Vec<(IpNet, String, String)> = csv
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("network,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[1].to_string(), f[2].to_string())
        })
        .collect();
    move |a: IpAddr| {
        let place = rows
            .iter()
            .find(|r| r.0.contains(&a))
            .map(|r| (r.1.as_str(), r.2.as_str()));
        let mut v: Vec<String> = rule(place).into_iter().map(String::from).collect();
        v.sort();
        v
    }
}

/// The dense config: country JP, then continent, then default.
fn dense_rule(place: Option<(&str, &str)>) -> Vec<&'static str> {
    match place {
        Some((_, "JP")) => vec!["192.0.2.6"],
        Some(("NA", _)) => vec!["192.0.2.1", "192.0.2.11"],
        Some(("EU", _)) => vec!["192.0.2.2"],
        Some(("AS", _)) => vec!["192.0.2.3"],
        Some(("SA", _)) => vec!["192.0.2.4"],
        Some(("OC", _)) => vec!["192.0.2.5"],
        _ => vec!["192.0.2.9"],
    }
}

/// zones/meridian.toml: continent rules, then default.
fn example_rule(place: Option<(&str, &str)>) -> Vec<&'static str> {
    match place.map(|p| p.0) {
        Some("NA") => vec!["192.0.2.100", "192.0.2.101"],
        Some("EU") => vec!["198.51.100.100", "198.51.100.101"],
        Some("AS") => vec!["203.0.113.100", "203.0.113.101"],
        Some("SA") => vec!["203.0.113.200"],
        _ => vec!["192.0.2.200"],
    }
}

#[test]
fn dense_random_database_blocks_are_exact() {
    let dir = TempDir::new("geo-dense");
    let mut rng = Rng(0xdead_beef_cafe);
    let csv = dir.write("dense.csv", &dense_csv(&mut rng));
    mkgeo(&csv, &dir.0.join("dense.mmdb"));
    let zone = fixture("geo.test.zone");
    let cfg = format!(
        r#"
[geo]
database = "dense.mmdb"
[[zone]]
origin = "geo.test."
file = "{}"
[pool.na]
members = ["192.0.2.1", "192.0.2.11", "2001:db8::1"]
[pool.eu]
members = ["192.0.2.2", "2001:db8::2"]
[pool.as]
members = ["192.0.2.3", "2001:db8::3"]
[pool.sa]
members = ["192.0.2.4", "2001:db8::4"]
[pool.oc]
members = ["192.0.2.5", "2001:db8::5"]
[pool.jp]
members = ["192.0.2.6", "2001:db8::6"]
[pool.def]
members = ["192.0.2.9", "2001:db8::9"]
[name."geo.geo.test"]
mode = "all"
[name."geo.geo.test".geo]
continent = {{ NA = ["na", "eu"], EU = ["eu", "na"], AS = ["as"], SA = ["sa"], OC = ["oc", "as"] }}
country = {{ JP = ["jp", "as"] }}
default = ["def"]
"#,
        zone.display()
    );
    let cfg = dir.write("dense.toml", &cfg);
    let s = Server::start(&cfg, &[]);
    let nets = csv_networks(&std::fs::read_to_string(&csv).unwrap());
    assert!(nets.len() > 300, "{} networks", nets.len());
    let run = Run {
        server: s.addr,
        name: "geo.geo.test.",
        strict_max: true,
        oracle: Some(Box::new(csv_oracle(
            &std::fs::read_to_string(&csv).unwrap(),
            dense_rule,
        ))),
    };
    // Edges of a sample of the networks (all of them would be slow), then
    // random addresses, most inside the dense ranges.
    let mut sample: Vec<IpNet> = nets.iter().step_by(3).copied().collect();
    sample.truncate(250);
    let st = prove(&run, &sample, &nets, 0x1234_5678, 0);
    let st2 = prove(&run, &[], &nets, 0x8765_4321, 2000);
    eprintln!("{st:?} {st2:?}");
    assert!(st.max_checked + st2.max_checked > 1000);
    assert!(st.longer_than_source + st2.longer_than_source > 100);
    assert!(st.oracle_checked + st2.oracle_checked > 4000);
}

/// The same proof through dig for a few subnets: the block's first and last
/// addresses, asked with SOURCE = scope and /32, get the same answer.
#[test]
fn blocks_are_exact_by_dig() {
    if !crate::common::need("blocks_are_exact_by_dig", &["dig"]) {
        return;
    }
    let s = Server::example();
    let mut rng = Rng(0x00d1_90d1);
    let mut subnets: Vec<(IpAddr, u8)> = [
        "8.8.8.0/24",
        "85.214.0.0/24",
        "133.242.0.0/24",
        "200.160.0.0/24",
        "203.0.0.0/24",
        "203.0.0.128/25",
        "5.2.127.0/24",
        "2001:4860::/56",
        "2a00:1450:4001::/56",
    ]
    .iter()
    .map(|s| {
        let (a, l) = s.split_once('/').unwrap();
        (a.parse().unwrap(), l.parse().unwrap())
    })
    .collect();
    for _ in 0..8 {
        subnets.push((IpAddr::V4(rng.public_v4()), 24));
    }
    let ask = |a: IpAddr, l: u8| {
        let d = dig(
            s.addr,
            "geo.example.test.",
            "A",
            &[&format!("+subnet={a}/{l}")],
        );
        assert_eq!(d.status, "NOERROR", "{}", d.text);
        let echoed = d.subnet.clone().unwrap();
        assert!(
            echoed.starts_with(&format!("{}/{l}/", block(a, l).0)),
            "{echoed}"
        );
        (d.addrs.clone(), d.scope())
    };
    for (a, l) in subnets {
        let (set, sc) = ask(a, l);
        assert!(sc > 0);
        let (first, last) = block(block(a, l).0, sc);
        let full = max_len(a);
        for (p, pl) in [
            (first, sc),
            (first, full),
            (last, full),
            (inside(&mut rng, first, sc), full),
        ] {
            assert_eq!(
                ask(p, pl),
                (set.clone(), sc),
                "{a}/{l} -> {first}/{sc}; {p}/{pl}"
            );
        }
    }
}
