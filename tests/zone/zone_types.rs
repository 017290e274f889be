//! Zone files (RFC 1035 §5, RFC 3597): every supported type is served with
//! the right RDATA; $ORIGIN, $TTL and $INCLUDE work; several zones are served
//! at once, and for a zone below another the longest match answers.
//!
//! Config: tests/data/types.toml (types.test, sub.types.test, 2.0.192.in-addr.arpa).

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> Server {
    Server::start(&data("types.toml"), &[])
}

fn ask(s: &Server, name: &str, t: RecordType) -> Resp {
    let r = s.dig(&Q::new(name, t));
    assert_eq!(
        (r.rcode(), r.flags().as_str()),
        (NOERROR, "qr aa"),
        "{name} {t}"
    );
    r
}

#[test]
fn soa() {
    // The multi-line SOA with unit suffixes: 2h 15m 2w 5m.
    let s = server();
    let r = ask(&s, "types.test.", RecordType::SOA);
    assert_eq!(
        r.answer(),
        ["types.test. 3600 IN SOA ns1.types.test. hostmaster.types.test. 2024010101 7200 900 1209600 300"]
    );
}

#[test]
fn ns() {
    let s = server();
    let r = ask(&s, "types.test.", RecordType::NS);
    assert_eq!(
        r.answer(),
        [
            "types.test. 3600 IN NS ns1.types.test.",
            "types.test. 3600 IN NS ns2.example.net."
        ]
    );
}

#[test]
fn a_and_aaaa() {
    let s = server();
    assert_eq!(
        ask(&s, "ns1.types.test.", RecordType::A).answer(),
        ["ns1.types.test. 3600 IN A 192.0.2.53"]
    );
    assert_eq!(
        ask(&s, "ns1.types.test.", RecordType::AAAA).answer(),
        ["ns1.types.test. 3600 IN AAAA 2001:db8::53"]
    );
    let r = ask(&s, "ns1.types.test.", RecordType::AAAA);
    assert_eq!(
        r.wire.answer[0].rdata,
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53]
    );
    // An explicit TTL on the record wins over $TTL.
    assert_eq!(
        ask(&s, "mail.types.test.", RecordType::A).answer(),
        ["mail.types.test. 300 IN A 192.0.2.25"]
    );
}

#[test]
fn cname_in_a_zone_file() {
    // CNAME RDATA from the example zone: a relative target made absolute.
    let s = Server::example();
    let r = s.dig(&Q::new("alias.example.test.", RecordType::CNAME));
    assert_eq!(
        r.answer(),
        ["alias.example.test. 3600 IN CNAME www.example.test."]
    );
}

#[test]
fn mx() {
    let s = server();
    let r = ask(&s, "types.test.", RecordType::MX);
    assert_eq!(
        r.answer(),
        [
            "types.test. 3600 IN MX 10 mail.types.test.",
            "types.test. 3600 IN MX 20 mail.example.net."
        ]
    );
    // The preference is the first two octets.
    assert_eq!(&r.wire.answer[0].rdata[..2], &[0, 10]);
}

#[test]
fn txt() {
    let s = server();
    let r = ask(&s, "types.test.", RecordType::TXT);
    assert_eq!(r.wire.answer[0].rdata, b"\x0bv=spf1 -all");
    // Two character-strings in one record.
    let r = ask(&s, "txt.types.test.", RecordType::TXT);
    assert_eq!(r.wire.answer.len(), 1);
    assert_eq!(r.wire.answer[0].rdata, b"\x03two\x07strings");
}

#[test]
fn srv_target_is_not_compressed() {
    // RFC 2782: the SRV target is written in full (no compression pointer).
    let s = server();
    let r = ask(&s, "_sip._tcp.types.test.", RecordType::SRV);
    assert_eq!(
        r.answer(),
        ["_sip._tcp.types.test. 3600 IN SRV 10 60 5060 sip.types.test."]
    );
    let mut want = vec![0, 10, 0, 60, 0x13, 0xC4];
    want.extend(wire("sip.types.test"));
    assert_eq!(r.wire.answer[0].rdata, want);
}

#[test]
fn caa() {
    let s = server();
    let r = ask(&s, "types.test.", RecordType::CAA);
    assert_eq!(r.wire.answer.len(), 1);
    assert_eq!(r.wire.answer[0].rtype, 257);
    assert_eq!(r.wire.answer[0].rdata, b"\x00\x05issueca.example.net");
}

#[test]
fn ptr() {
    let s = server();
    let r = ask(&s, "1.2.0.192.in-addr.arpa.", RecordType::PTR);
    assert_eq!(
        r.answer(),
        ["1.2.0.192.in-addr.arpa. 3600 IN PTR www.types.test."]
    );
    let r = ask(&s, "53.2.0.192.in-addr.arpa.", RecordType::PTR);
    assert_eq!(
        r.answer(),
        ["53.2.0.192.in-addr.arpa. 3600 IN PTR ns1.types.test."]
    );
}

