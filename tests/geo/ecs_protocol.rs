//! Spec 4, ECS protocol (RFC 7871 §6, §7.2, §7.4): FORMERR for every
//! malformed option, the echo on every response that carries an OPT
//! (byte-exact FAMILY, SOURCE and ADDRESS), and scope 0 whenever the answer
//! does not depend on the client. Raw packets over UDP and TCP, and dig.

use std::net::IpAddr;

use crate::common::Server;
use crate::geo_common::*;
use hickory_proto::op::MessageType;
use meridian_wire::name::from_text;

/// Malformed ECS option bodies, each FORMERR (RFC 7871 §6, §7.2.1; gdnsd).
fn malformed() -> Vec<(&'static str, Vec<u8>)> {
    let opt = |body: &[u8]| {
        let mut v = 8u16.to_be_bytes().to_vec();
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    };
    let good = ecs_option(1, 24, 0, &[8, 8, 8]);
    vec![
        ("unknown family 3", ecs_option(3, 0, 0, &[])),
        ("unknown family 0", ecs_option(0, 8, 0, &[8])),
        (
            "unknown family 3 with address",
            ecs_option(3, 24, 0, &[8, 8, 8]),
        ),
        ("IPv4 source 33", ecs_option(1, 33, 0, &[8, 8, 8, 8, 0])),
        (
            "IPv4 source 33, 4 octets",
            ecs_option(1, 33, 0, &[8, 8, 8, 8]),
        ),
        ("IPv6 source 129", ecs_option(2, 129, 0, &[0x20; 17])),
        (
            "IPv4 /24 with 4 octets",
            ecs_option(1, 24, 0, &[8, 8, 8, 0]),
        ),
        ("IPv4 /24 with 2 octets", ecs_option(1, 24, 0, &[8, 8])),
        ("IPv4 /0 with 1 octet", ecs_option(1, 0, 0, &[0])),
        (
            "IPv6 /56 with 8 octets",
            ecs_option(2, 56, 0, &[0x20, 1, 0x48, 0x60, 0, 0, 0, 0]),
        ),
        ("IPv6 /56 with 16 octets", ecs_option(2, 56, 0, &[0x20; 16])),
        ("IPv4 /23 bit 24 set", ecs_option(1, 23, 0, &[8, 8, 9])),
        (
            "IPv4 /25 bit 26 set",
            ecs_option(1, 25, 0, &[8, 8, 8, 0x40]),
        ),
        ("IPv4 /1 low bits set", ecs_option(1, 1, 0, &[0xC0])),
        (
            "IPv6 /57 bit 58 set",
            ecs_option(2, 57, 0, &[0x2a, 0, 0x14, 0x50, 0x40, 0x01, 0, 0x20]),
        ),
        ("non-zero scope", ecs_option(1, 24, 24, &[8, 8, 8])),
        ("non-zero scope, source 0", ecs_option(1, 0, 1, &[])),
        (
            "non-zero scope, IPv6",
            ecs_option(2, 56, 56, &[0x2a, 0, 0x14, 0x50, 0x40, 0x01, 0]),
        ),
        ("two ECS options", [good.clone(), good.clone()].concat()),
        (
            "two different ECS options",
            [good.clone(), ecs_option(2, 0, 0, &[])].concat(),
        ),
        (
            "ECS after a bad one",
            [ecs_option(1, 24, 0, &[8, 8]), good].concat(),
        ),
        ("option of 3 octets", opt(&[0, 1, 24])),
        ("option of 2 octets", opt(&[0, 1])),
        ("option of 0 octets", opt(&[])),
    ]
}

#[test]
fn malformed_ecs_is_formerr_with_question_and_opt() {
    let s = Server::start(&rules_config(), &[]);
    let mut c = Client::new(s.addr);
    for (what, opts) in malformed() {
        for name in ["geo.geo.test.", "www.geo.test.", "nope.geo.test."] {
            let req = QueryBuilder::new(name, A).id(0x1234).option(&opts).build();
            let question = req[12..12 + from_text(name).unwrap().len() + 4].to_vec();
            for r in [c.ask(&req), tcp(&s, &req)] {
                assert_eq!(r.rcode(), FORMERR, "{what} {name}: {r:?}");
                assert_eq!(r.hdr().message_type, MessageType::Response, "QR");
                assert_eq!(r.hdr().counts.queries, 1, "{what}: question echoed");
                assert_eq!(r.wire.question, question, "{what}");
                assert!(
                    r.wire.answer.is_empty() && r.wire.authority.is_empty(),
                    "{what}: {r:?}"
                );
                assert!(r.opt().is_some(), "{what}: the OPT is echoed");
                assert_eq!(r.ecs(), None, "{what}: a malformed ECS is not echoed");
            }
        }
    }
    // Still serving.
    assert_eq!(
        c.geo("geo.geo.test.", A, "8.8.8.0".parse().unwrap(), 24),
        (pool4("na"), 9)
    );
}

