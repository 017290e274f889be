//! The HTTP API as a client sees it: label values escaped in /metrics and
//! every line of the exposition in the text format's grammar; the
//! connection cap (idle clients beyond it are closed at once, and /metrics
//! answers again once they are gone); keep-alive. Loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::health_support::*;

/// The pool name as TOML writes it, and as it really is.
const POOL_TOML: &str = r#""c\"x\\y""#;
const POOL: &str = r#"c"x\y"#;

fn start() -> (crate::common::TempDir, crate::common::Server, SocketAddr) {
    let body = format!(
        "[pool.{POOL_TOML}]\nmembers = [\"192.0.2.7\"]\n\n\
         [name.\"odd.health.test\"]\npool = {POOL_TOML}\nttl = 60\n"
    );
    let (dir, cfg) = setup("admin-http", &body);
    let (s, api) = serve(&cfg);
    (dir, s, api)
}

/// A label value as the text format escapes it.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn is_name(s: &str, colon: bool) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_' || (colon && f == ':'))
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || (colon && x == ':'))
}

fn is_value(s: &str) -> bool {
    matches!(s, "+Inf" | "-Inf" | "NaN") || s.parse::<f64>().is_ok()
}

/// Parse the `{...}` of a sample line into (name, unescaped value) pairs;
/// the rest of the line after the closing brace. None if it breaks the grammar.
fn labels(s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut out = Vec::new();
    let mut rest = s.strip_prefix('{')?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Some((out, r));
        }
        let (name, r) = rest.split_once("=\"")?;
        if !is_name(name, false) {
            return None;
        }
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    _ => return None,
                },
                (i, '"') => break i,
                (_, '\n') => return None,
                (_, c) => value.push(c),
            }
        };
        out.push((name.to_string(), value));
        rest = &r[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// One sample: name, labels (unescaped), value.
type Sample = (String, Vec<(String, String)>, String);

/// Check every line of `text` against the text format 0.0.4 grammar, and
/// that each sample belongs to the family of the TYPE line before it.
fn check_exposition(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut family: Option<(String, String)> = None;
    assert!(text.ends_with('\n'), "no final newline");
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# ") {
            let mut w = c.splitn(3, ' ');
            match (w.next(), w.next(), w.next()) {
                (Some("HELP"), Some(n), Some(_)) => assert!(is_name(n, true), "{line}"),
                (Some("TYPE"), Some(n), Some(t)) => {
                    assert!(is_name(n, true), "{line}");
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                        "{line}"
                    );
                    family = Some((n.to_string(), t.to_string()));
                }
                _ => {}
            }
            continue;
        }
        assert!(!line.is_empty(), "empty line in\n{text}");
        let end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = &line[..end];
        assert!(is_name(name, true), "bad name: {line}");
        let (l, rest) = if line[end..].starts_with('{') {
            labels(&line[end..]).unwrap_or_else(|| panic!("bad labels: {line}"))
        } else {
            (Vec::new(), &line[end..])
        };
        let mut v = rest
            .strip_prefix(' ')
            .unwrap_or_else(|| panic!("no space before the value: {line}"))
            .split(' ');
        let value = v.next().unwrap();
        assert!(is_value(value), "bad value: {line}");
        if let Some(ts) = v.next() {
            assert!(ts.parse::<i64>().is_ok(), "bad timestamp: {line}");
        }
        assert!(v.next().is_none(), "trailing text: {line}");
        let (f, t) = family
            .as_ref()
            .unwrap_or_else(|| panic!("sample before any TYPE: {line}"));
        let ok = name == f
            || (t == "histogram"
                && ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name.strip_suffix(s) == Some(f)));
        assert!(ok, "{name} is not of family {f} ({t})");
        samples.push((name.to_string(), l, value.to_string()));
    }
    samples
}

