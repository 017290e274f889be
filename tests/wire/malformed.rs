//! Malformed input: each case gets FORMERR or no reply (which one is asserted,
//! with the reason), and the server answers normally afterwards.
//!
//! - No reply: fewer than 12 octets (no header to answer with) and responses
//!   (QR=1; answering them could loop between servers, RFC 1035 §7.3 spirit).
//! - FORMERR (RFC 1035 §4.1.1 "unable to interpret the query"), echoing the
//!   question when it parsed and the OPT when it parsed.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::*;
use hickory_proto::op::MessageType;
use meridian_wire::build::option;

const A: u16 = 1;

fn www() -> Vec<u8> {
    QueryBuilder::new("www.example.test", A)
        .id(0xF00D)
        .flags(0x0100)
        .build()
}

/// A query whose question is `name` as raw wire bytes.
fn with_qname(name: &[u8]) -> Vec<u8> {
    let mut q = vec![0xF0, 0x0D, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(name);
    q.extend_from_slice(&[0, 1, 0, 1]);
    q
}

/// FORMERR with the query's ID, QR, RD copied, no records.
fn assert_formerr(r: &Resp, question_echoed: bool, opt: bool) {
    let h = r.hdr();
    assert_eq!(r.rcode(), FORMERR, "expected FORMERR, got {h:?}");
    assert_eq!(h.id, 0xF00D);
    assert!(
        h.message_type == MessageType::Response
            && !h.authoritative
            && !h.truncation
            && !h.recursion_available
    );
    assert!(h.recursion_desired, "RD is copied on errors too");
    assert_eq!((h.counts.answers, h.counts.authorities), (0, 0));
    assert_eq!(h.counts.queries, question_echoed as u16);
    assert_eq!(r.opt().is_some(), opt, "OPT in the FORMERR");
}

#[test]
fn short_header_gets_no_reply() {
    // 0 to 11 octets: no header to answer with, so nothing is sent.
    let s = Server::example();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let q = www();
    for n in 0..12 {
        sock.send_to(&q[..n], s.addr).unwrap();
    }
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 512];
    assert!(
        sock.recv_from(&mut buf).is_err(),
        "a reply to a short header"
    );
    assert!(s.alive());
    // 12 octets (a header, QDCOUNT 1, no question): FORMERR.
    assert_formerr(&s.ask(&q[..12]), false, false);
}

#[test]
fn label_length_overrun() {
    // A label of 16 octets with 3 present, then the end of the packet.
    let s = Server::example();
    let mut q = vec![0xF0, 0x0D, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x10abc");
    assert_formerr(&s.ask(&q), false, false);
    // The name ends but the type and class are cut short.
    let mut q = with_qname(&wire("www.example.test"));
    q.truncate(q.len() - 2);
    assert_formerr(&s.ask(&q), false, false);
    assert!(s.alive());
}

#[test]
fn label_longer_than_63() {
    let s = Server::example();
    let mut name = vec![64u8];
    name.extend_from_slice(&[b'a'; 64]);
    name.extend_from_slice(&wire("example.test"));
    assert_formerr(&s.ask(&with_qname(&name)), false, false);
    // The reserved label types 0x40 and 0x80 are no better.
    for t in [0x41u8, 0x81] {
        let mut name = vec![t, b'a'];
        name.extend_from_slice(&wire("example.test"));
        assert_formerr(&s.ask(&with_qname(&name)), false, false);
    }
    // 63 is fine: a name in the zone that does not exist.
    let mut name = vec![63u8];
    name.extend_from_slice(&[b'a'; 63]);
    name.extend_from_slice(&wire("example.test"));
    assert_eq!(s.ask(&with_qname(&name)).rcode(), NXDOMAIN);
    assert!(s.alive());
}

#[test]
fn name_longer_than_255() {
    // 3 x 63-octet labels + a 48-octet label + example.test = 255 octets: fine.
    let s = Server::example();
    let name = |last: usize| {
        let mut n = Vec::new();
        for _ in 0..3 {
            n.push(63u8);
            n.extend_from_slice(&[b'a'; 63]);
        }
        n.push(last as u8);
        n.extend(std::iter::repeat_n(b'b', last));
        n.extend_from_slice(&wire("example.test"));
        n
    };
    assert_eq!(name(48).len(), 255);
    let r = s.ask(&with_qname(&name(48)));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert_eq!(r.wire.question.len(), 255 + 4);
    // One more octet: 256, FORMERR.
    assert_eq!(name(49).len(), 256);
    assert_formerr(&s.ask(&with_qname(&name(49))), false, false);
    // Many short labels past 255 octets.
    let mut many = Vec::new();
    for _ in 0..130 {
        many.extend_from_slice(b"\x01a");
    }
    many.push(0);
    assert_formerr(&s.ask(&with_qname(&many)), false, false);
    assert!(s.alive());
}

#[test]
fn compression_pointer_in_the_question() {
    // Nothing precedes the question for a pointer to point at.
    let s = Server::example();
    for name in [
        &b"\xC0\x0C"[..],
        b"\x03www\xC0\x0C",
        b"\x03www\xC0\x00",
        b"\x03www\xC0\x12",
    ] {
        assert_formerr(&s.ask(&with_qname(name)), false, false);
    }
    assert!(s.alive());
}

/// www.example.test A with one extra record in additional whose owner is `owner`.
fn with_extra_owner(owner: &[u8]) -> Vec<u8> {
    let mut q = www();
    q[10..12].copy_from_slice(&1u16.to_be_bytes());
    q.extend_from_slice(owner);
    q.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 9]);
    q
}

