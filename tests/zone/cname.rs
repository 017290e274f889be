//! CNAME (RFC 1034 §3.6.2, §4.3.2 step 3a; RFC 6604): the answer holds the
//! CNAME and the chain is followed inside the zone; the final rcode is the
//! one of the last name; a chain leaving the zone stops at the CNAME; a loop
//! ends; qtype CNAME gets the CNAME itself.
//!
//! Zone: tests/data/cname.test.zone.

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> Server {
    Server::start(&data("cname.toml"), &[])
}

const SOA: &str =
    "cname.test. 300 IN SOA ns1.cname.test. hostmaster.cname.test. 1 7200 1800 1209600 300";

#[test]
fn one_link() {
    // dig one.cname.test A
    let s = server();
    let r = s.dig(&Q::new("one.cname.test.", RecordType::A));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr aa");
    assert_eq!(
        r.answer(),
        [
            "one.cname.test. 100 IN CNAME www.cname.test.",
            "www.cname.test. 600 IN A 192.0.2.1",
        ]
    );
    assert!(r.authority().is_empty());
    assert!(r.additional().is_empty());
}

#[test]
fn multi_hop_chain() {
    // three -> two -> one -> www, each with its own TTL, for A and AAAA.
    let s = server();
    let r = s.dig(&Q::new("three.cname.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(
        r.answer(),
        [
            "three.cname.test. 300 IN CNAME two.cname.test.",
            "two.cname.test. 200 IN CNAME one.cname.test.",
            "one.cname.test. 100 IN CNAME www.cname.test.",
            "www.cname.test. 600 IN A 192.0.2.1",
        ]
    );
    let r = s.dig(&Q::new("two.cname.test.", RecordType::AAAA));
    assert_eq!(
        r.answer(),
        [
            "two.cname.test. 200 IN CNAME one.cname.test.",
            "one.cname.test. 100 IN CNAME www.cname.test.",
            "www.cname.test. 600 IN AAAA 2001:db8::1",
        ]
    );
}

#[test]
fn chain_to_nxdomain() {
    // RFC 6604 §2.1: the rcode is that of the last name in the chain.
    let s = server();
    let r = s.dig(&Q::new("dangling.cname.test.", RecordType::A));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.flags(), "qr aa");
    assert_eq!(
        r.answer(),
        ["dangling.cname.test. 3600 IN CNAME missing.cname.test."]
    );
    assert_eq!(r.authority(), [SOA]);
}

#[test]
fn chain_to_nodata() {
    let s = server();
    let r = s.dig(&Q::new("nodata.cname.test.", RecordType::A));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr aa");
    assert_eq!(
        r.answer(),
        ["nodata.cname.test. 3600 IN CNAME txtonly.cname.test."]
    );
    assert_eq!(r.authority(), [SOA]);
    // The type the target does have is followed to.
    let r = s.dig(&Q::new("nodata.cname.test.", RecordType::TXT));
    assert_eq!(
        r.answer(),
        [
            "nodata.cname.test. 3600 IN CNAME txtonly.cname.test.",
            "txtonly.cname.test. 3600 IN TXT only a TXT here",
        ]
    );
    assert!(r.authority().is_empty());
}

