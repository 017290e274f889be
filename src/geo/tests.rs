//! Property tests of the partition against direct rule evaluation, over the
//! bundled example database and hand-built ones (RFC 7871 §7.2.1 exactness).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use ipnet::IpNet;

use super::testdb::{Builder, V};
use super::*;

fn example() -> GeoDb {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("geo/example.mmdb");
    GeoDb::open(&p, Schema::Auto).expect("geo/example.mmdb (rebuild with mkgeo)")
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// Tiny deterministic xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn wide(&mut self) -> u128 {
        (self.next() as u128) << 64 | self.next() as u128
    }
}

fn first_last(n: IpNet) -> (u128, u128) {
    match n {
        IpNet::V4(n) => (
            u32::from(n.network()) as u128,
            u32::from(n.broadcast()) as u128,
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}

fn addr(v4: bool, a: u128) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(a as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(a))
    }
}

/// Check the compiled map against the slow evaluation: coverage, no
/// overlap, homogeneity, maximality, and random addresses.
fn check(db: Option<&GeoDb>, rules: &RuleSet, samples: usize) -> GeoMap {
    let map = GeoMap::compile(db, rules);
    let mut memo: HashMap<IpAddr, Vec<usize>> = HashMap::new();
    let mut direct = |a: IpAddr| {
        memo.entry(a)
            .or_insert_with(|| decide_direct(db, rules, a).0)
            .clone()
    };
    let blocks: Vec<(IpNet, u32)> = map.blocks().collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    // Cover each family exactly, in order, without overlap.
    for v4 in [true, false] {
        let fam: Vec<&(IpNet, u32)> = blocks
            .iter()
            .filter(|b| matches!(b.0, IpNet::V4(_)) == v4)
            .collect();
        let mut next = Some(0u128);
        for (n, _) in &fam {
            let (f, l) = first_last(*n);
            assert_eq!(Some(f), next, "gap or overlap before {n}");
            next = l.checked_add(1).filter(|_| !(v4 && l == u32::MAX as u128));
        }
        assert_eq!(next, None, "family not covered to the top");
    }

    for (i, &(n, id)) in blocks.iter().enumerate() {
        let v4 = matches!(n, IpNet::V4(_));
        let (f, l) = first_last(n);
        let want = map.decision(id).to_vec();
        let class = special_block(addr(v4, f));
        let mut probes = vec![f, l];
        for _ in 0..3 {
            probes.push(f + rng.wide() % (l - f).saturating_add(1).max(1));
        }
        for a in probes {
            let a = addr(v4, a);
            assert_eq!(direct(a), want, "{a} in block {n}");
            assert_eq!(special_block(a), class, "{a} in block {n}: special class");
            assert_eq!(map.decide(a), (id, n.prefix_len()), "{a} in block {n}");
        }
        // Maximality: the sibling must hold a different decision or class.
        if n.prefix_len() > 0 {
            let bit = 1u128 << ((if v4 { 32 } else { 128 }) - n.prefix_len() as u32);
            let sib = IpNet::new(addr(v4, f ^ bit), n.prefix_len()).unwrap();
            let (sf, sl) = first_last(sib);
            let (lo, hi) = if sf > f {
                (i + 1, blocks.len())
            } else {
                (0, i)
            };
            let differs = blocks[lo..hi]
                .iter()
                .filter(|(b, _)| matches!(b, IpNet::V4(_)) == v4)
                .filter(|(b, _)| {
                    let (bf, _) = first_last(*b);
                    bf >= sf && bf <= sl
                })
                .any(|(b, _)| {
                    let a = addr(v4, first_last(*b).0);
                    direct(a) != want || special_block(a) != class
                });
            assert!(differs, "block {n} could be merged with its sibling {sib}");
        }
    }

    // Random addresses: uniform, inside blocks, and next to boundaries.
    for k in 0..samples {
        let v4 = k % 2 == 0;
        let a = match k % 6 {
            0 | 1 => {
                let r = rng.wide();
                if v4 {
                    r & 0xFFFF_FFFF
                } else if rng.next().is_multiple_of(2) {
                    (r >> 3) | (1 << 125) // inside 2000::/3
                } else {
                    r
                }
            }
            2 | 3 => {
                let fam: Vec<&(IpNet, u32)> = blocks
                    .iter()
                    .filter(|b| matches!(b.0, IpNet::V4(_)) == v4)
                    .collect();
                let (f, l) = first_last(fam[rng.next() as usize % fam.len()].0);
                f + rng.wide() % (l - f).saturating_add(1).max(1)
            }
            _ => {
                let fam: Vec<&(IpNet, u32)> = blocks
                    .iter()
                    .filter(|b| matches!(b.0, IpNet::V4(_)) == v4)
                    .collect();
                let (f, _) = first_last(fam[rng.next() as usize % fam.len()].0);
                f.wrapping_sub(rng.next() as u128 % 3) & if v4 { 0xFFFF_FFFF } else { u128::MAX }
            }
        };
        let a = addr(v4, a);
        let (id, len) = map.decide(a);
        assert_eq!(map.decision(id), direct(a).as_slice(), "random {a}");
        let blk = IpNet::new(a, len).unwrap().trunc();
        let (f, l) = first_last(blk);
        for b in [f, l] {
            assert_eq!(map.decide(addr(v4, b)), (id, len), "{a}: block {blk} edge");
        }
        assert!(map.explain(db, a).consistent, "{a}");
    }
    map
}