/// `www()` with an OPT (payload 1232) carrying `options` as given.
fn www_opt(options: &[u8]) -> Vec<u8> {
    QueryBuilder::new("www.example.test", A)
        .id(0xF00D)
        .rd()
        .option(options)
        .build()
}

#[test]
fn compression_loop_in_additional_owner() {
    // The owner at offset 34 is a pointer to itself.
    let s = Server::example();
    let at = www().len() as u16;
    let ptr = (0xC000 | at).to_be_bytes();
    assert_formerr(&s.ask(&with_extra_owner(&ptr)), true, false);
    // A label, then a pointer back to that label: a loop too.
    let back = (0xC000 | at).to_be_bytes();
    assert_formerr(
        &s.ask(&with_extra_owner(&[1, b'x', back[0], back[1]])),
        true,
        false,
    );
    assert!(s.alive());
}

#[test]
fn forward_pointer_in_additional_owner() {
    let s = Server::example();
    let at = www().len() as u16;
    let fwd = (0xC000 | (at + 20)).to_be_bytes();
    assert_formerr(&s.ask(&with_extra_owner(&fwd)), true, false);
    // A pointer past the end of the message.
    assert_formerr(&s.ask(&with_extra_owner(&[0xFF, 0xFF])), true, false);
    // A pointer back to the question is fine: the query is answered.
    let r = s.ask(&with_extra_owner(&[0xC0, 12]));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
}

#[test]
fn trailing_garbage() {
    let s = Server::example();
    for extra in [&b"\x00"[..], b"junk", &[0xFF; 100]] {
        let mut q = www();
        q.extend_from_slice(extra);
        assert_formerr(&s.ask(&q), true, false);
    }
    // After an OPT: the OPT is echoed.
    let mut q = www_opt(&[]);
    q.push(0);
    assert_formerr(&s.ask(&q), true, true);
    assert!(s.alive());
}

#[test]
fn qdcount_zero_and_two() {
    let s = Server::example();
    let mut q = www();
    q[5] = 0;
    assert_formerr(&s.ask(&q), false, false);
    let mut q = www();
    q[5] = 2;
    assert_formerr(&s.ask(&q), false, false);
    // QDCOUNT 2 with both questions present.
    let mut q = www();
    q[5] = 2;
    q.extend_from_slice(&www()[12..]);
    assert_formerr(&s.ask(&q), false, false);
    assert!(s.alive());
}

#[test]
fn bad_opt_option_length() {
    // An option claims 20 octets in an 8-octet RDATA: FORMERR with an OPT
    // (no options echoed; only the Extended DNS Error, tests/wire/ede.rs).
    let s = Server::example();
    let mut opts = option(10, &[1, 2, 3, 4]);
    opts[3] = 20;
    let r = s.ask(&www_opt(&opts));
    assert_formerr(&r, true, true);
    assert_eq!(r.opt().unwrap().2, option(15, b"\0\0malformed query"));
    // An option header cut short (3 octets).
    let r = s.ask(&www_opt(&[0, 10, 0]));
    assert_formerr(&r, true, true);
    // The OPT's RDLENGTH runs past the packet.
    let mut q = www_opt(&[]);
    let n = q.len();
    q[n - 1] = 50;
    assert_formerr(&s.ask(&q), true, false);
    assert!(s.alive());
}