#[test]
fn rfc3597_unknown_type() {
    // opaque TYPE65280 \# 4 0A000001: the octets as given, type 65280.
    let s = server();
    let r = s.ask(&QueryBuilder::new("opaque.types.test", 65280).id(1).build());
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.wire.answer.len(), 1);
    let rr = &r.wire.answer[0];
    assert_eq!((rr.rtype, rr.class, rr.ttl), (65280, 1, 3600));
    assert_eq!(rr.rdata, [0x0A, 0, 0, 1]);
    // \# 0: empty RDATA (read from the wire only: hickory refuses an empty
    // RDATA outside UPDATE, though RFC 3597 allows it).
    let raw = s
        .udp_raw(&QueryBuilder::new("empty.types.test", 65281).id(2).build())
        .unwrap();
    let w = walk(&raw).unwrap();
    assert_eq!((w.header.response_code.low(), w.answer.len()), (NOERROR, 1));
    assert_eq!((w.answer[0].rtype, w.answer[0].rdata.len()), (65281, 0));
    // Another type at that name: NODATA.
    let r = s.ask(&QueryBuilder::new("opaque.types.test", 65281).id(3).build());
    assert_eq!(
        (r.rcode(), r.wire.answer.len(), r.wire.authority.len()),
        (NOERROR, 0, 1)
    );
}

#[test]
fn ttl_directive() {
    let s = server();
    // $TTL 1h for the first part, $TTL 120 after.
    assert_eq!(
        ask(&s, "sip.types.test.", RecordType::A).wire.answer[0].ttl,
        3600
    );
    assert_eq!(
        ask(&s, "short.types.test.", RecordType::A).answer(),
        ["short.types.test. 120 IN A 192.0.2.120"]
    );
}

#[test]
fn origin_directive() {
    // $ORIGIN lab.types.test.: "host" and "@" are relative to it.
    let s = server();
    assert_eq!(
        ask(&s, "host.lab.types.test.", RecordType::A).answer(),
        ["host.lab.types.test. 120 IN A 192.0.2.130"]
    );
    assert_eq!(
        ask(&s, "lab.types.test.", RecordType::TXT).wire.answer[0].rdata,
        b"\x07the lab"
    );
    // Not relative to the zone's origin.
    assert_eq!(
        s.dig(&Q::new("host.types.test.", RecordType::A)).rcode(),
        NXDOMAIN
    );
}

#[test]
fn include_directive() {
    let s = server();
    // types.inc: the includer's origin and $TTL (120) ...
    assert_eq!(
        ask(&s, "inc1.types.test.", RecordType::A).answer(),
        ["inc1.types.test. 120 IN A 192.0.2.160"]
    );
    // ... and its own $TTL 60 afterwards.
    assert_eq!(
        ask(&s, "inc2.types.test.", RecordType::A).answer(),
        ["inc2.types.test. 60 IN A 192.0.2.161"]
    );
    // types-named.inc with the origin from the $INCLUDE line.
    assert_eq!(
        ask(&s, "host.inc.types.test.", RecordType::A).answer(),
        ["host.inc.types.test. 120 IN A 192.0.2.170"]
    );
    assert_eq!(
        ask(&s, "inc.types.test.", RecordType::TXT).wire.answer[0].rdata,
        b"\x1corigin from the include line"
    );
    // The include's $TTL does not leak back into the including file.
    assert_eq!(
        ask(&s, "after.types.test.", RecordType::A).answer(),
        ["after.types.test. 120 IN A 192.0.2.140"]
    );
}

#[test]
fn several_zones_at_once() {
    let s = server();
    for (zone, mname) in [
        ("types.test.", "ns1.types.test."),
        ("sub.types.test.", "ns.sub.types.test."),
        ("2.0.192.in-addr.arpa.", "ns1.types.test."),
    ] {
        let r = ask(&s, zone, RecordType::SOA);
        assert_eq!(r.wire.answer.len(), 1);
        assert_eq!(r.wire.answer[0].owner, zone);
        assert!(
            r.answer()[0].contains(&format!(" IN SOA {mname} ")),
            "{:?}",
            r.answer()
        );
    }
    // A name in none of them.
    assert_eq!(
        s.dig(&Q::new("www.example.test.", RecordType::A)).rcode(),
        REFUSED
    );
}

#[test]
fn the_longest_matching_zone_answers() {
    // sub.types.test is delegated in types.test but served here too: the
    // child zone answers, authoritatively (not the parent's referral or its
    // occluded www.sub A 192.0.2.99).
    let s = server();
    let r = ask(&s, "www.sub.types.test.", RecordType::A);
    assert_eq!(r.answer(), ["www.sub.types.test. 3600 IN A 192.0.2.200"]);
    let r = ask(&s, "sub.types.test.", RecordType::NS);
    assert_eq!(
        r.answer(),
        ["sub.types.test. 3600 IN NS ns.sub.types.test."]
    );
    // Negative answers carry the child's SOA (MINIMUM 60).
    let r = s.dig(&Q::new("nope.sub.types.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NXDOMAIN, "qr aa"));
    assert_eq!(r.wire.authority[0].owner, "sub.types.test.");
    assert_eq!(r.wire.authority[0].ttl, 60);
}

#[test]
fn ds_at_a_child_apex_is_answered_by_the_served_parent() {
    // Both sides of the cut are served: DS is the parent's (RFC 4035
    // §3.1.4.1), so the NODATA carries types.test's SOA, not the child's.
    let s = server();
    let r = ask(&s, "sub.types.test.", RecordType::DS);
    assert!(r.answer().is_empty());
    assert_eq!(r.wire.authority.len(), 1);
    assert_eq!(r.wire.authority[0].owner, "types.test.");
    // Other types at the child apex stay with the child.
    let r = ask(&s, "sub.types.test.", RecordType::SOA);
    assert_eq!(r.wire.answer[0].owner, "sub.types.test.");
    // A zone apex with no served parent answers DS itself (NODATA).
    let r = ask(&s, "types.test.", RecordType::DS);
    assert!(r.answer().is_empty());
    assert_eq!(r.wire.authority[0].owner, "types.test.");
}