#[test]
fn malformed_ecs_is_formerr_by_dig() {
    if !crate::common::need("malformed_ecs_is_formerr_by_dig", &["dig"]) {
        return;
    }
    let s = Server::start(&rules_config(), &[]);
    let cases: &[(&str, &[&str])] = &[
        ("unknown family", &["+ednsopt=8:00030000"]),
        ("IPv4 source 33", &["+ednsopt=8:0001210008080808ff"]),
        (
            "IPv6 source 129",
            &["+ednsopt=8:00028100200100000000000000000000000000000000"],
        ),
        ("too many octets", &["+ednsopt=8:0001180008080800"]),
        ("too few octets", &["+ednsopt=8:000118000808"]),
        ("bits past source", &["+ednsopt=8:0001170008080900"]),
        ("bits past source /23", &["+ednsopt=8:00011700080809"]),
        ("non-zero scope", &["+ednsopt=8:00011818080808"]),
        (
            "two ECS",
            &["+ednsopt=8:00011800080808", "+ednsopt=8:00011800080808"],
        ),
        ("3 octets", &["+ednsopt=8:000118"]),
        ("empty", &["+ednsopt=8"]),
    ];
    for (what, args) in cases {
        for name in ["geo.geo.test.", "www.geo.test."] {
            let d = dig(s.addr, name, "A", args);
            assert_eq!(d.status, "FORMERR", "{what}:\n{}", d.text);
            assert!(d.has_opt, "{what}: OPT echoed:\n{}", d.text);
            assert!(d.subnet.is_none(), "{what}:\n{}", d.text);
            assert!(
                d.text.contains(";; QUESTION SECTION:"),
                "{what}:\n{}",
                d.text
            );
        }
    }
    // A well-formed option given the same way works.
    let d = dig(s.addr, "geo.geo.test.", "A", &["+ednsopt=8:00011800080808"]);
    assert_eq!(d.status, "NOERROR", "{}", d.text);
    assert_eq!(d.subnet.as_deref(), Some("8.8.8.0/24/9"));
}

/// Source lengths to echo, per family, with the address they come from.
fn echo_subnets() -> Vec<(IpAddr, u8)> {
    let mut v = Vec::new();
    let mut rng = Rng(0x5eed_ec50);
    for len in [0u8, 1, 7, 8, 9, 12, 15, 16, 17, 20, 23, 24, 25, 28, 31, 32] {
        v.push((IpAddr::V4(rng.public_v4()), len));
    }
    v.push(("85.214.12.34".parse().unwrap(), 24));
    for len in [
        0u8, 1, 3, 16, 20, 32, 33, 47, 48, 55, 56, 57, 63, 64, 96, 127, 128,
    ] {
        v.push((IpAddr::V6(rng.public_v6()), len));
    }
    v.push(("2a00:1450:4001:81a::200e".parse().unwrap(), 56));
    v
}

/// (name, type, rcode, depends on location) for every kind of response.
const KINDS: &[(&str, u16, u8, bool)] = &[
    ("geo.geo.test.", A, NOERROR, true),
    ("geo.geo.test.", AAAA, NOERROR, true),
    ("alias.geo.test.", A, NOERROR, true),
    ("www.geo.test.", A, NOERROR, false),
    ("www.geo.test.", AAAA, NOERROR, false),
    ("geo.geo.test.", TXT, NOERROR, false),
    ("www.geo.test.", MX, NOERROR, false),
    ("geo.geo.test.", MX, NOERROR, false),
    ("nope.geo.test.", A, NXDOMAIN, false),
    ("a.b.nope.geo.test.", AAAA, NXDOMAIN, false),
    ("host.sub.geo.test.", A, NOERROR, false),
    ("sub.geo.test.", A, NOERROR, false),
    ("same.geo.test.", A, NOERROR, false),
    ("same.geo.test.", AAAA, NOERROR, false),
    ("www.example.org.", A, REFUSED, false),
    (".", A, REFUSED, false),
];

