//! Issue #15: the dnstap query log. With `query_log = "file:PATH"` every
//! (sampled) answered query is written as one dnstap `AUTH_RESPONSE`
//! message holding the query and the response, in Frame Streams framing
//! (START, data frames, STOP on shutdown), readable by BIND's `dnstap-read`;
//! a reload after the file was renamed starts a new one (logrotate). With
//! `query_log = "unix:PATH"` the frames go to a collector (here the
//! reference one, `fstrm_capture` from fstrm-bin) over the bidirectional
//! Frame Streams handshake, and a missing or dying collector never stops
//! answering.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use hickory_proto::rr::RecordType;

/// A config serving the bundled example zone with `extra` in `[server]`.
fn config(dir: &TempDir, extra: &str) -> std::path::PathBuf {
    let zone = root().join("zones/example.test.zone");
    dir.write(
        "meridian.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n{extra}\n\n[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n",
            zone.display().to_string()
        ),
    )
}

/// SIGTERM, then wait for the exit (the STOP frame is written by then).
fn stop(mut s: Server) {
    s.signal("TERM");
    let t0 = Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            assert!(st.success(), "{st:?}");
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// A Frame Streams file: (content type of START, data frames); asserts
/// that it starts with START and ends with STOP.
fn frames(b: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    assert_eq!(u32_at(b, 0), 0, "no control frame first");
    let clen = u32_at(b, 4) as usize;
    assert_eq!(u32_at(b, 8), 2, "first control frame is not START");
    assert_eq!(u32_at(b, 12), 1, "START has no content type field");
    let tlen = u32_at(b, 16) as usize;
    let ct = b[20..20 + tlen].to_vec();
    let mut at = 8 + clen;
    let mut data = Vec::new();
    loop {
        let len = u32_at(b, at) as usize;
        if len == 0 {
            assert_eq!(u32_at(b, at + 4), 4, "STOP frame length");
            assert_eq!(u32_at(b, at + 8), 3, "last control frame is not STOP");
            assert_eq!(at + 12, b.len(), "octets after STOP");
            return (ct, data);
        }
        data.push(b[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
}

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let c = b[*at];
        *at += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c & 0x80 == 0 {
            break;
        }
    }
    v
}

/// Protobuf fields: (field number, varint or fixed32 value, bytes).
fn fields(b: &[u8]) -> Vec<(u64, u64, Vec<u8>)> {
    let mut at = 0;
    let mut v = Vec::new();
    while at < b.len() {
        let key = varint(b, &mut at);
        match key & 7 {
            0 => v.push((key >> 3, varint(b, &mut at), vec![])),
            5 => {
                let x = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                at += 4;
                v.push((key >> 3, u64::from(x), vec![]));
            }
            2 => {
                let n = varint(b, &mut at) as usize;
                v.push((key >> 3, 0, b[at..at + n].to_vec()));
                at += n;
            }
            w => panic!("wire type {w}"),
        }
    }
    v
}

fn get(f: &[(u64, u64, Vec<u8>)], n: u64) -> Option<&(u64, u64, Vec<u8>)> {
    f.iter().find(|x| x.0 == n)
}

/// One decoded frame: (message type, socket protocol, query, response).
fn message(frame: &[u8]) -> (u64, u64, Vec<u8>, Vec<u8>) {
    let top = fields(frame);
    assert_eq!(get(&top, 15).map(|x| x.1), Some(1), "Dnstap.type MESSAGE");
    let m = fields(&get(&top, 14).expect("Dnstap.message").2);
    let family = get(&m, 2).unwrap().1;
    assert_eq!(family, 1, "INET");
    assert_eq!(get(&m, 4).unwrap().2, vec![127, 0, 0, 1], "query_address");
    (
        get(&m, 1).unwrap().1,
        get(&m, 3).unwrap().1,
        get(&m, 10).expect("query_message").2.clone(),
        get(&m, 14).expect("response_message").2.clone(),
    )
}

const NAMES: [&str; 6] = [
    "ns1.example.test.",
    "ns2.example.test.",
    "mail.example.test.",
    "example.test.",
    "nope.example.test.",
    "ns1.example.test.",
];

#[test]
fn every_query_is_logged_as_dnstap() {
    let dir = TempDir::new("query-log");
    let log = dir.0.join("q.dnstap");
    let cfg = config(&dir, &format!("query_log = \"file:{}\"", log.display()));
    let s = Server::start(&cfg, &[]);
    let mut sent = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let mut q = Q::new(name, RecordType::A);
        q.id = 100 + i as u16;
        let req = q.to_bytes();
        let resp = if i == 5 {
            s.tcp_raw(&req)
        } else {
            s.udp_raw(&req)
        };
        sent.push((req, resp.expect("answered"), i == 5));
    }
    stop(s);
    let bytes = std::fs::read(&log).unwrap();
    let (ct, data) = frames(&bytes);
    assert_eq!(ct, b"protobuf:dnstap.Dnstap");
    assert_eq!(data.len(), 6, "one frame per query");
    // One UDP worker and in-order TCP: the frames are in sending order.
    for (f, (req, resp, tcp)) in data.iter().zip(&sent) {
        let (ty, proto, q, r) = message(f);
        assert_eq!(ty, 2, "AUTH_RESPONSE");
        assert_eq!(proto, if *tcp { 2 } else { 1 }, "socket_protocol");
        assert_eq!(&q, req, "query_message is the query as sent");
        assert_eq!(&r, resp, "response_message is the response as received");
    }
    dnstap_read(&log);
}

/// BIND's reader agrees: 6 AR messages with the names asked.
fn dnstap_read(log: &Path) {
    let Some(lines) = read_dnstap("query_log dnstap-read", log) else {
        return;
    };
    let text = lines.join("\n");
    assert_eq!(lines.len(), 6, "{text}");
    for (l, name) in lines.iter().zip(NAMES) {
        assert!(l.contains(" AR "), "not AUTH_RESPONSE: {l}");
        // dnstap-read writes names without the final dot.
        let name = name.trim_end_matches('.');
        assert!(l.ends_with(&format!(" {name}/IN/A")), "{name} not in: {l}");
    }
    assert_eq!(
        lines.iter().filter(|l| l.contains(" TCP ")).count(),
        1,
        "{text}"
    );
}

/// `dnstap-read FILE`'s non-empty lines; None (and a SKIP line) without it.
fn read_dnstap(test: &str, log: &Path) -> Option<Vec<String>> {
    if std::process::Command::new("dnstap-read")
        .arg("-h")
        .output()
        .is_err()
    {
        skip(test, "dnstap-read (bind9-dnsutils) is not installed");
        return None;
    }
    let out = std::process::Command::new("dnstap-read")
        .arg(log)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dnstap-read {} failed: {text}\n{}",
        log.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect(),
    )
}

