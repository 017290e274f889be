//! DNS Cookies (RFC 7873, server cookies as RFC 9018): the response to a
//! query with a client cookie carries that client cookie and a 16-octet
//! server cookie (version 1); echoing it back is accepted; with RRL at one
//! response a second, a client that echoes a valid server cookie is never
//! limited while one without is; a malformed COOKIE option is FORMERR.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use crate::common::*;

const CLIENT: [u8; 8] = [0xc1, 0x1e, 0x47, 0xc0, 0x0c, 0x1e, 0x5e, 0xed];

/// A query for www.example.test A with an OPT holding a COOKIE option whose
/// data is `cookie`.
fn query(id: u16, cookie: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(&wire("www.example.test."));
    p.extend_from_slice(&[0, 1, 0, 1]);
    p.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
    p.extend_from_slice(&((cookie.len() + 4) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 10]);
    p.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
    p.extend_from_slice(cookie);
    p
}

/// The COOKIE option's data in `resp` (it ends the OPT, the last record).
fn cookie_of(resp: &[u8]) -> Option<Vec<u8>> {
    // The response must parse as a whole (OPT RDLENGTH included).
    hickory_proto::op::Message::from_vec(resp).expect("response parses");
    let n = resp.len();
    let opt = resp.get(n - 28..)?;
    (opt[..4] == [0, 10, 0, 24]).then(|| opt[4..].to_vec())
}

fn rcode(resp: &[u8]) -> u8 {
    resp[3] & 0x0F
}

fn ancount(resp: &[u8]) -> u16 {
    u16::from_be_bytes([resp[6], resp[7]])
}

fn exchange(sock: &UdpSocket, server: SocketAddr, req: &[u8]) -> Option<Vec<u8>> {
    sock.send_to(req, server).unwrap();
    let mut buf = [0u8; 4096];
    sock.recv_from(&mut buf)
        .ok()
        .map(|(n, _)| buf[..n].to_vec())
}

fn socket(addr: &str) -> UdpSocket {
    let s = UdpSocket::bind(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

fn start(dir: &TempDir, rrl: &str) -> Server {
    let zone = root().join("zones/example.test.zone");
    let cfg = dir.write(
        "cookies.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n{rrl}\n\n\
             [[zone]]\norigin = \"example.test.\"\nfile = \"{}\"\n",
            zone.display()
        ),
    );
    Server::start(&cfg, &[])
}

#[test]
fn server_cookie_is_issued_and_accepted_back() {
    let dir = TempDir::new("cookies");
    let s = start(&dir, "");
    let sock = socket("127.0.0.1:0");
    let r = exchange(&sock, s.addr, &query(1, &CLIENT)).expect("answer");
    assert_eq!((rcode(&r), ancount(&r)), (0, 1));
    let c = cookie_of(&r).expect("a COOKIE option in the response");
    assert_eq!(c[..8], CLIENT, "the client cookie echoed");
    let server = &c[8..];
    assert_eq!(server.len(), 16);
    assert_eq!(server[0], 1, "RFC 9018 version 1");
    assert_eq!(server[1..4], [0, 0, 0], "reserved");
    // Echo client + server cookie: answered, with a server cookie again.
    let mut both = CLIENT.to_vec();
    both.extend_from_slice(server);
    let r = exchange(&sock, s.addr, &query(2, &both)).expect("answer");
    assert_eq!((rcode(&r), ancount(&r)), (0, 1));
    let c2 = cookie_of(&r).expect("a COOKIE option in the response");
    assert_eq!(c2[..8], CLIENT);
    assert_eq!((c2.len(), c2[8]), (24, 1));
}

#[test]
fn malformed_cookie_is_formerr() {
    let dir = TempDir::new("cookies-bad");
    let s = start(&dir, "");
    let sock = socket("127.0.0.1:0");
    for len in [0usize, 7, 9, 15, 41] {
        let r = exchange(&sock, s.addr, &query(3, &vec![7; len])).expect("answer");
        assert_eq!(rcode(&r), 1, "COOKIE of {len} octets: FORMERR");
        assert_eq!(ancount(&r), 0);
    }
    // 8 and 16..=40 are well formed (an unknown server cookie is not an error).
    for len in [8usize, 16, 40] {
        let r = exchange(&sock, s.addr, &query(4, &vec![7; len])).expect("answer");
        assert_eq!((rcode(&r), ancount(&r)), (0, 1), "COOKIE of {len} octets");
    }
}

#[test]
fn valid_server_cookie_is_exempt_from_rrl() {
    let dir = TempDir::new("cookies-rrl");
    let s = start(
        &dir,
        "[server.rrl]\nresponses_per_second = 1\nslip = 0\nipv4_prefix = 32\n\
         cookie_secret = \"000102030405060708090a0b0c0d0e0f\"",
    );
    // The cookie client, from 127.0.0.2: get a server cookie, then echo it.
    let good = socket("127.0.0.2:0");
    let r = exchange(&good, s.addr, &query(1, &CLIENT)).expect("first answer");
    let mut both = CLIENT.to_vec();
    both.extend_from_slice(&cookie_of(&r).unwrap()[8..]);
    let answered = (0..40)
        .filter(|&i| {
            exchange(&good, s.addr, &query(i, &both))
                .is_some_and(|r| rcode(&r) == 0 && ancount(&r) == 1)
        })
        .count();
    assert_eq!(answered, 40, "a valid server cookie is never limited");
    // Without a server cookie, from 127.0.0.1: limited to about 1/s.
    // (Sent at once, then read: waiting for each lost answer would let
    // the bucket refill.)
    let plain = socket("127.0.0.1:0");
    for i in 0..40 {
        plain.send_to(&query(i, &CLIENT), s.addr).unwrap();
    }
    let mut buf = [0u8; 4096];
    let mut answered = 0;
    while plain.recv_from(&mut buf).is_ok() {
        answered += 1;
    }
    assert!(answered <= 2, "no server cookie: {answered} of 40 answered");
}
