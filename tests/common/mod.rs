//! Test harness: starts the real `meridian` binary on an ephemeral loopback
//! port and talks to it with real DNS packets over UDP and TCP.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hickory_proto::op::{Header, Message, MessageType, Query};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable};
pub(crate) use meridian_wire::build::Opt;
use meridian_wire::name::{from_text, skip_name};
pub(crate) use meridian_wire::QueryBuilder;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_meridian");

/// Tests that need root (namespaces, user switches) skip with `skip` otherwise.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A test that cannot run here says so (`SKIP: test: reason` on stderr) and
/// returns. Under `CI=true`, where root and every tool are provided, a
/// skip is a failure: CI must not pass a test it did not run.
pub(crate) fn skip(test: &str, reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: cannot run in CI: {reason}"
    );
    // Straight to the process's stderr: `eprintln!` in a test that passes
    // is captured by the test harness and never shown, which would make
    // the skip silent. `.ci/run` counts these lines.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "SKIP: {test}: {reason}");
}

/// The Debian package of each external tool a test runs (`.ci/run`
/// installs them all).
const PACKAGES: &[(&str, &str)] = &[
    ("dig", "bind9-dnsutils"),
    ("delv", "bind9-dnsutils"),
    ("unbound", "unbound"),
    ("pdns_recursor", "pdns-recursor"),
    ("knotd", "knot"),
    ("etcd", "etcd-server"),
    ("ip", "iproute2"),
];

/// Is `tool` an executable on PATH?
pub(crate) fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Are all of `tools` on PATH? If not, `test` is skipped visibly (and
/// fails under `CI=true`, where everything is installed): a machine with
/// only a Rust toolchain runs the suite with these tests skipped.
pub(crate) fn need(test: &str, tools: &[&str]) -> bool {
    for &t in tools {
        if !on_path(t) {
            let package = PACKAGES.iter().find(|(n, _)| *n == t).map_or(t, |(_, p)| p);
            skip(
                test,
                &format!("{t} is not installed (Debian package {package}; .ci/run installs it)"),
            );
            return false;
        }
    }
    true
}

/// Repository root (for the bundled example).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn example_config() -> PathBuf {
    root().join("zones/meridian.toml")
}

