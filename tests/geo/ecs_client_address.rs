//! Spec 3, the client address: the ECS address when the query has valid ECS
//! with SOURCE > 0 and a globally routable address; otherwise the query's
//! source address. An ECS address in special-purpose space is decided on
//! the source address with the scope of the whole special block (RFC 7871
//! §10); SOURCE 0 is decided on the source address with scope 0 (§7.1.2).
//!
//! tests/data/geo/rules.toml maps 127.0.0.0/8 to pool src4 and ::1 to src6,
//! so a decision on the test client's own address shows in the answer.

use std::net::{IpAddr, SocketAddr};

use crate::geo_common::*;
use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::Engine;

const NAME: &str = "geo.geo.test.";

/// Special-purpose ECS subnets and the special block length they get.
const SPECIAL: &[(&str, u8, u8)] = &[
    ("10.1.2.0", 24, 8),
    ("10.0.0.0", 7, 8),
    ("100.64.1.0", 24, 10),
    ("100.127.255.0", 24, 10),
    ("127.0.0.0", 24, 8),
    ("169.254.3.0", 24, 16),
    ("172.16.5.0", 24, 12),
    ("172.31.255.0", 24, 12),
    ("192.168.1.0", 24, 16),
    ("192.0.0.0", 24, 24),
    ("192.0.2.0", 24, 24),
    ("198.51.100.0", 24, 24),
    ("203.0.113.0", 24, 24),
    ("198.18.0.0", 24, 15),
    ("192.88.99.0", 24, 24),
    ("0.1.2.0", 24, 8),
    ("224.1.2.0", 24, 4),
    ("255.255.255.255", 32, 4),
    ("fd00:1:2::", 56, 7),
    ("fe80::", 64, 10),
    ("2001:db8:1::", 48, 32),
    ("2001:db8::", 56, 32),
    ("::1", 128, 128),
    ("::", 128, 128),
    ("ff02::", 16, 8),
    ("2002:808:808::", 48, 16),
    ("2001::", 32, 23),
    ("64:ff9b::808:808", 128, 96),
    ("100::", 64, 64),
    // IPv4-mapped IPv6 is special space too: never located as IPv4.
    ("::ffff:8.8.8.8", 128, 96),
    ("::ffff:8.8.8.0", 120, 96),
    ("::ffff:85.214.0.0", 120, 96),
];

/// Public subnets and the pool each is decided to.
const PUBLIC: &[(&str, u8, &str)] = &[
    ("8.8.8.0", 24, "na"),
    ("85.214.0.0", 24, "eu"),
    ("133.242.0.0", 24, "as"),
    ("200.160.0.0", 24, "sa"),
    ("203.0.0.0", 24, "as"),
    ("203.0.0.128", 25, "def"),
    ("2001:4860::", 48, "na"),
    ("2a00:1450:4001::", 56, "eu"),
    ("2804:1::", 56, "sa"),
];

fn pool(name: &str, v6: bool) -> Vec<String> {
    if v6 {
        pool6(name)
    } else {
        pool4(name)
    }
}

/// The pool the source address decides to: 127.0.0.1 -> src4, ::1 -> src6.
fn source_pool(server: SocketAddr) -> &'static str {
    if server.is_ipv6() {
        "src6"
    } else {
        "src4"
    }
}

/// NAME/`qtype` with an OPT carrying `opts` (None: no OPT at all).
fn query(qtype: u16, opts: Option<&[u8]>) -> Vec<u8> {
    let b = QueryBuilder::new(NAME, qtype).id(1);
    match opts {
        Some(o) => b.option(o),
        None => b,
    }
    .build()
}

#[test]
fn raw_packets_over_both_transports() {
    let s = start_dual(&rules_config());
    for server in [s.addr, v6_addr(&s)] {
        let mut c = Client::new(server);
        let src = source_pool(server);
        for t in [A, AAAA] {
            let v6 = t == AAAA;
            // A public ECS address decides.
            for &(a, len, p) in PUBLIC {
                let (addrs, scope) = c.geo(NAME, t, a.parse().unwrap(), len);
                assert_eq!(addrs, pool(p, v6), "{a}/{len} via {server}");
                assert!(scope > 0);
            }
            // No ECS (with and without EDNS): the source address decides,
            // and no ECS comes back.
            for opts in [None, Some(&[][..])] {
                let r = c.ask(&query(t, opts));
                assert_eq!(r.addrs(), pool(src, v6), "no ECS via {server}");
                assert_eq!(r.ecs(), None);
            }
            // SOURCE 0, either family: the source address, scope 0.
            for fam in [1u16, 2] {
                let r = c.ask(&query(t, Some(&ecs_option(fam, 0, 0, &[]))));
                assert_eq!(
                    r.addrs(),
                    pool(src, v6),
                    "SOURCE 0 family {fam} via {server}"
                );
                assert_eq!(r.ecs(), Some((fam, 0, 0, vec![])));
            }
            // Special space: the source address, scope = the special block.
            for &(a, len, block) in SPECIAL {
                let (addrs, scope) = c.geo(NAME, t, a.parse().unwrap(), len);
                assert_eq!(addrs, pool(src, v6), "{a}/{len} via {server}");
                assert_eq!(scope, block, "{a}/{len} via {server}");
            }
        }
    }
}

