//! The HTTP API under hostile clients (E4): a client that sends its request
//! headers one byte at a time is cut off by the header deadline, however
//! steadily it sends; with the server's descriptors used up (RLIMIT_NOFILE
//! lowered with `prlimit` on its PID), 80 idle connections do not make its
//! accept loop spin (CPU ticks read from /proc/PID/stat), and the API answers
//! again once they are gone. Loopback only.

mod common;
mod health_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use health_support::*;

fn start() -> (common::TempDir, common::Server, std::net::SocketAddr) {
    let body = "[pool.p]\nmembers = [\"192.0.2.7\"]\n\n\
                [name.\"www.health.test\"]\npool = \"p\"\nttl = 60\n";
    let (dir, cfg) = setup("admin-limits", body);
    let (s, api) = serve(&cfg);
    (dir, s, api)
}

#[test]
fn a_client_dripping_its_headers_is_cut_off() {
    let (_dir, _s, api) = start();
    let mut c = TcpStream::connect(api).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {api}\r\n");
    // Then an endless header, one byte every 200 ms.
    let drip = req
        .bytes()
        .chain(b"X-Slow: ".iter().copied())
        .chain(std::iter::repeat(b'a'));
    let t0 = Instant::now();
    let mut cut = None;
    for b in drip {
        if c.write_all(&[b]).is_err() {
            cut = Some(t0.elapsed());
            break;
        }
        // A closed connection shows as EOF on a read.
        c.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        let closed = match c.read(&mut buf) {
            Ok(_) => true, // an error response, or EOF: either way, cut
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        c.set_nonblocking(false).unwrap();
        if closed {
            cut = Some(t0.elapsed());
            break;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let cut = cut.expect("a client dripping headers for 20 s was not cut off");
    assert!(cut < Duration::from_secs(12), "cut off only after {cut:?}");
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn no_spinning_when_descriptors_run_out() {
    let Some(prlimit) = ["/usr/bin/prlimit", "/bin/prlimit"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        common::skip(
            "no_spinning_when_descriptors_run_out",
            "prlimit (util-linux) is not installed",
        );
        return;
    };
    let (_dir, s, api) = start();
    let pid = s.child.id();
    std::thread::sleep(Duration::from_millis(300));
    // Room for a handful of connections only.
    let limit = open_fds(pid) + 6;
    let out = std::process::Command::new(prlimit)
        .args([
            "--pid",
            &pid.to_string(),
            &format!("--nofile={limit}:{limit}"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "prlimit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let idle = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let idle = cpu_ticks(pid) - idle;

    let conns: Vec<TcpStream> = (0..80)
        .filter_map(|_| TcpStream::connect(api).ok())
        .collect();
    assert!(conns.len() >= 40, "only {} connections opened", conns.len());
    std::thread::sleep(Duration::from_millis(300));
    let t = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let busy = cpu_ticks(pid) - t;
    assert!(
        busy <= idle + 20,
        "{busy} ticks of CPU in 2 s with descriptors gone (idle: {idle})"
    );
    assert!(
        s.stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("accept")),
        "no accept error logged: {:?}",
        s.stderr.lock().unwrap()
    );

    drop(conns);
    let back = wait_for(Duration::from_secs(10), || metrics_answer(api));
    assert!(
        back.is_some(),
        "/metrics did not answer after the clients left"
    );
}