/// A fresh temporary directory, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), tag)
    }

    /// A fresh directory under `base`.
    pub(crate) fn new_in(base: &std::path::Path, tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = base.join(format!(
            "meridian-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free port on 127.0.0.1 for both UDP and TCP (best effort), below
/// Linux's ephemeral range (32768 up): a port the kernel hands out for
/// `bind(0)` could go to another test's client socket (or dig's) between
/// this choice and the server's bind, and that test binary runs many
/// tests at once.
pub(crate) fn free_port() -> u16 {
    loop {
        let port = fastrand::u16(20_000..32_000);
        let Ok(_u) = UdpSocket::bind(("127.0.0.1", port)) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A running server, killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    pub(crate) stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub(crate) config: PathBuf,
}

impl Server {
    /// Serve the bundled example on a free loopback port.
    pub(crate) fn example() -> Server {
        Server::start(&example_config(), &[])
    }

    /// Serve `config` with extra CLI arguments; retries on a port clash.
    pub(crate) fn start(config: &Path, extra: &[&str]) -> Server {
        Server::start_env(config, extra, &[])
    }

    /// [`Server::start`] with more environment variables (test hooks).
    pub(crate) fn start_env(config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            if let Some(s) = Server::try_start_env(config, &[addr], extra, env) {
                return s;
            }
        }
        panic!("meridian did not start with {}", config.display());
    }

    pub(crate) fn try_start(
        config: &Path,
        listen: &[SocketAddr],
        extra: &[&str],
    ) -> Option<Server> {
        Server::try_start_env(config, listen, extra, &[])
    }

    /// [`Server::try_start`] with more environment variables (test hooks).
    pub(crate) fn try_start_env(
        config: &Path,
        listen: &[SocketAddr],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Option<Server> {
        let mut cmd = Command::new(BIN);
        cmd.envs(env.iter().copied());
        cmd.arg("serve").arg("--config").arg(config);
        for a in listen {
            cmd.arg("--listen").arg(a.to_string());
        }
        if !extra.contains(&"--http-listen") {
            cmd.arg("--http-listen").arg("none");
        }
        cmd.args(extra);
        // One worker unless the test asks for more (pool_rotate_order.rs).
        if !extra.contains(&"--workers") {
            cmd.arg("--workers").arg("1");
        }
        // CI runs as root and fixtures name no `user`: stay root, wherever the
        // checkout is (tests/transport/privileges.rs covers the switch to `user`).
        if !extra.contains(&"--allow-root") {
            cmd.arg("--allow-root");
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn meridian");
        let err = child.stderr.take().unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let l2 = lines.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let ready = line.contains("meridian: ready");
                // Kept before the ready signal, so a test sees its ready line.
                l2.lock().unwrap().push(line);
                if ready {
                    if let Some(t) = tx.take() {
                        let _ = t.send(true);
                    }
                }
            }
            if let Some(t) = tx.take() {
                let _ = t.send(false);
            }
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(true) => Some(Server {
                child,
                addr: listen[0],
                stderr: lines,
                config: config.to_path_buf(),
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("start failed: {:?}", lines.lock().unwrap());
                None
            }
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Send raw bytes over UDP; None on timeout.
    pub(crate) fn udp_raw(&self, req: &[u8]) -> Option<Vec<u8>> {
        udp_exchange(self.addr, req, Duration::from_secs(2))
    }

    /// Send raw bytes over TCP with the length prefix; None if the server closed.
    pub(crate) fn tcp_raw(&self, req: &[u8]) -> Option<Vec<u8>> {
        let mut s = TcpStream::connect(self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        tcp_send(&mut s, req);
        tcp_recv(&mut s)
    }

    pub(crate) fn query(&self, q: &Q) -> Message {
        let resp = self
            .udp_raw(&q.to_bytes())
            .unwrap_or_else(|| panic!("no answer to {q:?}"));
        Message::from_vec(&resp).expect("response parses")
    }

    pub(crate) fn query_tcp(&self, q: &Q) -> Message {
        let resp = self
            .tcp_raw(&q.to_bytes())
            .unwrap_or_else(|| panic!("no TCP answer to {q:?}"));
        Message::from_vec(&resp).expect("response parses")
    }

    pub(crate) fn signal(&self, sig: &str) {
        Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
    }

    /// Wait until a stderr line contains `needle`.
    /// Number of stderr lines containing `needle`.
    pub(crate) fn log_count(&self, needle: &str) -> usize {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Wait until more than `before` stderr lines contain `needle`.
    pub(crate) fn wait_log_count(&self, needle: &str, before: usize, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if self.log_count(needle) > before {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Send SIGHUP and wait (up to `timeout`) for the reload's line, which
    /// is returned: `meridian: reloaded (SIGHUP) ...` or `... reload failed ...`.
    pub(crate) fn reload(&self, timeout: Duration) -> String {
        let done =
            |l: &String| l.contains("meridian: reloaded (SIGHUP)") || l.contains("reload failed");
        let before = self
            .stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| done(l))
            .count();
        self.signal("HUP");
        let t0 = Instant::now();
        loop {
            if let Some(l) = self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .filter(|l| done(l))
                .nth(before)
            {
                return l.clone();
            }
            assert!(t0.elapsed() < timeout, "no reload line within {timeout:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains(needle))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Is the server still answering? (A liveness check after bad input.)
    pub(crate) fn alive(&self) -> bool {
        let m = self.query(&Q::new("www.example.test.", RecordType::A));
        m.metadata.response_code == hickory_proto::op::ResponseCode::NoError
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn udp_exchange(addr: SocketAddr, req: &[u8], timeout: Duration) -> Option<Vec<u8>> {
    let bind = if addr.is_ipv6() {
        "[::1]:0"
    } else {
        "127.0.0.1:0"
    };
    let s = UdpSocket::bind(bind).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.send_to(req, addr).ok()?;
    let mut buf = vec![0u8; 65535];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

pub(crate) fn tcp_send(s: &mut TcpStream, req: &[u8]) {
    let mut v = (req.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(req);
    s.write_all(&v).unwrap();
}

pub(crate) fn tcp_recv(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut l = [0u8; 2];
    s.read_exact(&mut l).ok()?;
    let mut b = vec![0u8; u16::from_be_bytes(l) as usize];
    s.read_exact(&mut b).ok()?;
    Some(b)
}

/// A query to build: name, type, and EDNS/ECS options (a thin wrapper
/// over `meridian_wire::QueryBuilder` taking hickory record types and
/// "a.b.c.d/len" subnets).
#[derive(Clone, Debug)]
pub(crate) struct Q {
    pub(crate) name: String,
    pub(crate) qtype: RecordType,
    pub(crate) id: u16,
    pub(crate) rd: bool,
    pub(crate) edns: Option<u16>,
    pub(crate) ecs: Option<(IpAddr, u8)>,
    pub(crate) dnssec_ok: bool,
}

impl Q {
    pub(crate) fn new(name: &str, qtype: RecordType) -> Q {
        Q {
            name: name.to_string(),
            qtype,
            id: 0x4d52,
            rd: false,
            edns: None,
            ecs: None,
            dnssec_ok: false,
        }
    }

    pub(crate) fn edns(mut self, size: u16) -> Q {
        self.edns = Some(size);
        self
    }

    /// Add ECS (implies EDNS with 1232).
    pub(crate) fn ecs(mut self, subnet: &str) -> Q {
        let (a, l) = subnet.split_once('/').unwrap();
        self.ecs = Some((a.parse().unwrap(), l.parse().unwrap()));
        if self.edns.is_none() {
            self.edns = Some(1232);
        }
        self
    }

    pub(crate) fn rd(mut self) -> Q {
        self.rd = true;
        self
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut b = QueryBuilder::new(&self.name, u16::from(self.qtype)).id(self.id);
        if self.rd {
            b = b.rd();
        }
        if let Some(udp_size) = self.edns {
            b = b.opt(Opt {
                udp_size,
                flags: if self.dnssec_ok { 0x8000 } else { 0 },
                ..Opt::default()
            });
            if let Some((a, l)) = self.ecs {
                b = b.ecs(a, l);
            }
        }
        b.build()
    }
}

/// Addresses in the answer section, in order, as strings.
pub(crate) fn addrs(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            RData::AAAA(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

/// The ECS option of a message as hickory reads it: (family, source,
/// scope, address octets as sent: ceil(source/8)). `walk` checks that
/// re-encoding the OPT gives back the bytes received, so nothing is hidden.
pub(crate) fn ecs_of(m: &Message) -> Option<(u16, u8, u8, Vec<u8>)> {
    match m.edns.as_ref()?.option(EdnsCode::Subnet)? {
        EdnsOption::Subnet(c) => {
            let (family, octets) = match c.addr() {
                IpAddr::V4(a) => (1, a.octets().to_vec()),
                IpAddr::V6(a) => (2, a.octets().to_vec()),
            };
            let n = usize::from(c.source_prefix()).div_ceil(8);
            Some((
                family,
                c.source_prefix(),
                c.scope_prefix(),
                octets[..n].to_vec(),
            ))
        }
        _ => None,
    }
}

/// The ECS option of a raw response (see `ecs_of`).
pub(crate) fn ecs_raw(resp: &[u8]) -> Option<(u16, u8, u8, Vec<u8>)> {
    ecs_of(&Message::from_vec(resp).ok()?)
}

/// The response scope from a parsed message (None: no ECS option).
pub(crate) fn scope(m: &Message) -> Option<u8> {
    ecs_of(m).map(|e| e.2)
}

/// Run `meridian` with arguments and capture (status, stdout, stderr).
pub(crate) fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Is `dig` installed? Tests that drive it fail loudly without it.
pub(crate) fn dig(args: &[&str]) -> String {
    let out = Command::new("dig")
        .args(args)
        .output()
        .expect("dig is required for this test (apt-get install bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A fixture under `tests/data/`.
pub(crate) fn data(file: &str) -> PathBuf {
    root().join("tests/data").join(file)
}

/// Wire form of a text name, case kept ("WwW.Example.TEST." or without the dot).
pub(crate) fn wire(name: &str) -> Vec<u8> {
    from_text(name).unwrap_or_else(|| panic!("not a name: {name:?}"))
}

pub(crate) const NOERROR: u8 = 0;
pub(crate) const FORMERR: u8 = 1;
pub(crate) const SERVFAIL: u8 = 2;
pub(crate) const NXDOMAIN: u8 = 3;
pub(crate) const NOTIMP: u8 = 4;
pub(crate) const REFUSED: u8 = 5;

/// One resource record as hickory reads it, with the bytes hickory
/// normalises kept raw: the CLASS field (an OPT's payload) and the RDATA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rr {
    /// The owner as hickory prints it (case kept).
    pub(crate) owner: String,
    pub(crate) rtype: u16,
    pub(crate) class: u16,
    pub(crate) ttl: u32,
    pub(crate) rdata: Vec<u8>,
}

/// A response walked record by record with hickory's decoders: every count
/// honoured and no byte left over after the last record. Works where
/// `Message::from_vec` refuses a whole message (an empty RDATA).
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    pub(crate) header: Header,
    /// The question exactly as it is in the response.
    pub(crate) question: Vec<u8>,
    pub(crate) answer: Vec<Rr>,
    pub(crate) authority: Vec<Rr>,
    pub(crate) additional: Vec<Rr>,
}

pub(crate) fn walk(p: &[u8]) -> Result<Wire, String> {
    let mut d = BinDecoder::new(p);
    let header = Header::read(&mut d).map_err(|e| format!("header: {e}"))?;
    for _ in 0..header.counts.queries {
        Query::read(&mut d).map_err(|e| format!("question: {e}"))?;
    }
    let question = p[12..d.index()].to_vec();
    let c = header.counts;
    let mut secs = [Vec::new(), Vec::new(), Vec::new()];
    for (s, n) in [c.answers, c.authorities, c.additionals]
        .into_iter()
        .enumerate()
    {
        for _ in 0..n {
            let start = d.index();
            let rec = Record::read(&mut d).map_err(|e| format!("record at {start}: {e}"))?;
            // RDATA starts after the owner and the fixed 10 octets.
            let at = skip_name(p, start).ok_or("owner")? + 10;
            let rdata = p[at..d.index()].to_vec();
            if rec.record_type() == RecordType::OPT {
                let again = rec.data.to_bytes().map_err(|e| e.to_string())?;
                if again != rdata {
                    return Err(format!("OPT RDATA {rdata:?} re-encodes as {again:?}"));
                }
            }
            secs[s].push(Rr {
                owner: rec.name.to_string(),
                rtype: u16::from(rec.record_type()),
                class: u16::from_be_bytes([p[at - 8], p[at - 7]]),
                ttl: rec.ttl,
                rdata,
            });
        }
    }
    if !d.is_empty() {
        return Err(format!("{} bytes left after the last record", d.len()));
    }
    let [answer, authority, additional] = secs;
    Ok(Wire {
        header,
        question,
        answer,
        authority,
        additional,
    })
}

/// A response as a dig user reads it: the raw bytes, the record walk, and
/// hickory's `Message` (records as text: "www.example.test. 300 IN A 192.0.2.1").
#[derive(Debug, Clone)]
pub(crate) struct Resp {
    pub(crate) raw: Vec<u8>,
    pub(crate) wire: Wire,
    pub(crate) msg: Message,
}

impl Resp {
    pub(crate) fn new(raw: Vec<u8>) -> Resp {
        let wire = walk(&raw).unwrap_or_else(|e| panic!("malformed response ({e}): {raw:?}"));
        let msg =
            Message::from_vec(&raw).unwrap_or_else(|e| panic!("hickory rejects ({e}): {raw:?}"));
        Resp { raw, wire, msg }
    }

    pub(crate) fn hdr(&self) -> &Header {
        &self.wire.header
    }

    /// The 4-bit header RCODE (hickory's `Message` merges the OPT's upper bits in).
    pub(crate) fn rcode(&self) -> u8 {
        self.wire.header.response_code.low()
    }

    /// The flags as dig prints them: "qr aa rd".
    pub(crate) fn flags(&self) -> String {
        let h = self.hdr();
        let mut v = Vec::new();
        for (on, s) in [
            (h.message_type == MessageType::Response, "qr"),
            (h.authoritative, "aa"),
            (h.truncation, "tc"),
            (h.recursion_desired, "rd"),
            (h.recursion_available, "ra"),
            (h.authentic_data, "ad"),
            (h.checking_disabled, "cd"),
        ] {
            if on {
                v.push(s);
            }
        }
        v.join(" ")
    }

    pub(crate) fn answer(&self) -> Vec<String> {
        self.msg.answers.iter().map(|r| r.to_string()).collect()
    }

    pub(crate) fn authority(&self) -> Vec<String> {
        self.msg.authorities.iter().map(|r| r.to_string()).collect()
    }

    /// The additional section without the OPT pseudo-record.
    pub(crate) fn additional(&self) -> Vec<String> {
        self.msg.additionals.iter().map(|r| r.to_string()).collect()
    }

    /// The OPT record: (payload, ttl field, rdata); None without one.
    pub(crate) fn opt(&self) -> Option<(u16, u32, Vec<u8>)> {
        let opts: Vec<&Rr> = self
            .wire
            .additional
            .iter()
            .filter(|r| r.rtype == 41)
            .collect();
        assert!(opts.len() <= 1, "more than one OPT in a response");
        opts.first().map(|r| (r.class, r.ttl, r.rdata.clone()))
    }

    /// The ECS option: (family, source, scope, address octets).
    pub(crate) fn ecs(&self) -> Option<(u16, u8, u8, Vec<u8>)> {
        ecs_of(&self.msg)
    }

    /// The ECS scope (panics when there is no ECS).
    pub(crate) fn scope(&self) -> u8 {
        self.ecs()
            .unwrap_or_else(|| panic!("no ECS in response {self:?}"))
            .2
    }

    pub(crate) fn aa(&self) -> bool {
        self.hdr().authoritative
    }

    /// Answer-section A/AAAA addresses, sorted (mode `all` shuffles).
    pub(crate) fn addrs(&self) -> Vec<String> {
        let mut v = addrs(&self.msg);
        v.sort();
        v
    }

    /// How many ECS options the OPT carries.
    pub(crate) fn ecs_count(&self) -> usize {
        self.msg
            .edns
            .as_ref()
            .map_or(0, |e| e.options().get_all(EdnsCode::Subnet).len())
    }
}

impl Server {
    /// Send raw bytes over UDP and read the answer strictly; panics on silence.
    pub(crate) fn ask(&self, req: &[u8]) -> Resp {
        let raw = self
            .udp_raw(req)
            .unwrap_or_else(|| panic!("no UDP answer to {req:?}"));
        Resp::new(raw)
    }

    /// Same over TCP.
    pub(crate) fn ask_tcp(&self, req: &[u8]) -> Resp {
        let raw = self
            .tcp_raw(req)
            .unwrap_or_else(|| panic!("no TCP answer to {req:?}"));
        Resp::new(raw)
    }

    /// A `Q` over UDP, read strictly.
    pub(crate) fn dig(&self, q: &Q) -> Resp {
        self.ask(&q.to_bytes())
    }

    pub(crate) fn dig_tcp(&self, q: &Q) -> Resp {
        self.ask_tcp(&q.to_bytes())
    }

    /// Send raw bytes over UDP and wait `wait` for an answer (None: silence).
    pub(crate) fn udp_maybe(&self, req: &[u8], wait: Duration) -> Option<Vec<u8>> {
        udp_exchange(self.addr, req, wait)
    }

    /// Is the server still answering A for `name` in its own zones (NOERROR)?
    pub(crate) fn alive_in(&self, name: &str) -> bool {
        let m = self.query(&Q::new(name, RecordType::A));
        m.metadata.response_code == hickory_proto::op::ResponseCode::NoError
    }
}

/// Wait for the server to close `c` (EOF or reset); how long that took
/// (None: still open after `limit`, or data arrived instead).
pub(crate) fn closed_within(c: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    c.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 64];
    match c.read(&mut b) {
        Ok(0) => Some(t0.elapsed()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(t0.elapsed()),
        _ => None,
    }
}

/// `meridian dnssec keygen --zone ZONE --algorithm ALG [--ksk]` in `dir`;
/// the base name of the key pair it printed.
pub(crate) fn dnssec_keygen(dir: &Path, zone: &str, alg: &str, ksk: bool) -> String {
    let d = dir.display().to_string();
    let mut args = vec![
        "dnssec",
        "keygen",
        "--zone",
        zone,
        "--algorithm",
        alg,
        "--dir",
        &d,
    ];
    if ksk {
        args.push("--ksk");
    }
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "keygen: {err}");
    out.trim().to_string()
}

/// Start `meridian serve` as the harness does, but without its
/// `--allow-root` (which keeps root), so that `user` applies.
pub(crate) fn start_without_allow_root(cfg: &std::path::Path) -> Server {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .args([
            "--listen",
            &addr.to_string(),
            "--http-listen",
            "none",
            "--workers",
            "1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l2 = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(line);
        }
    });
    let s = Server {
        child,
        addr,
        stderr: lines,
        config: cfg.to_path_buf(),
    };
    assert!(
        s.wait_log("meridian: ready", Duration::from_secs(20)),
        "did not start: {:?}",
        s.stderr.lock().unwrap()
    );
    s
}

/// `promtool check metrics` on `text`: None when promtool is not on PATH,
/// else whether it passed, with its output.
pub(crate) fn promtool_check(text: &str) -> Option<(bool, String)> {
    let path = std::env::var_os("PATH")?;
    let p = std::env::split_paths(&path)
        .map(|d| d.join("promtool"))
        .find(|f| f.is_file())?;
    let mut c = Command::new(p)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    c.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let out = c.wait_with_output().ok()?;
    Some((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}
