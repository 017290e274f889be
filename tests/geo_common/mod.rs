//! Shared by tests/geo_*.rs and tests/ecs_*.rs: raw ECS queries built byte
//! by byte, responses read straight from the wire, `dig +subnet` runs, a
//! seeded xorshift generator, and the `mkgeo` database builder.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::{root, Server};

pub const A: u16 = 1;
pub const NS: u16 = 2;
pub const CNAME: u16 = 5;
pub const SOA: u16 = 6;
pub const TXT: u16 = 16;
pub const MX: u16 = 15;
pub const AAAA: u16 = 28;
pub const OPT: u16 = 41;

pub const NOERROR: u8 = 0;
pub const FORMERR: u8 = 1;
pub const SERVFAIL: u8 = 2;
pub const NXDOMAIN: u8 = 3;
pub const NOTIMP: u8 = 4;
pub const REFUSED: u8 = 5;

/// A fixture under tests/data/geo/.
pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/data/geo").join(name)
}

/// The geo/ECS fixture config (tests/data/geo/rules.toml).
pub fn rules_config() -> PathBuf {
    fixture("rules.toml")
}

/// Pool addresses of tests/data/geo/rules.toml, by pool name.
pub fn pool4(name: &str) -> Vec<String> {
    let v: &[&str] = match name {
        "na" => &["192.0.2.1", "192.0.2.11"],
        "eu" => &["192.0.2.2"],
        "as" => &["192.0.2.3"],
        "sa" => &["192.0.2.4"],
        "oc" => &["192.0.2.5"],
        "def" => &["192.0.2.9"],
        "src4" => &["192.0.2.40"],
        "src6" => &["192.0.2.60"],
        "net24" => &["192.0.2.24"],
        "net16" => &["192.0.2.16"],
        "sub" => &["192.0.2.50"],
        "country" => &["192.0.2.51"],
        "cont" => &["192.0.2.52"],
        "one" => &["192.0.2.77"],
        _ => panic!("no pool {name}"),
    };
    v.iter().map(|s| s.to_string()).collect()
}

/// IPv6 members of a rules.toml pool.
pub fn pool6(name: &str) -> Vec<String> {
    pool4(name)
        .iter()
        .map(|a| {
            let last = a.rsplit('.').next().unwrap();
            format!("2001:db8::{last}")
        })
        .collect()
}

/// The bundled example's pools (zones/meridian.toml), IPv4 and IPv6.
pub fn example_pool(name: &str, v6: bool) -> Vec<String> {
    let v: &[&str] = match (name, v6) {
        ("na", false) => &["192.0.2.100", "192.0.2.101"],
        ("eu", false) => &["198.51.100.100", "198.51.100.101"],
        ("as", false) => &["203.0.113.100", "203.0.113.101"],
        ("sa", false) => &["203.0.113.200"],
        ("default", false) => &["192.0.2.200"],
        ("na", true) => &["2001:db8:100::1"],
        ("eu", true) => &["2001:db8:200::1"],
        ("as", true) => &["2001:db8:300::1"],
        ("sa", true) => &["2001:db8:400::1"],
        ("default", true) => &["2001:db8:500::1"],
        _ => panic!("no example pool {name}"),
    };
    v.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------
// Raw packets
// ---------------------------------------------------------------------------

/// Wire form of a text name (the shared harness's `wire`).
pub use crate::common::wire as wire_name;

/// A query; `options` = the OPT RDATA (None: no OPT record at all).
pub fn query(id: u16, name: &str, qtype: u16, options: Option<&[u8]>) -> Vec<u8> {
    query_class(id, name, qtype, 1, options)
}

pub fn query_class(
    id: u16,
    name: &str,
    qtype: u16,
    qclass: u16,
    options: Option<&[u8]>,
) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0]);
    v.push(options.is_some() as u8);
    v.extend_from_slice(&wire_name(name));
    v.extend_from_slice(&qtype.to_be_bytes());
    v.extend_from_slice(&qclass.to_be_bytes());
    if let Some(o) = options {
        v.push(0);
        v.extend_from_slice(&OPT.to_be_bytes());
        v.extend_from_slice(&1232u16.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 0]);
        v.extend_from_slice(&(o.len() as u16).to_be_bytes());
        v.extend_from_slice(o);
    }
    v
}

