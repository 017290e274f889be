//! TSIG (RFC 8945). meridian holds no TSIG keys, so a signed query is
//! answered NOTAUTH with an unsigned TSIG whose error is BADKEY, copying
//! the key name, algorithm, time signed, fudge and original ID, with an
//! empty MAC (§5.2.1), as Knot does; never answered as if unsigned. A TSIG
//! that is not the last record is FORMERR (§5.1). The answer stays within
//! the UDP limit: the key name is compressed, and an answer whose TSIG does
//! not fit is the truncated form.

use crate::common::*;

const A: u16 = 1;
const NOTAUTH: u8 = 9;

/// The TSIG RDATA fields after the algorithm name, as a client signs.
fn tsig_rr(owner: &[u8], mac: &[u8], orig_id: u16, other: &[u8]) -> Vec<u8> {
    let mut rd = wire("hmac-sha256.");
    rd.extend_from_slice(&[0x00, 0x00, 0x65, 0x43, 0x21, 0x00]); // time signed
    rd.extend_from_slice(&300u16.to_be_bytes()); // fudge
    rd.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    rd.extend_from_slice(mac);
    rd.extend_from_slice(&orig_id.to_be_bytes());
    rd.extend_from_slice(&0u16.to_be_bytes()); // error
    rd.extend_from_slice(&(other.len() as u16).to_be_bytes());
    rd.extend_from_slice(other);
    let mut rr = owner.to_vec();
    rr.extend_from_slice(&250u16.to_be_bytes());
    rr.extend_from_slice(&255u16.to_be_bytes());
    rr.extend_from_slice(&0u32.to_be_bytes());
    rr.extend_from_slice(&(rd.len() as u16).to_be_bytes());
    rr.extend_from_slice(&rd);
    rr
}

/// The BADKEY TSIG the answer must end with.
fn badkey(owner: &[u8], orig_id: u16) -> Vec<u8> {
    let mut rd = wire("hmac-sha256.");
    rd.extend_from_slice(&[0x00, 0x00, 0x65, 0x43, 0x21, 0x00]);
    rd.extend_from_slice(&300u16.to_be_bytes());
    rd.extend_from_slice(&0u16.to_be_bytes()); // empty MAC
    rd.extend_from_slice(&orig_id.to_be_bytes());
    rd.extend_from_slice(&17u16.to_be_bytes()); // BADKEY
    rd.extend_from_slice(&0u16.to_be_bytes());
    let mut rr = owner.to_vec();
    rr.extend_from_slice(&[0, 250, 0, 255, 0, 0, 0, 0]);
    rr.extend_from_slice(&(rd.len() as u16).to_be_bytes());
    rr.extend_from_slice(&rd);
    rr
}

fn signed(q: &mut Vec<u8>, rr: &[u8]) {
    q.extend_from_slice(rr);
    let ar = u16::from_be_bytes([q[10], q[11]]) + 1;
    q[10..12].copy_from_slice(&ar.to_be_bytes());
}

fn header(r: &[u8]) -> (u8, [u16; 4]) {
    let c = |i: usize| u16::from_be_bytes([r[i], r[i + 1]]);
    (r[3] & 0x0F, [c(4), c(6), c(8), c(10)])
}

#[test]
fn signed_query_is_notauth_badkey() {
    let s = Server::example();
    let key = wire("transfer-key.");
    let mut q = QueryBuilder::new("www.example.test", A).id(0x5151).build();
    signed(&mut q, &tsig_rr(&key, &[0xAB; 32], 0x5151, &[]));
    let r = s.udp_raw(&q).expect("an answer");
    assert_eq!(header(&r), (NOTAUTH, [1, 0, 0, 1]));
    assert_eq!(&r[0..2], &[0x51, 0x51]);
    assert!(r.ends_with(&badkey(&key, 0x5151)), "{r:?}");
    // Over TCP too, and the original ID is the TSIG's, not the header's.
    let mut q = QueryBuilder::new("www.example.test", A).id(0x0001).build();
    signed(&mut q, &tsig_rr(&key, &[1, 2, 3], 0x7777, &[9, 9]));
    let r = s.tcp_raw(&q).expect("an answer");
    assert_eq!(header(&r), (NOTAUTH, [1, 0, 0, 1]));
    assert!(r.ends_with(&badkey(&key, 0x7777)), "{r:?}");
}

#[test]
fn signed_query_with_edns_keeps_the_opt_before_the_tsig() {
    let s = Server::example();
    // A key name compressed against the question ("example.test.").
    let mut owner = b"\x03key".to_vec();
    owner.extend_from_slice(&[0xC0, 12 + 4]);
    let mut q = QueryBuilder::new("www.example.test", A)
        .id(0x5252)
        .edns(1232)
        .build();
    signed(&mut q, &tsig_rr(&owner, &[0xCD; 32], 0x5252, &[]));
    let r = s.udp_raw(&q).expect("an answer");
    assert_eq!(header(&r), (NOTAUTH, [1, 0, 0, 2]));
    // The key name comes back compressed against the question too.
    let key = b"\x03key\xC0\x10";
    assert!(r.ends_with(&badkey(key, 0x5252)), "{r:?}");
    // The OPT precedes it.
    let opt_at = r.len() - badkey(key, 0).len() - 11;
    assert_eq!(&r[opt_at..opt_at + 3], &[0, 0, 41]);
}