#[test]
fn odd_pool_name_is_escaped_and_every_line_parses() {
    let (_dir, s, api) = start();
    assert_eq!(ask(&s, "odd.health.test.").addrs, set(&["192.0.2.7"]));
    let text = wait_for(Duration::from_secs(5), || {
        metric(
            &metrics(api),
            &format!("meridian_pool_answers_total{{pool=\"{}\"}}", escape(POOL)),
        ) == Some(1.0)
    })
    .map(|_| metrics(api))
    .unwrap_or_else(|| panic!("pool answer not counted:\n{}", metrics(api)));
    let samples = check_exposition(&text);
    // The raw name nowhere: no line may end a label value early.
    assert!(!text.contains(&format!("\"{POOL}\"")), "{text}");
    let pool_label = |n: &str| {
        samples
            .iter()
            .filter(|(name, ..)| name == n)
            .flat_map(|(_, l, _)| l.iter())
            .any(|(k, v)| k == "pool" && v == POOL)
    };
    for n in [
        "meridian_pool_answers_total",
        "meridian_member_up",
        "meridian_member_health_state",
        "meridian_pool_up",
    ] {
        assert!(pool_label(n), "{n} has no series for {POOL:?}:\n{text}");
    }
    // The families the tests and tools read, typed as before.
    for (family, kind) in [
        ("meridian_queries_total", "counter"),
        ("meridian_dropped_total", "counter"),
        ("meridian_pool_answers_total", "counter"),
        ("meridian_reloads_total", "counter"),
        ("meridian_tcp_timeouts_total", "counter"),
        ("meridian_rrl_responses_total", "counter"),
        ("meridian_member_up", "gauge"),
        ("meridian_member_health_state", "gauge"),
        ("meridian_member_override", "gauge"),
        ("meridian_pool_up", "gauge"),
        ("meridian_health_checks_total", "counter"),
        ("meridian_health_check_failures_total", "counter"),
        ("meridian_health_transitions_total", "counter"),
        ("meridian_health_check_duration_seconds", "histogram"),
    ] {
        assert!(
            text.contains(&format!("\n# TYPE {family} {kind}\n")),
            "no {family} {kind} in\n{text}"
        );
    }
    // /status carries the name as JSON.
    let st = status(api);
    assert_eq!(st["pools"][0]["pool"], POOL, "{st}");
    assert_eq!(st["members"][0]["pool"], POOL, "{st}");
}

/// Read one response off a kept-alive connection: (status, body).
fn read_response(r: &mut BufReader<TcpStream>) -> (u16, String) {
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    let code = status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut len = 0;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (code, String::from_utf8(body).unwrap())
}

#[test]
fn keep_alive_serves_several_requests() {
    let (_dir, _s, api) = start();
    let c = TcpStream::connect(api).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    for target in ["/metrics", "/status", "/nope", "/metrics"] {
        write!(w, "GET {target} HTTP/1.1\r\nHost: {api}\r\n\r\n").unwrap();
        let (code, body) = read_response(&mut r);
        match target {
            "/metrics" => {
                assert_eq!(code, 200);
                assert!(body.contains("# TYPE meridian_queries_total counter\n"));
            }
            "/status" => {
                assert_eq!(code, 200);
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert!(v["members"].is_array(), "{body}");
            }
            _ => assert_eq!(code, 404),
        }
    }
    // Two requests in one write (pipelined) are answered in order.
    write!(
        w,
        "GET /status HTTP/1.1\r\nHost: {api}\r\n\r\nPOST /override/192.0.2.7?state=drain HTTP/1.1\r\nHost: {api}\r\nAuthorization: Bearer {WRITE_TOKEN}\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    assert_eq!(read_response(&mut r).0, 200);
    let (code, body) = read_response(&mut r);
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["override"].as_str(), v["entries"].as_u64()),
        (Some("drain"), Some(1))
    );
}

/// Whether the server closed `c` (EOF, or reset) within `wait`.
fn closed_within(c: &mut TcpStream, wait: Duration) -> bool {
    c.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    match c.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Whether the server has closed `c` already (no waiting).
fn is_closed_now(c: &TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let r = match c.peek(&mut b) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    c.set_nonblocking(false).unwrap();
    r
}

#[test]
fn idle_connections_over_the_cap_are_closed_and_metrics_comes_back() {
    let (_dir, _s, api) = start();
    const CAP: usize = meridian::admin::MAX_CONNECTIONS;
    // Let the harness's own probes of the port end and free their slots.
    std::thread::sleep(Duration::from_millis(500));
    let mut conns: Vec<TcpStream> = (0..CAP + 8)
        .map(|_| TcpStream::connect(api).unwrap())
        .collect();
    // CAP of them get a slot, the rest are closed at once.
    std::thread::sleep(Duration::from_millis(500));
    let closed = conns.iter_mut().filter(|c| is_closed_now(c)).count();
    assert_eq!(closed, 8, "over the cap, not closed");
    // Every slot is taken: one more client is turned away.
    let mut extra = TcpStream::connect(api).unwrap();
    assert!(closed_within(&mut extra, Duration::from_secs(2)));

    drop(conns);
    let back = wait_for(Duration::from_secs(5), || metrics_answer(api));
    assert!(
        back.is_some(),
        "/metrics did not answer after the clients left"
    );
}

#[test]
fn an_idle_connection_is_closed_by_the_read_timeout() {
    let (_dir, _s, api) = start();
    let mut c = TcpStream::connect(api).unwrap();
    let t0 = Instant::now();
    assert!(closed_within(&mut c, Duration::from_secs(10)));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(8),
        "closed after {took:?}"
    );
    // And a half-sent request too.
    let mut c = TcpStream::connect(api).unwrap();
    write!(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert!(closed_within(&mut c, Duration::from_secs(10)));
}
