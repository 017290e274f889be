//! Queries we refuse or cannot process: a name in no served zone and classes
//! other than IN and ANY are REFUSED, QDCOUNT other than 1 is FORMERR, an unknown
//! opcode is NOTIMP, zone transfers are REFUSED, and ANY gets one RRset
//! (RFC 8482).

use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;
use hickory_proto::rr::RecordType;

const A: u16 = 1;
const TXT: u16 = 16;
const IXFR: u16 = 251;
const AXFR: u16 = 252;
const ANY: u16 = 255;
const CH: u16 = 3;
const HS: u16 = 4;

#[test]
fn name_in_no_served_zone_is_refused() {
    // dig www.example.org: not ours, REFUSED, AA clear, nothing in the sections.
    let s = Server::example();
    for name in [
        "www.example.org.",
        "test.",
        "example.",
        "xexample.test.",
        ".",
    ] {
        let r = s.dig(&Q::new(name, RecordType::A));
        assert_eq!(r.rcode(), REFUSED, "{name}");
        assert_eq!(r.flags(), "qr", "{name}");
        assert_eq!(
            (
                r.hdr().counts.queries,
                r.hdr().counts.answers,
                r.hdr().counts.authorities,
                r.hdr().counts.additionals
            ),
            (1, 0, 0, 0)
        );
    }
}

#[test]
fn qdcount_zero_is_formerr() {
    let s = Server::example();
    let mut q = QueryBuilder::new("www.example.test", A)
        .id(0x0A0A)
        .flags(0x0100)
        .build();
    q.truncate(12);
    q[4..6].copy_from_slice(&0u16.to_be_bytes());
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().id, 0x0A0A);
    assert_eq!(r.flags(), "qr rd");
    assert_eq!(
        (
            r.hdr().counts.queries,
            r.hdr().counts.answers,
            r.hdr().counts.authorities,
            r.hdr().counts.additionals
        ),
        (0, 0, 0, 0)
    );
}

#[test]
fn qdcount_two_is_formerr() {
    let s = Server::example();
    let mut q = QueryBuilder::new("www.example.test", A).id(0x0B0B).build();
    q[4..6].copy_from_slice(&2u16.to_be_bytes());
    q.extend_from_slice(&wire("mail.example.test"));
    q.extend_from_slice(&[0, 1, 0, 1]);
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().id, 0x0B0B);
    assert_eq!(r.flags(), "qr");
    assert_eq!((r.hdr().counts.answers, r.hdr().counts.authorities), (0, 0));
    // QDCOUNT 2 with the second question compressed against the first.
    let mut q = QueryBuilder::new("www.example.test", A).id(0x0B0C).build();
    q[4..6].copy_from_slice(&2u16.to_be_bytes());
    q.extend_from_slice(&[0xC0, 12, 0, 28, 0, 1]);
    assert_eq!(s.ask(&q).rcode(), FORMERR);
}

#[test]
fn unknown_opcodes_are_notimp() {
    // IQUERY (1, obsolete), STATUS (2), 3, NOTIFY (4), UPDATE (5), DSO (6), 15.
    let s = Server::example();
    for op in [1u16, 2, 3, 4, 5, 6, 7, 15] {
        let q = QueryBuilder::new("www.example.test", A)
            .id(0x1000 + op)
            .flags(op << 11)
            .build();
        let r = s.ask(&q);
        assert_eq!(r.rcode(), NOTIMP, "opcode {op}");
        assert_eq!(
            u16::from(u8::from(r.hdr().op_code)),
            op,
            "the opcode is echoed"
        );
        assert!(!r.hdr().authoritative);
        assert_eq!(
            (
                r.hdr().counts.answers,
                r.hdr().counts.authorities,
                r.hdr().counts.additionals
            ),
            (0, 0, 0)
        );
        assert_eq!(r.hdr().id, 0x1000 + op);
    }
}

#[test]
fn unknown_opcode_without_a_question_is_notimp() {
    // A DSO (opcode 6) or STATUS message may carry no question: the opcode is
    // what we do not implement (RFC 8490 §5.1).
    let s = Server::example();
    for op in [2u16, 6] {
        let mut q = QueryBuilder::new("www.example.test", A)
            .id(0x2000)
            .flags(op << 11)
            .build();
        q.truncate(12);
        q[4..6].copy_from_slice(&0u16.to_be_bytes());
        let r = s.ask(&q);
        assert_eq!(r.rcode(), NOTIMP, "opcode {op}");
        assert_eq!(r.hdr().counts.queries, 0);
    }
}