#[test]
fn chain_leaving_the_zone() {
    // The target is not ours: just the CNAME, NOERROR, AA; the resolver goes on.
    let s = server();
    let r = s.dig(&Q::new("out.cname.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(
        r.answer(),
        ["out.cname.test. 3600 IN CNAME www.example.net."]
    );
    assert!(r.authority().is_empty());
    assert!(r.additional().is_empty());
}

#[test]
fn chain_into_another_served_zone_stops_at_the_cname() {
    let s = server();
    let r = s.dig(&Q::new("elsewhere.cname.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(
        r.answer(),
        ["elsewhere.cname.test. 3600 IN CNAME www.other.test."]
    );
    assert!(r.authority().is_empty());
}

#[test]
fn chain_into_a_delegation_is_well_formed() {
    // host.deleg.cname.test is below a cut: the CNAME is ours, the rest is
    // the child's. The message must still be exact (no stray referral bytes).
    let s = server();
    for q in [
        Q::new("intodeleg.cname.test.", RecordType::A),
        Q::new("intodeleg.cname.test.", RecordType::A).edns(1232),
    ] {
        let r = s.dig(&q);
        assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
        assert_eq!(
            r.answer(),
            ["intodeleg.cname.test. 3600 IN CNAME host.deleg.cname.test."]
        );
        assert!(r.authority().is_empty(), "{:?}", r.authority());
        assert!(r.additional().is_empty(), "{:?}", r.additional());
        assert_eq!(r.opt().is_some(), q.edns.is_some());
    }
}

#[test]
fn chain_to_a_wildcard() {
    let s = server();
    let r = s.dig(&Q::new("wild.cname.test.", RecordType::A));
    assert_eq!(
        r.answer(),
        [
            "wild.cname.test. 3600 IN CNAME foo.w.cname.test.",
            "foo.w.cname.test. 3600 IN A 192.0.2.99",
        ]
    );
}

#[test]
fn loop_terminates() {
    // loop1 -> loop2 -> loop1: an answer comes back (quickly), holding each
    // CNAME of the loop once.
    let s = server();
    let t0 = std::time::Instant::now();
    let r = s.dig(&Q::new("loop1.cname.test.", RecordType::A));
    assert!(t0.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(
        r.answer(),
        [
            "loop1.cname.test. 3600 IN CNAME loop2.cname.test.",
            "loop2.cname.test. 3600 IN CNAME loop1.cname.test.",
        ]
    );
    let r = s.dig(&Q::new("self.cname.test.", RecordType::A));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(
        r.answer(),
        ["self.cname.test. 3600 IN CNAME self.cname.test."]
    );
    // Still serving, over TCP too.
    let r = s.dig_tcp(&Q::new("loop2.cname.test.", RecordType::AAAA));
    assert_eq!(r.answer().len(), 2);
    assert!(s.alive_in("www.cname.test."));
}

#[test]
fn eight_links_are_followed() {
    // c3 -> c4 -> ... -> c10 -> www is 8 links: the README's limit, so the
    // address is reached.
    let s = server();
    let r = s.dig(&Q::new("c3.cname.test.", RecordType::A));
    assert_eq!(r.rcode(), NOERROR);
    let a = r.answer();
    assert_eq!(a.len(), 9, "{a:#?}");
    assert_eq!(a[0], "c3.cname.test. 3600 IN CNAME c4.cname.test.");
    assert_eq!(a[7], "c10.cname.test. 3600 IN CNAME www.cname.test.");
    assert_eq!(a[8], "www.cname.test. 600 IN A 192.0.2.1");
}

#[test]
fn longer_chains_stop() {
    // c1 is 10 links long: the answer stops with CNAMEs only, NOERROR.
    let s = server();
    let r = s.dig(&Q::new("c1.cname.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    let types: Vec<u16> = r.wire.answer.iter().map(|x| x.rtype).collect();
    assert!(types.iter().all(|&t| t == 5), "{:?}", r.answer());
    assert!((8..=9).contains(&types.len()), "{:?}", r.answer());
    assert_eq!(r.answer()[0], "c1.cname.test. 3600 IN CNAME c2.cname.test.");
}

#[test]
fn qtype_cname_returns_the_cname_itself() {
    // dig one.cname.test CNAME: not followed.
    let s = server();
    let r = s.dig(&Q::new("one.cname.test.", RecordType::CNAME));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.answer(), ["one.cname.test. 100 IN CNAME www.cname.test."]);
    assert!(r.authority().is_empty());
    // ... and a dangling one is still answered (NOERROR: the CNAME exists).
    let r = s.dig(&Q::new("dangling.cname.test.", RecordType::CNAME));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(
        r.answer(),
        ["dangling.cname.test. 3600 IN CNAME missing.cname.test."]
    );
    // qtype CNAME at a name without one: NODATA.
    let r = s.dig(&Q::new("www.cname.test.", RecordType::CNAME));
    assert_eq!(r.rcode(), NOERROR);
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [SOA]);
}

#[test]
fn owner_of_the_first_cname_is_the_question() {
    // The first owner is written as a pointer to the question: case as asked.
    let s = server();
    let r = s.dig(&Q::new("ONE.Cname.Test.", RecordType::A));
    assert_eq!(r.wire.answer[0].owner, "ONE.Cname.Test.");
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
}