fn scope(map: &GeoMap, a: &str) -> (Vec<usize>, u8) {
    let (id, len) = map.decide(ip(a));
    (map.decision(id).to_vec(), len)
}

fn geo_rules() -> RuleSet {
    // Pools: 0 us, 1 eu, 2 asia, 3 fallback, 4 california, 5 override.
    let mut r = RuleSet {
        default: vec![3],
        ..Default::default()
    };
    r.country.insert("US".into(), vec![0, 3]);
    r.country.insert("jp".into(), vec![2, 3]); // keys are case-insensitive
    r.continent.insert("EU".into(), vec![1, 3]);
    r.subdivision.insert("US-CA".into(), vec![4, 0]);
    r
}

#[test]
fn example_db_lookups() {
    let db = example();
    assert_eq!(db.schema(), Schema::MaxMind);
    assert_eq!(db.database_type(), "meridian-example-City");
    let (l, len) = db.lookup(ip("8.8.8.8")).unwrap();
    assert_eq!(
        (l.country.as_deref(), l.continent.as_deref(), len),
        (Some("US"), Some("NA"), 9)
    );
    let (l, _) = db.lookup(ip("8.130.0.1")).unwrap();
    assert_eq!(l.subdivisions, vec!["US-CA".to_string()]);
    let (l, len) = db.lookup(ip("2a00:1450:4001::1")).unwrap();
    assert_eq!((l.country.as_deref(), len), (Some("DE"), 37));
    let (l, len) = db.lookup(ip("203.0.0.1")).unwrap();
    assert_eq!((l.country.as_deref(), len), (Some("JP"), 25));
    assert!(l.coords.is_some());
    assert_eq!(db.lookup(ip("10.0.0.1")), None);
    // IPv4 is reported once, as IPv4: not through ::/96 or mapped forms.
    assert_eq!(db.lookup(ip("::808:808")), None);
    assert_eq!(db.lookup(ip("::ffff:8.8.8.8")), None);

    let mut nets = Vec::new();
    db.for_each_network(|n, _| nets.push(n));
    assert_eq!(nets.len(), 31);
    assert!(nets.contains(&net("8.0.0.0/9")));
    assert!(nets.contains(&net("2804::/16")));
    assert!(nets
        .iter()
        .all(|n| !matches!(n, IpNet::V6(v) if v.network().segments()[0] == 0)));
}

#[test]
fn default_only_is_uniform() {
    let rules = RuleSet {
        default: vec![0, 1],
        ..Default::default()
    };
    let map = check(None, &rules, 2000);
    assert!(map.is_uniform());
    assert_eq!(map.decision_count(), 1);
    // 8.0.0.0/7 is the widest public block around 8.8.8.8 (10/8 is special).
    assert_eq!(scope(&map, "8.8.8.8"), (vec![0, 1], 7));
    assert_eq!(scope(&map, "10.9.9.9"), (vec![0, 1], 8));
    let db = example();
    assert!(GeoMap::compile(Some(&db), &rules).is_uniform());
}

