//! Support for the health check tests (tests/health_*.rs): backends on
//! loopback addresses (127.0.0.x) that speak TCP, HTTP or HTTPS and can be
//! stopped, restarted and scripted; configs written to a TempDir with the
//! backends' ports; a small HTTP client for /status, /metrics and the
//! override API; DNS helpers and polling.
//!
//! Every backend listens on 127.0.0.0/8 only; no check leaves the machine.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use tokio_rustls::rustls;

use crate::common::{addrs, free_port, root, scope, Server, TempDir, Q};

/// The default timing of the tests' checks.
pub(crate) const INTERVAL_MS: u64 = 200;
pub(crate) const TIMEOUT_MS: u64 = 100;
pub(crate) const RISE: u64 = 2;
pub(crate) const FALL: u64 = 3;
/// Scheduling slack on a shared 2-core machine.
pub(crate) const SLACK_MS: u64 = 500;

/// A request as the backend saw it; `n` counts requests from 0.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub(crate) path: String,
    pub(crate) host: String,
    pub(crate) n: u64,
}

pub(crate) enum Reply {
    /// Status and body, with Content-Length.
    Status(u16, String),
    /// Status and a chunked body in these pieces.
    Chunked(u16, Vec<String>),
    /// Read the request and never answer (until the backend stops).
    Hang,
    /// Wait `delay`, then answer `code` with these extra headers and body
    /// (Content-Length framing).
    Custom {
        delay: Duration,
        code: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

pub(crate) type Handler = Arc<dyn Fn(&Req) -> Reply + Send + Sync>;

pub(crate) fn handler(f: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

/// 200 "ok" to everything.
pub(crate) fn ok_handler() -> Handler {
    handler(|_| Reply::Status(200, "ok".into()))
}

/// A free port on `ip`, below the ephemeral range like `common::free_port`:
/// a stopped backend's port must not go to another test's `bind(0)` on the
/// same address while the test binary runs its tests at once.
fn any_port(ip: &str) -> SocketAddr {
    let ip = ip.parse().expect("a loopback address");
    loop {
        let a = SocketAddr::new(ip, fastrand::u16(20_000..32_000));
        if TcpListener::bind(a).is_ok() {
            return a;
        }
    }
}

pub(crate) struct Backend {
    pub(crate) addr: SocketAddr,
    handler: Handler,
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: Arc<AtomicBool>,
    hits: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Backend {
    /// An HTTP backend on `ip` (a 127.x address) and a free port.
    pub(crate) fn http(ip: &str, h: Handler) -> Backend {
        Backend::start(any_port(ip), h, None)
    }

    /// An HTTP backend answering 200 "ok" (also fine for tcp checks).
    pub(crate) fn ok(ip: &str) -> Backend {
        Backend::http(ip, ok_handler())
    }

    /// An HTTPS backend with `tls` (see `self_signed`).
    pub(crate) fn https(ip: &str, h: Handler, tls: Arc<rustls::ServerConfig>) -> Backend {
        Backend::start(any_port(ip), h, Some(tls))
    }

    /// A backend that is not running: its address has a port nothing listens on.
    pub(crate) fn stopped(ip: &str) -> Backend {
        let mut b = Backend::ok(ip);
        b.stop();
        b
    }

    fn start(
        addr: SocketAddr,
        handler: Handler,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Backend {
        let mut b = Backend {
            addr,
            handler,
            tls,
            stop: Arc::new(AtomicBool::new(false)),
            hits: Arc::new(AtomicU64::new(0)),
            thread: None,
        };
        b.listen();
        b
    }

    fn listen(&mut self) {
        let t0 = Instant::now();
        let l = loop {
            match TcpListener::bind(self.addr) {
                Ok(l) => break l,
                Err(e) if t0.elapsed() < Duration::from_secs(5) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("backend cannot bind {}: {e}", self.addr),
            }
        };
        self.addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        self.stop = Arc::new(AtomicBool::new(false));
        let stop = self.stop.clone();
        let hits = self.hits.clone();
        let h = self.handler.clone();
        let tls = self.tls.clone();
        self.thread = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        let (stop, hits, h, tls) =
                            (stop.clone(), hits.clone(), h.clone(), tls.clone());
                        std::thread::spawn(move || serve_conn(s, &h, tls, &hits, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }));
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(crate) fn ip(&self) -> String {
        self.addr.ip().to_string()
    }

    /// Requests answered so far.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Stop listening: connections are refused from now on.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Listen again on the same address and port.
    pub(crate) fn restart(&mut self) {
        self.stop();
        self.listen();
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve_conn(
    s: TcpStream,
    h: &Handler,
    tls: Option<Arc<rustls::ServerConfig>>,
    hits: &AtomicU64,
    stop: &AtomicBool,
) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    match tls {
        None => exchange(s, h, hits, stop),
        Some(cfg) => {
            let Ok(conn) = rustls::ServerConnection::new(cfg) else {
                return;
            };
            exchange(rustls::StreamOwned::new(conn, s), h, hits, stop)
        }
    }
}

fn exchange<S: Read + Write>(mut s: S, h: &Handler, hits: &AtomicU64, stop: &AtomicBool) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    let path = text.split_whitespace().nth(1).unwrap_or("").to_string();
    let host = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("host").then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let n = hits.fetch_add(1, Ordering::Relaxed);
    let resp = match h(&Req { path, host, n }) {
        Reply::Status(code, body) => format!(
            "HTTP/1.1 {code} X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Reply::Chunked(code, parts) => {
            let mut r = format!("HTTP/1.1 {code} X\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
            for p in parts {
                r.push_str(&format!("{:x}\r\n{p}\r\n", p.len()));
            }
            r.push_str("0\r\n\r\n");
            r
        }
        Reply::Custom {
            delay,
            code,
            headers,
            body,
        } => {
            std::thread::sleep(delay);
            let mut r = format!("HTTP/1.1 {code} X\r\n");
            for (k, v) in headers {
                r.push_str(&format!("{k}: {v}\r\n"));
            }
            r.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ));
            r
        }
        Reply::Hang => {
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return;
        }
    };
    let _ = s.write_all(resp.as_bytes());
    let _ = s.flush();
}

/// A rustls server config with a fresh self-signed certificate for
/// 127.0.0.1 and localhost (rcgen, ring provider).
pub(crate) fn self_signed() -> Arc<rustls::ServerConfig> {
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let cert = ck.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        ck.signing_key.serialize_der(),
    ));
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    Arc::new(cfg)
}

/// Write the test zone and a config (`body` after the [server] and
/// [[zone]] parts) into a fresh TempDir.
/// The write token every config from [`setup`] accepts (name `tester`),
/// which [`http`] sends.
pub(crate) const WRITE_TOKEN: &str = "tester-write-0123456789abcdef";
/// A read-scope token of the same file (name `scraper`).
pub(crate) const READ_TOKEN: &str = "scraper-read-0123456789abcdef";

/// The token file of the test configs, written private (mode 600).
pub(crate) fn write_tokens(dir: &TempDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.write(
        "api.tokens",
        &format!("# name scope secret\ntester write {WRITE_TOKEN}\nscraper read {READ_TOKEN}\n"),
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

pub(crate) fn setup(tag: &str, body: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    write_tokens(&dir);
    let zone = std::fs::read_to_string(root().join("tests/data/health/health.test.zone")).unwrap();
    dir.write("health.test.zone", &zone);
    let p = dir.write("meridian.toml", &config_text(body));
    (dir, p)
}

pub(crate) fn config_text(body: &str) -> String {
    format!(
        "[server]\nlog = \"info\"\n\n[api]\ntokens = \"api.tokens\"\n\n[[zone]]\norigin = \"health.test.\"\nfile = \"health.test.zone\"\n\n{body}\n"
    )
}

/// A `[check.NAME]` table with the tests' default timing.
pub(crate) fn check_table(name: &str, kind: &str, extra: &str) -> String {
    format!(
        "[check.{name}]\ntype = \"{kind}\"\ninterval_ms = {INTERVAL_MS}\ntimeout_ms = {TIMEOUT_MS}\nrise = {RISE}\nfall = {FALL}\n{extra}\n"
    )
}

/// A member table for `b`, checked on its port, optionally with its own check.
pub(crate) fn member(b: &Backend, check: Option<&str>) -> String {
    match check {
        Some(c) => format!(
            "{{ address = \"{}\", port = {}, check = \"{c}\" }}",
            b.ip(),
            b.port()
        ),
        None => format!("{{ address = \"{}\", port = {} }}", b.ip(), b.port()),
    }
}

/// Start meridian on `config` with the HTTP API on a free loopback port.
/// Retries when the server did not come up (a port taken meanwhile: the
/// harness takes "Address already in use" for its ready line).
pub(crate) fn serve(config: &std::path::Path) -> (Server, SocketAddr) {
    serve_env(config, &[])
}

/// [`serve`] with more environment variables (test hooks).
pub(crate) fn serve_env(config: &std::path::Path, env: &[(&str, &str)]) -> (Server, SocketAddr) {
    for _ in 0..5 {
        let hp = free_port();
        let h: SocketAddr = format!("127.0.0.1:{hp}").parse().unwrap();
        let mut s = Server::start_env(config, &["--http-listen", &h.to_string()], env);
        let up = wait_for(Duration::from_secs(2), || {
            TcpStream::connect(h).is_ok() || !matches!(s.child.try_wait(), Ok(None))
        });
        if up.is_some() && matches!(s.child.try_wait(), Ok(None)) {
            return (s, h);
        }
        eprintln!(
            "meridian did not come up, retrying: {:?}",
            s.stderr.lock().unwrap()
        );
    }
    panic!("meridian did not start with {}", config.display());
}

/// One HTTP request with the write token ([`WRITE_TOKEN`]); (status, body).
pub(crate) fn http(addr: SocketAddr, method: &str, target: &str) -> (u16, String) {
    let auth = format!("Bearer {WRITE_TOKEN}");
    http_with(
        addr,
        method,
        target,
        &[("Host", &addr.to_string()), ("Authorization", &auth)],
    )
}

/// One HTTP request with exactly these headers (besides Content-Length and
/// Connection); (status, body).
pub(crate) fn http_with(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the HTTP API");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "Content-Length: 0\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (code, body)
}

/// Whether `/metrics` answers 200 on a fresh connection (false when the
/// connection cannot be made or is cut: the API may be out of descriptors).
#[allow(dead_code)] // not every test file that includes this module uses it
pub(crate) fn metrics_answer(api: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut c) = std::net::TcpStream::connect(api) else {
        return false;
    };
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = write!(
        c,
        "GET /metrics HTTP/1.1\r\nHost: {api}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

pub(crate) fn status(api: SocketAddr) -> serde_json::Value {
    let (code, body) = http(api, "GET", "/status");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/status is not JSON ({e}): {body}"))
}

/// The `/status` entry of `address` in `pool`.
pub(crate) fn member_status(api: SocketAddr, pool: &str, address: &str) -> serde_json::Value {
    let st = status(api);
    st["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["pool"] == pool && m["address"] == address)
        .cloned()
        .unwrap_or_else(|| panic!("no member {address} in pool {pool}: {st}"))
}

pub(crate) fn metrics(api: SocketAddr) -> String {
    let (code, body) = http(api, "GET", "/metrics");
    assert_eq!(code, 200);
    body
}

/// The value of the sample whose name and labels are exactly `series`.
pub(crate) fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// What a query got: rcode, the addresses (sorted), their TTLs, the ECS
/// scope, and the authority record count.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ans {
    pub(crate) rcode: ResponseCode,
    pub(crate) addrs: Vec<String>,
    pub(crate) ttls: Vec<u32>,
    pub(crate) scope: Option<u8>,
    pub(crate) authority: usize,
}

pub(crate) fn ask_q(s: &Server, q: &Q) -> Ans {
    let m = s.query(q);
    let mut a = addrs(&m);
    a.sort();
    Ans {
        rcode: m.metadata.response_code,
        addrs: a,
        ttls: m.answers.iter().map(|r| r.ttl).collect(),
        scope: scope(&m),
        authority: m.authorities.len(),
    }
}

pub(crate) fn ask(s: &Server, name: &str) -> Ans {
    ask_q(s, &Q::new(name, RecordType::A))
}

pub(crate) fn ask_ecs(s: &Server, name: &str, subnet: &str) -> Ans {
    ask_q(s, &Q::new(name, RecordType::A).ecs(subnet))
}

/// Sorted address list.
pub(crate) fn set(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Poll `f` every 10 ms until it holds; the time it took, or None after `timeout`.
pub(crate) fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    loop {
        if f() {
            return Some(t0.elapsed());
        }
        if t0.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until no member of the config is in state "unknown".
pub(crate) fn settle(api: SocketAddr) {
    let ok = wait_for(Duration::from_secs(5), || {
        status(api)["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["state"] != "unknown")
    });
    assert!(ok.is_some(), "members still unknown: {}", status(api));
}

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// The flapping check of #31's tests: the rise 2 and fall 3,
/// probing every 500 ms with a timeout long enough that a loaded test
/// machine does not add failures of its own (a timeout next to a 503 would
/// make a run of `fall`).
pub(crate) const FLAPPING_CHECK: &str =
    "[check.web]\ntype = \"http\"\ninterval_ms = 500\ntimeout_ms = 450\nrise = 2\nfall = 3\n";

/// An HTTP backend that, while `flap` is set, fails every other request
/// (503 for odd request numbers; the first, number 0, passes): never
/// `fall` failures in a row, so its checks keep it up.
pub(crate) fn flapping(ip: &str, flap: Arc<AtomicBool>) -> Backend {
    Backend::http(
        ip,
        handler(move |r| {
            if flap.load(Ordering::Relaxed) && r.n % 2 == 1 {
                Reply::Status(503, "sick".into())
            } else {
                Reply::Status(200, "ok".into())
            }
        }),
    )
}
