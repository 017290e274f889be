//! Listening and the process life cycle: `--listen` repeated serves UDP and
//! TCP on every address (IPv4 and IPv6), the ready line is printed, and
//! SIGTERM / SIGINT stop the process promptly with exit status 0.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::*;
use hickory_proto::rr::RecordType;

/// A port free on both 127.0.0.1 and [::1], for UDP and TCP.
fn dual_port() -> u16 {
    loop {
        let p = free_port();
        let ok =
            UdpSocket::bind(("::1", p)).is_ok() && std::net::TcpListener::bind(("::1", p)).is_ok();
        if ok {
            return p;
        }
    }
}

fn dual_stack() -> (Server, SocketAddr, SocketAddr) {
    for _ in 0..5 {
        let p = dual_port();
        let v4: SocketAddr = format!("127.0.0.1:{p}").parse().unwrap();
        let v6: SocketAddr = format!("[::1]:{p}").parse().unwrap();
        if let Some(s) = Server::try_start(&example_config(), &[v4, v6], &[]) {
            return (s, v4, v6);
        }
    }
    panic!("meridian did not start on 127.0.0.1 and [::1]");
}

fn www() -> Vec<u8> {
    Q::new("www.example.test.", RecordType::A).to_bytes()
}

fn answered_over_udp(addr: SocketAddr) -> bool {
    udp_exchange(addr, &www(), Duration::from_secs(2))
        .map(|r| addrs(&Resp::new(r).msg) == ["192.0.2.1"])
        .unwrap_or(false)
}

fn answered_over_tcp(addr: SocketAddr) -> bool {
    let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return false;
    };
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    tcp_send(&mut c, &www());
    tcp_recv(&mut c)
        .map(|r| addrs(&Resp::new(r).msg) == ["192.0.2.1"])
        .unwrap_or(false)
}

#[test]
fn repeated_listen_serves_udp_and_tcp_on_each() {
    // meridian serve --listen 127.0.0.1:P --listen [::1]:P
    let (_s, v4, v6) = dual_stack();
    for a in [v4, v6] {
        assert!(answered_over_udp(a), "no UDP answer on {a}");
        assert!(answered_over_tcp(a), "no TCP answer on {a}");
    }
}

#[test]
fn ready_line_names_every_address() {
    let (s, v4, v6) = dual_stack();
    let lines = s.stderr.lock().unwrap().clone();
    let ready = lines
        .iter()
        .find(|l| l.starts_with("meridian: ready"))
        .unwrap_or_else(|| panic!("no ready line in {lines:?}"));
    assert!(ready.contains(&v4.to_string()), "{ready}");
    assert!(ready.contains(&v6.to_string()), "{ready}");
    assert!(ready.contains("1 zone(s)"), "{ready}");
}

#[test]
fn only_the_given_addresses_are_served() {
    // --listen replaces the config's list: [::1] on our port is not served
    // when only 127.0.0.1 is given.
    let s = Server::example();
    let v6: SocketAddr = format!("[::1]:{}", s.port()).parse().unwrap();
    assert!(answered_over_udp(s.addr));
    if UdpSocket::bind(v6).is_ok() {
        assert!(udp_exchange(v6, &www(), Duration::from_millis(500)).is_none());
    }
}

/// Send `sig` and wait for the exit: (status code, how long it took).
fn stop_with(sig: &str) -> (Option<i32>, Duration, Vec<String>, SocketAddr) {
    let (mut s, v4, _) = dual_stack();
    assert!(answered_over_udp(v4));
    let t0 = Instant::now();
    s.signal(sig);
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            // Give the stderr reader a moment to collect the last lines.
            std::thread::sleep(Duration::from_millis(100));
            let lines = s.stderr.lock().unwrap().clone();
            return (st.code(), t0.elapsed(), lines, v4);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return (None, t0.elapsed(), Vec::new(), v4);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_stops_with_status_0() {
    let (code, took, lines, v4) = stop_with("TERM");
    assert_eq!(code, Some(0), "exit status after SIGTERM ({took:?})");
    assert!(took < Duration::from_secs(3), "SIGTERM took {took:?}");
    assert!(
        lines.iter().any(|l| l.contains("meridian: stopped")),
        "{lines:?}"
    );
    assert!(!answered_over_udp(v4));
}

#[test]
fn sigint_stops_with_status_0() {
    let (code, took, _, v4) = stop_with("INT");
    assert_eq!(code, Some(0), "exit status after SIGINT ({took:?})");
    assert!(took < Duration::from_secs(3), "SIGINT took {took:?}");
    assert!(!answered_over_tcp(v4));
}

#[test]
fn sigterm_with_an_open_tcp_connection() {
    // An idle client must not keep the process alive (the idle timeout is 10 s).
    let (mut s, v4, _) = dual_stack();
    let mut c = TcpStream::connect(v4).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    tcp_send(&mut c, &www());
    assert!(tcp_recv(&mut c).is_some());
    let t0 = Instant::now();
    s.signal("TERM");
    while s.child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "still running with an idle TCP client"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(s.child.try_wait().unwrap().unwrap().code(), Some(0));
}
