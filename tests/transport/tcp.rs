//! DNS over TCP (RFC 1035 §4.2.2, RFC 7766): 2-byte length framing, several
//! queries per connection (pipelined), an idle timeout, a cap on concurrent
//! connections, and a stalled client that holds nobody else up.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

const A: u16 = 1;

fn connect(s: &Server) -> TcpStream {
    let c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut v = (msg.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(msg);
    v
}

/// One query on an open connection; None if the server closed it.
fn ask_on(c: &mut TcpStream, q: &[u8]) -> Option<Resp> {
    c.write_all(&framed(q)).ok()?;
    tcp_recv(c).map(Resp::new)
}

#[test]
fn two_byte_framing() {
    // The answer's length prefix is exactly the message that follows.
    let s = Server::example();
    let mut c = connect(&s);
    c.write_all(&framed(
        &QueryBuilder::new("www.example.test", A).id(0x1111).build(),
    ))
    .unwrap();
    let mut len = [0u8; 2];
    c.read_exact(&mut len).unwrap();
    let n = u16::from_be_bytes(len) as usize;
    let mut msg = vec![0u8; n];
    c.read_exact(&mut msg).unwrap();
    let r = Resp::new(msg);
    assert_eq!(r.hdr().id, 0x1111);
    assert_eq!(r.answer(), ["www.example.test. 300 IN A 192.0.2.1"]);
    // Nothing else was sent.
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut extra = [0u8; 1];
    assert!(c.read(&mut extra).is_err(), "bytes after the framed answer");
}

#[test]
fn query_split_across_writes() {
    // The prefix one octet at a time, then the message in two pieces.
    let s = Server::example();
    let mut c = connect(&s);
    let f = framed(&QueryBuilder::new("www.example.test", A).id(0x2222).build());
    for piece in [&f[..1], &f[1..2], &f[2..10], &f[10..]] {
        c.write_all(piece).unwrap();
        c.flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = Resp::new(tcp_recv(&mut c).expect("an answer"));
    assert_eq!(r.hdr().id, 0x2222);
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
}

#[test]
fn long_queries_past_the_starting_buffer() {
    // The read buffer starts at 514 octets and grows to the message: a
    // 4,000-octet query (OPT padding), split across writes, then two long
    // ones pipelined with a short one between them, all answered in order.
    let s = Server::example();
    let mut c = connect(&s);
    let long = |id: u16, len: usize| {
        let q = QueryBuilder::new("www.example.test", A).id(id).edns(1232);
        let pad = len - q.wire_len() - 4;
        let q = q
            .option(&meridian_wire::build::option(12, &vec![0; pad]))
            .build();
        assert_eq!(q.len(), len);
        framed(&q)
    };
    let f = long(1, 4000);
    for piece in [&f[..300], &f[300..700], &f[700..]] {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
    let r = Resp::new(tcp_recv(&mut c).expect("the long query answered"));
    assert_eq!((r.hdr().id, addrs(&r.msg)), (1, vec!["192.0.2.1".into()]));
    let mut burst = long(2, 3000);
    burst.extend(framed(
        &QueryBuilder::new("www.example.test", A).id(3).build(),
    ));
    burst.extend(long(4, 60000));
    c.write_all(&burst).unwrap();
    for id in [2, 3, 4] {
        let r = Resp::new(tcp_recv(&mut c).expect("pipelined answer"));
        assert_eq!((r.hdr().id, addrs(&r.msg)), (id, vec!["192.0.2.1".into()]));
    }
    // And a short one after them, on the buffer given back.
    let r = ask_on(
        &mut c,
        &QueryBuilder::new("www.example.test", A).id(5).build(),
    );
    assert_eq!(r.map(|r| r.hdr().id), Some(5));
}

#[test]
fn several_queries_on_one_connection() {
    let s = Server::example();
    let mut c = connect(&s);
    for id in 0..20u16 {
        let r = ask_on(
            &mut c,
            &QueryBuilder::new("www.example.test", A).id(id).build(),
        )
        .expect("answered");
        assert_eq!(r.hdr().id, id);
        assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    }
}

#[test]
fn pipelined_queries_all_answered() {
    // Ten queries in one write, then ten answers, matched by ID.
    let s = Server::example();
    let mut c = connect(&s);
    let names = [
        ("www.example.test", NOERROR),
        ("nope.example.test", NXDOMAIN),
        ("mail.example.test", NOERROR),
        ("www.example.org", REFUSED),
        ("alias.example.test", NOERROR),
    ];
    let mut batch = Vec::new();
    for id in 0..10u16 {
        batch.extend(framed(
            &QueryBuilder::new(names[id as usize % 5].0, A)
                .id(0x100 + id)
                .build(),
        ));
    }
    c.write_all(&batch).unwrap();
    let mut seen = Vec::new();
    for _ in 0..10 {
        let r = Resp::new(tcp_recv(&mut c).expect("all pipelined queries answered"));
        let id = r.hdr().id - 0x100;
        assert_eq!(r.rcode(), names[id as usize % 5].1, "query {id}");
        seen.push(id);
    }
    seen.sort();
    assert_eq!(seen, (0..10).collect::<Vec<u16>>());
}

#[test]
fn idle_timeout_closes_the_connection() {
    // tests/data/tcp_idle.toml: tcp_idle_timeout_ms = 300.
    let s = Server::start(&data("tcp_idle.toml"), &[]);
    let mut c = connect(&s);
    assert!(ask_on(
        &mut c,
        &QueryBuilder::new("www.example.test", A).id(1).build()
    )
    .is_some());
    let t = closed_within(&mut c, Duration::from_secs(3)).expect("closed when idle");
    assert!(
        t >= Duration::from_millis(200),
        "closed after {t:?}, before the timeout"
    );
    assert!(t < Duration::from_millis(2000), "closed after {t:?}");
    // A connection that never sends anything is closed too.
    let mut quiet = connect(&s);
    let t = closed_within(&mut quiet, Duration::from_secs(3)).expect("closed when idle");
    assert!(
        t >= Duration::from_millis(200) && t < Duration::from_millis(2000),
        "{t:?}"
    );
}

#[test]
fn a_busy_connection_outlives_the_idle_timeout() {
    // Queries every 100 ms for 1.2 s on a 300 ms idle timeout: never idle.
    let s = Server::start(&data("tcp_idle.toml"), &[]);
    let mut c = connect(&s);
    for id in 0..12u16 {
        let r = ask_on(
            &mut c,
            &QueryBuilder::new("www.example.test", A).id(id).build(),
        );
        assert!(r.is_some(), "closed while busy at query {id}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn connection_cap_closes_the_longest_idle_for_a_new_client() {
    // tests/data/tcp_max.toml: tcp_max_connections = 2.
    let s = Server::start(&data("tcp_max.toml"), &[]);
    let q = QueryBuilder::new("www.example.test", A).id(7).build();
    let mut c1 = connect(&s);
    assert!(ask_on(&mut c1, &q).is_some());
    std::thread::sleep(Duration::from_millis(50));
    let mut c2 = connect(&s);
    assert!(ask_on(&mut c2, &q).is_some());
    // A third client with a query is served (RFC 7766 §6.2.3), and the
    // connection idle the longest, c1, is closed to make room for it.
    let mut c3 = connect(&s);
    assert!(ask_on(&mut c3, &q).is_some(), "a third client was refused");
    assert!(
        closed_within(&mut c1, Duration::from_secs(1)).is_some(),
        "the oldest idle connection is still open"
    );
    // The most recently used still works, and UDP is not affected.
    assert!(ask_on(&mut c2, &q).is_some());
    assert!(s.alive());
}

#[test]
fn connection_cap_with_none_idle_refuses_the_new_client() {
    // Both slots hold a started message (one octet of its length): not idle,
    // so a third connection is closed without an answer until they go.
    let s = Server::start(&data("tcp_max.toml"), &[]);
    let q = QueryBuilder::new("www.example.test", A).id(7).build();
    let mut busy: Vec<TcpStream> = (0..2).map(|_| connect(&s)).collect();
    for c in busy.iter_mut() {
        c.write_all(&[0]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut c3 = connect(&s);
    assert!(
        ask_on(&mut c3, &q).is_none(),
        "a third connection was served"
    );
    assert!(s.alive());
    // Closing one makes room for another.
    drop(busy.pop());
    let t0 = Instant::now();
    loop {
        let mut c4 = connect(&s);
        if ask_on(&mut c4, &q).is_some() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "no room after a close"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn short_message_does_not_stall_the_server() {
    // A prefix of 100 and then 10 octets: that connection waits for the rest
    // until the idle timeout (300 ms) and is closed; others are served.
    let s = Server::start(&data("tcp_idle.toml"), &[]);
    let mut stuck = connect(&s);
    let q = QueryBuilder::new("www.example.test", A).id(9).build();
    stuck.write_all(&100u16.to_be_bytes()).unwrap();
    stuck.write_all(&q[..10]).unwrap();
    // Meanwhile, UDP and other TCP clients are answered.
    for _ in 0..3 {
        let mut other = connect(&s);
        assert!(ask_on(&mut other, &q).is_some());
        assert!(s.alive());
    }
    let t = closed_within(&mut stuck, Duration::from_secs(3)).expect("stuck connection closed");
    assert!(t < Duration::from_millis(2000), "{t:?}");
}