/// An ECS option (code 8) with every field given, valid or not.
pub fn ecs_option(family: u16, source: u8, scope: u8, addr: &[u8]) -> Vec<u8> {
    let mut v = 8u16.to_be_bytes().to_vec();
    v.extend_from_slice(&((4 + addr.len()) as u16).to_be_bytes());
    v.extend_from_slice(&family.to_be_bytes());
    v.push(source);
    v.push(scope);
    v.extend_from_slice(addr);
    v
}

/// (FAMILY, ADDRESS octets) of `addr/len` as a client sends them: the
/// address masked to `len`, ceil(len/8) octets.
pub fn ecs_fields(addr: IpAddr, len: u8) -> (u16, Vec<u8>) {
    let (family, bytes) = match addr {
        IpAddr::V4(a) => (1, a.octets().to_vec()),
        IpAddr::V6(a) => (2, a.octets().to_vec()),
    };
    let n = (len as usize).div_ceil(8);
    let mut b = bytes[..n].to_vec();
    if !len.is_multiple_of(8) {
        b[n - 1] &= 0xFFu8 << (8 - len % 8);
    }
    (family, b)
}

/// A valid ECS option for `addr/len` (address masked to `len`).
pub fn ecs_for(addr: IpAddr, len: u8) -> Vec<u8> {
    let (f, b) = ecs_fields(addr, len);
    ecs_option(f, len, 0, &b)
}

/// A query carrying a valid ECS option for `addr/len`.
pub fn ecs_query(name: &str, qtype: u16, addr: IpAddr, len: u8) -> Vec<u8> {
    query(0x6765, name, qtype, Some(&ecs_for(addr, len)))
}

/// A resource record read from a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rr {
    pub owner: String,
    pub rtype: u16,
    pub ttl: u32,
    pub rdata: Vec<u8>,
}

/// A response read from the wire.
#[derive(Debug, Clone)]
pub struct Resp {
    pub raw: Vec<u8>,
    pub id: u16,
    pub flags: u16,
    /// Header RCODE (4 bits).
    pub rcode: u8,
    pub qd: u16,
    /// The echoed question: (name bytes as received, type, class).
    pub question: Option<Vec<u8>>,
    pub answer: Vec<Rr>,
    pub authority: Vec<Rr>,
    pub additional: Vec<Rr>,
    /// The OPT RDATA, if an OPT record came back.
    pub opt: Option<Vec<u8>>,
    /// The ECS option: (family, source, scope, address octets).
    pub ecs: Option<(u16, u8, u8, Vec<u8>)>,
    /// Number of ECS options in the OPT.
    pub ecs_count: usize,
}

impl Resp {
    pub fn aa(&self) -> bool {
        self.flags & 0x0400 != 0
    }

    pub fn tc(&self) -> bool {
        self.flags & 0x0200 != 0
    }

    /// The response's ECS scope (panics when there is no ECS).
    pub fn scope(&self) -> u8 {
        self.ecs
            .as_ref()
            .unwrap_or_else(|| panic!("no ECS in response {self:?}"))
            .2
    }

    /// Answer-section A/AAAA addresses, sorted (mode `all` shuffles).
    pub fn addrs(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .answer
            .iter()
            .filter_map(|r| match (r.rtype, r.rdata.len()) {
                (A, 4) => {
                    Some(Ipv4Addr::new(r.rdata[0], r.rdata[1], r.rdata[2], r.rdata[3]).to_string())
                }
                (AAAA, 16) => {
                    let b: [u8; 16] = r.rdata[..].try_into().unwrap();
                    Some(Ipv6Addr::from(b).to_string())
                }
                _ => None,
            })
            .collect();
        v.sort();
        v
    }
}

fn read_name(p: &[u8], mut i: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut end = None;
    let mut hops = 0;
    loop {
        let l = *p.get(i)? as usize;
        if l == 0 {
            return Some((
                if out.is_empty() { ".".into() } else { out },
                end.unwrap_or(i + 1),
            ));
        }
        if l & 0xC0 == 0xC0 {
            let ptr = ((l & 0x3F) << 8) | *p.get(i + 1)? as usize;
            end.get_or_insert(i + 2);
            hops += 1;
            if hops > 64 || ptr >= i {
                return None;
            }
            i = ptr;
            continue;
        }
        out.push_str(&String::from_utf8_lossy(p.get(i + 1..i + 1 + l)?).to_ascii_lowercase());
        out.push('.');
        i += 1 + l;
    }
}