#[test]
fn sample_two_logs_half() {
    let dir = TempDir::new("query-log-sample");
    let log = dir.0.join("q.dnstap");
    let cfg = config(
        &dir,
        &format!(
            "query_log = \"file:{}\"\nquery_log_sample = 2",
            log.display()
        ),
    );
    let api = format!("127.0.0.1:{}", free_port());
    let s = Server::start(&cfg, &["--http-listen", &api]);
    for i in 0..40u16 {
        let mut q = Q::new("ns1.example.test.", RecordType::A);
        q.id = i;
        s.udp_raw(&q.to_bytes()).expect("answered");
    }
    // The writer drains every 10 ms: /metrics counts the frames.
    let api = api.parse().unwrap();
    let t0 = Instant::now();
    let metric = |name: &str| {
        let text = crate::health_support::metrics(api);
        crate::health_support::metric(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    while metric("meridian_query_log_frames_total") < 20.0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "frames not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(metric("meridian_query_log_dropped_total"), 0.0);
    stop(s);
    let (_, data) = frames(&std::fs::read(&log).unwrap());
    assert_eq!(data.len(), 20, "one in 2 of 40 queries on one worker");
}

#[test]
fn bad_values_refused_with_line() {
    let dir = TempDir::new("query-log-check");
    for (line, words) in [
        (
            "query_log = \"syslog\"",
            &["bad query_log", "file:PATH", "unix:PATH"][..],
        ),
        (
            "query_log = \"tcp:127.0.0.1:6000\"",
            &["bad query_log", "file:PATH", "unix:PATH"][..],
        ),
        ("query_log = \"file:\"", &["bad query_log"][..]),
        (
            "query_log = \"unix:run/x.sock\"",
            &["unix:", "must be absolute"][..],
        ),
        (
            "query_log = \"unix:/nonexistent-dir/x.sock\"",
            &["/nonexistent-dir", "does not exist"][..],
        ),
        ("query_log_sample = 4", &["without query_log"][..]),
    ] {
        let cfg = config(&dir, line);
        let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{line}: check passed\n{out}\n{err}");
        let prefix = format!("{}:3: ", cfg.display());
        assert!(
            err.starts_with(&prefix),
            "{line}: expected {prefix}..., got {err}"
        );
        for w in words {
            assert!(err.contains(w), "{line}: `{w}` not in {err}");
        }
    }
    let cfg = config(&dir, "query_log = \"file:/tmp/x\"\nquery_log_sample = 0");
    let (code, _, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.starts_with(&format!("{}:4: ", cfg.display())), "{err}");
    assert!(err.contains("query_log_sample must be 1"), "{err}");
    // A socket in a directory that exists is accepted (no collector needed).
    let sock = dir.0.join("dnstap.sock");
    let cfg = config(&dir, &format!("query_log = \"unix:{}\"", sock.display()));
    let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// `fstrm_capture` (Frame Streams' reference collector) on `sock`, writing
/// to `out`; None (and a SKIP line) without it.
fn collector(test: &str, sock: &Path, out: &Path) -> Option<std::process::Child> {
    if std::process::Command::new("fstrm_capture")
        .arg("-h")
        .output()
        .is_err()
    {
        skip(test, "fstrm_capture (fstrm-bin) is not installed");
        return None;
    }
    // A stale socket file from a killed collector is replaced.
    let _ = std::fs::remove_file(sock);
    let child = std::process::Command::new("fstrm_capture")
        .args(["-t", "protobuf:dnstap.Dnstap", "-u"])
        .arg(sock)
        .arg("-w")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn fstrm_capture");
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no collector socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    Some(child)
}

/// SIGTERM the collector: it closes its file with a STOP frame.
fn stop_collector(mut c: std::process::Child) {
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(c.id().to_string())
        .status()
        .unwrap();
    assert!(c.wait().unwrap().success());
}

/// One UDP query from a socket of our own: (client port, time to answer).
fn ask(s: &Server, name: &str, id: u16) -> (u16, Duration) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut q = Q::new(name, RecordType::A);
    q.id = id;
    let t0 = Instant::now();
    sock.send_to(&q.to_bytes(), s.addr).unwrap();
    let mut buf = [0u8; 1500];
    let (n, _) = sock
        .recv_from(&mut buf)
        .unwrap_or_else(|e| panic!("{name} (id {id}) not answered: {e}"));
    assert!(n > 12, "short answer");
    assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), id);
    (sock.local_addr().unwrap().port(), t0.elapsed())
}