#[test]
fn tsig_not_last_is_formerr() {
    let s = Server::example();
    let mut q = QueryBuilder::new("www.example.test", A).id(0x5353).build();
    signed(&mut q, &tsig_rr(&wire("k."), &[0; 32], 0x5353, &[]));
    // An OPT after the TSIG.
    let opt = QueryBuilder::new(".", A).edns(1232).build();
    signed(&mut q, &opt[opt.len() - 11..]);
    let r = s.udp_raw(&q).expect("an answer");
    assert_eq!(header(&r).0, FORMERR);
}

#[test]
fn malformed_tsig_is_formerr() {
    let s = Server::example();
    let mut q = QueryBuilder::new("www.example.test", A).id(0x5454).build();
    let mut rr = tsig_rr(&wire("k."), &[0; 32], 0x5454, &[]);
    // MAC size larger than the RDATA holds.
    let mac_size_at = 3 + 10 + wire("hmac-sha256.").len() + 8;
    rr[mac_size_at..mac_size_at + 2].copy_from_slice(&40u16.to_be_bytes());
    signed(&mut q, &rr);
    let r = s.udp_raw(&q).expect("an answer");
    assert_eq!(header(&r).0, FORMERR);
}

/// A query for a long QNAME under example.test (`labels` labels of 63
/// octets) signed with a TSIG whose key and algorithm names are both
/// pointers to it: about 250 octets that once drew a 660-octet BADKEY
/// answer without EDNS (the names were written out in full, past 512).
fn pointer_tsig_query(labels: usize, id: u16) -> Vec<u8> {
    let label = "a".repeat(63);
    let name = vec![label.as_str(); labels].join(".") + ".example.test.";
    let mut q = QueryBuilder::new(&name, A).id(id).build();
    let mut rd = vec![0xC0, 12]; // algorithm: the QNAME
    rd.extend_from_slice(&[0x00, 0x00, 0x65, 0x43, 0x21, 0x00]); // time signed
    rd.extend_from_slice(&300u16.to_be_bytes()); // fudge
    rd.extend_from_slice(&0u16.to_be_bytes()); // MAC size
    rd.extend_from_slice(&id.to_be_bytes());
    rd.extend_from_slice(&[0, 0, 0, 0]); // error, other len
    let mut rr = vec![0xC0, 12]; // key name: the QNAME
    rr.extend_from_slice(&[0, 250, 0, 255, 0, 0, 0, 0]);
    rr.extend_from_slice(&(rd.len() as u16).to_be_bytes());
    rr.extend_from_slice(&rd);
    signed(&mut q, &rr);
    q
}

#[test]
fn badkey_with_pointer_names_fits_512_without_edns() {
    let s = Server::example();
    // A 206-octet QNAME: the answer with the key name compressed fits.
    let q = pointer_tsig_query(3, 0x6161);
    assert_eq!(q.len(), 252);
    let qname_len = 3 * 64 + 14;
    let r = s.udp_raw(&q).expect("an answer");
    assert!(r.len() <= 512, "{} octets to a 512-octet client", r.len());
    assert_eq!(r[2] & 0x02, 0, "TC");
    assert_eq!(header(&r), (NOTAUTH, [1, 0, 0, 1]));
    // Owner: a pointer to the question; the algorithm name written out
    // (RFC 8945 §4.2: never compressed).
    let mut tsig = vec![0xC0, 12, 0, 250, 0, 255, 0, 0, 0, 0];
    tsig.extend_from_slice(&((qname_len + 16) as u16).to_be_bytes());
    tsig.extend_from_slice(&q[12..12 + qname_len]);
    tsig.extend_from_slice(&[0x00, 0x00, 0x65, 0x43, 0x21, 0x00, 0x01, 0x2C, 0, 0]);
    tsig.extend_from_slice(&[0x61, 0x61, 0, 17, 0, 0]);
    assert!(r.ends_with(&tsig), "{r:?}");
    // A 250-octet QNAME: the TSIG cannot fit; the truncated form does.
    let mut q = pointer_tsig_query(3, 0x6262);
    // Grow the QNAME by 44 octets: one more 43-octet label in front.
    let mut longer = vec![43];
    longer.extend_from_slice(&[b'b'; 43]);
    q.splice(12..12, longer);
    let r = s.udp_raw(&q).expect("an answer");
    assert!(r.len() <= 512, "{} octets to a 512-octet client", r.len());
    assert_eq!(r[2] & 0x02, 0x02, "TC");
    assert_eq!(header(&r), (NOTAUTH, [1, 0, 0, 0]));
    assert_eq!(r.len(), 12 + qname_len + 44 + 4);
    // Over TCP it all comes back, the TSIG last.
    let r = s.tcp_raw(&q).expect("an answer");
    assert_eq!(header(&r), (NOTAUTH, [1, 0, 0, 1]));
    assert_eq!(r[2] & 0x02, 0, "TC over TCP");
    assert!(r.ends_with(&[0x62, 0x62, 0, 17, 0, 0]), "{r:?}");
}