/// Parse a response strictly: every count honoured, nothing left over.
pub fn parse(raw: &[u8]) -> Resp {
    try_parse(raw).unwrap_or_else(|| panic!("malformed response {raw:?}"))
}

pub fn try_parse(raw: &[u8]) -> Option<Resp> {
    let u16at = |i: usize| Some(u16::from_be_bytes([*raw.get(i)?, *raw.get(i + 1)?]));
    let flags = u16at(2)?;
    let counts: Vec<u16> = (0..4).map(|k| u16at(4 + 2 * k)).collect::<Option<_>>()?;
    let mut i = 12;
    let mut question = None;
    for _ in 0..counts[0] {
        let start = i;
        let (_, e) = read_name(raw, i)?;
        i = e + 4;
        question = Some(raw.get(start..i)?.to_vec());
    }
    let mut sections: [Vec<Rr>; 3] = Default::default();
    let mut opt = None;
    for (s, sec) in sections.iter_mut().enumerate() {
        for _ in 0..counts[s + 1] {
            let (owner, e) = read_name(raw, i)?;
            i = e;
            let rtype = u16at(i)?;
            let ttl = u32::from_be_bytes(raw.get(i + 4..i + 8)?.try_into().ok()?);
            let len = u16at(i + 8)? as usize;
            let rdata = raw.get(i + 10..i + 10 + len)?.to_vec();
            i += 10 + len;
            if rtype == OPT {
                if s != 2 || opt.is_some() {
                    return None;
                }
                opt = Some(rdata.clone());
            }
            sec.push(Rr {
                owner,
                rtype,
                ttl,
                rdata,
            });
        }
    }
    if i != raw.len() {
        return None;
    }
    let mut ecs = None;
    let mut ecs_count = 0;
    if let Some(o) = &opt {
        let mut j = 0;
        while j < o.len() {
            let code = u16::from_be_bytes([*o.get(j)?, *o.get(j + 1)?]);
            let len = u16::from_be_bytes([*o.get(j + 2)?, *o.get(j + 3)?]) as usize;
            let body = o.get(j + 4..j + 4 + len)?;
            if code == 8 {
                ecs_count += 1;
                if body.len() < 4 {
                    return None;
                }
                ecs = Some((
                    u16::from_be_bytes([body[0], body[1]]),
                    body[2],
                    body[3],
                    body[4..].to_vec(),
                ));
            }
            j += 4 + len;
        }
    }
    let [answer, authority, additional] = sections;
    Some(Resp {
        raw: raw.to_vec(),
        id: u16at(0)?,
        flags,
        rcode: (flags & 0xF) as u8,
        qd: counts[0],
        question,
        answer,
        authority,
        additional,
        opt,
        ecs,
        ecs_count,
    })
}

/// One UDP socket for many sequential queries to one server.
pub struct Client {
    sock: UdpSocket,
    server: SocketAddr,
    id: u16,
    buf: Vec<u8>,
}

impl Client {
    pub fn new(server: SocketAddr) -> Client {
        let bind = if server.is_ipv6() {
            "[::1]:0"
        } else {
            "127.0.0.1:0"
        };
        let sock = UdpSocket::bind(bind).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Client {
            sock,
            server,
            id: 1,
            buf: vec![0; 65535],
        }
    }

    /// Send raw bytes; None on timeout. The ID is rewritten per query and
    /// stray late answers are skipped.
    pub fn raw(&mut self, req: &[u8]) -> Option<Vec<u8>> {
        self.id = self.id.wrapping_add(1);
        let mut req = req.to_vec();
        req[0..2].copy_from_slice(&self.id.to_be_bytes());
        self.sock.send_to(&req, self.server).ok()?;
        loop {
            let (n, _) = self.sock.recv_from(&mut self.buf).ok()?;
            if n >= 2 && u16::from_be_bytes([self.buf[0], self.buf[1]]) == self.id {
                return Some(self.buf[..n].to_vec());
            }
        }
    }

    /// Send and parse; panics on a timeout.
    pub fn ask(&mut self, req: &[u8]) -> Resp {
        let raw = self
            .raw(req)
            .unwrap_or_else(|| panic!("no answer from {} to {req:?}", self.server));
        parse(&raw)
    }