#[test]
fn example_db_with_geo_rules() {
    let db = example();
    let map = check(Some(&db), &geo_rules(), 6000);
    assert!(!map.is_uniform());
    assert_eq!(scope(&map, "8.8.8.8"), (vec![0, 3], 9));
    assert_eq!(scope(&map, "8.130.0.1"), (vec![4, 0], 10));
    assert_eq!(scope(&map, "85.214.1.1"), (vec![1, 3], 15));
    assert_eq!(scope(&map, "133.1.2.3"), (vec![2, 3], 8));
    assert_eq!(scope(&map, "200.200.0.1"), (vec![3], 7)); // BR: no rule, merges
    assert_eq!(scope(&map, "2a00:1450:4001::1"), (vec![1, 3], 37));
    assert_eq!(scope(&map, "2001:4860:4860::8888"), (vec![0, 3], 32));
    // A /24 query gets a longer scope where the map splits inside it.
    assert_eq!(scope(&map, "203.0.0.1"), (vec![2, 3], 25));
    assert_eq!(scope(&map, "203.0.0.200"), (vec![3], 25));
    // DE and FR are both EU: the fragmented pair merges into one /15.
    assert_eq!(scope(&map, "5.1.2.3"), (vec![1, 3], 15));
    assert_eq!(scope(&map, "5.2.1.1"), (vec![0, 3], 17));
    // Default never claims a block holding another answer.
    assert_eq!(scope(&map, "7.255.0.1"), (vec![3], 7));
    // Special space: own blocks, even with the default answer.
    assert_eq!(scope(&map, "10.1.1.1"), (vec![3], 8));
    assert_eq!(scope(&map, "2001:db8::1"), (vec![3], 32));
    assert_eq!(scope(&map, "2001::1"), (vec![3], 23));
    let e = map.explain(Some(&db), ip("8.8.8.8"));
    assert_eq!(e.rule, "country US");
    assert_eq!(e.db_network, Some(net("8.0.0.0/9")));
    assert!(e.to_string().contains("block 8.0.0.0/9"), "{e}");

    // With per-country rules the fragmented region splits by /16.
    let mut r = geo_rules();
    r.country.insert("FR".into(), vec![5]);
    let map = check(Some(&db), &r, 2000);
    assert_eq!(scope(&map, "5.1.2.3"), (vec![5], 16));
    assert_eq!(scope(&map, "5.0.2.3"), (vec![1, 3], 16));
}

#[test]
fn cidr_overrides() {
    let db = example();
    let mut r = geo_rules();
    r.nets = vec![
        (net("8.8.0.0/16"), vec![1]),
        (net("8.8.8.0/24"), vec![5]),    // nested, longer wins
        (net("8.1.0.0/16"), vec![0, 3]), // same as US: must merge away
        (net("10.1.0.0/16"), vec![5]),   // inside special space
        (net("2001:4860:4860::/48"), vec![5]),
        (net("2804::/16"), vec![2]),  // exactly a DB network
        (net("8.8.8.0/24"), vec![4]), // duplicate: first listed wins
        (net("203.0.0.77/32"), vec![5]),
    ];
    let map = check(Some(&db), &r, 6000);
    assert_eq!(scope(&map, "8.8.8.8"), (vec![5], 24));
    assert_eq!(scope(&map, "8.8.9.1"), (vec![1], 24));
    assert_eq!(scope(&map, "8.8.200.1"), (vec![1], 17));
    assert_eq!(scope(&map, "8.9.0.1"), (vec![0, 3], 16));
    assert_eq!(scope(&map, "8.1.2.3"), (vec![0, 3], 13));
    assert_eq!(scope(&map, "10.1.2.3"), (vec![5], 16));
    assert_eq!(scope(&map, "10.2.0.1"), (vec![3], 15));
    assert_eq!(scope(&map, "2001:4860:4860::8888"), (vec![5], 48));
    assert_eq!(scope(&map, "2001:4860:4861::1"), (vec![0, 3], 48));
    assert_eq!(scope(&map, "2804:1::1"), (vec![2], 16));
    assert_eq!(scope(&map, "203.0.0.77"), (vec![5], 32));
    assert_eq!(scope(&map, "203.0.0.76"), (vec![2, 3], 32));
    assert_eq!(scope(&map, "203.0.0.78"), (vec![2, 3], 31));
    assert_eq!(
        map.explain(Some(&db), ip("8.8.8.8")).rule,
        "nets 8.8.8.0/24"
    );

    // Overrides alone, no database.
    let r = RuleSet {
        nets: vec![(net("0.0.0.0/0"), vec![1]), (net("::/0"), vec![2])],
        default: vec![0],
        ..Default::default()
    };
    let map = check(None, &r, 2000);
    assert!(!map.is_uniform());
    assert_eq!(scope(&map, "8.8.8.8"), (vec![1], 7));
}

