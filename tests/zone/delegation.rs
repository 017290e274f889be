//! Referrals at zone cuts (RFC 1034 §4.3.2 step 3b): NS of the cut in the
//! authority section, glue for in-bailiwick name servers in additional, AA
//! clear, NOERROR; DS at the cut is the parent's (RFC 4035 §3.1.4.1).
//!
//! Zone: tests/data/parent.test.zone.

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> Server {
    Server::start(&data("delegation.toml"), &[])
}

const CHILD_NS: [&str; 2] = [
    "child.parent.test. 86400 IN NS ns1.child.parent.test.",
    "child.parent.test. 86400 IN NS ns2.child.parent.test.",
];
const CHILD_GLUE: [&str; 3] = [
    "ns1.child.parent.test. 3600 IN A 192.0.2.10",
    "ns1.child.parent.test. 3600 IN AAAA 2001:db8::10",
    "ns2.child.parent.test. 7200 IN A 192.0.2.11",
];

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn assert_child_referral(r: &Resp) {
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr", "AA must be clear on a referral");
    assert!(r.answer().is_empty(), "{:?}", r.answer());
    assert_eq!(sorted(r.authority()), CHILD_NS);
    assert_eq!(sorted(r.additional()), CHILD_GLUE);
}

#[test]
fn referral_at_the_cut() {
    // dig child.parent.test A
    let s = server();
    assert_child_referral(&s.dig(&Q::new("child.parent.test.", RecordType::A)));
}

#[test]
fn referral_below_the_cut() {
    let s = server();
    for name in ["www.child.parent.test.", "a.b.c.child.parent.test."] {
        for t in [
            RecordType::A,
            RecordType::AAAA,
            RecordType::MX,
            RecordType::TXT,
        ] {
            assert_child_referral(&s.dig(&Q::new(name, t)));
        }
    }
}

#[test]
fn ns_at_the_cut_is_a_referral_too() {
    // The parent is not authoritative for the child's NS: same referral, AA clear.
    let s = server();
    assert_child_referral(&s.dig(&Q::new("child.parent.test.", RecordType::NS)));
}

#[test]
fn glue_names_are_referred_not_answered() {
    // ns1.child.parent.test is glue, not authoritative data.
    let s = server();
    assert_child_referral(&s.dig(&Q::new("ns1.child.parent.test.", RecordType::A)));
}

#[test]
fn referral_with_edns_and_over_tcp() {
    let s = server();
    let r = s.dig(&Q::new("www.child.parent.test.", RecordType::A).edns(1232));
    assert_child_referral(&r);
    assert!(r.opt().is_some());
    assert_eq!(
        r.hdr().counts.additionals,
        4,
        "three glue records and the OPT"
    );
    assert_child_referral(&s.dig_tcp(&Q::new("www.child.parent.test.", RecordType::A)));
}

#[test]
fn out_of_bailiwick_ns_has_no_glue() {
    let s = server();
    let r = s.dig(&Q::new("host.ext.parent.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr"));
    assert!(r.answer().is_empty());
    assert_eq!(
        sorted(r.authority()),
        [
            "ext.parent.test. 3600 IN NS ns.example.net.",
            "ext.parent.test. 3600 IN NS ns.example.org.",
        ]
    );
    assert!(r.additional().is_empty(), "{:?}", r.additional());
    assert_eq!(r.hdr().counts.additionals, 0);
}

#[test]
fn cut_below_an_empty_non_terminal() {
    let s = server();
    let r = s.dig(&Q::new("x.sub.deep.parent.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr"));
    assert_eq!(
        r.authority(),
        ["sub.deep.parent.test. 600 IN NS ns.sub.deep.parent.test."]
    );
    assert_eq!(
        r.additional(),
        ["ns.sub.deep.parent.test. 3600 IN A 192.0.2.20"]
    );
    // The empty non-terminal above the cut is ours: NODATA, AA.
    let r = s.dig(&Q::new("deep.parent.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert!(r.answer().is_empty());
    assert_eq!(r.authority().len(), 1);
    assert!(r.authority()[0].contains(" IN SOA "));
}

#[test]
fn ds_at_the_cut_is_answered_by_the_parent() {
    // dig child.parent.test DS: the parent side of the cut answers, NODATA
    // (no DS here), AA set, the parent's SOA.
    let s = server();
    let r = s.dig(&Q::new("child.parent.test.", RecordType::DS));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert!(r.answer().is_empty());
    assert_eq!(
        r.authority(),
        ["parent.test. 300 IN SOA ns1.parent.test. hostmaster.parent.test. 1 7200 1800 1209600 300"]
    );
    assert!(r.additional().is_empty());
}

#[test]
fn ds_below_the_cut_is_a_referral() {
    let s = server();
    assert_child_referral(&s.dig(&Q::new("www.child.parent.test.", RecordType::DS)));
}

#[test]
fn names_beside_the_cut_are_authoritative() {
    let s = server();
    let r = s.dig(&Q::new("www.parent.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.answer(), ["www.parent.test. 3600 IN A 192.0.2.1"]);
    let r = s.dig(&Q::new("children.parent.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NXDOMAIN, "qr aa"));
}
