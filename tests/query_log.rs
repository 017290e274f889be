//! Issue #15: the dnstap query log. With `query_log = "file:PATH"` every
//! (sampled) answered query is written as one dnstap `AUTH_RESPONSE`
//! message holding the query and the response, in Frame Streams framing
//! (START, data frames, STOP on shutdown), readable by BIND's `dnstap-read`.

mod common;
mod health_support;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
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
    if std::process::Command::new("dnstap-read")
        .arg("-h")
        .output()
        .is_err()
    {
        skip(
            "query_log dnstap-read",
            "dnstap-read (bind9-dnsutils) is not installed",
        );
        return;
    }
    let out = std::process::Command::new("dnstap-read")
        .arg(log)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dnstap-read failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
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
        let text = health_support::metrics(api);
        health_support::metric(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
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
            &["bad query_log", "file:PATH"][..],
        ),
        ("query_log = \"file:\"", &["bad query_log"][..]),
        (
            "query_log = \"unix:/run/x.sock\"",
            &["unix:", "not built"][..],
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
}