#[test]
fn nearest_mode() {
    let db = example();
    let mut r = geo_rules(); // name rules are ignored in nearest mode
    r.nearest = Some(vec![
        (0, 40.71, -74.01), // New York
        (1, 50.11, 8.68),   // Frankfurt
        (2, 35.68, 139.69), // Tokyo
        (1, 48.86, 2.35),   // Paris: second site of pool 1
    ]);
    r.nets = vec![(net("8.8.8.0/24"), vec![5])];
    let map = check(Some(&db), &r, 6000);
    assert_eq!(scope(&map, "8.8.8.8"), (vec![5], 24));
    assert_eq!(scope(&map, "8.8.9.9").0, vec![0, 1, 2]);
    assert_eq!(scope(&map, "85.214.0.1").0, vec![1, 0, 2]);
    assert_eq!(scope(&map, "133.0.0.1").0, vec![2, 1, 0]);
    assert_eq!(scope(&map, "203.0.0.200").0, vec![2, 0, 1]); // Sydney
    assert_eq!(scope(&map, "10.0.0.1"), (vec![3], 8)); // no coordinates
    assert!(map
        .explain(Some(&db), ip("133.0.0.1"))
        .rule
        .starts_with("nearest to 35.6895"));
}

fn flat_db(ip_version: u16, database_type: &'static str) -> GeoDb {
    let rec = |cc, cont, lat: V| {
        V::M(vec![
            ("country_code", V::S(cc)),
            ("continent_code", V::S(cont)),
            ("country", V::S("Some Name")), // IPinfo: a string, not a map
            ("latitude", lat),
            ("longitude", V::S("13.4")),
        ])
    };
    let mut b = Builder::new(ip_version);
    b.insert("1.0.0.0/8", &rec("de", "EU", V::F(52.5)));
    b.insert("2.0.0.0/8", &V::M(vec![("country_code", V::S("JP"))]));
    if ip_version == 6 {
        b.insert("2a00::/16", &rec("FR", "EU", V::D(48.9)));
    }
    GeoDb::from_bytes(b.finish(database_type), Schema::Auto).unwrap()
}

#[test]
fn flat_schema() {
    for (v, ty) in [(4, "ipinfo lite"), (6, "some-country-db")] {
        let db = flat_db(v, ty);
        assert_eq!(db.schema(), Schema::Flat);
        let (l, len) = db.lookup(ip("1.2.3.4")).unwrap();
        assert_eq!(l.country.as_deref(), Some("DE"));
        assert_eq!(l.continent.as_deref(), Some("EU"));
        assert_eq!(l.coords, Some((52.5, 13.4)));
        assert_eq!(len, 8);
        // Continent derived from the built-in table.
        let (l, _) = db.lookup(ip("2.2.3.4")).unwrap();
        assert_eq!(l.continent.as_deref(), Some("AS"));
        assert_eq!(l.coords, None);
        let map = check(Some(&db), &geo_rules(), 2000);
        assert_eq!(scope(&map, "1.1.1.1"), (vec![1, 3], 8));
        assert_eq!(scope(&map, "2.1.1.1"), (vec![2, 3], 8));
        if v == 6 {
            assert_eq!(scope(&map, "2a00:1::1"), (vec![1, 3], 16));
        } else {
            assert_eq!(db.lookup(ip("2a00::1")), None);
        }
    }
}

