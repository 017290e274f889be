//! QCLASS ANY ("*", RFC 1035 §3.2.5) matches every class; our zones are all
//! IN, so it is answered as IN, as Knot does. The question echoes class ANY
//! byte for byte; the records carry class IN.

use crate::common::*;

const A: u16 = 1;
const MX: u16 = 15;
const CLASS_ANY: u16 = 255;

#[test]
fn qclass_any_is_answered_as_in() {
    let s = Server::example();
    let q = QueryBuilder::new("www.example.test", A)
        .id(0x0A0A)
        .class(CLASS_ANY)
        .build();
    let r = s.ask(&q);
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.wire.question, &q[12..], "question echoed with class ANY");
    let a = s.dig(&Q::new(
        "www.example.test.",
        hickory_proto::rr::RecordType::A,
    ));
    assert_eq!(r.answer(), a.answer(), "same records as class IN");
    assert!(!r.answer().is_empty());
    assert!(r.wire.answer.iter().all(|rr| rr.class == 1));
}

#[test]
fn qclass_any_negative_answers_are_as_in() {
    let s = Server::example();
    // NXDOMAIN and NODATA, with the SOA, as for IN.
    for (name, t, rcode) in [
        ("nope.example.test", A, NXDOMAIN),
        ("www.example.test", MX, NOERROR),
    ] {
        let q = QueryBuilder::new(name, t).class(CLASS_ANY).build();
        let r = s.ask(&q);
        assert_eq!((r.rcode(), r.flags().as_str()), (rcode, "qr aa"), "{name}");
        assert_eq!(r.authority().len(), 1, "{name}");
    }
    // A name in no served zone is still REFUSED.
    let r = s.ask(&QueryBuilder::new("example.org", A).class(CLASS_ANY).build());
    assert_eq!(r.rcode(), REFUSED);
}
