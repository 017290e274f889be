//! Sticky answers (#16) end to end: a real server, real queries over UDP
//! with ECS. A sticky `one` name over ten members gives each ECS /24 block
//! one member, the same on every repeat; taking one member down (an
//! operator override) moves only that member's blocks, about 10 % of them
//! (modulo hashing would move about 90 %), each to another member, and
//! clearing the override gives every block its member back. Shares follow
//! the weights (binomial tolerance, 4.5 sigma); the reply's ECS scope is the
//! client block (/24, /56, the configured `sticky_prefix`; also when SOURCE
//! is shorter), or the geo block when that is longer; a special-purpose
//! ECS address (private, CGNAT, benchmarking, documentation...) is decided
//! on the resolver's block and scoped to its whole special block, never /0
//! (RFC 7871 §10, §7.2.1); a sticky block that holds special space is
//! scoped to the largest special-free block around the client; SOURCE 0
//! adds no scope. Loopback
//! only; the members are documentation addresses never contacted, and the
//! ECS addresses are public ones, never contacted either.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::common::{scope, Q};
use crate::health_support::*;
use crate::pool_common::{ip, Client};
use hickory_proto::rr::RecordType;

const BODY: &str = "\
[pool.ten]\nmembers = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\", \"192.0.2.4\", \"192.0.2.5\",\n\
  \"192.0.2.6\", \"192.0.2.7\", \"192.0.2.8\", \"192.0.2.9\", \"192.0.2.10\"]\n\n\
[pool.duo]\nmembers = [\"192.0.2.21\", { address = \"192.0.2.22\", weight = 3 }]\n\n\
[name.\"ten.health.test\"]\npool = \"ten\"\nmode = \"one\"\nsticky = true\nttl = 60\n\n\
[name.\"duo.health.test\"]\npool = \"duo\"\nmode = \"one\"\nsticky = true\nttl = 60\n\n\
[name.\"some.health.test\"]\npool = \"ten\"\nmode = \"some\"\ncount = 3\nsticky = true\n\
sticky_prefix = [20, 48]\nttl = 60\n\n\
[name.\"wide.health.test\"]\npool = \"ten\"\nmode = \"one\"\nsticky = true\n\
sticky_prefix = [8, 16]\nttl = 60\n\n\
[name.\"geo.health.test\"]\nmode = \"one\"\nsticky = true\nttl = 60\n\n\
[name.\"geo.health.test\".geo]\nnets = { \"20.0.0.0/25\" = [\"duo\"] }\ndefault = [\"ten\"]\n";

/// Distinct ECS /24 blocks per run.
const BLOCKS: u32 = 2000;

/// The i-th /24 block: 20.0.0.0/24, 20.0.1.0/24, ... (public space).
fn block(i: u32) -> String {
    let a = IpAddr::from((0x1400_0000u32 + (i << 8)).to_be_bytes());
    format!("{a}/24")
}

/// The member each block gets, and check the scope of every reply.
fn members_by_block(c: &mut Client, name: &str, want_scope: u8) -> Vec<IpAddr> {
    (0..BLOCKS)
        .map(|i| {
            let a = c.ask_q(&Q::new(name, RecordType::A).ecs(&block(i)));
            assert_eq!(a.addrs.len(), 1, "{name} {}: {:?}", block(i), a.addrs);
            assert_eq!(scope(&a.msg), Some(want_scope), "{name} {}", block(i));
            a.addrs[0]
        })
        .collect()
}

/// Is `k` of `n` within 4.5 binomial sigmas of share `p`?
fn near(k: usize, n: usize, p: f64) -> bool {
    let mean = n as f64 * p;
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    (k as f64 - mean).abs() <= 4.5 * sigma
}