#[test]
fn maxmind_aliases_are_skipped() {
    let rec = |cc| V::M(vec![("country", V::M(vec![("iso_code", V::S(cc))]))]);
    let mut b = Builder::new(6);
    b.insert("8.0.0.0/8", &rec("US"));
    let ca = V::A(vec![V::M(vec![("iso_code", V::S("ca"))])]);
    let us_ca = V::M(vec![
        ("country", V::M(vec![("iso_code", V::S("US"))])),
        ("subdivisions", ca),
    ]);
    b.insert("9.0.0.0/8", &us_ca);
    b.insert("2a00::/16", &rec("DE"));
    b.alias("::ffff:0:0/96");
    b.alias("2002::/16");
    let db = GeoDb::from_bytes(b.finish("GeoLite2-Country"), Schema::Auto).unwrap();
    assert_eq!(db.schema(), Schema::MaxMind);
    let mut nets = Vec::new();
    db.for_each_network(|n, l| nets.push((n, l.continent.clone())));
    assert_eq!(
        nets,
        vec![
            (net("8.0.0.0/8"), Some("NA".to_string())),
            (net("9.0.0.0/8"), Some("NA".to_string())),
            (net("2a00::/16"), Some("EU".to_string()))
        ]
    );
    assert!(db.lookup(ip("8.8.8.8")).is_some());
    let (l, _) = db.lookup(ip("9.9.9.9")).unwrap();
    assert_eq!(l.subdivisions, vec!["US-CA".to_string()]);
    assert_eq!(db.lookup(ip("2002:808:808::1")), None);
    assert_eq!(db.lookup(ip("::ffff:8.8.8.8")), None);
    check(Some(&db), &geo_rules(), 2000);
}

#[test]
fn geo_types_are_shareable() {
    fn is<T: Send + Sync>() {}
    is::<GeoDb>();
    is::<GeoMap>();
}

/// Timing on a real or synthetic database:
/// `MERIDIAN_GEO_BENCH=/path/GeoLite2-City.mmdb cargo test --release --lib geo::tests::bench -- --ignored --nocapture`
#[test]
#[ignore]
fn bench() {
    use std::time::Instant;
    let path = std::env::var("MERIDIAN_GEO_BENCH").expect("set MERIDIAN_GEO_BENCH");
    let t = Instant::now();
    let db = GeoDb::open(Path::new(&path), Schema::Auto).unwrap();
    let mut n = 0;
    db.for_each_network(|_, _| n += 1);
    println!("{n} networks iterated in {:?}", t.elapsed());
    let mut nearest = geo_rules();
    nearest.nearest = Some(vec![(0, 40.7, -74.0), (1, 50.1, 8.7), (2, 35.7, 139.7)]);
    for (name, rules) in [("country", geo_rules()), ("nearest", nearest)] {
        let t = Instant::now();
        let map = GeoMap::compile(Some(&db), &rules);
        println!("{name}: compiled {map:?} in {:?}", t.elapsed());
        let mut rng = Rng(7);
        let addrs: Vec<IpAddr> = (0..1_000_000)
            .map(|i| {
                if i % 2 == 0 {
                    addr(true, rng.next() as u128 & 0xFFFF_FFFF)
                } else {
                    addr(false, (rng.wide() >> 3) | (1 << 125))
                }
            })
            .collect();
        let t = Instant::now();
        let mut acc = 0u64;
        for a in &addrs {
            let (id, len) = map.decide(*a);
            acc = acc.wrapping_add(id as u64 + len as u64);
        }
        let per = t.elapsed() / addrs.len() as u32;
        println!("{name}: decide {per:?}/query (checksum {acc})");
        for a in addrs.iter().take(2000) {
            assert!(map.explain(Some(&db), *a).consistent, "{a}");
        }
    }
}