#[test]
fn echo_is_byte_exact_on_every_response() {
    let s = Server::start(&rules_config(), &[]);
    let mut c = Client::new(s.addr);
    for &(name, qtype, rcode, tailored) in KINDS {
        for &(addr, len) in &echo_subnets() {
            let (fam, octets) = ecs_fields(addr, len);
            let req = ecs_query(name, qtype, addr, len);
            for r in [c.ask(&req), tcp(&s, &req)] {
                assert_eq!(r.rcode(), rcode, "{name} {qtype} {addr}/{len}: {r:?}");
                assert_eq!(r.ecs_count(), 1, "one ECS in the echo");
                let (f, src, scope, a) = r.ecs().unwrap();
                assert_eq!(
                    (f, src, &a),
                    (fam, len, &octets),
                    "{name} {addr}/{len}: echo changed"
                );
                // The OPT carries exactly this option, byte for byte, and
                // it is 4 + ceil(SOURCE/8) octets long; a REFUSED adds an
                // Extended DNS Error after it (tests/wire/ede.rs).
                let mut opt = r.opt().unwrap().2;
                if rcode == REFUSED {
                    let ede = opt.split_off(opt.len() - 6);
                    assert_eq!(ede, [0, 15, 0, 2, 0, 20], "EDE 20 after the ECS");
                }
                assert_eq!(opt, ecs_option(f, src, scope, &a));
                let body_len = u16::from_be_bytes([opt[2], opt[3]]) as usize;
                assert_eq!(body_len, 4 + (len as usize).div_ceil(8));
                if !tailored || len == 0 {
                    assert_eq!(scope, 0, "{name} {qtype} {addr}/{len}: scope must be 0");
                } else {
                    assert!(scope > 0, "{name} {qtype} {addr}/{len}: tailored, scope 0");
                }
            }
            // Without ECS there is no ECS in the response; without EDNS, no OPT.
            let r = c.ask(&QueryBuilder::new(name, qtype).id(7).edns(1232).build());
            assert_eq!(
                (r.rcode(), r.opt().is_some(), r.ecs_count()),
                (rcode, true, 0),
                "{name}"
            );
            let r = c.ask(&QueryBuilder::new(name, qtype).id(7).build());
            assert_eq!((r.rcode(), r.opt().is_some()), (rcode, false), "{name}");
        }
    }
}

#[test]
fn referral_and_negative_answers_carry_the_echo() {
    let s = Server::start(&rules_config(), &[]);
    let mut c = Client::new(s.addr);
    let q = |name, t| ecs_query(name, t, "8.8.8.0".parse().unwrap(), 24);
    // Referral: NS in authority, glue in additional, AA clear, scope 0.
    let r = c.ask(&q("host.sub.geo.test.", A));
    assert!(!r.aa());
    assert_eq!(
        r.wire.authority.iter().map(|x| x.rtype).collect::<Vec<_>>(),
        vec![NS]
    );
    assert!(r.wire.additional.iter().any(|x| x.rtype == A));
    assert_eq!(r.ecs(), Some((1, 24, 0, vec![8, 8, 8])));
    // NXDOMAIN and NODATA: the SOA, scope 0.
    for (name, t, rc) in [
        ("nope.geo.test.", A, NXDOMAIN),
        ("www.geo.test.", MX, NOERROR),
        ("geo.geo.test.", MX, NOERROR),
    ] {
        let r = c.ask(&q(name, t));
        assert_eq!(r.rcode(), rc);
        assert!(r.wire.answer.is_empty());
        assert_eq!(
            r.wire.authority.iter().map(|x| x.rtype).collect::<Vec<_>>(),
            vec![SOA]
        );
        assert_eq!(r.ecs(), Some((1, 24, 0, vec![8, 8, 8])), "{name}");
    }
    // REFUSED (outside our zones; class CH) and NOTIMP keep the echo too.
    let r = c.ask(&q("example.org.", A));
    assert_eq!(
        (r.rcode(), r.ecs()),
        (REFUSED, Some((1, 24, 0, vec![8, 8, 8])))
    );
    let ch = QueryBuilder::new("geo.geo.test.", A)
        .id(9)
        .class(3)
        .ecs("8.8.8.0".parse().unwrap(), 24)
        .build();
    let r = c.ask(&ch);
    assert_eq!(
        (r.rcode(), r.ecs()),
        (REFUSED, Some((1, 24, 0, vec![8, 8, 8])))
    );
    let mut notimp = q("geo.geo.test.", A);
    notimp[2] |= 2 << 3; // opcode 2 (STATUS)
    let r = c.ask(&notimp);
    assert_eq!(
        (r.rcode(), r.ecs()),
        (NOTIMP, Some((1, 24, 0, vec![8, 8, 8])))
    );
    // A CNAME to a geo name is tailored: the chain takes the geo scope.
    let r = c.ask(&q("alias.geo.test.", A));
    assert_eq!(r.wire.answer[0].rtype, CNAME);
    assert_eq!(r.addrs(), pool4("na"));
    assert_eq!(r.scope(), 9);
}

