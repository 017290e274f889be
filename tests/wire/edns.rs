//! EDNS (RFC 6891): an OPT in the response iff the query had one, whatever
//! the rcode; our payload size advertised; version > 0 gets BADVERS; unknown
//! options and flag bits ignored; a second OPT is FORMERR; DO copied.

use crate::common::*;
use hickory_proto::rr::RecordType;
use meridian_wire::build::option;

const A: u16 = 1;
const AXFR: u16 = 252;
const IN: u16 = 1;
const CH: u16 = 3;

/// `dig +edns=0 +bufsize=SIZE`: a query with a plain OPT.
fn edns_query(id: u16, flags: u16, name: &str, qtype: u16, qclass: u16) -> Vec<u8> {
    QueryBuilder::new(name, qtype)
        .id(id)
        .flags(flags)
        .class(qclass)
        .edns(1232)
        .build()
}

/// Queries covering every rcode: (what, query without OPT, expected rcode).
fn every_rcode() -> Vec<(&'static str, QueryBuilder, u8)> {
    vec![
        (
            "NOERROR",
            QueryBuilder::new("www.example.test", A).id(1),
            NOERROR,
        ),
        (
            "NODATA",
            QueryBuilder::new("mail.example.test", 28).id(2),
            NOERROR,
        ),
        (
            "NXDOMAIN",
            QueryBuilder::new("nope.example.test", A).id(3),
            NXDOMAIN,
        ),
        (
            "REFUSED (zone)",
            QueryBuilder::new("www.example.org", A).id(4),
            REFUSED,
        ),
        (
            "REFUSED (class)",
            QueryBuilder::new("www.example.test", A).id(5).class(CH),
            REFUSED,
        ),
        (
            "REFUSED (AXFR)",
            QueryBuilder::new("example.test", AXFR).id(6),
            REFUSED,
        ),
        (
            "NOTIMP",
            QueryBuilder::new("www.example.test", A)
                .id(7)
                .flags(2 << 11),
            NOTIMP,
        ),
    ]
}

#[test]
fn no_opt_without_edns() {
    let s = Server::example();
    for (what, q, rcode) in every_rcode() {
        let r = s.ask(&q.build());
        assert_eq!(r.rcode(), rcode, "{what}");
        assert!(
            r.opt().is_none(),
            "{what}: OPT in the answer to a query without one"
        );
    }
}

#[test]
fn opt_with_edns_for_every_rcode() {
    let s = Server::example();
    for (what, q, rcode) in every_rcode() {
        let r = s.ask(&q.edns(1232).build());
        assert_eq!(r.rcode(), rcode, "{what}");
        let (payload, ttl, rdata) = r.opt().unwrap_or_else(|| panic!("{what}: no OPT"));
        assert_eq!(payload, 1232, "{what}");
        assert_eq!(ttl, 0, "{what}: ext-rcode, version and flags are 0");
        if rcode == REFUSED {
            // An Extended DNS Error says why (tests/wire/ede.rs).
            assert_eq!(rdata[..4], [0, 15, 0, 2], "{what}: one EDE, no text");
        } else {
            assert!(rdata.is_empty(), "{what}");
        }
        // The OPT is the last record and the only one in additional here.
        assert_eq!(r.hdr().counts.additionals, 1, "{what}");
    }
}

#[test]
fn formerr_keeps_the_opt() {
    let s = Server::example();
    // Trailing garbage after the OPT record.
    let mut q = edns_query(1, 0, "www.example.test", A, IN);
    q.extend_from_slice(b"junk");
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert!(
        r.opt().is_some(),
        "FORMERR for a query with an OPT lacks the OPT"
    );
    // QDCOUNT 0 with an OPT.
    let mut q = QueryBuilder::new("x", A).id(2).edns(1232).build();
    // Cut the question ("\x01x\x00", type, class) and count none.
    q.drain(12..12 + 3 + 4);
    q[4..6].copy_from_slice(&0u16.to_be_bytes());
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().counts.queries, 0);
    assert!(
        r.opt().is_some(),
        "FORMERR (QDCOUNT 0) for a query with an OPT lacks the OPT"
    );
    // The same without an OPT: none back.
    let mut q = QueryBuilder::new("x", A).id(3).build();
    q.truncate(12);
    q[4..6].copy_from_slice(&0u16.to_be_bytes());
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert!(r.opt().is_none());
}

#[test]
fn advertised_payload_is_the_configured_limit() {
    // Whatever the client offers, we advertise our own size (1232 by default).
    let s = Server::example();
    for offered in [512u16, 1232, 1400, 4096, 65535] {
        let r = s.dig(&Q::new("www.example.test.", RecordType::A).edns(offered));
        assert_eq!(r.opt().unwrap().0, 1232, "client offered {offered}");
    }
}

#[test]
fn advertised_payload_follows_the_config() {
    // tests/data/payload1400.toml: edns_udp_payload = 1400.
    let s = Server::start(&data("payload1400.toml"), &[]);
    for offered in [512u16, 4096] {
        let r = s.dig(&Q::new("www.example.test.", RecordType::A).edns(offered));
        assert_eq!(r.opt().unwrap().0, 1400);
        let r = s.dig(&Q::new("nope.example.test.", RecordType::A).edns(offered));
        assert_eq!((r.rcode(), r.opt().unwrap().0), (NXDOMAIN, 1400));
    }
}

