//! Negative answers (RFC 2308): NXDOMAIN and NODATA carry the zone's SOA in
//! the authority section with TTL = min(SOA TTL, SOA MINIMUM) (§3, §5).
//!
//! tests/data/negative.toml serves low.test (SOA TTL 60 < MINIMUM 900) and
//! high.test (SOA TTL 7200 > MINIMUM 120), so both sides of the min count.

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> Server {
    Server::start(&data("negative.toml"), &[])
}

const LOW_SOA: &str =
    "low.test. 60 IN SOA ns1.low.test. hostmaster.low.test. 1 7200 1800 1209600 900";
const HIGH_SOA: &str =
    "high.test. 120 IN SOA ns1.high.test. hostmaster.high.test. 1 7200 1800 1209600 120";

#[test]
fn nxdomain_soa_ttl_below_minimum() {
    // dig nope.low.test: NXDOMAIN, SOA TTL = SOA TTL (60), not MINIMUM (900).
    let s = server();
    let r = s.dig(&Q::new("nope.low.test.", RecordType::A));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.flags(), "qr aa");
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [LOW_SOA]);
    assert!(r.additional().is_empty());
}

#[test]
fn nodata_soa_ttl_below_minimum() {
    // dig www.low.test MX: NOERROR, no answer, SOA with TTL 60.
    let s = server();
    let r = s.dig(&Q::new("www.low.test.", RecordType::MX));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr aa");
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [LOW_SOA]);
}

#[test]
fn nxdomain_soa_ttl_above_minimum() {
    // dig nope.high.test: the SOA's TTL is capped at MINIMUM (120), not 7200.
    let s = server();
    let r = s.dig(&Q::new("nope.high.test.", RecordType::A));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.flags(), "qr aa");
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [HIGH_SOA]);
}

#[test]
fn nodata_soa_ttl_above_minimum() {
    let s = server();
    let r = s.dig(&Q::new("www.high.test.", RecordType::AAAA));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.flags(), "qr aa");
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [HIGH_SOA]);
}

#[test]
fn nodata_at_empty_non_terminal() {
    // b.c.high.test exists only because a.b.c.high.test does: NODATA, not NXDOMAIN.
    let s = server();
    for name in ["b.c.high.test.", "c.high.test."] {
        let r = s.dig(&Q::new(name, RecordType::TXT));
        assert_eq!(r.rcode(), NOERROR, "{name}");
        assert!(r.answer().is_empty());
        assert_eq!(r.authority(), [HIGH_SOA]);
    }
    // ... and below it, a missing name is NXDOMAIN.
    let r = s.dig(&Q::new("x.b.c.high.test.", RecordType::TXT));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.authority(), [HIGH_SOA]);
}

#[test]
fn positive_soa_keeps_its_own_ttl() {
    // The SOA asked for directly is a positive answer: its own TTL (7200), and
    // nothing in authority.
    let s = server();
    let r = s.dig(&Q::new("high.test.", RecordType::SOA));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(
        r.answer(),
        ["high.test. 7200 IN SOA ns1.high.test. hostmaster.high.test. 1 7200 1800 1209600 120"]
    );
    assert!(r.authority().is_empty());
}

#[test]
fn negative_over_tcp_and_with_edns() {
    let s = server();
    let r = s.dig_tcp(&Q::new("nope.low.test.", RecordType::A));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.authority(), [LOW_SOA]);
    let r = s.dig(&Q::new("nope.high.test.", RecordType::A).edns(1232));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.authority(), [HIGH_SOA]);
    assert!(r.opt().is_some());
}

#[test]
fn the_soa_is_the_right_zones() {
    // Two zones: each negative answer carries its own zone's SOA.
    let s = server();
    let lo = s.dig(&Q::new("x.low.test.", RecordType::A));
    let hi = s.dig(&Q::new("x.high.test.", RecordType::A));
    assert_eq!(lo.wire.authority[0].owner, "low.test.");
    assert_eq!(hi.wire.authority[0].owner, "high.test.");
}
