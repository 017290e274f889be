//! NSEC and RRSIG at an alias (RFC 2181 §10.1, RFC 4035 §2.5): they may sit
//! beside a CNAME, so a query for them is about the alias itself and is not
//! followed. meridian serves unsigned zones: NODATA with the SOA.
//!
//! Zone: tests/data/cname.test.zone.

use crate::common::*;
use hickory_proto::rr::RecordType;

const SOA: &str =
    "cname.test. 300 IN SOA ns1.cname.test. hostmaster.cname.test. 1 7200 1800 1209600 300";

#[test]
fn nsec_and_rrsig_at_a_cname_are_nodata() {
    let s = Server::start(&data("cname.toml"), &[]);
    for t in [RecordType::NSEC, RecordType::RRSIG] {
        // dig one.cname.test NSEC: not the chain to www.
        let r = s.dig(&Q::new("one.cname.test.", t));
        assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"), "{t}");
        assert!(r.answer().is_empty(), "{t}: {:?}", r.answer());
        assert_eq!(r.authority(), [SOA], "{t}");
    }
    // Other types still follow the chain.
    let r = s.dig(&Q::new("one.cname.test.", RecordType::MX));
    assert_eq!(r.answer(), ["one.cname.test. 100 IN CNAME www.cname.test."]);
}
