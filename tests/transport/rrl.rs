//! Response rate limiting (`[server.rrl]`): a loopback flood from one client
//! is held to about the configured rate, the rest dropped or slipped (sent
//! truncated so that a real client retries over TCP), while another client
//! is answered in full and TCP is never limited.
//!
//! RRL keys on the source address's prefix. 127.0.0.1 and 127.0.0.2 share
//! a /24, so these configs set `ipv4_prefix = 32` to make them two clients;
//! the flood comes from 127.0.0.1 and the other client binds 127.0.0.2.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::*;

const RATE: u32 = 20;

fn config(dir: &TempDir, rrl: &str) -> std::path::PathBuf {
    let zone = root().join("zones/example.test.zone");
    dir.write(
        "rrl.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[server.rrl]\n{rrl}\n\n\
             [[zone]]\norigin = \"example.test.\"\nfile = \"{}\"\n",
            zone.display()
        ),
    )
}

fn start(dir: &TempDir, rrl: &str) -> (Server, SocketAddr) {
    let cfg = config(dir, rrl);
    let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let s = Server::start(&cfg, &["--http-listen", &http.to_string()]);
    (s, http)
}

/// What came back for a burst of queries from one socket.
#[derive(Debug, Default)]
#[allow(dead_code)] // `sent` is for the Debug output
struct Tally {
    full: usize,
    slipped: usize,
    lost: usize,
    sent: usize,
    /// Time from the first to the last query sent.
    spread: Duration,
}

/// Send `n` queries from `sock` as fast as possible, then read every answer.
fn burst(sock: &UdpSocket, server: SocketAddr, n: usize, ecs: bool) -> Tally {
    let mut t = Tally {
        sent: n,
        ..Tally::default()
    };
    // Read while sending, so none is lost in our own socket.
    let rx = collect_replies(sock);
    let t0 = Instant::now();
    for i in 0..n {
        // A short pause every 50 queries bounds what is in flight.
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut q = Q::new("www.example.test.", hickory_proto::rr::RecordType::A);
        q.id = i as u16;
        if ecs {
            q = q.ecs("192.0.2.0/24");
        }
        sock.send_to(&q.to_bytes(), server).unwrap();
    }
    t.spread = t0.elapsed();
    let mut seen = vec![false; n];
    for raw in rx.join().unwrap() {
        let r = Resp::new(raw);
        let id = r.hdr().id as usize;
        assert!(!seen[id], "two answers to query {id}");
        seen[id] = true;
        if r.hdr().truncation {
            // A slip: the question (and OPT, with the ECS echo), no records.
            assert_eq!(
                (
                    r.hdr().counts.queries,
                    r.hdr().counts.answers,
                    r.hdr().counts.authorities
                ),
                (1, 0, 0),
                "{r:?}"
            );
            assert!(r.authority().is_empty() && r.additional().is_empty());
            if ecs {
                assert_eq!(
                    ecs_raw(&r.raw).map(|e| (e.0, e.1, e.3)),
                    Some((1, 24, vec![192, 0, 2])),
                    "slip keeps the ECS echo"
                );
            }
            t.slipped += 1;
        } else {
            assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
            t.full += 1;
        }
    }
    t.lost = n - t.full - t.slipped;
    t
}

/// SO_RCVBUFFORCE (as root, as in CI) or else SO_RCVBUF up to rmem_max.
fn big_receive_buffer(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 8 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: a valid socket fd, and a pointer to a c_int that lives
        // across the call with its exact size.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &size as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

fn metric(http: SocketAddr, line: &str) -> Option<u64> {
    let mut c = TcpStream::connect(http).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    // The API refuses a Host that is not its address.
    c.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {http}\r\n\r\n").as_bytes())
        .ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(line).map(|v| v.trim().parse().unwrap()))
}