#[test]
fn opt_with_non_root_owner() {
    let s = Server::example();
    // The OPT's owner (the root label) starts where `www()` ends.
    let at = www().len();
    let mut q = www_opt(&[]);
    q.splice(at..at + 1, wire("example.test"));
    assert_formerr(&s.ask(&q), true, false);
    // A compressed owner pointing at the question's root label is not "the root" either.
    let mut q = www_opt(&[]);
    q.splice(at..at + 1, [0xC0, 12 + 17]);
    assert_eq!(www()[12 + 17], 0, "offset of the question's root label");
    assert_formerr(&s.ask(&q), true, false);
    assert!(s.alive());
}

#[test]
fn tcp_length_prefix_larger_than_the_data() {
    // The prefix says 200, 34 octets follow, then the client shuts its
    // side: no answer, the connection is closed at once, the server lives.
    let s = Server::example();
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.write_all(&200u16.to_be_bytes()).unwrap();
    c.write_all(&www()).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let _ = c.read_to_end(&mut buf);
    assert!(buf.is_empty(), "an answer to a short message: {buf:?}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert!(s.alive());
    assert!(s.tcp_raw(&www()).is_some());
}

#[test]
fn responses_are_dropped() {
    // Take a real answer and send it back: QR=1, no reply (UDP), and the TCP
    // connection is closed without one.
    let s = Server::example();
    let answer = s.udp_raw(&www()).unwrap();
    assert_eq!(
        Resp::new(answer.clone()).hdr().message_type,
        MessageType::Response
    );
    assert!(s.udp_maybe(&answer, Duration::from_millis(500)).is_none());
    let mut q = www();
    q[2] |= 0x80;
    assert!(s.udp_maybe(&q, Duration::from_millis(500)).is_none());
    assert!(s.tcp_raw(&q).is_none());
    assert!(s.alive());
}

/// xorshift64*: a small seeded generator (no crates).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Random input of three kinds: pure noise, a valid query (with EDNS and
/// ECS) with a few octets changed, and a valid query cut or extended.
fn fuzz_case(rng: &mut Rng) -> Vec<u8> {
    let base = Q::new("www.example.test.", hickory_proto::rr::RecordType::A)
        .ecs("8.8.8.0/24")
        .to_bytes();
    match rng.below(3) {
        0 => (0..rng.below(600)).map(|_| rng.byte()).collect(),
        1 => {
            let mut q = base;
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(q.len());
                q[i] = rng.byte();
            }
            // Mostly queries: clear QR half the time so the parser is reached.
            if rng.below(2) == 0 {
                q[2] &= 0x7F;
            }
            q
        }
        _ => {
            let mut q = base;
            if rng.below(2) == 0 {
                q.truncate(rng.below(q.len()));
            } else {
                for _ in 0..rng.below(40) {
                    q.push(rng.byte());
                }
            }
            q
        }
    }
}

#[test]
fn random_bytes_do_not_crash_the_server() {
    // 10,000 random datagrams (seeded, so a failure can be replayed). Every
    // reply that comes back must be a well-formed response.
    let s = Server::example();
    let mut rng = Rng(0x6D65_7269_6469_616E);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(30)))
        .unwrap();
    let mut buf = [0u8; 65535];
    let mut replies = 0;
    for _ in 0..100 {
        for _ in 0..100 {
            sock.send_to(&fuzz_case(&mut rng), s.addr).unwrap();
        }
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            let r = &buf[..n];
            let w = walk(r).unwrap_or_else(|e| panic!("malformed reply ({e}): {r:?}"));
            assert!(
                w.header.message_type == MessageType::Response,
                "a reply without QR"
            );
            assert!(w.header.counts.queries <= 1);
            replies += 1;
        }
    }
    assert!(
        replies > 1000,
        "only {replies} replies: is the server answering?"
    );
    assert!(s.alive());
    assert!(s.tcp_raw(&www()).is_some());
}

#[test]
fn random_messages_over_tcp() {
    // The same kind of input, framed, over TCP (reconnecting whenever the
    // server closes a connection on a message it cannot answer).
    let s = Server::example();
    let mut rng = Rng(0x7463_7066_757A_7A21);
    let mut c: Option<TcpStream> = None;
    for _ in 0..300 {
        let msg = fuzz_case(&mut rng);
        let conn = c.get_or_insert_with(|| {
            let c = TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            c
        });
        let mut f = (msg.len() as u16).to_be_bytes().to_vec();
        f.extend_from_slice(&msg);
        if conn.write_all(&f).is_err() {
            c = None;
            continue;
        }
        match tcp_recv(conn) {
            Some(r) => {
                walk(&r).unwrap_or_else(|e| panic!("malformed reply ({e}): {r:?}"));
            }
            None => c = None,
        }
    }
    assert!(s.alive());
}
