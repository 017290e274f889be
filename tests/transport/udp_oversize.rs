//! A UDP datagram longer than the 4,096-octet receive buffer (E5) is cut by
//! the kernel (MSG_TRUNC); its first 4,096 octets are not the query the
//! client sent, so it is dropped unanswered and counted in
//! `meridian_udp_dropped_total{reason="truncated"}`, where it was answered
//! as if valid. The same query without the excess is answered.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::health_support::{metric, metrics, serve};

/// A valid query for www.example.test A of exactly `len` octets: its OPT
/// carries a Padding option (RFC 7830) that fills it up.
fn padded_query(len: usize) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    for l in ["www", "example", "test"] {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    // OPT: root, type 41, payload 4096, ttl 0, then RDLENGTH.
    q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0]);
    let pad = len - q.len() - 2 - 4;
    q.extend_from_slice(&((4 + pad) as u16).to_be_bytes());
    q.extend_from_slice(&12u16.to_be_bytes());
    q.extend_from_slice(&(pad as u16).to_be_bytes());
    q.resize(len, 0);
    q
}

fn ask(s: &Server, req: &[u8]) -> Option<Resp> {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    c.send_to(req, s.addr).unwrap();
    let mut buf = [0u8; 65535];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some(Resp::new(buf[..n].to_vec()))
}

#[test]
fn datagram_longer_than_the_buffer_is_not_answered_as_valid() {
    let (s, api) = serve(&example_config());
    let q = padded_query(4096);
    assert_eq!(q.len(), 4096);
    let r = ask(&s, &q).expect("the 4,096-octet query is answered");
    assert_eq!(
        (r.rcode(), r.addrs()),
        (0, vec!["192.0.2.1".to_string()]),
        "4,096 octets, valid"
    );

    let mut long = q.clone();
    long.extend_from_slice(&[0xAB; 100]);
    if let Some(r) = ask(&s, &long) {
        assert_eq!(
            r.rcode(),
            1,
            "4,196 octets (valid + 100 junk) answered as if valid: {:?}",
            r.addrs()
        );
    }
    // The drop is counted (workers flush their counters every few ms).
    let t0 = Instant::now();
    loop {
        let m = metrics(api);
        let n = metric(&m, r#"meridian_udp_dropped_total{reason="truncated"}"#);
        if n == Some(1.0) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "truncated drop not counted: {n:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Still serving: the valid query again.
    assert_eq!(ask(&s, &q).map(|r| r.rcode()), Some(0));
}
