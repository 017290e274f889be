//! Replies leave from the address the query came to (E1). On a wildcard
//! listen address (`0.0.0.0:P`, `[::]:P`) the kernel would otherwise pick
//! the reply's source by route, so a query to a secondary address of the
//! host was answered from another one, and dig and resolvers (which check
//! the source, or use a connected socket) dropped the reply.
//!
//! IPv4 runs anywhere (every 127/8 address is local). IPv6 needs a second
//! local address, so it runs in a network namespace of its own with
//! fd00::9 on its loopback: as root only, skipped with a `SKIP:` line
//! otherwise.

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use hickory_proto::rr::RecordType;

/// The example served on `wildcard:P`, with a free port P.
fn wildcard_server(wildcard: &str, free: impl Fn() -> u16) -> Server {
    for _ in 0..5 {
        let addr: SocketAddr = format!("{wildcard}:{}", free()).parse().unwrap();
        if let Some(s) = Server::try_start(&example_config(), &[addr], &[]) {
            return s;
        }
    }
    panic!("meridian did not start on {wildcard}");
}

fn www() -> Vec<u8> {
    Q::new("www.example.test.", RecordType::A).to_bytes()
}

/// Asks `to` from a socket bound to `client` and checks that the answer
/// comes from `to` (recv_from), then asks again from a socket connected to
/// `to`, which the kernel only lets a datagram from `to` reach (as dig).
fn assert_reply_from(client: &str, to: SocketAddr) {
    let s = UdpSocket::bind(client).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.send_to(&www(), to).unwrap();
    let mut buf = [0u8; 4096];
    let (n, from) = s
        .recv_from(&mut buf)
        .unwrap_or_else(|e| panic!("no answer to a query sent to {to}: {e}"));
    assert_eq!(
        from, to,
        "the reply to a query sent to {to} came from {from}"
    );
    assert_eq!(addrs(&Resp::new(buf[..n].to_vec()).msg), ["192.0.2.1"]);

    let c = UdpSocket::bind(client).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    c.connect(to).unwrap();
    c.send(&www()).unwrap();
    let n = c
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("a socket connected to {to} got no answer: {e}"));
    assert_eq!(addrs(&Resp::new(buf[..n].to_vec()).msg), ["192.0.2.1"]);
}

#[test]
fn ipv4_wildcard_replies_from_the_queried_address() {
    let s = wildcard_server("0.0.0.0", free_port);
    let p = s.port();
    for to in ["127.0.0.1", "127.0.0.9", "127.0.0.1"] {
        assert_reply_from("127.0.0.5:0", format!("{to}:{p}").parse().unwrap());
    }
}

#[test]
fn ipv6_wildcard_replies_from_the_queried_address() {
    if !crate::common::need("ipv6_wildcard_replies_from_the_queried_address", &["ip"]) {
        return;
    }
    const T: &str = "ipv6_wildcard_replies_from_the_queried_address";
    if !is_root() {
        return skip(T, "needs root for a network namespace with fd00::9");
    }
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this thread (and what it spawns).
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
        for args in [
            &["link", "set", "lo", "up"][..],
            &["addr", "add", "fd00::9/128", "dev", "lo", "nodad"][..],
        ] {
            let st = Command::new("ip").args(args).status().expect("ip");
            assert!(st.success(), "ip {args:?}");
        }
        let s = wildcard_server("[::]", || {
            let u = UdpSocket::bind("[::1]:0").unwrap();
            u.local_addr().unwrap().port()
        });
        let p = s.port();
        for to in ["::1", "fd00::9", "::1"] {
            assert_reply_from("[::1]:0", format!("[{to}]:{p}").parse().unwrap());
        }
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p));
}
