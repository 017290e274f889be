//! A UDP query from source port 0 is dropped unanswered and counted in
//! `meridian_udp_dropped_total{reason="source_port_0"}`, not answered: no
//! reply can reach port 0 (gdnsd and hickory drop these too).
//!
//! Sending from port 0 needs a raw socket, so this runs as root only and
//! is skipped with a `SKIP:` line otherwise.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::health_support::{metric, metrics, serve};
use hickory_proto::rr::RecordType;

/// Sends `payload` over UDP from 127.0.0.1 port `sport` to 127.0.0.1 port
/// `dport` through a raw socket (the kernel adds the IP header; the UDP
/// header is ours, with checksum 0: none, allowed over IPv4).
fn send_raw_udp(sport: u16, dport: u16, payload: &[u8]) {
    let mut pkt = Vec::with_capacity(8 + payload.len());
    pkt.extend_from_slice(&sport.to_be_bytes());
    pkt.extend_from_slice(&dport.to_be_bytes());
    pkt.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    pkt.extend_from_slice(&[0, 0]);
    pkt.extend_from_slice(payload);
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: plain socket calls on a descriptor we own; `pkt` and `to` are
    // live for the sendto call and their lengths are passed with them.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let n = libc::sendto(
            fd,
            pkt.as_ptr().cast(),
            pkt.len(),
            0,
            (&to as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        assert_eq!(n, pkt.len() as isize, "raw sendto: {err}");
    }
}

/// Polls /metrics until `series` reads `want` (counters are flushed every
/// few ms), and returns the whole text.
fn wait_metric(api: std::net::SocketAddr, series: &str, want: f64) -> String {
    let t0 = Instant::now();
    loop {
        let m = metrics(api);
        if metric(&m, series) == Some(want) {
            return m;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "{series} is {:?}, expected {want}",
            metric(&m, series)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn query_from_source_port_0_is_dropped() {
    const T: &str = "query_from_source_port_0_is_dropped";
    if !is_root() {
        return skip(T, "a raw socket (to send from port 0) needs root");
    }
    let (s, api) = serve(&example_config());
    let q = Q::new("www.example.test.", RecordType::A).to_bytes();
    // One ordinary query, so that the count of queries is known to be 1.
    assert_eq!(Resp::new(s.udp_raw(&q).unwrap()).rcode(), 0);
    wait_metric(api, "meridian_queries_total", 1.0);

    // The control: the same raw path from a real port is answered (and
    // counted), so the raw packet itself is well formed.
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let cport = c.local_addr().unwrap().port();
    send_raw_udp(cport, s.port(), &q);
    let mut buf = [0u8; 512];
    let (n, _) = c
        .recv_from(&mut buf)
        .expect("raw query from a real port answered");
    assert_eq!(Resp::new(buf[..n].to_vec()).rcode(), 0);
    wait_metric(api, "meridian_queries_total", 2.0);

    send_raw_udp(0, s.port(), &q);
    // Wait until the server has seen it, one way or the other.
    let dropped = r#"meridian_udp_dropped_total{reason="source_port_0"}"#;
    let t0 = Instant::now();
    let m = loop {
        let m = metrics(api);
        let seen =
            metric(&m, dropped) == Some(1.0) || metric(&m, "meridian_queries_total") > Some(2.0);
        if seen || t0.elapsed() > Duration::from_secs(3) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        metric(&m, "meridian_queries_total"),
        Some(2.0),
        "the port-0 query was taken as a query and answered"
    );
    assert_eq!(metric(&m, dropped), Some(1.0), "the drop is counted");
    // Still serving.
    assert_eq!(Resp::new(s.udp_raw(&q).unwrap()).rcode(), 0);
}
