//! Where an OPT may stand (RFC 6891 §6.1.1): one, owned by the root, in
//! the additional section. An OPT in the answer or authority section, a
//! second OPT, or one owned by another name makes the query malformed:
//! FORMERR, as Knot answers. (The second OPT: tests/wire/edns.rs.)

use crate::common::*;

const A: u16 = 1;

/// The 11 octets of a root OPT with payload 1232.
fn opt() -> Vec<u8> {
    let q = QueryBuilder::new(".", A).edns(1232).build();
    q[q.len() - 11..].to_vec()
}

/// www.example.test A with `rr` appended and counted in section `count_at`
/// (6: answer, 8: authority, 10: additional).
fn with_record(rr: &[u8], count_at: usize) -> Vec<u8> {
    let mut q = QueryBuilder::new("www.example.test", A).id(0x0707).build();
    q.extend_from_slice(rr);
    q[count_at..count_at + 2].copy_from_slice(&1u16.to_be_bytes());
    q
}

#[test]
fn opt_in_the_answer_section_is_formerr() {
    let s = Server::example();
    let r = s.ask(&with_record(&opt(), 6));
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().counts.answers, 0);
}

#[test]
fn opt_in_the_authority_section_is_formerr() {
    let s = Server::example();
    let r = s.ask(&with_record(&opt(), 8));
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(r.hdr().counts.answers, 0);
}

#[test]
fn opt_not_owned_by_the_root_is_formerr() {
    let s = Server::example();
    // Owner "a." instead of the root.
    let mut rr = b"\x01a\x00".to_vec();
    rr.extend_from_slice(&opt()[1..]);
    let r = s.ask(&with_record(&rr, 10));
    assert_eq!(r.rcode(), FORMERR);
    // And the same OPT at the root, in its place, is fine.
    let r = s.ask(&with_record(&opt(), 10));
    assert_eq!(r.rcode(), NOERROR);
}