/// Wait until the workers have flushed their counters to `want`.
fn metric_reaches(http: SocketAddr, line: &str, want: u64) -> u64 {
    let t0 = Instant::now();
    loop {
        let v = metric(http, line).unwrap_or(0);
        if v >= want || t0.elapsed() > Duration::from_secs(5) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn flood_is_limited_while_another_client_is_answered_in_full() {
    let dir = TempDir::new("rrl");
    let (s, http) = start(
        &dir,
        &format!("responses_per_second = {RATE}\nslip = 2\nipv4_prefix = 32"),
    );
    let flooder = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other = UdpSocket::bind("127.0.0.2:0").expect("bind 127.0.0.2 (loopback /8)");
    let n = 400;
    let t = burst(&flooder, s.addr, n, true);
    eprintln!("flood from 127.0.0.1: {t:?}");
    // One second's burst, plus what refills while the queries arrive.
    let allowed = RATE as f64 * (1.0 + t.spread.as_secs_f64());
    assert!(
        t.full >= RATE as usize,
        "fewer than the burst answered: {t:?}"
    );
    assert!(
        t.full as f64 <= allowed + 2.0,
        "more than the rate answered: {t:?}"
    );
    // slip = 2: every second limited response is sent truncated.
    let limited = n - t.full;
    assert!(
        t.slipped.abs_diff(limited / 2) <= 1,
        "slips {} for {limited} limited",
        t.slipped
    );
    assert_eq!(t.lost, limited - t.slipped, "{t:?}");

    // The other client, right after the flood: all answered in full.
    let o = burst(&other, s.addr, RATE as usize, false);
    assert_eq!(
        (o.full, o.slipped, o.lost),
        (RATE as usize, 0, 0),
        "127.0.0.2: {o:?}"
    );

    // TCP from the flooding address is never limited.
    for id in 0..5u16 {
        let mut q = Q::new("www.example.test.", hickory_proto::rr::RecordType::A);
        q.id = id;
        let r = s.dig_tcp(&q);
        assert!(!r.hdr().truncation);
        assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
    }

    // The counters in /metrics agree with what the client saw.
    let dropped = metric_reaches(
        http,
        "meridian_rrl_responses_total{action=\"dropped\"}",
        t.lost as u64,
    );
    let slipped = metric_reaches(
        http,
        "meridian_rrl_responses_total{action=\"slipped\"}",
        t.slipped as u64,
    );
    assert_eq!((dropped, slipped), (t.lost as u64, t.slipped as u64));

    // A second later the bucket has refilled: about one second's worth again.
    std::thread::sleep(Duration::from_millis(1100));
    let again = burst(&flooder, s.addr, 100, false);
    eprintln!("after 1.1 s: {again:?}");
    assert!(again.full >= RATE as usize - 1, "{again:?}");
    assert!(
        again.full as f64 <= RATE as f64 * (1.0 + again.spread.as_secs_f64()) + 2.0,
        "{again:?}"
    );
}

#[test]
fn slip_zero_drops_everything_over_the_limit() {
    let dir = TempDir::new("rrl0");
    let (s, _http) = start(
        &dir,
        "responses_per_second = 10\nslip = 0\nipv4_prefix = 32",
    );
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = burst(&sock, s.addr, 200, false);
    assert_eq!(t.slipped, 0, "{t:?}");
    assert!(t.full >= 10 && t.full <= 14, "{t:?}");
}

#[test]
fn default_prefix_groups_a_slash_24() {
    // ipv4_prefix left at 24: 127.0.0.1 and 127.0.0.2 are one client.
    let dir = TempDir::new("rrl24");
    // A low rate, so that what refills while a burst is read is small.
    let (s, _http) = start(&dir, "responses_per_second = 2\nslip = 0");
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.2:0").unwrap();
    let ta = burst(&a, s.addr, 50, false);
    assert!(ta.full >= 2 && ta.full <= 4, "{ta:?}");
    let tb = burst(&b, s.addr, 10, false);
    assert!(tb.full <= 4, "the same /24 shares the bucket: {tb:?}");
}

#[test]
fn off_by_default() {
    // The bundled example has no [server.rrl]: a burst is answered in full.
    let s = Server::example();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = burst(&sock, s.addr, 300, false);
    assert_eq!((t.full, t.slipped, t.lost), (300, 0, 0), "{t:?}");
}

#[test]
fn bad_rrl_settings_are_errors_with_their_line() {
    let dir = TempDir::new("rrlbad");
    for (rrl, msg) in [
        (
            "responses_per_second = 0",
            "responses_per_second must be 1 to 1000000",
        ),
        (
            "responses_per_second = 5\nipv4_prefix = 33",
            "ipv4_prefix must be 0 to 32",
        ),
        (
            "responses_per_second = 5\nipv6_prefix = 129",
            "ipv6_prefix must be 0 to 128",
        ),
        (
            "responses_per_second = 5\nwindow = 15",
            "unknown field `window`",
        ),
    ] {
        let cfg = config(&dir, rrl);
        let (code, _, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{rrl}: {err}");
        assert!(err.contains(msg), "{rrl}: {err}");
        assert!(err.contains("rrl.toml:"), "names the file and line: {err}");
    }
}

/// Send one query for each name in `names` (ids 0..) from `sock` without
/// waiting, then count the answers that came back in full (not truncated,
/// with an answer record).
fn answered(sock: &UdpSocket, server: SocketAddr, names: &[String]) -> usize {
    exchange(sock, server, names)
        .into_iter()
        .filter(|r| !r.hdr().truncation && r.hdr().counts.answers == 1)
        .count()
}

/// Like `answered`, counting every response that is not truncated.
fn answered_any(sock: &UdpSocket, server: SocketAddr, names: &[String]) -> usize {
    exchange(sock, server, names)
        .into_iter()
        .filter(|r| !r.hdr().truncation)
        .count()
}

/// Read every reply on `sock` on another thread, with a receive buffer
/// large enough for all of them (the default holds only ~256 datagrams),
/// until 500 ms pass without one.
fn collect_replies(sock: &UdpSocket) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    big_receive_buffer(sock);
    let reader = sock.try_clone().unwrap();
    reader
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok((len, _)) = reader.recv_from(&mut buf) {
            got.push(buf[..len].to_vec());
        }
        got
    })
}

