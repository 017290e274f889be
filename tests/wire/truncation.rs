//! Truncation (RFC 1035 §4.2.1, RFC 6891 §7, RFC 2181 §9): a UDP answer
//! larger than min(the client's EDNS size, or 512 without EDNS; our
//! `edns_udp_payload`) goes out with TC set, holding the header, the question
//! and (iff the query had EDNS) the OPT, and no records. TCP gets it all.
//!
//! Zone: tests/data/big.test.zone (TXT RRsets of known sizes).

use std::time::Duration;

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> Server {
    Server::start(&data("truncation.toml"), &[])
}

fn txt(name: &str) -> Q {
    Q::new(name, RecordType::TXT)
}

/// The size of the full answer, learnt over TCP (which never truncates).
fn full_size(s: &Server, q: &Q) -> usize {
    let r = s.dig_tcp(q);
    assert!(!r.hdr().truncation);
    r.raw.len()
}

/// A truncated answer: TC, the question as sent, the OPT iff EDNS, nothing else.
fn assert_truncated(r: &Resp, q: &[u8], edns: bool) {
    let h = r.hdr();
    assert!(h.truncation, "TC not set ({} octets)", r.raw.len());
    assert_eq!(r.rcode(), NOERROR);
    assert!(h.authoritative);
    let c = h.counts;
    assert_eq!((c.queries, c.answers, c.authorities), (1, 0, 0));
    assert_eq!(c.additionals, edns as u16);
    let qlen = q.len() - 12 - if edns { q.len() - question_end(q) } else { 0 };
    assert_eq!(r.wire.question, &q[12..12 + qlen]);
    assert_eq!(r.opt().is_some(), edns);
    let opt_len = if edns {
        11 + r.opt().unwrap().2.len()
    } else {
        0
    };
    assert_eq!(
        r.raw.len(),
        12 + qlen + opt_len,
        "only header, question and OPT"
    );
}

/// Where the question of a query ends.
fn question_end(q: &[u8]) -> usize {
    let mut i = 12;
    while q[i] != 0 {
        i += 1 + q[i] as usize;
    }
    i + 5
}

#[test]
fn fixture_sizes() {
    // The premises of the tests below, measured over TCP (no EDNS).
    let s = server();
    assert_eq!(full_size(&s, &txt("big.big.test.")), 4290);
    assert_eq!(full_size(&s, &txt("huge.big.test.")), 1735);
    assert_eq!(full_size(&s, &txt("x1300.big.test.")), 1310);
    assert_eq!(full_size(&s, &txt("mid.big.test.")), 669);
    assert_eq!(full_size(&s, &txt("fit512.big.test.")), 512);
    assert_eq!(full_size(&s, &txt("not512.big.test.")), 513);
}

#[test]
fn no_edns_over_512_is_truncated() {
    // dig +noedns +ignore TXT big.big.test: TC, no records.
    let s = server();
    for name in [
        "big.big.test.",
        "huge.big.test.",
        "mid.big.test.",
        "not512.big.test.",
    ] {
        let q = txt(name).to_bytes();
        assert_truncated(&s.ask(&q), &q, false);
    }
}

#[test]
fn small_answers_are_not_truncated() {
    let s = server();
    let r = s.dig(&txt("small.big.test."));
    assert!(!r.hdr().truncation);
    assert_eq!(r.answer(), ["small.big.test. 3600 IN TXT fits anywhere"]);
}

#[test]
fn exactly_512_is_not_truncated() {
    // 512 octets is the limit without EDNS, inclusive.
    let s = server();
    let r = s.dig(&txt("fit512.big.test."));
    assert!(!r.hdr().truncation);
    assert_eq!(r.raw.len(), 512);
    assert_eq!(r.hdr().counts.answers, 2);
}

#[test]
fn edns_4096_is_capped_by_our_1232() {
    // dig +bufsize=4096: we still send at most 1232 octets.
    let s = server();
    for name in ["big.big.test.", "huge.big.test.", "x1300.big.test."] {
        let q = txt(name).edns(4096).to_bytes();
        let r = s.ask(&q);
        assert_truncated(&r, &q, true);
        assert_eq!(r.opt().unwrap().0, 1232);
    }
    // Under our limit and the client's: the full answer.
    let r = s.dig(&txt("mid.big.test.").edns(4096));
    assert!(!r.hdr().truncation);
    assert_eq!(r.hdr().counts.answers, 3);
}

