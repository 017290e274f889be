//! TCP resource limits and graceful shutdown: slowloris clients (connect,
//! send one octet, stall) cannot starve other clients; a started message
//! has a read timeout separate from (and shorter than) the idle timeout;
//! while more than half the slots are taken both drop to 250 ms; the number
//! of queries per connection is capped; on SIGTERM a pipelined burst already
//! sent is answered in full; and a second instance on the same port
//! (SO_REUSEPORT) takes over without failing queries.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::common::*;

const A: u16 = 1;

fn config(dir: &TempDir, server: &str) -> std::path::PathBuf {
    let zone = root().join("zones/example.test.zone");
    dir.write(
        "limits.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n{server}\n\n\
             [[zone]]\norigin = \"example.test.\"\nfile = \"{}\"\n",
            zone.display()
        ),
    )
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut v = (msg.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(msg);
    v
}

fn www(id: u16) -> Vec<u8> {
    QueryBuilder::new("www.example.test", A).id(id).build()
}

/// A slowloris connection: one octet of the length prefix, then nothing.
fn slowloris(addr: SocketAddr) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(&[0]).unwrap();
    c
}

/// One query on a new connection, with a short timeout; the answer or None.
fn tcp_try(addr: SocketAddr, id: u16) -> Option<Resp> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_millis(1000))).ok()?;
    c.write_all(&framed(&www(id))).ok()?;
    tcp_recv(&mut c).map(Resp::new)
}

#[test]
fn slowloris_below_the_cap_does_not_starve_others() {
    // 24 stalled connections of a cap of 32: others are still served at once.
    let dir = TempDir::new("slow");
    let cfg = config(
        &dir,
        "tcp_max_connections = 32\ntcp_idle_timeout_ms = 10000\ntcp_read_timeout_ms = 5000",
    );
    let s = Server::start(&cfg, &[]);
    let mut stalled: Vec<TcpStream> = (0..24).map(|_| slowloris(s.addr)).collect();
    std::thread::sleep(Duration::from_millis(50));
    for id in 0..8u16 {
        let t0 = Instant::now();
        let r = tcp_try(s.addr, id).expect("a normal TCP client is answered");
        assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        assert!(s.alive(), "UDP answered");
    }
    // More than half the slots taken: stalled ones are cut after 250 ms
    // instead of the 5 s read timeout, until no more than half are open
    // (then the normal timeouts apply again, as in NSD).
    std::thread::sleep(Duration::from_millis(1000));
    let mut closed = 0;
    for c in stalled.iter_mut() {
        if closed_within(c, Duration::from_millis(20)).is_some() {
            closed += 1;
        }
    }
    assert!(
        (8..=24).contains(&closed),
        "{closed} of 24 stalled connections closed"
    );
    let open = 24 - closed;
    assert!(open <= 16, "{open} stalled connections still open");
}