fn exchange(sock: &UdpSocket, server: SocketAddr, names: &[String]) -> Vec<Resp> {
    let rx = collect_replies(sock);
    for (i, name) in names.iter().enumerate() {
        let mut q = Q::new(name, hickory_proto::rr::RecordType::A);
        q.id = i as u16;
        sock.send_to(&q.to_bytes(), server).unwrap();
    }
    rx.join().unwrap().into_iter().map(Resp::new).collect()
}

/// RRL counts identical responses, as BIND and Knot do: a /24 asking 200
/// different names at once (200 responses, ten times the per-response rate
/// of 20/s) is answered in full, while the same name asked 200 times is
/// held to about the rate.
#[test]
fn different_names_are_separate_categories() {
    let dir = TempDir::new("rrl-names");
    let mut zone = String::from(
        "$ORIGIN many.test.\n$TTL 300\n@ SOA ns hostmaster 1 7200 1800 1209600 300\n@ NS ns\nns A 192.0.2.53\n",
    );
    for i in 0..200 {
        zone.push_str(&format!("n{i} A 192.0.2.{}\n", i % 250 + 1));
    }
    let zf = dir.write("many.test.zone", &zone);
    let cfg = dir.write(
        "rrl.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[server.rrl]\nresponses_per_second = {RATE}\nslip = 0\n\n\
             [[zone]]\norigin = \"many.test.\"\nfile = \"{}\"\n",
            zf.display()
        ),
    );
    let s = Server::start(&cfg, &[]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let names: Vec<String> = (0..200).map(|i| format!("n{i}.many.test.")).collect();
    let got = answered(&sock, s.addr, &names);
    assert_eq!(got, 200, "200 different names from one /24: all answered");
    // The same name 200 times from another address of the same /24.
    let sock = UdpSocket::bind("127.0.0.2:0").unwrap();
    let same = vec!["n7.many.test.".to_string(); 200];
    let got = answered(&sock, s.addr, &same);
    assert!(
        (RATE as usize..=2 * RATE as usize).contains(&got),
        "one name 200 times: {got} answered, expected about {RATE}"
    );
    // NXDOMAIN is counted by zone: 200 different names that do not exist
    // are one category (a random-subdomain flood is limited).
    let sock = UdpSocket::bind("127.0.0.3:0").unwrap();
    let missing: Vec<String> = (0..200).map(|i| format!("x{i}.many.test.")).collect();
    let got = answered_any(&sock, s.addr, &missing);
    assert!(
        (RATE as usize..=2 * RATE as usize).contains(&got),
        "200 NXDOMAIN in one zone: {got} answered, expected about {RATE}"
    );
}