#[test]
fn classes_other_than_in_are_refused() {
    // dig CH TXT version.bind, HS and others: REFUSED, question echoed.
    // (QCLASS ANY is answered as IN: tests/zone/qclass_any.rs.)
    let s = Server::example();
    for (name, t, class) in [
        ("version.bind", TXT, CH),
        ("www.example.test", A, CH),
        ("www.example.test", A, HS),
        ("www.example.test", A, 254),
        ("www.example.test", A, 2),
    ] {
        let q = QueryBuilder::new(name, t).id(0x0C0C).class(class).build();
        let r = s.ask(&q);
        assert_eq!(r.rcode(), REFUSED, "class {class}");
        assert_eq!(r.flags(), "qr");
        assert_eq!(r.wire.question, &q[12..]);
        assert_eq!(
            (
                r.hdr().counts.answers,
                r.hdr().counts.authorities,
                r.hdr().counts.additionals
            ),
            (0, 0, 0)
        );
    }
}

#[test]
fn zone_transfers_are_refused_over_udp() {
    let s = Server::example();
    for t in [AXFR, IXFR] {
        let r = s.ask(&QueryBuilder::new("example.test", t).id(0x0D0D).build());
        assert_eq!(r.rcode(), REFUSED, "type {t}");
        assert_eq!(r.flags(), "qr");
        assert_eq!((r.hdr().counts.answers, r.hdr().counts.authorities), (0, 0));
    }
}

#[test]
fn zone_transfers_are_refused_over_tcp() {
    // dig +tcp AXFR example.test: one REFUSED message, and the connection
    // still answers the next query.
    let s = Server::example();
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    for t in [AXFR, IXFR] {
        tcp_send(
            &mut c,
            &QueryBuilder::new("example.test", t).id(0x0E0E).build(),
        );
        let r = Resp::new(tcp_recv(&mut c).expect("an answer"));
        assert_eq!(r.rcode(), REFUSED, "type {t}");
        assert_eq!(r.flags(), "qr");
        assert_eq!(r.hdr().counts.answers, 0);
    }
    tcp_send(
        &mut c,
        &QueryBuilder::new("www.example.test", A).id(0x0E0F).build(),
    );
    let r = Resp::new(tcp_recv(&mut c).expect("an answer"));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
}

#[test]
fn any_gets_one_rrset() {
    // RFC 8482: at the apex (SOA, NS, MX, TXT) one RRset comes back, AA set.
    let s = Server::example();
    for name in ["example.test", "www.example.test", "ns1.example.test"] {
        let r = s.ask(&QueryBuilder::new(name, ANY).id(0x0F0F).build());
        assert_eq!(
            (r.rcode(), r.flags().as_str()),
            (NOERROR, "qr aa"),
            "{name}"
        );
        let a = &r.wire.answer;
        assert!(!a.is_empty(), "{name}: empty ANY answer");
        assert!(
            a.iter()
                .all(|x| x.rtype == a[0].rtype && x.owner == a[0].owner),
            "{name}: more than one RRset: {:?}",
            r.answer()
        );
        assert!(r.authority().is_empty());
    }
    // The apex has 4 RRsets; ANY must not return them all.
    let r = s.ask(&QueryBuilder::new("example.test", ANY).id(1).build());
    assert!(r.wire.answer.len() < 2 + 1 + 1 + 1);
}

#[test]
fn any_for_missing_names_is_negative() {
    let s = Server::example();
    let r = s.ask(&QueryBuilder::new("nope.example.test", ANY).id(1).build());
    assert_eq!((r.rcode(), r.flags().as_str()), (NXDOMAIN, "qr aa"));
    assert_eq!(r.authority().len(), 1);
    // ANY for a name in no zone: REFUSED.
    let r = s.ask(&QueryBuilder::new("www.example.org", ANY).id(1).build());
    assert_eq!(r.rcode(), REFUSED);
}

#[test]
fn any_over_tcp() {
    let s = Server::example();
    let r = s.ask_tcp(&QueryBuilder::new("www.example.test", ANY).id(2).build());
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    let a = &r.wire.answer;
    assert!(!a.is_empty() && a.iter().all(|x| x.rtype == a[0].rtype));
}