    /// `name` with a valid ECS `addr/len`: (sorted addresses, scope).
    pub fn geo(&mut self, name: &str, qtype: u16, addr: IpAddr, len: u8) -> (Vec<String>, u8) {
        let r = self.ask(&ecs_query(name, qtype, addr, len));
        assert_eq!(r.rcode, NOERROR, "{name} {addr}/{len}: {r:?}");
        let (f, b) = ecs_fields(addr, len);
        let (rf, rs, _, rb) = r
            .ecs
            .clone()
            .unwrap_or_else(|| panic!("no ECS echo for {addr}/{len}"));
        assert_eq!(
            (rf, rs, &rb),
            (f, len, &b),
            "ECS echo changed for {addr}/{len}"
        );
        (r.addrs(), r.scope())
    }
}

/// The response over TCP.
pub fn tcp(server: &Server, req: &[u8]) -> Resp {
    parse(&server.tcp_raw(req).expect("TCP answer"))
}

// ---------------------------------------------------------------------------
// dig
// ---------------------------------------------------------------------------

/// What `dig` printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dig {
    pub status: String,
    pub flags: String,
    /// Answer-section A/AAAA addresses, sorted.
    pub addrs: Vec<String>,
    /// Answer-section record types, in order ("A", "CNAME"...).
    pub answer_types: Vec<String>,
    pub authority_types: Vec<String>,
    /// The CLIENT-SUBNET line: "8.8.8.0/24/9".
    pub subnet: Option<String>,
    pub has_opt: bool,
    pub text: String,
}

impl Dig {
    /// The scope from "ADDR/SOURCE/SCOPE".
    pub fn scope(&self) -> u8 {
        let s = self
            .subnet
            .as_ref()
            .unwrap_or_else(|| panic!("no CLIENT-SUBNET in dig output:\n{}", self.text));
        s.rsplit('/').next().unwrap().parse().unwrap()
    }
}

/// Run dig against a test server: `args` are extra options ("+subnet=...").
pub fn dig(server: SocketAddr, name: &str, qtype: &str, args: &[&str]) -> Dig {
    let at = format!("@{}", server.ip());
    let port = server.port().to_string();
    let mut all = vec![
        at.as_str(),
        "-p",
        &port,
        name,
        qtype,
        "+norec",
        "+time=3",
        "+tries=2",
    ];
    all.extend_from_slice(args);
    let text = crate::common::dig(&all);
    parse_dig(&text)
}

pub fn parse_dig(text: &str) -> Dig {
    let mut d = Dig {
        status: String::new(),
        flags: String::new(),
        addrs: Vec::new(),
        answer_types: Vec::new(),
        authority_types: Vec::new(),
        subnet: None,
        has_opt: false,
        text: text.to_string(),
    };
    let mut section = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(";; ->>HEADER<<-") {
            if let Some(s) = rest.split("status: ").nth(1) {
                d.status = s.split(',').next().unwrap().trim().to_string();
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(";; flags:") {
            d.flags = rest.split(';').next().unwrap().trim().to_string();
            continue;
        }
        if line.starts_with(";; OPT PSEUDOSECTION") {
            d.has_opt = true;
        }
        if let Some(rest) = line.strip_prefix("; CLIENT-SUBNET: ") {
            d.subnet = Some(rest.trim().to_string());
            continue;
        }
        if line.starts_with(";; ") && line.ends_with("SECTION:") {
            section = if line.contains("ANSWER") {
                "answer"
            } else if line.contains("AUTHORITY") {
                "authority"
            } else {
                "other"
            };
            continue;
        }
        if line.is_empty() {
            section = "";
            continue;
        }
        if line.starts_with(';') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 5 {
            match section {
                "answer" => {
                    d.answer_types.push(f[3].to_string());
                    if f[3] == "A" || f[3] == "AAAA" {
                        d.addrs.push(f[4].to_string());
                    }
                }
                "authority" => d.authority_types.push(f[3].to_string()),
                _ => {}
            }
        }
    }
    d.addrs.sort();
    d
}

// ---------------------------------------------------------------------------
// Random addresses
// ---------------------------------------------------------------------------

/// xorshift64*: seeded, so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn u128(&mut self) -> u128 {
        ((self.next() as u128) << 64) | self.next() as u128
    }

    /// A random globally routable IPv4 address.
    pub fn public_v4(&mut self) -> Ipv4Addr {
        loop {
            let a = Ipv4Addr::from(self.next() as u32);
            if meridian::geo::special_block(IpAddr::V4(a)).is_none() {
                return a;
            }
        }
    }

    /// A random address in 2000::/3 outside the special blocks there.
    pub fn public_v6(&mut self) -> Ipv6Addr {
        loop {
            let a = Ipv6Addr::from((self.u128() >> 3) | (1u128 << 125));
            if meridian::geo::special_block(IpAddr::V6(a)).is_none() {
                return a;
            }
        }
    }
}