#[test]
fn removing_one_of_ten_moves_only_its_blocks_and_they_come_back() {
    let (_dir, cfg) = setup("sticky-move", BODY);
    let (s, api) = serve(&cfg);
    let mut c = Client::new(&s);
    let name = "ten.health.test.";
    let before = members_by_block(&mut c, name, 24);

    // Every member holds about a tenth of the blocks.
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for &m in &before {
        *held.entry(m).or_insert(0) += 1;
    }
    assert_eq!(held.len(), 10, "{held:?}");
    for (m, &k) in &held {
        assert!(near(k, BLOCKS as usize, 0.1), "{m}: {k} of {BLOCKS}");
    }

    let gone = ip("192.0.2.4");
    let (code, body) = http(api, "POST", "/override/192.0.2.4?state=down");
    assert_eq!(code, 200, "{body}");
    let during = members_by_block(&mut c, name, 24);
    let mut moved = 0;
    for (i, (b, d)) in before.iter().zip(&during).enumerate() {
        if b == d {
            continue;
        }
        moved += 1;
        assert_eq!(*b, gone, "block {} moved from {b} to {d}", block(i as u32));
        assert_ne!(*d, gone);
    }
    // Exactly its own blocks moved: about 10 %, where modulo would move 90 %.
    assert_eq!(moved, held[&gone], "only and all of {gone}'s blocks move");
    eprintln!(
        "sticky: {moved} of {BLOCKS} blocks moved ({:.1} %)",
        100.0 * moved as f64 / f64::from(BLOCKS)
    );

    let (code, body) = http(api, "POST", "/override/192.0.2.4?state=none");
    assert_eq!(code, 200, "{body}");
    let after = members_by_block(&mut c, name, 24);
    assert_eq!(after, before, "every block gets its member back");
}

#[test]
fn a_block_keeps_its_answer_and_shares_follow_the_weights() {
    let (_dir, cfg) = setup("sticky-stable", BODY);
    let (s, _api) = serve(&cfg);
    let mut c = Client::new(&s);

    // 50 repeats of 20 blocks (and other addresses in the same /24): one
    // answer each.
    for i in 0..20 {
        let first = c.ask_q(&Q::new("ten.health.test.", RecordType::A).ecs(&block(i * 97)));
        for r in 0..50u32 {
            let host = IpAddr::from((0x1400_0000u32 + ((i * 97) << 8) + r % 256).to_be_bytes());
            let q = Q::new("ten.health.test.", RecordType::A).ecs(&format!("{host}/32"));
            let a = c.ask_q(&q);
            assert_eq!(a.addrs, first.addrs, "repeat {r} from {host}");
            // SOURCE /32: the answer holds for the /24 block.
            assert_eq!(scope(&a.msg), Some(24));
        }
    }

    // 1:3 weights over many blocks.
    let got = members_by_block(&mut c, "duo.health.test.", 24);
    let k = got.iter().filter(|&&m| m == ip("192.0.2.22")).count();
    assert!(
        near(k, BLOCKS as usize, 0.75),
        "weight 3 of 4 got {k} of {BLOCKS} blocks"
    );

    // `some`: three distinct members, the same three in the same order for
    // every address of one /20 (its `sticky_prefix`), scope 20.
    let q = |a: &str| Q::new("some.health.test.", RecordType::A).ecs(a);
    let first = c.ask_q(&q("20.1.0.0/24"));
    assert_eq!(first.addrs.len(), 3);
    assert_eq!(scope(&first.msg), Some(20));
    for a in ["20.1.15.0/24", "20.1.7.9/32", "20.1.0.0/20"] {
        let r = c.ask_q(&q(a));
        assert_eq!(r.addrs, first.addrs, "{a}");
        assert_eq!(scope(&r.msg), Some(20), "{a}");
    }
}