#[test]
fn our_limit_follows_the_config() {
    // edns_udp_payload = 1400: a 1321-octet answer (1310 + OPT) fits with
    // +bufsize=4096, not with +bufsize=1232; 1746 octets never fit.
    let s = Server::start(&data("truncation1400.toml"), &[]);
    let r = s.dig(&txt("x1300.big.test.").edns(4096));
    assert!(!r.hdr().truncation);
    assert_eq!((r.raw.len(), r.hdr().counts.answers), (1321, 6));
    let q = txt("x1300.big.test.").edns(1232).to_bytes();
    assert_truncated(&s.ask(&q), &q, true);
    let q = txt("huge.big.test.").edns(4096).to_bytes();
    assert_truncated(&s.ask(&q), &q, true);
}

#[test]
fn edns_512_is_truncated() {
    let s = server();
    let q = txt("mid.big.test.").edns(512).to_bytes();
    assert_truncated(&s.ask(&q), &q, true);
    // A size below 512 counts as 512 (RFC 6891 §6.2.5): mid still does not fit...
    let q = txt("mid.big.test.").edns(100).to_bytes();
    assert_truncated(&s.ask(&q), &q, true);
    // ... while a small answer fits in those 512.
    let r = s.dig(&txt("small.big.test.").edns(100));
    assert!(!r.hdr().truncation);
}

#[test]
fn exact_fit_with_edns() {
    // mid with EDNS is 680 octets: +bufsize=680 fits, +bufsize=679 does not.
    let s = server();
    let size = full_size(&s, &txt("mid.big.test.").edns(4096));
    assert_eq!(size, 680);
    let r = s.dig(&txt("mid.big.test.").edns(size as u16));
    assert!(!r.hdr().truncation);
    assert_eq!(r.raw.len(), size);
    let q = txt("mid.big.test.").edns(size as u16 - 1).to_bytes();
    assert_truncated(&s.ask(&q), &q, true);
}

#[test]
fn ecs_option_counts_toward_the_size() {
    // With ECS 8.8.8.0/24 the echo adds 11 octets to the OPT: a size that
    // fits the plain EDNS answer no longer fits.
    let s = server();
    let plain = full_size(&s, &txt("mid.big.test.").edns(4096));
    let with_ecs = full_size(&s, &txt("mid.big.test.").edns(4096).ecs("8.8.8.0/24"));
    assert_eq!(with_ecs, plain + 11);
    let r = s.dig(&txt("mid.big.test.").edns(plain as u16));
    assert!(!r.hdr().truncation);
    let q = txt("mid.big.test.")
        .edns(plain as u16)
        .ecs("8.8.8.0/24")
        .to_bytes();
    let r = s.ask(&q);
    assert_truncated(&r, &q, true);
    // The truncated answer still echoes the ECS option (scope 0: static data).
    assert_eq!(ecs_raw(&r.raw), Some((1, 24, 0, vec![8, 8, 8])));
    let r = s.dig(&txt("mid.big.test.").edns(with_ecs as u16).ecs("8.8.8.0/24"));
    assert!(!r.hdr().truncation);
    assert_eq!(r.raw.len(), with_ecs);
}

#[test]
fn tcp_gets_the_full_answer() {
    // dig +tcp TXT big.big.test: all 20 records, no TC, with or without EDNS.
    let s = server();
    for q in [txt("big.big.test."), txt("big.big.test.").edns(512)] {
        let r = s.dig_tcp(&q);
        assert!(!r.hdr().truncation);
        assert_eq!(r.hdr().counts.answers, 20);
        assert_eq!(r.answer().len(), 20);
        assert!(r
            .answer()
            .iter()
            .all(|a| a.starts_with("big.big.test. 3600 IN TXT big-")));
        assert_eq!(r.opt().is_some(), q.edns.is_some());
    }
}

#[test]
fn truncated_then_retried_over_tcp() {
    // What a resolver does: UDP, see TC, retry over TCP.
    let s = server();
    let q = txt("huge.big.test.").edns(1232);
    let udp = s.dig(&q);
    assert!(udp.hdr().truncation);
    let tcp = s.dig_tcp(&q);
    assert!(!tcp.hdr().truncation);
    assert_eq!(tcp.answer().len(), 8);
    assert!(s.udp_maybe(&q.to_bytes(), Duration::from_secs(2)).is_some());
}