#[test]
fn echo_and_scope_by_dig() {
    if !crate::common::need("echo_and_scope_by_dig", &["dig"]) {
        return;
    }
    let s = Server::start(&rules_config(), &[]);
    // (name, type, status, expected CLIENT-SUBNET line)
    let cases = [
        ("geo.geo.test.", "A", "NOERROR", "8.8.8.0/24/9"),
        ("alias.geo.test.", "A", "NOERROR", "8.8.8.0/24/9"),
        ("www.geo.test.", "A", "NOERROR", "8.8.8.0/24/0"),
        ("geo.geo.test.", "TXT", "NOERROR", "8.8.8.0/24/0"),
        ("geo.geo.test.", "MX", "NOERROR", "8.8.8.0/24/0"),
        ("nope.geo.test.", "A", "NXDOMAIN", "8.8.8.0/24/0"),
        ("host.sub.geo.test.", "A", "NOERROR", "8.8.8.0/24/0"),
        ("same.geo.test.", "A", "NOERROR", "8.8.8.0/24/0"),
        ("www.example.org.", "A", "REFUSED", "8.8.8.0/24/0"),
    ];
    for (name, t, status, subnet) in cases {
        for extra in [&[][..], &["+tcp"][..]] {
            let mut args = vec!["+subnet=8.8.8.0/24"];
            args.extend_from_slice(extra);
            let d = dig(s.addr, name, t, &args);
            assert_eq!(d.status, status, "{name} {t}:\n{}", d.text);
            assert_eq!(d.subnet.as_deref(), Some(subnet), "{name} {t}:\n{}", d.text);
        }
    }
    // Referral: NS in authority. Same pool for every location: /0.
    let d = dig(s.addr, "host.sub.geo.test.", "A", &["+subnet=8.8.8.0/24"]);
    assert_eq!(d.authority_types, vec!["NS"]);
    assert!(!d.flags.contains("aa"));
    for subnet in [
        "85.214.0.0/24",
        "133.242.0.0/24",
        "2001:4860::/56",
        "10.0.0.0/8",
    ] {
        let d = dig(
            s.addr,
            "same.geo.test.",
            "A",
            &[&format!("+subnet={subnet}")],
        );
        assert_eq!(d.addrs, pool4("one"));
        assert_eq!(d.subnet, Some(format!("{subnet}/0")), "{}", d.text);
    }
    // Odd source lengths come back unchanged.
    for subnet in [
        "8.8.8.8/32",
        "8.8.0.0/17",
        "8.0.0.0/7",
        "2a00:1450:4001:800::/57",
        "2a00::/9",
    ] {
        let d = dig(
            s.addr,
            "geo.geo.test.",
            "A",
            &[&format!("+subnet={subnet}")],
        );
        let echoed = d.subnet.clone().unwrap();
        assert!(
            echoed.starts_with(&format!("{subnet}/")),
            "{subnet}: {echoed}"
        );
    }
    // No ECS in the query: none in the answer.
    let d = dig(s.addr, "geo.geo.test.", "A", &[]);
    assert!(d.has_opt && d.subnet.is_none(), "{}", d.text);
}

/// Scope 0 for a geo name whose every location yields one pool list, for
/// any client: public, special, SOURCE 0, either family.
#[test]
fn uniform_geo_name_has_scope_zero() {
    let s = Server::start(&rules_config(), &[]);
    let mut c = Client::new(s.addr);
    let mut rng = Rng(0xa11_5a3e);
    for i in 0..300 {
        let (addr, len): (IpAddr, u8) = match i % 3 {
            0 => (IpAddr::V4(rng.public_v4()), (rng.below(33)) as u8),
            1 => (IpAddr::V6(rng.public_v6()), (rng.below(129)) as u8),
            _ => (IpAddr::V4(std::net::Ipv4Addr::from(rng.next() as u32)), 24),
        };
        for t in [A, AAAA] {
            let (addrs, scope) = c.geo("same.geo.test.", t, addr, len);
            assert_eq!(scope, 0, "{addr}/{len}");
            assert_eq!(addrs, if t == A { pool4("one") } else { pool6("one") });
        }
    }
}
