//! No IP fragmentation of UDP answers (RFC 9715 §3.2): meridian sends them
//! with DF set, at the interface MTU. An answer that the client's EDNS size
//! allows but the link cannot carry whole is refused by the kernel
//! (EMSGSIZE) and goes out in its truncated form instead (TC, the question,
//! the OPT), so the client retries over TCP rather than depending on
//! fragments that middleboxes drop and attackers spoof.
//!
//! Runs in a network namespace of its own whose loopback has MTU 1280, so
//! it needs root (CI runs as root); as another user it is skipped with a
//! `SKIP:` line (a failure under CI=true). Zone: tests/data/big.test.zone.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use hickory_proto::rr::RecordType;

/// Run `f` on a thread inside a new network namespace whose loopback is up
/// with the given MTU; processes it starts live there too.
fn in_netns_with_lo_mtu(mtu: u32, f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        // SAFETY: unshare affects only this thread (and what it spawns).
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        let st = Command::new("ip")
            .args(["link", "set", "lo", "up", "mtu", &mtu.to_string()])
            .status()
            .expect("ip (iproute2)");
        assert!(st.success(), "ip link set lo up mtu {mtu}");
        f();
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p));
}

fn config(dir: &TempDir) -> std::path::PathBuf {
    let zone = data("big.test.zone");
    dir.write(
        "meridian.toml",
        &format!(
            "[server]\nedns_udp_payload = 4096\n\n[[zone]]\norigin = \"big.test.\"\nfile = \"{}\"\n",
            zone.display()
        ),
    )
}

/// dig +bufsize=4096 x1300.big.test TXT: 1321 octets with the OPT, allowed
/// by both EDNS sizes, but 1349 (IPv4) or 1369 (IPv6) on the wire with the
/// IP and UDP headers: more than the 1280 of the link. Truncated over UDP,
/// whole over TCP; answers that fit are sent whole.
fn assert_df_behaviour(addr: SocketAddr) {
    let q = Q::new("x1300.big.test.", RecordType::TXT).edns(4096);
    let r =
        Resp::new(udp_exchange(addr, &q.to_bytes(), Duration::from_secs(2)).expect("udp answer"));
    let h = r.hdr();
    assert!(
        h.truncation,
        "{addr}: TC expected, got {} octets {}",
        r.raw.len(),
        r.flags()
    );
    assert!(h.authoritative);
    let c = h.counts;
    assert_eq!(
        (c.queries, c.answers, c.authorities, c.additionals),
        (1, 0, 0, 1),
        "{addr}: question and OPT only"
    );
    assert_eq!(r.opt().map(|o| o.0), Some(4096));

    // The same question over TCP: the whole RRset.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    tcp_send(&mut c, &q.to_bytes());
    let t = Resp::new(tcp_recv(&mut c).expect("tcp answer"));
    assert!(!t.hdr().truncation);
    assert_eq!(t.hdr().counts.answers, 6);
    assert!(t.raw.len() > 1252, "{} octets", t.raw.len());

    // An answer that fits the link is sent whole: 669 + 11 octets.
    let q = Q::new("mid.big.test.", RecordType::TXT).edns(4096);
    let m =
        Resp::new(udp_exchange(addr, &q.to_bytes(), Duration::from_secs(2)).expect("udp answer"));
    assert!(!m.hdr().truncation, "{addr}");
    assert_eq!(m.hdr().counts.answers, 3);
}

#[test]
fn answer_over_the_link_mtu_goes_out_truncated_not_fragmented() {
    if !crate::common::need(
        "answer_over_the_link_mtu_goes_out_truncated_not_fragmented",
        &["ip"],
    ) {
        return;
    }
    if !is_root() {
        skip(
            "answer_over_the_link_mtu_goes_out_truncated_not_fragmented",
            "a network namespace needs root",
        );
        return;
    }
    in_netns_with_lo_mtu(1280, || {
        let dir = TempDir::new("udp-df");
        let cfg = config(&dir);
        let port = free_port();
        let v4: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let v6: SocketAddr = format!("[::1]:{port}").parse().unwrap();
        let s = Server::try_start(&cfg, &[v4, v6], &[]).expect("meridian starts");
        assert_df_behaviour(v4);
        assert_df_behaviour(v6);
        // The server keeps answering after the refused sends.
        let small = s.dig(&Q::new("small.big.test.", RecordType::TXT).edns(4096));
        assert_eq!(small.answer().len(), 1);
    });
}
