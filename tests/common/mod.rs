//! Test harness: starts the real `meridian` binary on an ephemeral loopback
//! port and talks to it with real DNS packets over UDP and TCP.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};

pub const BIN: &str = env!("CARGO_BIN_EXE_meridian");

/// Repository root (for the bundled example).
/// Tests that need root (namespaces, user switches) skip with a note otherwise.
#[allow(dead_code)]
pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn example_config() -> PathBuf {
    root().join("zones/meridian.toml")
}

/// A fresh temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "meridian-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
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

/// A free port on 127.0.0.1 for both UDP and TCP (best effort).
pub fn free_port() -> u16 {
    loop {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = u.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A running server, killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub config: PathBuf,
}

impl Server {
    /// Serve the bundled example on a free loopback port.
    pub fn example() -> Server {
        Server::start(&example_config(), &[])
    }

    /// Serve `config` with extra CLI arguments; retries on a port clash.
    pub fn start(config: &Path, extra: &[&str]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            if let Some(s) = Server::try_start(config, &[addr], extra) {
                return s;
            }
        }
        panic!("meridian did not start with {}", config.display());
    }

    pub fn try_start(config: &Path, listen: &[SocketAddr], extra: &[&str]) -> Option<Server> {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve").arg("--config").arg(config);
        for a in listen {
            cmd.arg("--listen").arg(a.to_string());
        }
        if !extra.contains(&"--http-listen") {
            cmd.arg("--http-listen").arg("none");
        }
        cmd.args(extra);
        cmd.arg("--workers").arg("1");
        // CI runs as root and fixtures name no `user`: stay root, wherever the
        // checkout is (tests/privileges.rs covers the switch to `user`).
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

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Send raw bytes over UDP; None on timeout.
    pub fn udp_raw(&self, req: &[u8]) -> Option<Vec<u8>> {
        udp_exchange(self.addr, req, Duration::from_secs(2))
    }

    /// Send raw bytes over TCP with the length prefix; None if the server closed.
    pub fn tcp_raw(&self, req: &[u8]) -> Option<Vec<u8>> {
        let mut s = TcpStream::connect(self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        tcp_send(&mut s, req);
        tcp_recv(&mut s)
    }

    pub fn query(&self, q: &Q) -> Message {
        let resp = self
            .udp_raw(&q.to_bytes())
            .unwrap_or_else(|| panic!("no answer to {q:?}"));
        Message::from_vec(&resp).expect("response parses")
    }

    pub fn query_tcp(&self, q: &Q) -> Message {
        let resp = self
            .tcp_raw(&q.to_bytes())
            .unwrap_or_else(|| panic!("no TCP answer to {q:?}"));
        Message::from_vec(&resp).expect("response parses")
    }

    pub fn signal(&self, sig: &str) {
        Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
    }

    /// Wait until a stderr line contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
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
    pub fn alive(&self) -> bool {
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

pub fn udp_exchange(addr: SocketAddr, req: &[u8], timeout: Duration) -> Option<Vec<u8>> {
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

pub fn tcp_send(s: &mut TcpStream, req: &[u8]) {
    let mut v = (req.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(req);
    s.write_all(&v).unwrap();
}

pub fn tcp_recv(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut l = [0u8; 2];
    s.read_exact(&mut l).ok()?;
    let mut b = vec![0u8; u16::from_be_bytes(l) as usize];
    s.read_exact(&mut b).ok()?;
    Some(b)
}

/// A query to build: name, type, and EDNS/ECS options.
#[derive(Clone, Debug)]
pub struct Q {
    pub name: String,
    pub qtype: RecordType,
    pub id: u16,
    pub rd: bool,
    pub edns: Option<u16>,
    pub ecs: Option<(IpAddr, u8)>,
    pub dnssec_ok: bool,
}

impl Q {
    pub fn new(name: &str, qtype: RecordType) -> Q {
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

    pub fn edns(mut self, size: u16) -> Q {
        self.edns = Some(size);
        self
    }

    /// Add ECS (implies EDNS with 1232).
    pub fn ecs(mut self, subnet: &str) -> Q {
        let (a, l) = subnet.split_once('/').unwrap();
        self.ecs = Some((a.parse().unwrap(), l.parse().unwrap()));
        if self.edns.is_none() {
            self.edns = Some(1232);
        }
        self
    }

    pub fn rd(mut self) -> Q {
        self.rd = true;
        self
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut m = Message::new(self.id, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = self.rd;
        m.add_query(Query::query(
            Name::from_ascii(&self.name).unwrap(),
            self.qtype,
        ));
        if let Some(size) = self.edns {
            let mut e = Edns::new();
            e.set_max_payload(size);
            e.set_dnssec_ok(self.dnssec_ok);
            if let Some((a, l)) = self.ecs {
                e.options_mut()
                    .insert(EdnsOption::Subnet(ClientSubnet::new(a, l, 0)));
            }
            m.set_edns(e);
        }
        m.to_vec().unwrap()
    }
}

/// Addresses in the answer section, in order, as strings.
pub fn addrs(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            RData::AAAA(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

/// The ECS option of a response: (family, source, scope, address octets).
pub fn ecs_raw(resp: &[u8]) -> Option<(u16, u8, u8, Vec<u8>)> {
    let opts = opt_options(resp)?;
    let mut i = 0;
    while i + 4 <= opts.len() {
        let code = u16::from_be_bytes([opts[i], opts[i + 1]]);
        let len = u16::from_be_bytes([opts[i + 2], opts[i + 3]]) as usize;
        let body = &opts[i + 4..i + 4 + len];
        if code == 8 {
            return Some((
                u16::from_be_bytes([body[0], body[1]]),
                body[2],
                body[3],
                body[4..].to_vec(),
            ));
        }
        i += 4 + len;
    }
    None
}

/// The response scope from a parsed message (None: no ECS option).
pub fn scope(m: &Message) -> Option<u8> {
    let e = m.edns.as_ref()?;
    match e.option(EdnsCode::Subnet)? {
        EdnsOption::Subnet(c) => Some(c.scope_prefix()),
        _ => None,
    }
}

/// Raw OPT RDATA of a response (walks the wire format directly).
pub fn opt_options(resp: &[u8]) -> Option<Vec<u8>> {
    let (_, _, rdata) = opt_record(resp)?;
    Some(rdata)
}

/// The OPT record: (class = payload, ttl field, rdata).
pub fn opt_record(resp: &[u8]) -> Option<(u16, u32, Vec<u8>)> {
    let counts: Vec<u16> = (0..4)
        .map(|k| u16::from_be_bytes([resp[4 + 2 * k], resp[5 + 2 * k]]))
        .collect();
    let mut i = 12;
    for _ in 0..counts[0] {
        i = skip_name(resp, i)? + 4;
    }
    let mut found = None;
    for (s, &count) in counts.iter().enumerate().skip(1) {
        for _ in 0..count {
            i = skip_name(resp, i)?;
            let t = u16::from_be_bytes([resp[i], resp[i + 1]]);
            let class = u16::from_be_bytes([resp[i + 2], resp[i + 3]]);
            let ttl = u32::from_be_bytes([resp[i + 4], resp[i + 5], resp[i + 6], resp[i + 7]]);
            let len = u16::from_be_bytes([resp[i + 8], resp[i + 9]]) as usize;
            if t == 41 && s == 3 {
                found = Some((class, ttl, resp[i + 10..i + 10 + len].to_vec()));
            }
            i += 10 + len;
        }
    }
    found
}

fn skip_name(p: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let l = *p.get(i)?;
        if l == 0 {
            return Some(i + 1);
        }
        if l & 0xC0 == 0xC0 {
            return Some(i + 2);
        }
        i += 1 + l as usize;
    }
}

/// Run `meridian` with arguments and capture (status, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Is `dig` installed? Tests that drive it fail loudly without it.
pub fn dig(args: &[&str]) -> String {
    let out = Command::new("dig")
        .args(args)
        .output()
        .expect("dig is required for this test (apt-get install bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout).to_string()
}

// ---------------------------------------------------------------------------
// Core DNS behaviour helpers (flags, negative, cname, wildcard, delegation,
// errors, edns, truncation, tcp, malformed, zone_types tests): raw queries
// built byte by byte, and responses read straight from the wire so that
// counts, flags, TTLs and trailing bytes are checked exactly.
// ---------------------------------------------------------------------------

/// A fixture under `tests/data/`.
pub fn data(file: &str) -> PathBuf {
    root().join("tests/data").join(file)
}

/// Wire form of a text name, case kept ("WwW.Example.TEST." or without the dot).
pub fn wire(name: &str) -> Vec<u8> {
    let mut v = Vec::new();
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        v.push(label.len() as u8);
        v.extend_from_slice(label.as_bytes());
    }
    v.push(0);
    v
}

/// A query with one question, built by hand: `flags` is the raw flag word
/// (0x0100 = RD), so opcodes, classes and odd bits can be anything.
pub fn raw_query(id: u16, flags: u16, qname: &str, qtype: u16, qclass: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    v.extend_from_slice(&wire(qname));
    v.extend_from_slice(&qtype.to_be_bytes());
    v.extend_from_slice(&qclass.to_be_bytes());
    v
}

/// An OPT pseudo-record (RFC 6891 §6.1.2) owned by the root.
pub fn opt_rr(payload: u16, ext_rcode: u8, version: u8, flags: u16, options: &[u8]) -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&41u16.to_be_bytes());
    v.extend_from_slice(&payload.to_be_bytes());
    v.extend_from_slice(&[ext_rcode, version]);
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&(options.len() as u16).to_be_bytes());
    v.extend_from_slice(options);
    v
}

/// Append a record to the additional section (ARCOUNT + 1).
pub fn with_additional(mut q: Vec<u8>, rr: &[u8]) -> Vec<u8> {
    let ar = u16::from_be_bytes([q[10], q[11]]) + 1;
    q[10..12].copy_from_slice(&ar.to_be_bytes());
    q.extend_from_slice(rr);
    q
}

/// One EDNS option: code, length, body.
pub fn edns_option(code: u16, body: &[u8]) -> Vec<u8> {
    let mut v = code.to_be_bytes().to_vec();
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// The header of a response, field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hdr {
    pub id: u16,
    pub qr: bool,
    pub opcode: u8,
    pub aa: bool,
    pub tc: bool,
    pub rd: bool,
    pub ra: bool,
    /// The Z bit and AD, CD.
    pub z: bool,
    pub ad: bool,
    pub cd: bool,
    /// The 4-bit header RCODE.
    pub rcode: u8,
    pub qd: u16,
    pub an: u16,
    pub ns: u16,
    pub ar: u16,
}

pub fn hdr(resp: &[u8]) -> Hdr {
    assert!(resp.len() >= 12, "response shorter than a header: {resp:?}");
    let f = u16::from_be_bytes([resp[2], resp[3]]);
    let c = |k: usize| u16::from_be_bytes([resp[4 + 2 * k], resp[5 + 2 * k]]);
    Hdr {
        id: u16::from_be_bytes([resp[0], resp[1]]),
        qr: f & 0x8000 != 0,
        opcode: ((f >> 11) & 0xF) as u8,
        aa: f & 0x0400 != 0,
        tc: f & 0x0200 != 0,
        rd: f & 0x0100 != 0,
        ra: f & 0x0080 != 0,
        z: f & 0x0040 != 0,
        ad: f & 0x0020 != 0,
        cd: f & 0x0010 != 0,
        rcode: (f & 0xF) as u8,
        qd: c(0),
        an: c(1),
        ns: c(2),
        ar: c(3),
    }
}

impl Hdr {
    /// The flags as dig prints them: "qr aa rd".
    pub fn flags(&self) -> String {
        let mut v = Vec::new();
        for (on, s) in [
            (self.qr, "qr"),
            (self.aa, "aa"),
            (self.tc, "tc"),
            (self.rd, "rd"),
            (self.ra, "ra"),
            (self.ad, "ad"),
            (self.cd, "cd"),
        ] {
            if on {
                v.push(s);
            }
        }
        v.join(" ")
    }
}

pub const NOERROR: u8 = 0;
pub const FORMERR: u8 = 1;
pub const SERVFAIL: u8 = 2;
pub const NXDOMAIN: u8 = 3;
pub const NOTIMP: u8 = 4;
pub const REFUSED: u8 = 5;

/// One resource record read from the wire (owner decompressed, case kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRr {
    pub owner: String,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    /// Offset of the RDATA in the message and the raw RDATA.
    pub rdata_at: usize,
    pub rdata: Vec<u8>,
}

/// A response walked strictly: every count is honoured, pointers go
/// backwards, and no byte is left over after the last record.
#[derive(Debug, Clone)]
pub struct Wire {
    pub hdr: Hdr,
    /// The question exactly as it is in the response.
    pub question: Vec<u8>,
    pub answer: Vec<WireRr>,
    pub authority: Vec<WireRr>,
    pub additional: Vec<WireRr>,
}

/// Read a (possibly compressed) name at `i`: (text with case kept, end of the name in place).
pub fn read_name(p: &[u8], mut i: usize) -> Result<(String, usize), String> {
    let mut out = String::new();
    let mut end = None;
    let mut hops = 0;
    loop {
        let l = *p.get(i).ok_or(format!("name runs past the end at {i}"))? as usize;
        if l & 0xC0 == 0xC0 {
            let ptr = (u16::from_be_bytes([l as u8, *p.get(i + 1).ok_or("cut pointer")?]) & 0x3FFF)
                as usize;
            if ptr >= i {
                return Err(format!("forward pointer at {i}"));
            }
            end.get_or_insert(i + 2);
            hops += 1;
            if hops > 64 {
                return Err("pointer loop".into());
            }
            i = ptr;
            continue;
        }
        if l & 0xC0 != 0 {
            return Err(format!("bad label type at {i}"));
        }
        if l == 0 {
            if out.is_empty() {
                out.push('.');
            }
            return Ok((out, end.unwrap_or(i + 1)));
        }
        let label = p.get(i + 1..i + 1 + l).ok_or("label runs past the end")?;
        for &b in label {
            if b.is_ascii_graphic() && b != b'.' && b != b'\\' {
                out.push(b as char);
            } else {
                out.push_str(&format!("\\{b:03}"));
            }
        }
        out.push('.');
        i += 1 + l;
    }
}

pub fn parse_wire(p: &[u8]) -> Result<Wire, String> {
    if p.len() < 12 {
        return Err(format!("{} bytes: no header", p.len()));
    }
    let h = hdr(p);
    let mut i = 12;
    for _ in 0..h.qd {
        i = read_name(p, i)?.1 + 4;
    }
    if i > p.len() {
        return Err("question runs past the end".into());
    }
    let question = p[12..i].to_vec();
    let mut secs = [Vec::new(), Vec::new(), Vec::new()];
    for (s, n) in [h.an, h.ns, h.ar].into_iter().enumerate() {
        for _ in 0..n {
            let (owner, j) = read_name(p, i)?;
            let f = p.get(j..j + 10).ok_or("record header runs past the end")?;
            let rdlen = u16::from_be_bytes([f[8], f[9]]) as usize;
            let rdata = p
                .get(j + 10..j + 10 + rdlen)
                .ok_or("rdata runs past the end")?
                .to_vec();
            secs[s].push(WireRr {
                owner,
                rtype: u16::from_be_bytes([f[0], f[1]]),
                class: u16::from_be_bytes([f[2], f[3]]),
                ttl: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
                rdata_at: j + 10,
                rdata,
            });
            i = j + 10 + rdlen;
        }
    }
    if i != p.len() {
        return Err(format!("{} bytes left after the last record", p.len() - i));
    }
    let [answer, authority, additional] = secs;
    Ok(Wire {
        hdr: h,
        question,
        answer,
        authority,
        additional,
    })
}

/// A response as a dig user reads it: the raw bytes, the strict wire walk,
/// and the records as text ("www.example.test. 300 IN A 192.0.2.1").
#[derive(Debug, Clone)]
pub struct Resp {
    pub raw: Vec<u8>,
    pub wire: Wire,
    pub msg: Message,
}

impl Resp {
    pub fn new(raw: Vec<u8>) -> Resp {
        let wire = parse_wire(&raw).unwrap_or_else(|e| panic!("malformed response ({e}): {raw:?}"));
        let msg =
            Message::from_vec(&raw).unwrap_or_else(|e| panic!("hickory rejects ({e}): {raw:?}"));
        Resp { raw, wire, msg }
    }

    pub fn hdr(&self) -> Hdr {
        self.wire.hdr
    }

    pub fn rcode(&self) -> u8 {
        self.wire.hdr.rcode
    }

    pub fn flags(&self) -> String {
        self.wire.hdr.flags()
    }

    pub fn answer(&self) -> Vec<String> {
        self.msg.answers.iter().map(|r| r.to_string()).collect()
    }

    pub fn authority(&self) -> Vec<String> {
        self.msg.authorities.iter().map(|r| r.to_string()).collect()
    }

    /// The additional section without the OPT pseudo-record.
    pub fn additional(&self) -> Vec<String> {
        self.msg.additionals.iter().map(|r| r.to_string()).collect()
    }

    /// The OPT record: (payload, ttl field, rdata); None without one.
    pub fn opt(&self) -> Option<(u16, u32, Vec<u8>)> {
        let opts: Vec<&WireRr> = self
            .wire
            .additional
            .iter()
            .filter(|r| r.rtype == 41)
            .collect();
        assert!(opts.len() <= 1, "more than one OPT in a response");
        opts.first().map(|r| (r.class, r.ttl, r.rdata.clone()))
    }
}

impl Server {
    /// Send raw bytes over UDP and read the answer strictly; panics on silence.
    pub fn ask(&self, req: &[u8]) -> Resp {
        let raw = self
            .udp_raw(req)
            .unwrap_or_else(|| panic!("no UDP answer to {req:?}"));
        Resp::new(raw)
    }

    /// Same over TCP.
    pub fn ask_tcp(&self, req: &[u8]) -> Resp {
        let raw = self
            .tcp_raw(req)
            .unwrap_or_else(|| panic!("no TCP answer to {req:?}"));
        Resp::new(raw)
    }

    /// A `Q` over UDP, read strictly.
    pub fn dig(&self, q: &Q) -> Resp {
        self.ask(&q.to_bytes())
    }

    pub fn dig_tcp(&self, q: &Q) -> Resp {
        self.ask_tcp(&q.to_bytes())
    }

    /// Send raw bytes over UDP and wait `wait` for an answer (None: silence).
    pub fn udp_maybe(&self, req: &[u8], wait: Duration) -> Option<Vec<u8>> {
        udp_exchange(self.addr, req, wait)
    }
}

impl Server {
    /// Is the server still answering A for `name` in its own zones (NOERROR)?
    pub fn alive_in(&self, name: &str) -> bool {
        let m = self.query(&Q::new(name, RecordType::A));
        m.metadata.response_code == hickory_proto::op::ResponseCode::NoError
    }
}

/// Wait for the server to close `c` (EOF or reset); how long that took
/// (None: still open after `limit`, or data arrived instead).
pub fn closed_within(c: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    c.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 64];
    match c.read(&mut b) {
        Ok(0) => Some(t0.elapsed()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(t0.elapsed()),
        _ => None,
    }
}
