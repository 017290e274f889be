//! QTYPE ANY (RFC 8482 §4.1): one RRset, the smallest on the wire (ties:
//! the first in the file), so ANY amplifies as little as it can; at an
//! alias, the CNAME alone, not followed (RFC 1034 §4.3.2 step 3a).

use crate::common::*;
use hickory_proto::rr::RecordType;

/// A zone whose first RRset at `big` is a 1,000-octet TXT, then an A.
fn big_first() -> (TempDir, Server) {
    let dir = TempDir::new("any-smallest");
    let chunk = "x".repeat(250);
    let txt = format!("\"{chunk}\" \"{chunk}\" \"{chunk}\" \"{chunk}\"");
    dir.write(
        "any.test.zone",
        &format!(
            "$ORIGIN any.test.\n$TTL 300\n\
             @ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
             @ IN NS ns1\nns1 IN A 192.0.2.53\n\
             big IN TXT {txt}\nbig IN A 192.0.2.1\nbig IN AAAA 2001:db8::1\n\
             two IN A 192.0.2.2\ntwo IN A 192.0.2.3\ntwo IN AAAA 2001:db8::2\n\
             alias IN CNAME big\n"
        ),
    );
    let cfg = dir.write(
        "any.toml",
        "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[[zone]]\norigin = \"any.test.\"\nfile = \"any.test.zone\"\n",
    );
    let s = Server::start(&cfg, &[]);
    (dir, s)
}

#[test]
fn any_answers_the_smallest_rrset() {
    // dig big.any.test ANY: the 4-octet A, not the 1,004-octet TXT listed first.
    let (_d, s) = big_first();
    let r = s.dig(&Q::new("big.any.test.", RecordType::ANY).edns(4096));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.answer(), ["big.any.test. 300 IN A 192.0.2.1"]);
    assert!(r.raw.len() < 100, "{} octets", r.raw.len());
}

#[test]
fn any_smallest_counts_every_record_of_a_set() {
    // Two A records (32 octets) against one AAAA (28): the AAAA.
    let (_d, s) = big_first();
    let r = s.dig(&Q::new("two.any.test.", RecordType::ANY));
    assert_eq!(r.answer(), ["two.any.test. 300 IN AAAA 2001:db8::2"]);
}

#[test]
fn any_at_a_cname_is_the_cname_alone() {
    // RFC 1034 §4.3.2 step 3a: the alias's CNAME, the chain not followed.
    let (_d, s) = big_first();
    let r = s.dig(&Q::new("alias.any.test.", RecordType::ANY));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.answer(), ["alias.any.test. 300 IN CNAME big.any.test."]);
    assert!(r.authority().is_empty());
    assert!(r.additional().is_empty());
}
