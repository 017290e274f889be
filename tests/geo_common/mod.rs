//! Shared by tests/geo_*.rs and tests/ecs_*.rs: raw ECS queries built byte
//! by byte, responses read straight from the wire, `dig +subnet` runs, a
//! seeded xorshift generator, and the `mkgeo` database builder.
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::{root, Server};

pub(crate) const A: u16 = 1;
pub(crate) const NS: u16 = 2;
pub(crate) const CNAME: u16 = 5;
pub(crate) const SOA: u16 = 6;
pub(crate) const TXT: u16 = 16;
pub(crate) const MX: u16 = 15;
pub(crate) const AAAA: u16 = 28;
pub(crate) const OPT: u16 = 41;

pub(crate) use crate::common::{FORMERR, NOERROR, NOTIMP, NXDOMAIN, REFUSED, SERVFAIL};

/// A fixture under tests/data/geo/.
pub(crate) fn fixture(name: &str) -> PathBuf {
    root().join("tests/data/geo").join(name)
}

/// The geo/ECS fixture config (tests/data/geo/rules.toml).
pub(crate) fn rules_config() -> PathBuf {
    fixture("rules.toml")
}

/// Pool addresses of tests/data/geo/rules.toml, by pool name.
pub(crate) fn pool4(name: &str) -> Vec<String> {
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
pub(crate) fn pool6(name: &str) -> Vec<String> {
    pool4(name)
        .iter()
        .map(|a| {
            let last = a.rsplit('.').next().unwrap();
            format!("2001:db8::{last}")
        })
        .collect()
}

/// The bundled example's pools (zones/meridian.toml), IPv4 and IPv6.
pub(crate) fn example_pool(name: &str, v6: bool) -> Vec<String> {
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
// Packets: built with meridian_wire, read with hickory (crate::common::Resp)
// ---------------------------------------------------------------------------

pub(crate) use crate::common::{Resp, Rr};
pub(crate) use meridian_wire::build::{ecs_fields, ecs_for, ecs_option};
pub(crate) use meridian_wire::QueryBuilder;

/// A query carrying a valid ECS option for `addr/len`.
pub(crate) fn ecs_query(name: &str, qtype: u16, addr: IpAddr, len: u8) -> Vec<u8> {
    QueryBuilder::new(name, qtype)
        .id(0x6765)
        .ecs(addr, len)
        .build()
}

/// Read a response strictly (see `crate::common::walk`).
pub(crate) fn parse(raw: &[u8]) -> Resp {
    Resp::new(raw.to_vec())
}

/// One UDP socket for many sequential queries to one server.
pub(crate) struct Client {
    sock: UdpSocket,
    server: SocketAddr,
    id: u16,
    buf: Vec<u8>,
}

impl Client {
    pub(crate) fn new(server: SocketAddr) -> Client {
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
    pub(crate) fn raw(&mut self, req: &[u8]) -> Option<Vec<u8>> {
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
    pub(crate) fn ask(&mut self, req: &[u8]) -> Resp {
        let raw = self
            .raw(req)
            .unwrap_or_else(|| panic!("no answer from {} to {req:?}", self.server));
        parse(&raw)
    }

    /// `name` with a valid ECS `addr/len`: (sorted addresses, scope).
    pub(crate) fn geo(
        &mut self,
        name: &str,
        qtype: u16,
        addr: IpAddr,
        len: u8,
    ) -> (Vec<String>, u8) {
        let r = self.ask(&ecs_query(name, qtype, addr, len));
        assert_eq!(r.rcode(), NOERROR, "{name} {addr}/{len}: {r:?}");
        let (f, b) = ecs_fields(addr, len);
        let (rf, rs, _, rb) = r
            .ecs()
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
pub(crate) fn tcp(server: &Server, req: &[u8]) -> Resp {
    parse(&server.tcp_raw(req).expect("TCP answer"))
}

// ---------------------------------------------------------------------------
// dig
// ---------------------------------------------------------------------------

/// What `dig` printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dig {
    pub(crate) status: String,
    pub(crate) flags: String,
    /// Answer-section A/AAAA addresses, sorted.
    pub(crate) addrs: Vec<String>,
    /// Answer-section record types, in order ("A", "CNAME"...).
    pub(crate) answer_types: Vec<String>,
    pub(crate) authority_types: Vec<String>,
    /// The CLIENT-SUBNET line: "8.8.8.0/24/9".
    pub(crate) subnet: Option<String>,
    pub(crate) has_opt: bool,
    pub(crate) text: String,
}

impl Dig {
    /// The scope from "ADDR/SOURCE/SCOPE".
    pub(crate) fn scope(&self) -> u8 {
        let s = self
            .subnet
            .as_ref()
            .unwrap_or_else(|| panic!("no CLIENT-SUBNET in dig output:\n{}", self.text));
        s.rsplit('/').next().unwrap().parse().unwrap()
    }
}

/// Run dig against a test server: `args` are extra options ("+subnet=...").
pub(crate) fn dig(server: SocketAddr, name: &str, qtype: &str, args: &[&str]) -> Dig {
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

pub(crate) fn parse_dig(text: &str) -> Dig {
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
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(crate) fn u128(&mut self) -> u128 {
        ((self.next() as u128) << 64) | self.next() as u128
    }

    /// A random globally routable IPv4 address.
    pub(crate) fn public_v4(&mut self) -> Ipv4Addr {
        loop {
            let a = Ipv4Addr::from(self.next() as u32);
            if meridian::geo::special_block(IpAddr::V4(a)).is_none() {
                return a;
            }
        }
    }

    /// A random address in 2000::/3 outside the special blocks there.
    pub(crate) fn public_v6(&mut self) -> Ipv6Addr {
        loop {
            let a = Ipv6Addr::from((self.u128() >> 3) | (1u128 << 125));
            if meridian::geo::special_block(IpAddr::V6(a)).is_none() {
                return a;
            }
        }
    }
}

/// First and last address of `addr/len`.
pub(crate) fn block(addr: IpAddr, len: u8) -> (IpAddr, IpAddr) {
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
pub(crate) fn inside(rng: &mut Rng, addr: IpAddr, len: u8) -> IpAddr {
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
pub(crate) fn step(addr: IpAddr, delta: i64) -> IpAddr {
    match addr {
        IpAddr::V4(a) => IpAddr::V4(u32::from(a).wrapping_add(delta as u32).into()),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(delta as i128 as u128).into()),
    }
}

pub(crate) fn max_len(addr: IpAddr) -> u8 {
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
pub(crate) fn start_dual(config: &Path) -> Server {
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
pub(crate) fn v6_addr(s: &Server) -> SocketAddr {
    format!("[::1]:{}", s.port()).parse().unwrap()
}

/// The `mkgeo` binary beside the `meridian` under test, built once.
pub(crate) fn mkgeo_bin() -> PathBuf {
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
pub(crate) fn mkgeo(csv: &Path, out: &Path) {
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
pub(crate) fn log_count(s: &Server, needle: &str) -> usize {
    s.log_count(needle)
}

/// Wait until more than `before` stderr lines contain `needle`.
pub(crate) fn wait_log_count(s: &Server, needle: &str, before: usize, timeout: Duration) -> bool {
    s.wait_log_count(needle, before, timeout)
}
