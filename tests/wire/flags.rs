//! Header flags and the echoed question (RFC 1035 §4.1.1, RFC 4343):
//! AA on authoritative answers, RD copied, RA never set, the question echoed
//! byte for byte with its case, names matched without regard to case, and
//! the ID echoed.

use crate::common::*;
use hickory_proto::op::MessageType;
use hickory_proto::rr::RecordType;

const A: u16 = 1;

#[test]
fn aa_set_on_authoritative_answer() {
    // dig +norec www.example.test A
    let s = Server::example();
    let r = s.dig(&Q::new("www.example.test.", RecordType::A));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr aa");
    assert_eq!(r.answer(), ["www.example.test. 300 IN A 192.0.2.1"]);
}

#[test]
fn aa_set_on_negative_answers() {
    let s = Server::example();
    // NXDOMAIN and NODATA come from the zone too: authoritative.
    let nx = s.dig(&Q::new("nope.example.test.", RecordType::A));
    assert_eq!((nx.rcode(), nx.flags().as_str()), (NXDOMAIN, "qr aa"));
    let nodata = s.dig(&Q::new("mail.example.test.", RecordType::AAAA));
    assert_eq!(
        (nodata.rcode(), nodata.flags().as_str()),
        (NOERROR, "qr aa")
    );
    assert!(nodata.answer().is_empty());
}

#[test]
fn aa_clear_on_refused() {
    // A name in no served zone: we are not an authority for it.
    let s = Server::example();
    let r = s.dig(&Q::new("www.example.org.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (REFUSED, "qr"));
}

#[test]
fn rd_is_copied_when_set() {
    // dig +rec www.example.test: "flags: qr aa rd", and no "ra".
    let s = Server::example();
    let r = s.dig(&Q::new("www.example.test.", RecordType::A).rd());
    assert_eq!(r.flags(), "qr aa rd");
    assert!(!r.hdr().recursion_available);
}

#[test]
fn rd_is_copied_when_clear() {
    let s = Server::example();
    let r = s.ask(
        &QueryBuilder::new("www.example.test", A)
            .id(7)
            .flags(0x0000)
            .build(),
    );
    assert_eq!(r.flags(), "qr aa");
    let r = s.ask(
        &QueryBuilder::new("www.example.test", A)
            .id(7)
            .flags(0x0100)
            .build(),
    );
    assert_eq!(r.flags(), "qr aa rd");
}

#[test]
fn ra_never_set() {
    // Not on answers, negative answers, refusals or errors, with or without RD.
    let s = Server::example();
    for flags in [0x0000u16, 0x0100, 0x0180] {
        for name in ["www.example.test", "nope.example.test", "www.example.org"] {
            let r = s.ask(&QueryBuilder::new(name, A).id(9).flags(flags).build());
            assert!(
                !r.hdr().recursion_available,
                "RA set for {name} with flags {flags:#06x}"
            );
        }
        // FORMERR: trailing garbage after the question.
        let mut bad = QueryBuilder::new("www.example.test", A)
            .id(9)
            .flags(flags)
            .build();
        bad.extend_from_slice(b"xx");
        let r = s.ask(&bad);
        assert_eq!(r.rcode(), FORMERR);
        assert!(!r.hdr().recursion_available);
    }
}

#[test]
fn z_bit_is_not_echoed() {
    // The response flags are ours: the query's Z bit does not come back.
    let s = Server::example();
    let r = s.ask(
        &QueryBuilder::new("www.example.test", A)
            .id(3)
            .flags(0x0140)
            .build(),
    );
    assert_eq!(r.rcode(), NOERROR);
    // hickory does not expose Z: read the bit from the header.
    assert_eq!(r.raw[3] & 0x40, 0, "Z bit must be zero in a response");
}

#[test]
fn question_echoed_with_case_preserved() {
    // dig WwW.ExAmPle.TEST: the question comes back exactly as sent.
    let s = Server::example();
    let q = QueryBuilder::new("WwW.ExAmPle.TEST", A).id(0x1234).build();
    let r = s.ask(&q);
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.hdr().counts.queries, 1);
    assert_eq!(
        r.wire.question,
        &q[12..],
        "question not echoed byte for byte"
    );
    assert_eq!(r.msg.queries[0].name().to_string(), "WwW.ExAmPle.TEST.");
}

#[test]
fn matching_ignores_case() {
    let s = Server::example();
    let r = s.dig(&Q::new("WwW.ExAmPle.TEST.", RecordType::A));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr aa");
    assert_eq!(r.wire.answer.len(), 1);
    // The owner is the question's name (a pointer to it) and the data is www's.
    assert!(r.wire.answer[0]
        .owner
        .eq_ignore_ascii_case("www.example.test."));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    // Upper case everywhere, other types, and a CNAME to follow.
    let r = s.dig(&Q::new("ALIAS.EXAMPLE.TEST.", RecordType::A));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    let r = s.dig(&Q::new("Www.Example.Test.", RecordType::TXT));
    assert_eq!(r.answer().len(), 1);
    assert!(
        r.answer()[0].ends_with("IN TXT static answer"),
        "{:?}",
        r.answer()
    );
}

#[test]
fn case_preserved_on_negative_and_refused() {
    let s = Server::example();
    for (name, rcode) in [
        ("NoPe.ExAmPle.TeSt", NXDOMAIN),
        ("WWW.Example.ORG", REFUSED),
    ] {
        let q = QueryBuilder::new(name, A).id(0x0102).build();
        let r = s.ask(&q);
        assert_eq!(r.rcode(), rcode);
        assert_eq!(r.wire.question, &q[12..]);
    }
}

#[test]
fn id_echoed() {
    let s = Server::example();
    for id in [0u16, 1, 0x4d52, 0xBEEF, 0xFFFF] {
        let r = s.ask(&QueryBuilder::new("www.example.test", A).id(id).build());
        assert_eq!(r.hdr().id, id);
        assert_eq!(r.hdr().message_type, MessageType::Response);
        // ... on errors too (NOTIMP for opcode 2, STATUS).
        let r = s.ask(
            &QueryBuilder::new("www.example.test", A)
                .id(id)
                .flags(2 << 11)
                .build(),
        );
        assert_eq!((r.hdr().id, r.rcode()), (id, NOTIMP));
    }
}

#[test]
fn id_echoed_over_tcp() {
    let s = Server::example();
    let r = s.ask_tcp(
        &QueryBuilder::new("WWW.example.test", A)
            .id(0xCAFE)
            .flags(0x0100)
            .build(),
    );
    assert_eq!(r.hdr().id, 0xCAFE);
    assert_eq!(r.flags(), "qr aa rd");
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
}
