//! Spec 8: the bundled example (zones/meridian.toml over geo/example.mmdb)
//! answers the README's `dig +subnet` examples with the continent's pool and
//! a non-zero scope, by dig and by raw packets, over UDP and TCP.

use std::net::IpAddr;

use crate::common::Server;
use crate::geo_common::*;

const NAME: &str = "geo.example.test.";

/// (client subnet, pool, scope) for the README's examples. The scopes are
/// the merged blocks of the example data: 8.0.0.0/9 (US and US-CA are both
/// NA), 85.214.0.0/15, 133.0.0.0/8, 200.128.0.0/9, 2001:4860::/32 and
/// 2a00:1450:4000::/37.
const CASES: &[(&str, &str, u8)] = &[
    ("8.8.8.0/24", "na", 9),
    ("85.214.0.0/24", "eu", 15),
    ("133.242.0.0/24", "as", 8),
    ("200.160.0.0/24", "sa", 9),
    ("2001:4860::/48", "na", 32),
    ("2a00:1450:4001::/48", "eu", 37),
];

fn split(subnet: &str) -> (IpAddr, u8) {
    let (a, l) = subnet.split_once('/').unwrap();
    (a.parse().unwrap(), l.parse().unwrap())
}

#[test]
fn readme_subnets_by_dig() {
    if !crate::common::need("readme_subnets_by_dig", &["dig"]) {
        return;
    }
    let s = Server::example();
    for &(subnet, pool, scope) in CASES {
        let (addr, _) = split(subnet);
        for (qtype, v6) in [("A", false), ("AAAA", true)] {
            let d = dig(s.addr, NAME, qtype, &[&format!("+subnet={subnet}")]);
            assert_eq!(d.status, "NOERROR", "{subnet} {qtype}:\n{}", d.text);
            assert_eq!(
                d.addrs,
                sorted(example_pool(pool, v6)),
                "{subnet} {qtype}:\n{}",
                d.text
            );
            assert_eq!(
                d.subnet.as_deref(),
                Some(format!("{subnet}/{scope}").as_str()),
                "{}",
                d.text
            );
            assert!(d.scope() > 0);
            assert!(d.flags.contains("aa"), "{}", d.text);
            // The same over TCP.
            let t = dig(s.addr, NAME, qtype, &[&format!("+subnet={subnet}"), "+tcp"]);
            assert_eq!((t.addrs, t.subnet), (d.addrs.clone(), d.subnet.clone()));
        }
        let _ = addr;
    }
}

#[test]
fn readme_subnets_by_raw_packets() {
    let s = Server::example();
    let mut c = Client::new(s.addr);
    for &(subnet, pool, scope) in CASES {
        let (addr, len) = split(subnet);
        for (qtype, v6) in [(A, false), (AAAA, true)] {
            let req = ecs_query(NAME, qtype, addr, len);
            for r in [c.ask(&req), tcp(&s, &req)] {
                assert_eq!(r.rcode(), NOERROR);
                assert!(r.aa());
                assert_eq!(r.addrs(), sorted(example_pool(pool, v6)), "{subnet}");
                let (f, b) = ecs_fields(addr, len);
                assert_eq!(r.ecs(), Some((f, len, scope, b)), "{subnet}");
                assert!(r.wire.answer.iter().all(|rr| rr.ttl == 30));
            }
        }
    }
}

/// The README's other example outputs: no ECS (decided on 127.0.0.1, which
/// no rule covers: the default pool, and no ECS option back), the split
/// /24 (scope longer than SOURCE) and a private subnet.
#[test]
fn readme_other_examples() {
    if !crate::common::need("readme_other_examples", &["dig"]) {
        return;
    }
    let s = Server::example();
    let d = dig(s.addr, NAME, "A", &[]);
    assert_eq!(d.addrs, example_pool("default", false));
    assert!(d.subnet.is_none(), "{}", d.text);

    let d = dig(s.addr, NAME, "A", &["+subnet=203.0.0.0/24"]);
    assert_eq!(d.addrs, sorted(example_pool("as", false)));
    assert_eq!(d.subnet.as_deref(), Some("203.0.0.0/24/25"));
    let d = dig(s.addr, NAME, "A", &["+subnet=203.0.0.128/25"]);
    assert_eq!(d.addrs, example_pool("default", false));
    assert_eq!(d.subnet.as_deref(), Some("203.0.0.128/25/25"));

    let d = dig(s.addr, NAME, "A", &["+subnet=10.1.2.0/24"]);
    assert_eq!(d.addrs, example_pool("default", false));
    assert_eq!(d.subnet.as_deref(), Some("10.1.2.0/24/8"));

    // Static names do not depend on the client: scope 0.
    let d = dig(s.addr, "www.example.test.", "A", &["+subnet=8.8.8.0/24"]);
    assert_eq!(d.addrs, vec!["192.0.2.1"]);
    assert_eq!(d.subnet.as_deref(), Some("8.8.8.0/24/0"));
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