#[test]
fn dig_over_both_transports() {
    if !crate::common::need("dig_over_both_transports", &["dig"]) {
        return;
    }
    let s = start_dual(&rules_config());
    for server in [s.addr, v6_addr(&s)] {
        let src = source_pool(server);
        for (t, v6) in [("A", false), ("AAAA", true)] {
            for &(a, len, p) in PUBLIC {
                let d = dig(server, NAME, t, &[&format!("+subnet={a}/{len}")]);
                assert_eq!(d.addrs, pool(p, v6), "{a}/{len}:\n{}", d.text);
                assert!(d.scope() > 0);
            }
            let d = dig(server, NAME, t, &[]);
            assert_eq!(d.addrs, pool(src, v6), "{}", d.text);
            assert!(d.subnet.is_none());
            for zero in ["0.0.0.0/0", "::/0"] {
                let d = dig(server, NAME, t, &[&format!("+subnet={zero}")]);
                assert_eq!(d.addrs, pool(src, v6), "{zero}:\n{}", d.text);
                assert_eq!(d.subnet, Some(format!("{zero}/0")), "{}", d.text);
            }
            for &(a, len, block) in SPECIAL {
                let d = dig(server, NAME, t, &[&format!("+subnet={a}/{len}")]);
                assert_eq!(d.addrs, pool(src, v6), "{a}/{len}:\n{}", d.text);
                assert_eq!(d.scope(), block, "{a}/{len}:\n{}", d.text);
            }
        }
    }
}

/// A name whose answer never depends on the client: scope 0 even for a
/// special ECS address (the special block rule only applies to tailored
/// answers).
#[test]
fn special_ecs_on_uniform_name_is_scope_zero() {
    let s = start_dual(&rules_config());
    let mut c = Client::new(s.addr);
    for &(a, len, _) in SPECIAL {
        let (addrs, scope) = c.geo("same.geo.test.", A, a.parse().unwrap(), len);
        assert_eq!((addrs, scope), (pool4("one"), 0), "{a}/{len}");
    }
}

/// A dual-stack socket reports an IPv4 client as ::ffff:a.b.c.d: the answer
/// path must locate it as the IPv4 address (found through the library, as
/// the tests may only listen on 127.0.0.1 and ::1).
#[test]
fn ipv4_mapped_source_is_located_as_ipv4() {
    let e = Engine::load(&rules_config()).unwrap();
    let ask = |src: &str, opts: Option<&[u8]>| {
        let req = query(A, opts);
        let mut out = vec![0u8; 65535];
        let mut o = Outcome::default();
        let t = Transport {
            src: src.parse::<IpAddr>().unwrap(),
            tcp: false,
        };
        let n = e
            .answer(&req, t, &mut Scratch::default(), &mut out, &mut o)
            .unwrap();
        parse(&out[..n])
    };
    for (src, p) in [
        ("::ffff:127.0.0.1", "src4"),
        ("127.0.0.1", "src4"),
        ("::ffff:85.214.1.1", "eu"),
        ("85.214.1.1", "eu"),
        ("::ffff:8.8.8.8", "na"),
        ("::1", "src6"),
        ("2001:4860::1", "na"),
    ] {
        assert_eq!(ask(src, None).addrs(), pool4(p), "source {src}");
        // SOURCE 0 and special ECS are decided on the (unmapped) source.
        let r = ask(src, Some(&ecs_option(1, 0, 0, &[])));
        assert_eq!((r.addrs(), r.scope()), (pool4(p), 0), "source {src}");
        let r = ask(src, Some(&ecs_for("10.9.0.0".parse().unwrap(), 16)));
        assert_eq!((r.addrs(), r.scope()), (pool4(p), 8), "source {src}");
        // A public ECS address wins over any source.
        let r = ask(src, Some(&ecs_for("133.242.0.0".parse().unwrap(), 24)));
        assert_eq!((r.addrs(), r.scope()), (pool4("as"), 8), "source {src}");
    }
}