#[test]
fn slowloris_filling_every_slot_is_cleared_quickly() {
    // All 16 slots stalled: UDP is answered throughout, and a TCP client
    // gets in within about the busy timeout (250 ms), far less than the
    // 10 s idle or 5 s read timeouts.
    let dir = TempDir::new("slowfull");
    let cfg = config(
        &dir,
        "tcp_max_connections = 16\ntcp_idle_timeout_ms = 10000\ntcp_read_timeout_ms = 5000",
    );
    let s = Server::start(&cfg, &[]);
    let stalled: Vec<TcpStream> = (0..16).map(|_| slowloris(s.addr)).collect();
    std::thread::sleep(Duration::from_millis(20));
    assert!(s.alive(), "UDP answered while every TCP slot is taken");
    let t0 = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        if let Some(r) = tcp_try(s.addr, tries) {
            assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "no TCP answer while slowloris held the slots"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("served after {:?} ({tries} tries)", t0.elapsed());
    assert!(s.alive());
    drop(stalled);
}

#[test]
fn a_started_message_has_its_own_read_timeout() {
    // Few connections (not busy): a started message is cut after the read
    // timeout (400 ms) while a silent connection waits the idle timeout (3 s).
    let dir = TempDir::new("readto");
    let cfg = config(
        &dir,
        "tcp_max_connections = 64\ntcp_idle_timeout_ms = 3000\ntcp_read_timeout_ms = 400",
    );
    let s = Server::start(&cfg, &[]);
    let mut silent = TcpStream::connect(s.addr).unwrap();
    let mut slow = slowloris(s.addr);
    let t = closed_within(&mut slow, Duration::from_secs(5)).expect("slow client closed");
    assert!(
        t >= Duration::from_millis(300) && t < Duration::from_millis(1500),
        "{t:?}"
    );
    // The silent one is still open (idle timeout not reached) and usable.
    silent
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(silent.read(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut),
        "silent connection closed before its idle timeout"
    );
    silent
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    silent.write_all(&framed(&www(5))).unwrap();
    let r = Resp::new(tcp_recv(&mut silent).expect("answer on the idle connection"));
    assert_eq!(r.hdr().id, 5);
}

#[test]
fn queries_per_connection_are_capped() {
    let dir = TempDir::new("maxq");
    let cfg = config(&dir, "tcp_max_queries = 5");
    let s = Server::start(&cfg, &[]);
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut burst = Vec::new();
    for id in 0..8u16 {
        burst.extend(framed(&www(id)));
    }
    c.write_all(&burst).unwrap();
    let mut ids = Vec::new();
    while let Some(raw) = tcp_recv(&mut c) {
        ids.push(Resp::new(raw).hdr().id);
    }
    assert_eq!(
        ids,
        [0, 1, 2, 3, 4],
        "five answers, then the connection closes"
    );
    // A new connection is served.
    assert!(tcp_try(s.addr, 9).is_some());
}

fn wait_exit(s: &mut Server, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(st) = s.child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[test]
fn sigterm_lets_a_pipelined_burst_finish() {
    let mut s = Server::example();
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = 500u16;
    let mut burst = Vec::new();
    for id in 0..n {
        let name = if id % 2 == 0 {
            "www.example.test"
        } else {
            "geo.example.test"
        };
        burst.extend(framed(&QueryBuilder::new(name, A).id(id).build()));
    }
    // The whole burst is sent, and the server has started on it (the first
    // answer is here), when the signal comes.
    c.write_all(&burst).unwrap();
    let first = Resp::new(tcp_recv(&mut c).expect("first answer"));
    s.signal("TERM");
    let mut got = vec![false; n as usize];
    got[first.hdr().id as usize] = true;
    let mut count = 1;
    while let Some(raw) = tcp_recv(&mut c) {
        let r = Resp::new(raw);
        assert_eq!(r.rcode(), NOERROR);
        assert!(!got[r.hdr().id as usize]);
        got[r.hdr().id as usize] = true;
        count += 1;
    }
    assert_eq!(
        count, n as usize,
        "every query sent before SIGTERM is answered"
    );
    let st = wait_exit(&mut s, Duration::from_secs(5)).expect("exits after SIGTERM");
    assert!(st.success(), "{st:?}");
    assert!(s.wait_log("meridian: stopped", Duration::from_secs(1)));
}

#[test]
fn sigterm_answers_queries_sent_just_before_it() {
    // A query sent right before SIGTERM, on a connection the server may not
    // even have accepted yet, is answered: the listener takes the completed
    // connections before closing, and idle connections wait a short grace
    // for queries still on their way.
    for round in 0..3u16 {
        let mut s = Server::example();
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&framed(&www(round))).unwrap();
        s.signal("TERM");
        let r = Resp::new(tcp_recv(&mut c).expect("answered after SIGTERM"));
        assert_eq!(r.hdr().id, round);
        assert!(wait_exit(&mut s, Duration::from_secs(5))
            .expect("exits")
            .success());
    }
}

#[test]
fn restart_on_the_same_port_loses_no_query() {
    // Zero-downtime restart: start a second instance on the same address
    // (SO_REUSEPORT), then SIGTERM the first. A client that queries all the
    // while, over UDP (one retry after 1 s, as resolvers do) and TCP (a new
    // connection per query), gets every answer.
    let mut old = Server::example();
    let addr = old.addr;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    let client = std::thread::spawn(move || {
        let (mut n, mut retried, mut failed, mut tcp_failed) = (0u32, 0u32, 0u32, 0u32);
        while !d2.load(std::sync::atomic::Ordering::Relaxed) {
            n += 1;
            let q = www(n as u16);
            let ok = |r: Option<Vec<u8>>| {
                r.map(|r| Resp::new(r).hdr().id == n as u16)
                    .unwrap_or(false)
            };
            if !ok(udp_exchange(addr, &q, Duration::from_secs(1))) {
                retried += 1;
                if !ok(udp_exchange(addr, &q, Duration::from_secs(1))) {
                    failed += 1;
                }
            }
            if n % 10 == 0 {
                let answered = (0..2).any(|_| tcp_try(addr, n as u16).is_some());
                if !answered {
                    tcp_failed += 1;
                }
            }
        }
        (n, retried, failed, tcp_failed)
    });
    std::thread::sleep(Duration::from_millis(300));
    // --replace: without it the takeover guard refuses a second instance.
    // It sends the old one SIGTERM once ready; the test's own is then moot.
    let new = Server::try_start(&example_config(), &[addr], &["--replace"])
        .expect("second instance binds the same port");
    std::thread::sleep(Duration::from_millis(300));
    old.signal("TERM");
    let st = wait_exit(&mut old, Duration::from_secs(5)).expect("old instance exits");
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(500));
    assert!(new.alive());
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (n, retried, failed, tcp_failed) = client.join().unwrap();
    eprintln!("{n} queries during the restart: {retried} retried over UDP, {failed} failed, {tcp_failed} TCP failed");
    assert!(n > 50, "the client kept querying ({n})");
    assert_eq!((failed, tcp_failed), (0, 0));
}
