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
        if !extra.iter().any(|a| *a == "--http-listen") {
            cmd.arg("--http-listen").arg("none");
        }
        cmd.args(extra);
        cmd.arg("--workers").arg("1");
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
                if line.contains("ready") {
                    if let Some(t) = tx.take() {
                        let _ = t.send(true);
                    }
                }
                l2.lock().unwrap().push(line);
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
            if self.stderr.lock().unwrap().iter().any(|l| l.contains(needle)) {
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
    let bind = if addr.is_ipv6() { "[::1]:0" } else { "127.0.0.1:0" };
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
        m.add_query(Query::query(Name::from_ascii(&self.name).unwrap(), self.qtype));
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
    for s in 1..4 {
        for _ in 0..counts[s] {
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