#[test]
fn scope_is_the_longer_of_the_sticky_and_geo_blocks() {
    let (_dir, cfg) = setup("sticky-scope", BODY);
    let (s, _api) = serve(&cfg);
    let mut c = Client::new(&s);
    let ask = |c: &mut Client, name: &str, ecs: Option<&str>| {
        let q = Q::new(name, RecordType::A);
        let q = match ecs {
            Some(e) => q.ecs(e),
            None => q.edns(1232),
        };
        let a = c.ask_q(&q);
        assert_eq!(a.addrs.len(), 1, "{name} {ecs:?}");
        scope(&a.msg)
    };
    let ten = "ten.health.test.";
    // A plain pool: the sticky block is the scope.
    assert_eq!(ask(&mut c, ten, Some("20.0.9.1/32")), Some(24));
    // SOURCE shorter than the sticky prefix: only the known bits count, and
    // the answer is the first /24's, with scope /24 (a hint; resolvers
    // cache it at /20), so the blocks handed out never overlap.
    assert_eq!(ask(&mut c, ten, Some("20.0.16.0/20")), Some(24));
    let wide = c.ask_q(&Q::new(ten, RecordType::A).ecs("20.0.16.0/20"));
    let first = c.ask_q(&Q::new(ten, RecordType::A).ecs("20.0.16.0/24"));
    assert_eq!(wide.addrs, first.addrs);
    // IPv6 ECS on an A query: the /56 block.
    assert_eq!(ask(&mut c, ten, Some("2a01:4f8:1:2::/64")), Some(56));
    // SOURCE 0: decided on the resolver, the client asked that its address
    // not be used, so no scope from the sticky block.
    assert_eq!(ask(&mut c, ten, Some("0.0.0.0/0")), Some(0));
    // A private ECS address: decided on the resolver, but scoped to the
    // whole private block, never /0 (tested in depth below).
    assert_eq!(ask(&mut c, ten, Some("10.1.2.0/24")), Some(8));
    // No ECS: none echoed.
    assert_eq!(ask(&mut c, ten, None), None);

    // `meridian lookup` explains the same answer and scope.
    let a = c.ask_q(&Q::new(ten, RecordType::A).ecs("20.0.9.0/24"));
    let (code, out, err) = crate::common::run(&[
        "lookup",
        "--config",
        cfg.to_str().unwrap(),
        "--name",
        "ten.health.test",
        "--client",
        "20.0.9.0/24",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("IN A {}", a.addrs[0])), "{out}");
    assert!(
        out.contains("scope:    /24 (20.0.9.0/24, the sticky client block"),
        "{out}"
    );

    // Geo: inside 20.0.0.0/25 the decision block (/25) is longer.
    let geo = "geo.health.test.";
    assert_eq!(ask(&mut c, geo, Some("20.0.0.5/32")), Some(25));
    // Elsewhere the geo block is wide and the sticky /24 is longer.
    assert_eq!(ask(&mut c, geo, Some("21.3.4.0/24")), Some(24));
    // Every address of the /25 gets one answer (duo, by its block).
    let one = c.ask_q(&Q::new(geo, RecordType::A).ecs("20.0.0.1/32"));
    assert!(one.addrs[0] == ip("192.0.2.21") || one.addrs[0] == ip("192.0.2.22"));
    for h in [2, 64, 127] {
        let r = c.ask_q(&Q::new(geo, RecordType::A).ecs(&format!("20.0.0.{h}/32")));
        assert_eq!(r.addrs, one.addrs, "20.0.0.{h}");
    }
}

/// The five special-purpose ECS subnets of issue #25, the length of the
/// special block around each, and other subnets inside that block.
const SPECIAL: &[(&str, u8, &[&str])] = &[
    (
        "100.100.1.0/24",
        10,
        &["100.64.0.0/24", "100.127.255.0/24", "100.100.1.77/32"],
    ),
    (
        "192.168.1.0/24",
        16,
        &["192.168.0.0/24", "192.168.255.0/24", "192.168.1.9/32"],
    ),
    ("198.18.0.0/24", 15, &["198.19.255.0/24", "198.18.200.0/24"]),
    (
        "fd00:1::/56",
        7,
        &["fc00::/56", "fdff:ffff:ffff:ff00::/56", "fd00:1::1/128"],
    ),
    (
        "2001:db8:1::/56",
        32,
        &[
            "2001:db8::/56",
            "2001:db8:ffff:ff00::/56",
            "2001:db8:1::5/128",
        ],
    ),
];

