//! EDNS (RFC 6891): an OPT in the response iff the query had one, whatever
//! the rcode; our payload size advertised; version > 0 gets BADVERS; unknown
//! options and flag bits ignored; a second OPT is FORMERR; DO copied.

mod common;

use common::*;
use hickory_proto::rr::RecordType;

const A: u16 = 1;
const AXFR: u16 = 252;
const IN: u16 = 1;
const CH: u16 = 3;

/// `dig +edns=0 +bufsize=SIZE`: a query with a plain OPT.
fn edns_query(id: u16, flags: u16, name: &str, qtype: u16, qclass: u16) -> Vec<u8> {
    with_additional(
        raw_query(id, flags, name, qtype, qclass),
        &opt_rr(1232, 0, 0, 0, &[]),
    )
}

/// Queries covering every rcode: (what, query without OPT, expected rcode).
fn every_rcode() -> Vec<(&'static str, Vec<u8>, u8)> {
    vec![
        (
            "NOERROR",
            raw_query(1, 0, "www.example.test", A, IN),
            NOERROR,
        ),
        (
            "NODATA",
            raw_query(2, 0, "mail.example.test", 28, IN),
            NOERROR,
        ),
        (
            "NXDOMAIN",
            raw_query(3, 0, "nope.example.test", A, IN),
            NXDOMAIN,
        ),
        (
            "REFUSED (zone)",
            raw_query(4, 0, "www.example.org", A, IN),
            REFUSED,
        ),
        (
            "REFUSED (class)",
            raw_query(5, 0, "www.example.test", A, CH),
            REFUSED,
        ),
        (
            "REFUSED (AXFR)",
            raw_query(6, 0, "example.test", AXFR, IN),
            REFUSED,
        ),
        (
            "NOTIMP",
            raw_query(7, 2 << 11, "www.example.test", A, IN),
            NOTIMP,
        ),
    ]
}

#[test]
fn no_opt_without_edns() {
    let s = Server::example();
    for (what, q, rcode) in every_rcode() {
        let r = s.ask(&q);
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
        let r = s.ask(&with_additional(q, &opt_rr(1232, 0, 0, 0, &[])));
        assert_eq!(r.rcode(), rcode, "{what}");
        let (payload, ttl, rdata) = r.opt().unwrap_or_else(|| panic!("{what}: no OPT"));
        assert_eq!(payload, 1232, "{what}");
        assert_eq!(ttl, 0, "{what}: ext-rcode, version and flags are 0");
        assert!(rdata.is_empty(), "{what}");
        // The OPT is the last record and the only one in additional here.
        assert_eq!(r.hdr().ar, 1, "{what}");
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
    let mut q = raw_query(2, 0, "x", A, IN);
    q.truncate(12);
    q[4..6].copy_from_slice(&0u16.to_be_bytes());
    let q = with_additional(q, &opt_rr(1232, 0, 0, 0, &[]));
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().qd, 0);
    assert!(
        r.opt().is_some(),
        "FORMERR (QDCOUNT 0) for a query with an OPT lacks the OPT"
    );
    // The same without an OPT: none back.
    let mut q = raw_query(3, 0, "x", A, IN);
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
        let q = with_additional(
            raw_query(0x5151, 0x0100, "www.example.test", A, IN),
            &opt_rr(1232, 0, version, 0, &[]),
        );
        let r = s.ask(&q);
        assert_eq!(r.rcode(), 0, "header rcode carries the low 4 bits of 16");
        let (payload, ttl, _) = r.opt().expect("BADVERS comes with an OPT");
        assert_eq!(ttl >> 24, 1, "extended rcode: 16 >> 4");
        assert_eq!((ttl >> 16) & 0xFF, 0, "the version we speak");
        assert_eq!(payload, 1232);
        assert_eq!(r.hdr().an, 0, "no answer with BADVERS");
        assert_eq!(r.hdr().id, 0x5151);
        assert_eq!(r.flags(), "qr rd");
        // hickory merges the extended rcode: BADVERS.
        assert_eq!(u16::from(r.msg.metadata.response_code), 16);
    }
}

#[test]
fn unknown_options_are_ignored() {
    // COOKIE (10), an unassigned code, and a zero-length option.
    let s = Server::example();
    let mut opts = edns_option(10, &[1, 2, 3, 4, 5, 6, 7, 8]);
    opts.extend(edns_option(65001, b"whatever"));
    opts.extend(edns_option(3, &[]));
    let q = with_additional(
        raw_query(0x6161, 0, "www.example.test", A, IN),
        &opt_rr(1232, 0, 0, 0, &opts),
    );
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
    let q = with_additional(
        raw_query(0x7171, 0, "www.example.test", A, IN),
        &opt_rr(1232, 0, 0, 0x7FFF, &[]),
    );
    let r = s.ask(&q);
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    assert_eq!(r.opt().unwrap().1, 0);
    // The extended-rcode octet of a query is ignored too.
    let q = with_additional(
        raw_query(0x7172, 0, "www.example.test", A, IN),
        &opt_rr(1232, 0xAB, 0, 0, &[]),
    );
    let r = s.ask(&q);
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.opt().unwrap().1, 0);
}

#[test]
fn second_opt_is_formerr() {
    let s = Server::example();
    let q = with_additional(
        with_additional(
            raw_query(0x8181, 0, "www.example.test", A, IN),
            &opt_rr(1232, 0, 0, 0, &[]),
        ),
        &opt_rr(4096, 0, 0, 0, &[]),
    );
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().an, 0);
    assert!(r.opt().is_some(), "one OPT in the FORMERR");
    assert_eq!(r.hdr().ar, 1);
}

#[test]
fn do_bit_is_copied() {
    // dig +dnssec: DO set in the query, set in the answer's OPT; clear, clear.
    let s = Server::example();
    for (flags, want) in [(0x8000u16, 0x8000u32), (0, 0), (0xFFFF, 0x8000)] {
        for name in ["www.example.test", "nope.example.test"] {
            let q = with_additional(
                raw_query(9, 0, name, A, IN),
                &opt_rr(1232, 0, 0, flags, &[]),
            );
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
    let r = s.ask_tcp(&raw_query(1, 0, "www.example.test", A, IN));
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