/// `rules` with every pool index replaced through `f`.
fn relabel(rules: &RuleSet, f: impl Fn(usize) -> usize) -> RuleSet {
    let list = |v: &Vec<usize>| v.iter().map(|&p| f(p)).collect::<Vec<_>>();
    let map = |m: &std::collections::HashMap<String, Vec<usize>>| {
        m.iter().map(|(k, v)| (k.clone(), list(v))).collect()
    };
    RuleSet {
        nets: rules.nets.iter().map(|(n, v)| (*n, list(v))).collect(),
        subdivision: map(&rules.subdivision),
        country: map(&rules.country),
        continent: map(&rules.continent),
        default: list(&rules.default),
        nearest: rules
            .nearest
            .as_ref()
            .map(|s| s.iter().map(|&(p, la, lo)| (f(p), la, lo)).collect()),
    }
}

/// Every block's edges and its middle, plus random addresses.
fn probes(map: &GeoMap, n: usize) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for (net, _) in map.blocks() {
        let v4 = net.addr().is_ipv4();
        let (lo, hi) = first_last(net);
        for a in [lo, hi, lo + (hi - lo) / 2] {
            out.push(addr(v4, a));
        }
    }
    let mut rng = Rng(0x5eed_1234);
    for i in 0..n {
        let w = rng.wide();
        out.push(if i % 2 == 0 {
            addr(true, w >> 96)
        } else {
            addr(false, w)
        });
    }
    out
}

#[test]
fn names_with_one_shape_share_a_table_and_answer_as_if_alone() {
    let db = example();
    let mut a = geo_rules();
    a.nets.push((net("8.8.8.0/24"), vec![5, 1]));
    // The same shape over other pools (every pool moved by 10), keys in
    // another case and order: one table.
    let mut b = relabel(&a, |p| p + 10);
    let jp = b.country.remove("jp").unwrap();
    b.country.insert("JP".into(), jp);
    // A different shape: one list in another order.
    let mut c = a.clone();
    c.country.insert("US".into(), vec![3, 0]);

    let mut cache = TableCache::new();
    let maps = cache.compile_all(Some(&db), &[&a, &b, &c, &a], 2);
    assert_eq!(cache.len(), 2, "a, b and the second a share; c has its own");
    assert!(Arc::ptr_eq(maps[0].table(), maps[1].table()));
    assert!(Arc::ptr_eq(maps[0].table(), maps[3].table()));
    assert!(!Arc::ptr_eq(maps[0].table(), maps[2].table()));

    // Each shared map answers exactly as the map compiled for it alone:
    // the same pools and the same scope at every block edge and at
    // thousands of random addresses.
    for (shared, rules) in maps.iter().zip([&a, &b, &c, &a]) {
        let alone = GeoMap::compile(Some(&db), rules);
        assert_eq!(shared.block_count(), alone.block_count());
        for x in probes(&alone, 5000) {
            let (sid, slen) = shared.decide(x);
            let (aid, alen) = alone.decide(x);
            assert_eq!(
                (shared.decision(sid), slen),
                (alone.decision(aid), alen),
                "{x}"
            );
            assert!(shared.explain(Some(&db), x).consistent, "{x}");
        }
    }
}

#[test]
fn nearest_mode_shares_by_coordinates() {
    let db = example();
    let sites = |p: [usize; 3]| RuleSet {
        default: vec![p[0]],
        nearest: Some(vec![
            (p[0], 50.1, 8.7),
            (p[1], 39.0, -77.5),
            (p[2], 35.7, 139.7),
        ]),
        ..Default::default()
    };
    let mut moved = sites([0, 1, 2]);
    if let Some(s) = moved.nearest.as_mut() {
        s[2].1 = 1.35;
    }
    let mut cache = TableCache::new();
    let maps = cache.compile_all(
        Some(&db),
        &[&sites([0, 1, 2]), &sites([7, 8, 9]), &moved],
        1,
    );
    assert_eq!(cache.len(), 2);
    assert!(Arc::ptr_eq(maps[0].table(), maps[1].table()));
    for x in probes(&maps[0], 2000) {
        let (id0, l0) = maps[0].decide(x);
        let (id1, l1) = maps[1].decide(x);
        let moved_pools: Vec<usize> = maps[1].decision(id1).iter().map(|p| p - 7).collect();
        assert_eq!(
            (maps[0].decision(id0).to_vec(), l0),
            (moved_pools, l1),
            "{x}"
        );
    }
}
