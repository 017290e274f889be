//! DNS over TCP under a flood of idle connections (RFC 7766 §6.2.3: the
//! server may close idle connections to make room): 2,000 connections that
//! never send a query fill the 512 slots, yet every client that connects
//! with a real query meanwhile is answered (at the cap, the connection idle
//! the longest is closed for it, as Knot and gdnsd do, rather than the new
//! one refused); and once they are gone the server's memory comes back
//! down, because a connection holds buffers sized to its messages, not
//! 64 KiB ones.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::common::*;

const FLOOD: usize = 2000;
const REAL: u16 = 200;
/// Floods one after another: the allocator reuses (and so touches) the
/// memory of connections closed by an earlier one.
const WAVES: usize = 4;

fn config(dir: &TempDir) -> std::path::PathBuf {
    let zone = root().join("zones/example.test.zone");
    dir.write(
        "flood.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n\
             tcp_max_connections = 512\ntcp_idle_timeout_ms = 10000\n\n\
             [[zone]]\norigin = \"example.test.\"\nfile = \"{}\"\n",
            zone.display()
        ),
    )
}

/// The resident set of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// One query on a new connection: Ok(answer) or what went wrong.
fn query(addr: SocketAddr, id: u16) -> Result<Resp, String> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let q = QueryBuilder::new("www.example.test", 1).id(id).build();
    let mut v = (q.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(&q);
    c.write_all(&v).map_err(|e| format!("write: {e}"))?;
    tcp_recv(&mut c)
        .map(Resp::new)
        .ok_or_else(|| "EOF or reset before the answer".to_string())
}

/// Room for the flood's descriptors in this process (and in the server,
/// which inherits the limit).
fn raise_nofile() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a live rlimit struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        if r.rlim_cur < 8192 {
            r.rlim_cur = r.rlim_max.min(8192);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
    }
    assert!(
        r.rlim_cur as usize > FLOOD + 100,
        "RLIMIT_NOFILE {} too low for {FLOOD} connections",
        r.rlim_cur
    );
}

#[test]
fn idle_flood_neither_refuses_real_queries_nor_keeps_memory() {
    raise_nofile();
    let dir = TempDir::new("tcp-flood");
    let s = Server::start(&config(&dir), &[]);
    let addr = s.addr;
    // Warm up every path once, then take the baseline.
    for id in 0..20 {
        query(addr, id).expect("warm-up query");
    }
    std::thread::sleep(Duration::from_millis(300));
    let rss0 = rss_kib(s.child.id());

    let mut failed = Vec::new();
    for wave in 0..WAVES {
        // The flood: connections that send nothing, held open, from two
        // threads.
        let flood: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for _ in 0..FLOOD / 2 {
                        if let Ok(c) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                            held.push(c);
                        }
                    }
                    held
                })
            })
            .collect();
        // Real clients while the flood goes on.
        std::thread::sleep(Duration::from_millis(20));
        for id in 0..REAL / WAVES as u16 {
            match query(addr, 1000 + id) {
                Ok(r) if addrs(&r.msg) == ["192.0.2.1"] => {}
                Ok(r) => failed.push(format!("{wave}/{id}: wrong answer {:?}", addrs(&r.msg))),
                Err(e) => failed.push(format!("{wave}/{id}: {e}")),
            }
        }
        let held: Vec<TcpStream> = flood.into_iter().flat_map(|t| t.join().unwrap()).collect();
        eprintln!(
            "wave {wave}: {} idle connections opened; RSS {rss0} KiB before, {} KiB at the end of the flood",
            held.len(),
            rss_kib(s.child.id())
        );
        // Everything closed.
        drop(held);
    }
    eprintln!("{} of {REAL} real queries failed", failed.len());

    // The memory comes back.
    let t0 = Instant::now();
    let bound = rss0 + 8 * 1024;
    let mut rss = rss_kib(s.child.id());
    while rss > bound && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        rss = rss_kib(s.child.id());
    }
    eprintln!("RSS {rss} KiB after the flood closed (bound {bound} KiB)");
    // 8 MiB: the 512 slots at the ~4 KiB a connection may keep, plus the
    // allocator's slack; the 64 KiB buffers of before came to ~100 MiB.
    assert!(
        rss <= bound,
        "RSS {rss} KiB after the flood, {rss0} KiB before"
    );
    assert!(failed.is_empty(), "real queries failed: {failed:?}");
    query(addr, 9999).expect("answered after the flood");
}