#[test]
fn a_special_purpose_client_gets_its_special_block_as_scope() {
    let (_dir, cfg) = setup("sticky-special", BODY);
    let (s, _api) = serve(&cfg);
    let mut c = Client::new(&s);
    // Sticky `one`, sticky `some` (/20 blocks), and geo + sticky: each
    // depends on the client, so none may answer a special address with
    // scope 0 (resolvers would cache it for every client, RFC 7871 §7.2.1).
    for name in ["ten.health.test.", "some.health.test.", "geo.health.test."] {
        for &(ecs, len, inside) in SPECIAL {
            let first = c.ask_q(&Q::new(name, RecordType::A).ecs(ecs));
            assert!(!first.addrs.is_empty(), "{name} {ecs}");
            assert_eq!(scope(&first.msg), Some(len), "{name} {ecs}: scope");
            // The scope is a promise: every address of the block gets this
            // answer (decided on the resolver's block, the same here).
            for &other in inside {
                let a = c.ask_q(&Q::new(name, RecordType::A).ecs(other));
                assert_eq!(a.addrs, first.addrs, "{name} {other} vs {ecs}");
                assert_eq!(scope(&a.msg), Some(len), "{name} {other}: scope");
            }
        }
    }
    // `meridian lookup` says why.
    let (code, out, err) = crate::common::run(&[
        "lookup",
        "--config",
        cfg.to_str().unwrap(),
        "--name",
        "ten.health.test",
        "--client",
        "100.100.1.0/24",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("scope:    /10 (100.64.0.0/10, the whole special-purpose block"),
        "{out}"
    );
}

#[test]
fn a_sticky_block_holding_special_space_is_scoped_around_it() {
    let (_dir, cfg) = setup("sticky-holes", BODY);
    let (s, _api) = serve(&cfg);
    let mut c = Client::new(&s);
    let ask = |c: &mut Client, name: &str, ecs: &str| {
        let a = c.ask_q(&Q::new(name, RecordType::A).ecs(ecs));
        assert!(!a.addrs.is_empty(), "{name} {ecs}");
        (a.addrs, scope(&a.msg))
    };
    // /20 blocks: 192.0.0.0/20 holds 192.0.0.0/24 and 192.0.2.0/24
    // (special). Its public parts share one answer (one hashed block), each
    // scoped to the largest special-free block around the client, so no
    // scope covers a special client decided otherwise (§7.2.1: no overlap).
    let some = "some.health.test.";
    let (m1, s1) = ask(&mut c, some, "192.0.1.0/24");
    assert_eq!(s1, Some(24), "192.0.1.0/24 lies between two special /24s");
    for (ecs, want) in [
        ("192.0.3.0/24", 24),
        ("192.0.8.0/24", 21),
        ("192.0.15.0/24", 21),
    ] {
        let (m, sc) = ask(&mut c, some, ecs);
        assert_eq!(m, m1, "{ecs}: same /20 block");
        assert_eq!(sc, Some(want), "{ecs}");
    }
    assert_eq!(ask(&mut c, some, "192.0.2.0/24").1, Some(24));
    // /8 and /16 blocks: 100.0.0.0/8 holds 100.64.0.0/10; 2001::/16 holds
    // 2001::/23 and 2001:db8::/32.
    let wide = "wide.health.test.";
    let (m1, s1) = ask(&mut c, wide, "100.1.0.0/24");
    assert_eq!(s1, Some(10));
    let (m2, s2) = ask(&mut c, wide, "100.200.0.0/24");
    assert_eq!((m2, s2), (m1, Some(9)));
    assert_eq!(ask(&mut c, wide, "100.100.0.0/24").1, Some(10));
    assert_eq!(ask(&mut c, wide, "101.1.0.0/24").1, Some(8));
    let (m1, s1) = ask(&mut c, wide, "2001:200::/56");
    assert_eq!(s1, Some(23));
    let (m2, s2) = ask(&mut c, wide, "2001:4860::/56");
    assert_eq!((m2, s2), (m1, Some(18)));
    assert_eq!(ask(&mut c, wide, "2001:db8:5::/56").1, Some(32));
    assert_eq!(ask(&mut c, wide, "2a00:1450::/56").1, Some(16));
}