#[test]
fn version_1_is_badvers() {
    // RFC 6891 §6.1.3: BADVERS = 16: header rcode 0, OPT extended rcode 1,
    // and the response's OPT says version 0 (the version we speak).
    let s = Server::example();
    for version in [1u8, 2, 255] {
        let q = QueryBuilder::new("www.example.test", A)
            .id(0x5151)
            .rd()
            .opt(Opt {
                version,
                ..Opt::default()
            })
            .build();
        let r = s.ask(&q);
        assert_eq!(r.rcode(), 0, "header rcode carries the low 4 bits of 16");
        let (payload, ttl, _) = r.opt().expect("BADVERS comes with an OPT");
        assert_eq!(ttl >> 24, 1, "extended rcode: 16 >> 4");
        assert_eq!((ttl >> 16) & 0xFF, 0, "the version we speak");
        assert_eq!(payload, 1232);
        assert_eq!(r.hdr().counts.answers, 0, "no answer with BADVERS");
        assert_eq!(r.hdr().id, 0x5151);
        assert_eq!(r.flags(), "qr rd");
        // hickory merges the extended rcode: BADVERS.
        assert_eq!(u16::from(r.msg.metadata.response_code), 16);
    }
}

#[test]
fn unknown_options_are_ignored() {
    // Two unassigned codes and a zero-length option (COOKIE is answered:
    // tests/wire/cookies.rs).
    let s = Server::example();
    let q = QueryBuilder::new("www.example.test", A)
        .id(0x6161)
        .option(&option(65002, &[1, 2, 3, 4, 5, 6, 7, 8]))
        .option(&option(65001, b"whatever"))
        .option(&option(3, &[]))
        .build();
    let r = s.ask(&q);
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    let (_, _, rdata) = r.opt().unwrap();
    assert!(
        rdata.is_empty(),
        "unknown options are not echoed: {rdata:?}"
    );
}

#[test]
fn unknown_flag_bits_are_ignored() {
    // Every Z bit of the OPT TTL set (and DO clear): answered as usual, and
    // the Z bits come back as zero (RFC 6891 §6.1.4).
    let s = Server::example();
    let q = QueryBuilder::new("www.example.test", A)
        .id(0x7171)
        .opt(Opt {
            flags: 0x7FFF,
            ..Opt::default()
        })
        .build();
    let r = s.ask(&q);
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    assert_eq!(r.opt().unwrap().1, 0);
    // The extended-rcode octet of a query is ignored too.
    let q = QueryBuilder::new("www.example.test", A)
        .id(0x7172)
        .opt(Opt {
            ext_rcode: 0xAB,
            ..Opt::default()
        })
        .build();
    let r = s.ask(&q);
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.opt().unwrap().1, 0);
}

#[test]
fn second_opt_is_formerr() {
    let s = Server::example();
    // The builder writes one OPT: append a second (the 11-octet tail of
    // a query with one) and count it.
    let mut q = QueryBuilder::new("www.example.test", A)
        .id(0x8181)
        .edns(1232)
        .build();
    let second = QueryBuilder::new(".", A).edns(4096).build();
    q.extend_from_slice(&second[second.len() - 11..]);
    q[10..12].copy_from_slice(&2u16.to_be_bytes());
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().counts.answers, 0);
    assert!(r.opt().is_some(), "one OPT in the FORMERR");
    assert_eq!(r.hdr().counts.additionals, 1);
}

#[test]
fn do_bit_is_copied() {
    // dig +dnssec: DO set in the query, set in the answer's OPT; clear, clear.
    let s = Server::example();
    for (flags, want) in [(0x8000u16, 0x8000u32), (0, 0), (0xFFFF, 0x8000)] {
        for name in ["www.example.test", "nope.example.test"] {
            let q = QueryBuilder::new(name, A)
                .id(9)
                .opt(Opt {
                    flags,
                    ..Opt::default()
                })
                .build();
            let r = s.ask(&q);
            assert_eq!(r.opt().unwrap().1 & 0xFFFF, want, "{name} flags {flags:#x}");
        }
    }
    let mut q = Q::new("www.example.test.", RecordType::A).edns(1232);
    q.dnssec_ok = true;
    assert!(s.dig(&q).msg.edns.as_ref().unwrap().flags().dnssec_ok);
}

#[test]
fn opt_over_tcp() {
    let s = Server::example();
    let r = s.ask_tcp(&edns_query(1, 0, "www.example.test", A, IN));
    assert_eq!(r.opt().unwrap().0, 1232);
    let r = s.ask_tcp(&QueryBuilder::new("www.example.test", A).id(1).build());
    assert!(r.opt().is_none());
}

#[test]
fn ecs_is_echoed_with_the_opt() {
    // dig +subnet=8.8.8.0/24 www.example.test: the option comes back, scope 0
    // (a static name does not depend on the client).
    let s = Server::example();
    let r = s.dig(&Q::new("www.example.test.", RecordType::A).ecs("8.8.8.0/24"));
    assert_eq!(ecs_raw(&r.raw), Some((1, 24, 0, vec![8, 8, 8])));
}