/// A counter from /metrics.
fn metric(api: std::net::SocketAddr, name: &str) -> f64 {
    let text = crate::health_support::metrics(api);
    crate::health_support::metric(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

fn wait_metric(api: std::net::SocketAddr, name: &str, at_least: f64) {
    let t0 = Instant::now();
    while metric(api, name) < at_least {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{name} stays below {at_least}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const CONNECTED: &str = "connected to the dnstap collector";

#[test]
fn unix_socket_to_fstrm_capture() {
    let test = "query_log unix_socket_to_fstrm_capture";
    let dir = TempDir::new("query-log-unix");
    let (sock, out) = (dir.0.join("dnstap.sock"), dir.0.join("captured.fstrm"));
    let Some(c) = collector(test, &sock, &out) else {
        return;
    };
    let cfg = config(&dir, &format!("query_log = \"unix:{}\"", sock.display()));
    let s = Server::start(&cfg, &[]);
    let server_port = s.port();
    assert!(
        s.wait_log(CONNECTED, Duration::from_secs(5)),
        "no handshake"
    );
    let mut ports = Vec::new();
    for (i, name) in NAMES[..5].iter().enumerate() {
        ports.push(ask(&s, name, i as u16).0);
    }
    // STOP, and the collector's FINISH, before meridian exits.
    stop(s);
    stop_collector(c);
    let Some(lines) = read_dnstap(test, &out) else {
        return;
    };
    assert_eq!(lines.len(), 5, "{lines:#?}");
    for ((l, name), port) in lines.iter().zip(NAMES).zip(ports) {
        // An AR line reads "client <- server": the response's direction.
        let who = format!(" AR 127.0.0.1:{port} <- 127.0.0.1:{} UDP ", server_port);
        assert!(l.contains(&who), "`{who}` not in {l}");
        let name = name.trim_end_matches('.');
        assert!(l.ends_with(&format!(" {name}/IN/A")), "{name} not in: {l}");
    }
}

#[test]
fn collector_started_late_gets_entries_after_reconnect() {
    let test = "query_log collector_started_late_gets_entries_after_reconnect";
    let dir = TempDir::new("query-log-late");
    let (sock, out) = (dir.0.join("dnstap.sock"), dir.0.join("captured.fstrm"));
    let cfg = config(&dir, &format!("query_log = \"unix:{}\"", sock.display()));
    let api_s = format!("127.0.0.1:{}", free_port());
    let s = Server::start(&cfg, &["--http-listen", &api_s]);
    let api = api_s.parse().unwrap();
    assert!(
        s.wait_log("no dnstap collector at", Duration::from_secs(5)),
        "the missing collector is not reported"
    );
    // Nobody listens: every query is answered at once, its entry dropped
    // and counted.
    for i in 0..20 {
        let (_, took) = ask(&s, "ns2.example.test.", i);
        assert!(took < Duration::from_millis(500), "query {i} took {took:?}");
    }
    wait_metric(api, "meridian_query_log_dropped_total", 20.0);
    let Some(c) = collector(test, &sock, &out) else {
        return;
    };
    // The backoff (1 s, 2 s, 4 s...) finds it.
    assert!(
        s.wait_log(CONNECTED, Duration::from_secs(40)),
        "no reconnect"
    );
    assert_eq!(
        s.log_count("no dnstap collector at"),
        1,
        "warned per attempt"
    );
    for i in 0..5 {
        let (_, took) = ask(&s, "mail.example.test.", 100 + i);
        assert!(took < Duration::from_millis(500), "query took {took:?}");
    }
    wait_metric(api, "meridian_query_log_frames_total", 5.0);
    assert_eq!(metric(api, "meridian_query_log_dropped_total"), 20.0);
    stop(s);
    stop_collector(c);
    let Some(lines) = read_dnstap(test, &out) else {
        return;
    };
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(
        lines.iter().all(|l| l.ends_with(" mail.example.test/IN/A")),
        "{lines:#?}"
    );
}

#[test]
fn collector_killed_mid_run_keeps_answering() {
    let test = "query_log collector_killed_mid_run_keeps_answering";
    let dir = TempDir::new("query-log-killed");
    let (sock, out) = (dir.0.join("dnstap.sock"), dir.0.join("captured.fstrm"));
    let Some(mut c) = collector(test, &sock, &out) else {
        return;
    };
    let cfg = config(&dir, &format!("query_log = \"unix:{}\"", sock.display()));
    let api_s = format!("127.0.0.1:{}", free_port());
    let s = Server::start(&cfg, &["--http-listen", &api_s]);
    let api = api_s.parse().unwrap();
    assert!(
        s.wait_log(CONNECTED, Duration::from_secs(5)),
        "no handshake"
    );
    for i in 0..10 {
        ask(&s, "ns1.example.test.", i);
    }
    wait_metric(api, "meridian_query_log_frames_total", 10.0);
    c.kill().unwrap();
    c.wait().unwrap();
    for i in 0..300 {
        let (_, took) = ask(&s, "ns1.example.test.", 1000 + i);
        assert!(took < Duration::from_millis(500), "query {i} took {took:?}");
    }
    assert!(
        s.wait_log("lost the dnstap collector", Duration::from_secs(5)),
        "the lost collector is not reported"
    );
    assert_eq!(s.log_count("lost the dnstap collector"), 1);
    // Every entry is either written before the kill or dropped and counted.
    let t0 = Instant::now();
    loop {
        let written = metric(api, "meridian_query_log_frames_total");
        let dropped = metric(api, "meridian_query_log_dropped_total");
        if written + dropped == 310.0 && dropped > 0.0 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{written} written + {dropped} dropped != 310"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.alive());
    stop(s);
}

#[test]
fn rename_and_sighup_rotates_the_file() {
    let test = "query_log rename_and_sighup_rotates_the_file";
    let dir = TempDir::new("query-log-rotate");
    let log = dir.0.join("q.dnstap");
    let old = dir.0.join("q.dnstap.1");
    let cfg = config(&dir, &format!("query_log = \"file:{}\"", log.display()));
    let api_s = format!("127.0.0.1:{}", free_port());
    let s = Server::start(&cfg, &["--http-listen", &api_s]);
    let api = api_s.parse().unwrap();
    for i in 0..2 {
        ask(&s, "ns1.example.test.", i);
    }
    // A reload with the file in place (a zone change) keeps writing to it.
    assert!(s.reload(Duration::from_secs(10)).contains("reloaded"));
    ask(&s, "ns1.example.test.", 2);
    wait_metric(api, "meridian_query_log_frames_total", 3.0);
    std::fs::rename(&log, &old).unwrap();
    assert!(s.reload(Duration::from_secs(10)).contains("reloaded"));
    let t0 = Instant::now();
    while !log.exists() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no new file");
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..4 {
        ask(&s, "mail.example.test.", 10 + i);
    }
    wait_metric(api, "meridian_query_log_frames_total", 7.0);
    stop(s);
    // Both are whole Frame Streams files: START, frames, STOP.
    let (ct, data) = frames(&std::fs::read(&old).unwrap());
    assert_eq!(ct, b"protobuf:dnstap.Dnstap");
    assert_eq!(data.len(), 3, "the rotated file has the first queries");
    let (ct, data) = frames(&std::fs::read(&log).unwrap());
    assert_eq!(ct, b"protobuf:dnstap.Dnstap");
    assert_eq!(data.len(), 4, "the new file has the later queries");
    for (file, name, n) in [(&old, "ns1", 3), (&log, "mail", 4)] {
        let Some(lines) = read_dnstap(test, file) else {
            return;
        };
        assert_eq!(lines.len(), n, "{lines:#?}");
        let tail = format!(" {name}.example.test/IN/A");
        assert!(lines.iter().all(|l| l.ends_with(&tail)), "{lines:#?}");
    }
}

#[test]
fn reload_applies_a_changed_sink_and_sample() {
    let dir = TempDir::new("query-log-reconfig");
    let (a, b) = (dir.0.join("a.dnstap"), dir.0.join("b.dnstap"));
    let cfg = config(&dir, &format!("query_log = \"file:{}\"", a.display()));
    let api_s = format!("127.0.0.1:{}", free_port());
    let s = Server::start(&cfg, &["--http-listen", &api_s]);
    let api = api_s.parse().unwrap();
    for i in 0..3 {
        ask(&s, "ns1.example.test.", i);
    }
    wait_metric(api, "meridian_query_log_frames_total", 3.0);
    config(
        &dir,
        &format!("query_log = \"file:{}\"\nquery_log_sample = 2", b.display()),
    );
    let line = s.reload(Duration::from_secs(10));
    assert!(line.contains("reloaded"), "{line}");
    assert_eq!(s.log_count("restart to apply"), 0, "asked for a restart");
    let t0 = Instant::now();
    while !b.exists() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no new file");
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..10 {
        ask(&s, "mail.example.test.", 10 + i);
    }
    wait_metric(api, "meridian_query_log_frames_total", 8.0);
    // Turning it off needs a restart, as for `listen`: said, and logging goes on.
    config(&dir, "");
    assert!(s.reload(Duration::from_secs(10)).contains("reloaded"));
    assert_eq!(
        s.log_count("[server] query_log changed (file:"),
        1,
        "{:#?}",
        s.stderr.lock().unwrap()
    );
    stop(s);
    assert_eq!(frames(&std::fs::read(&a).unwrap()).1.len(), 3);
    assert_eq!(
        frames(&std::fs::read(&b).unwrap()).1.len(),
        5,
        "one in 2 of 10 queries"
    );
}

/// A collector that does the handshake and then never reads: meridian's
/// writes stall, time out, and the connection is dropped; answering goes
/// on and shutdown does not hang on the writer.
#[test]
fn stuck_collector_is_dropped_not_waited_for() {
    use std::io::{Read, Write};
    let dir = TempDir::new("query-log-stuck");
    let sock = dir.0.join("dnstap.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Every connection: READY in, ACCEPT out, START in, then silence.
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { return };
            let mut control = || {
                let mut h = [0u8; 8];
                c.read_exact(&mut h).unwrap();
                assert_eq!(u32_at(&h, 0), 0, "not a control frame");
                let mut body = vec![0u8; u32_at(&h, 4) as usize];
                c.read_exact(&mut body).unwrap();
                u32_at(&body, 0)
            };
            assert_eq!(control(), 4, "READY first");
            let ct = b"protobuf:dnstap.Dnstap";
            let mut accept = Vec::new();
            for w in [0, 12 + ct.len() as u32, 1, 1, ct.len() as u32] {
                accept.extend_from_slice(&w.to_be_bytes());
            }
            accept.extend_from_slice(ct);
            c.write_all(&accept).unwrap();
            let mut c2 = c.try_clone().unwrap();
            let mut h = [0u8; 12];
            c2.read_exact(&mut h).unwrap();
            assert_eq!(u32_at(&h, 8), 2, "START after ACCEPT");
            let _ = held_tx.send(c);
        }
    });
    let cfg = config(&dir, &format!("query_log = \"unix:{}\"", sock.display()));
    let s = Server::start(&cfg, &[]);
    assert!(
        s.wait_log(CONNECTED, Duration::from_secs(5)),
        "no handshake"
    );
    let _held = held_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    // Enough frames to fill the socket's buffer many times over.
    let t0 = Instant::now();
    let mut i = 0u16;
    while s.log_count("lost the dnstap collector") == 0 {
        for _ in 0..500 {
            let (_, took) = ask(&s, "ns1.example.test.", i);
            assert!(took < Duration::from_millis(500), "query {i} took {took:?}");
            i = i.wrapping_add(1);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the stuck collector is never dropped ({i} queries): {:#?}",
            s.stderr.lock().unwrap()
        );
    }
    assert!(
        s.log_count("stopped reading") > 0,
        "{:#?}",
        s.stderr.lock().unwrap()
    );
    assert!(s.alive());
    stop(s);
}

/// The process umask (Linux reports it in /proc/self/status), which the
/// server inherits and applies to the mode it asks for.
fn umask() -> u32 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let v = s
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .expect("Umask in /proc/self/status");
    u32::from_str_radix(v.trim(), 8).unwrap()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// F10: the log holds client addresses, so a file meridian creates is
/// 0640 (less what the umask takes away), at start and after a rotation;
/// a file that already exists keeps the mode its owner gave it (logrotate's
/// `create`, a chmod), with a warning when every user can read it.
#[test]
fn log_file_is_created_0640_and_an_existing_mode_is_kept() {
    let dir = TempDir::new("query-log-mode");
    let log = dir.0.join("q.dnstap");
    let cfg = config(&dir, &format!("query_log = \"file:{}\"", log.display()));
    let want = 0o640 & !umask();
    let s = Server::start(&cfg, &[]);
    assert_eq!(mode(&log), want, "created at start: {:o}", mode(&log));
    std::fs::rename(&log, dir.0.join("q.dnstap.1")).unwrap();
    assert!(s.reload(Duration::from_secs(10)).contains("reloaded"));
    let t0 = Instant::now();
    while !log.exists() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no new file");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(mode(&log), want, "created by a rotation: {:o}", mode(&log));
    assert_eq!(s.log_count("readable by every user"), 0);
    stop(s);

    // A file the operator made world-readable stays so, and is named.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    let s = Server::start(&cfg, &[]);
    assert_eq!(mode(&log), 0o644);
    assert!(
        s.wait_log("readable by every user", Duration::from_secs(5)),
        "{:?}",
        s.stderr.lock().unwrap()
    );
    assert!(s.alive());
    stop(s);
}