/// First and last address of `addr/len`.
pub fn block(addr: IpAddr, len: u8) -> (IpAddr, IpAddr) {
    match addr {
        IpAddr::V4(a) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - len as u32)
            };
            let s = u32::from(a) & m;
            (IpAddr::V4(s.into()), IpAddr::V4((s | !m).into()))
        }
        IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len as u32)
            };
            let s = u128::from(a) & m;
            (IpAddr::V6(s.into()), IpAddr::V6((s | !m).into()))
        }
    }
}

/// A random address inside `addr/len`.
pub fn inside(rng: &mut Rng, addr: IpAddr, len: u8) -> IpAddr {
    let (first, last) = block(addr, len);
    match (first, last) {
        (IpAddr::V4(f), IpAddr::V4(l)) => {
            let host = u32::from(l) - u32::from(f);
            IpAddr::V4((u32::from(f) | (rng.next() as u32 & host)).into())
        }
        (IpAddr::V6(f), IpAddr::V6(l)) => {
            let host = u128::from(l) - u128::from(f);
            IpAddr::V6((u128::from(f) | (rng.u128() & host)).into())
        }
        _ => unreachable!(),
    }
}

/// The address `delta` away (wrapping within the family).
pub fn step(addr: IpAddr, delta: i64) -> IpAddr {
    match addr {
        IpAddr::V4(a) => IpAddr::V4(u32::from(a).wrapping_add(delta as u32).into()),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(delta as i128 as u128).into()),
    }
}

pub fn max_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

// ---------------------------------------------------------------------------
// Servers and databases
// ---------------------------------------------------------------------------

/// Serve `config` on 127.0.0.1 and [::1], same port.
pub fn start_dual(config: &Path) -> Server {
    for _ in 0..20 {
        let port = crate::common::free_port();
        if UdpSocket::bind(("::1", port)).is_err()
            || std::net::TcpListener::bind(("::1", port)).is_err()
        {
            continue;
        }
        let v4: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let v6: SocketAddr = format!("[::1]:{port}").parse().unwrap();
        if let Some(s) = Server::try_start(config, &[v4, v6], &[]) {
            return s;
        }
    }
    panic!(
        "meridian did not start on 127.0.0.1 and ::1 with {}",
        config.display()
    );
}

/// The [::1] address of a server started by [`start_dual`].
pub fn v6_addr(s: &Server) -> SocketAddr {
    format!("[::1]:{}", s.port()).parse().unwrap()
}

/// The `mkgeo` binary beside the `meridian` under test, built once.
pub fn mkgeo_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = PathBuf::from(crate::common::BIN);
        let dir = exe.parent().unwrap().to_path_buf();
        let profile = dir.file_name().unwrap().to_string_lossy().to_string();
        let target = dir.parent().unwrap().to_path_buf();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(root())
            .args(["build", "--quiet", "-p", "mkgeo", "--target-dir"])
            .arg(&target);
        if profile != "debug" {
            cmd.args([
                "--profile",
                if profile == "release" {
                    "release"
                } else {
                    &profile
                },
            ]);
        }
        let st = cmd.status().expect("run cargo build -p mkgeo");
        assert!(st.success(), "cargo build -p mkgeo failed");
        let bin = dir.join("mkgeo");
        assert!(bin.exists(), "{} missing after build", bin.display());
        bin
    })
    .clone()
}

/// Build `out` (an mmdb) from the CSV `csv` with mkgeo.
pub fn mkgeo(csv: &Path, out: &Path) {
    let o = Command::new(mkgeo_bin())
        .arg(csv)
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mkgeo {} failed: {}",
        csv.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Number of stderr lines of `s` containing `needle`.
pub fn log_count(s: &Server, needle: &str) -> usize {
    s.stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .count()
}

/// Wait until more than `before` stderr lines contain `needle`.
pub fn wait_log_count(s: &Server, needle: &str, before: usize, timeout: Duration) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < timeout {
        if log_count(s, needle) > before {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
