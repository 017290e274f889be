//! Shared by tests/lab_*.rs: the local resolver lab. meridian, Unbound and
//! PowerDNS Recursor on loopback and ephemeral ports, the resolvers' configs
//! rendered from tools/lab/*.conf.in (the same templates tools/lab/lab.sh
//! uses) into a temporary directory, readiness checked by querying, and every
//! process killed by its own handle when its guard drops (also when a test
//! panics), or by the kernel (PR_SET_PDEATHSIG) if the test binary itself is
//! killed before any Drop runs.
//!
//! Network rule: everything listens on 127.0.0.1 and the resolvers talk to
//! nobody but meridian: a forward zone for each lab zone, Unbound refuses
//! every other name (`local-zone: "." refuse`), the Recursor may not query
//! any address but its forwarders (`dont-query=0.0.0.0/0, ::/0`), and
//! security polling is off. DNSSEC validation is off unless a test gives a
//! trust anchor ([`dnssec::TrustAnchor`], tests/dnssec_validate*.rs). The
//! tests only ask for example.test names.
#![allow(dead_code)]

pub(crate) mod dnssec;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hickory_proto::op::Message;
use hickory_proto::rr::{RData, RecordType};

use crate::common::{free_port, root, scope, udp_exchange, TempDir, BIN, Q};

/// Where meridian listens in the lab (the resolvers forward to it).
pub(crate) const MERIDIAN_ADDR: &str = "127.0.0.1";

/// tools/lab/, with the resolver config templates.
pub(crate) fn lab_dir() -> PathBuf {
    root().join("tools/lab")
}

/// A fixture under tests/data/lab/.
pub(crate) fn fixture(name: &str) -> PathBuf {
    root().join("tests/data/lab").join(name)
}

/// Replace every `@KEY@` in `template`; panics on a placeholder left over.
pub(crate) fn render(template: &str, vars: &[(&str, String)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("@{k}@"), v);
    }
    for line in s.lines().filter(|l| !l.trim_start().starts_with('#')) {
        assert!(
            !line.contains('@') || line.contains("forward-addr"),
            "unrendered placeholder in {line:?}"
        );
    }
    s
}

// ---------------------------------------------------------------------------
// meridian with its HTTP API
// ---------------------------------------------------------------------------

/// meridian on a free loopback port, with /metrics on another; killed (by
/// its PID) on drop, and by the kernel if the test thread dies first.
pub(crate) struct Meridian {
    pub(crate) addr: SocketAddr,
    pub(crate) http: SocketAddr,
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Meridian {
    pub(crate) fn start(config: &Path) -> Meridian {
        for _ in 0..5 {
            let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            if let Some(m) = Meridian::try_start(config, addr, http) {
                // The HTTP listener may come up a moment after the DNS one.
                let t0 = Instant::now();
                while http_get(m.http, "/metrics").is_none() {
                    assert!(
                        t0.elapsed() < Duration::from_secs(20),
                        "no /metrics on {http}"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
                return m;
            }
        }
        panic!("meridian did not start with {}", config.display());
    }

    fn try_start(config: &Path, addr: SocketAddr, http: SocketAddr) -> Option<Meridian> {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .arg("--config")
            .arg(config)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--http-listen")
            .arg(http.to_string())
            .arg("--workers")
            .arg("1")
            // CI runs as root; the lab's meridian listens on loopback only.
            .arg("--allow-root")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        die_with_parent(&mut cmd, libc::SIGKILL);
        let mut child = cmd.spawn().expect("spawn meridian");
        let err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = stderr.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if line.contains("meridian: ready") {
                    if let Some(t) = tx.take() {
                        let _ = t.send(true);
                    }
                }
                lines.lock().unwrap().push(line);
            }
            if let Some(t) = tx.take() {
                let _ = t.send(false);
            }
        });
        let mut m = Meridian {
            addr,
            http,
            child,
            stderr,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(true) => Some(m),
            _ => {
                eprintln!("meridian did not start: {:?}", m.stderr.lock().unwrap());
                let _ = m.child.kill();
                let _ = m.child.wait();
                None
            }
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(crate) fn metrics(&self) -> String {
        http_get(self.http, "/metrics")
            .unwrap_or_else(|| panic!("GET /metrics on {} failed", self.http))
    }

    /// A counter from /metrics (exact name, no labels); 0 if absent.
    pub(crate) fn counter(&self, name: &str) -> u64 {
        counter(&self.metrics(), name)
    }

    /// `meridian_queries_total` once it has stopped moving. UDP workers
    /// flush their counts when idle for 200 ms, so read until two readings
    /// 400 ms apart agree.
    pub(crate) fn settled_queries(&self) -> u64 {
        let mut last = self.counter("meridian_queries_total");
        let t0 = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(400));
            let now = self.counter("meridian_queries_total");
            if now == last || t0.elapsed() > Duration::from_secs(20) {
                return now;
            }
            last = now;
        }
    }
}

impl Drop for Meridian {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` over plain HTTP/1.1; the body, or None.
pub(crate) fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    if !buf.starts_with("HTTP/1.1 200") {
        return None;
    }
    buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// The value of an unlabelled counter in Prometheus text.
pub(crate) fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (n, v) = l.split_once(' ')?;
            (n == name).then(|| v.trim().parse::<f64>().ok()).flatten()
        })
        .map(|v| v as u64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Resolvers
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Unbound,
    Recursor,
}

impl Kind {
    pub(crate) const ALL: [Kind; 2] = [Kind::Unbound, Kind::Recursor];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Unbound => "unbound",
            Kind::Recursor => "pdns-recursor",
        }
    }
}

/// A running resolver; killed (by its own PID) and its directory removed on drop.
pub(crate) struct Resolver {
    pub(crate) kind: Kind,
    pub(crate) addr: SocketAddr,
    pub(crate) config: PathBuf,
    log: PathBuf,
    child: Child,
    _dir: TempDir,
}

impl Resolver {
    /// Start `kind` on a free loopback port, forwarding `zones` (e.g.
    /// "example.test.") to meridian at `upstream`. Ready when an SOA query
    /// for the first zone comes back NOERROR through it.
    pub(crate) fn start(kind: Kind, upstream: SocketAddr, zones: &[&str]) -> Resolver {
        Resolver::start_with(kind, upstream, zones, None)
    }

    /// `start`, validating with `anchor` when given (its zone must be one of
    /// `zones`). Ready when the SOA query, sent with CD=1 when validating
    /// (a wrong anchor must not keep a resolver from starting), comes back
    /// NOERROR.
    pub(crate) fn start_with(
        kind: Kind,
        upstream: SocketAddr,
        zones: &[&str],
        anchor: Option<&dnssec::TrustAnchor>,
    ) -> Resolver {
        assert!(
            upstream.ip().is_loopback(),
            "the lab only forwards to loopback"
        );
        assert!(!zones.is_empty());
        let mut last_log = String::new();
        for attempt in 0..5 {
            let dir = TempDir::new(&format!("lab-{}", kind.name()));
            let port = free_port();
            let config = match kind {
                Kind::Unbound => unbound_config(&dir.0, port, upstream, zones, anchor),
                Kind::Recursor => recursor_config(&dir.0, port, upstream, zones, anchor),
            };
            let log = dir.0.join(format!("{}.log", kind.name()));
            let out = File::create(&log).unwrap();
            let err = out.try_clone().unwrap();
            let mut cmd = match kind {
                Kind::Unbound => {
                    let mut c = Command::new("unbound");
                    c.arg("-d").arg("-c").arg(&config);
                    c
                }
                Kind::Recursor => {
                    let mut c = Command::new("pdns_recursor");
                    c.arg(format!("--config-dir={}", dir.0.display()));
                    c
                }
            };
            cmd.stdin(Stdio::null()).stdout(out).stderr(err);
            die_with_parent(&mut cmd, libc::SIGKILL);
            let child = cmd.spawn().unwrap_or_else(|e| {
                panic!("cannot run {} ({e}); .ci/run installs it", kind.name())
            });
            let mut r = Resolver {
                kind,
                addr: format!("127.0.0.1:{port}").parse().unwrap(),
                config,
                log,
                child,
                _dir: dir,
            };
            if r.wait_ready(zones[0], anchor.is_some(), Duration::from_secs(30)) {
                return r;
            }
            last_log = r.log();
            eprintln!(
                "{} attempt {attempt} on port {port} did not come up; log:\n{last_log}",
                kind.name()
            );
        }
        panic!("{} did not start; last log:\n{last_log}", kind.name());
    }

    fn wait_ready(&mut self, zone: &str, cd: bool, timeout: Duration) -> bool {
        let t0 = Instant::now();
        let mut q = Q::new(zone, RecordType::SOA).rd().edns(1232).to_bytes();
        if cd {
            q[3] |= 0x10; // CD: checking disabled
        }
        while t0.elapsed() < timeout {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false; // exited: a port clash or a config error
            }
            if let Some(raw) = udp_exchange(self.addr, &q, Duration::from_millis(500)) {
                if let Ok(m) = Message::from_vec(&raw) {
                    if m.metadata.response_code == hickory_proto::op::ResponseCode::NoError
                        && !m.answers.is_empty()
                    {
                        return true;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    pub(crate) fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The resolver's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Have the child get `signal` if the thread that started it goes away
/// (a test binary killed by a timeout), so nothing outlives the test even
/// when no Drop runs. Linux only (PR_SET_PDEATHSIG).
pub(crate) fn die_with_parent(cmd: &mut Command, signal: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong);
            Ok(())
        });
    }
}

fn read_template(name: &str) -> String {
    let p = lab_dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn fqdn(z: &str) -> String {
    format!("{}.", z.trim_end_matches('.'))
}

/// `unbound -V` lists the subnetcache module (Debian builds with --enable-subnet).
pub(crate) fn unbound_has_subnetcache() -> bool {
    static V: OnceLock<String> = OnceLock::new();
    let v = V.get_or_init(|| {
        let out = Command::new("unbound")
            .arg("-V")
            .output()
            .expect("unbound is required for the lab tests (apt-get install unbound; see .ci/run)");
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
    });
    v.lines()
        .any(|l| l.starts_with("Linked modules:") && l.contains("subnetcache"))
}

pub(crate) fn unbound_config(
    dir: &Path,
    port: u16,
    upstream: SocketAddr,
    zones: &[&str],
    anchor: Option<&dnssec::TrustAnchor>,
) -> PathBuf {
    assert!(
        unbound_has_subnetcache(),
        "this unbound has no subnetcache module (unbound -V); the lab needs ECS support"
    );
    let mut local = String::new();
    let mut fwd = String::new();
    for z in zones {
        let z = fqdn(z);
        local += &format!("    local-zone: \"{z}\" transparent\n");
        fwd += &format!(
            "forward-zone:\n    name: \"{z}\"\n    forward-addr: {}@{}\n",
            upstream.ip(),
            upstream.port()
        );
    }
    let text = render(
        &read_template("unbound.conf.in"),
        &[
            ("PORT", port.to_string()),
            ("DIR", dir.display().to_string()),
            ("MERIDIAN_ADDR", upstream.ip().to_string()),
            ("UNBOUND_LOCAL_ZONES", local),
            ("UNBOUND_FORWARD_ZONES", fwd),
            (
                "UNBOUND_TRUST_ANCHORS",
                anchor.map(|a| a.unbound_lines()).unwrap_or_default(),
            ),
        ],
    );
    let path = dir.join("unbound.conf");
    std::fs::write(&path, text).unwrap();
    let out = Command::new("unbound-checkconf")
        .arg(&path)
        .output()
        .expect("unbound-checkconf is required (package unbound)");
    assert!(
        out.status.success(),
        "unbound-checkconf rejects the lab config:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// (major, minor) of `pdns_recursor --version`.
pub(crate) fn recursor_version() -> (u32, u32) {
    static V: OnceLock<(u32, u32)> = OnceLock::new();
    *V.get_or_init(|| {
        let out = Command::new("pdns_recursor").arg("--version").output().expect(
            "pdns_recursor is required for the lab tests (apt-get install pdns-recursor; see .ci/run)",
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        let v = text
            .split("Recursor ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("cannot read the version from {text:?}"));
        let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    })
}

/// The allow-list setting's name: renamed from edns-subnet-whitelist in 4.5.
pub(crate) fn recursor_ecs_allow_setting() -> &'static str {
    if recursor_version() >= (4, 5) {
        "edns-subnet-allow-list"
    } else {
        "edns-subnet-whitelist"
    }
}

pub(crate) fn recursor_config(
    dir: &Path,
    port: u16,
    upstream: SocketAddr,
    zones: &[&str],
    anchor: Option<&dnssec::TrustAnchor>,
) -> PathBuf {
    let pdns_dnssec = match anchor {
        None => "dnssec=off".to_string(),
        Some(a) => {
            let lua = dir.join("recursor.lua");
            std::fs::write(&lua, a.recursor_lua()).unwrap();
            format!(
                "dnssec=validate\nlua-config-file={}\nextended-resolution-errors=yes",
                lua.display()
            )
        }
    };
    let fwd: Vec<String> = zones
        .iter()
        .map(|z| format!("{}={}", z.trim_end_matches('.'), upstream))
        .collect();
    let text = render(
        &read_template("recursor.conf.in"),
        &[
            ("PORT", port.to_string()),
            ("DIR", dir.display().to_string()),
            ("MERIDIAN_ADDR", upstream.ip().to_string()),
            ("PDNS_FORWARD_ZONES", fwd.join(", ")),
            (
                "ECS_ALLOW_SETTING",
                recursor_ecs_allow_setting().to_string(),
            ),
            ("PDNS_DNSSEC", pdns_dnssec),
        ],
    );
    // pdns_recursor reads recursor.conf from --config-dir.
    let path = dir.join("recursor.conf");
    std::fs::write(&path, text).unwrap();
    path
}

/// meridian plus both resolvers, all forwarding example.test.
pub(crate) struct Lab {
    pub(crate) meridian: Meridian,
    pub(crate) unbound: Resolver,
    pub(crate) recursor: Resolver,
}

impl Lab {
    pub(crate) fn start(config: &Path) -> Lab {
        let meridian = Meridian::start(config);
        let unbound = Resolver::start(Kind::Unbound, meridian.addr(), &["example.test."]);
        let recursor = Resolver::start(Kind::Recursor, meridian.addr(), &["example.test."]);
        Lab {
            meridian,
            unbound,
            recursor,
        }
    }

    pub(crate) fn resolver(&self, k: Kind) -> &Resolver {
        match k {
            Kind::Unbound => &self.unbound,
            Kind::Recursor => &self.recursor,
        }
    }
}

// ---------------------------------------------------------------------------
// Asking
// ---------------------------------------------------------------------------

/// An answer as the lab compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) rcode: u16,
    /// A/AAAA addresses of the answer section, sorted (mode `all` shuffles).
    pub(crate) addrs: Vec<String>,
    /// TTLs of those records, in answer order.
    pub(crate) ttls: Vec<u32>,
    /// The ECS scope of the response (None: no ECS option).
    pub(crate) scope: Option<u8>,
}

impl Answer {
    pub(crate) fn max_ttl(&self) -> u32 {
        self.ttls.iter().copied().max().unwrap_or(0)
    }
}

/// Ask `server` for `name`/`qtype`, with ECS `subnet` ("a.b.c.d/len") if
/// given and RD if `rd`. Retries on silence (4 × 3 s) and over TCP on TC;
/// panics if the server never answers.
pub(crate) fn ask(
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
    subnet: Option<&str>,
    rd: bool,
) -> Answer {
    let mut q = Q::new(name, qtype).edns(1232);
    if rd {
        q = q.rd();
    }
    if let Some(s) = subnet {
        q = q.ecs(s);
    }
    for _ in 0..4 {
        q.id = q.id.wrapping_add(1);
        let req = q.to_bytes();
        let Some(mut raw) = udp_exchange(server, &req, Duration::from_secs(3)) else {
            continue;
        };
        if raw.len() >= 4 && raw[2] & 0x02 != 0 {
            match tcp_exchange(server, &req) {
                Some(r) => raw = r,
                None => continue,
            }
        }
        let m = Message::from_vec(&raw)
            .unwrap_or_else(|e| panic!("{server} sent a bad response ({e}): {raw:?}"));
        if m.metadata.id != q.id {
            continue;
        }
        let mut addrs = Vec::new();
        let mut ttls = Vec::new();
        for r in &m.answers {
            match &r.data {
                RData::A(a) => addrs.push(a.0.to_string()),
                RData::AAAA(a) => addrs.push(a.0.to_string()),
                _ => continue,
            }
            ttls.push(r.ttl);
        }
        addrs.sort();
        return Answer {
            rcode: u16::from(m.metadata.response_code),
            addrs,
            ttls,
            scope: scope(&m),
        };
    }
    panic!("{server} never answered {name} {qtype} ecs {subnet:?}");
}

fn tcp_exchange(server: SocketAddr, req: &[u8]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(3)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    crate::common::tcp_send(&mut s, req);
    crate::common::tcp_recv(&mut s)
}

// ---------------------------------------------------------------------------
// Subnets
// ---------------------------------------------------------------------------

/// A deterministic generator (splitmix64) for seeded orders and addresses.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// A network, as (address as u128, family bits, prefix length); IPv4 in the
/// low 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Net {
    pub(crate) v6: bool,
    pub(crate) addr: u128,
    pub(crate) len: u8,
}

impl Net {
    pub(crate) fn bits(&self) -> u8 {
        if self.v6 {
            128
        } else {
            32
        }
    }

    pub(crate) fn parse(s: &str) -> Net {
        let (a, l) = s.split_once('/').unwrap_or((s, ""));
        let ip: IpAddr = a.parse().unwrap_or_else(|_| panic!("bad address {s:?}"));
        let (v6, addr, max) = match ip {
            IpAddr::V4(x) => (false, u32::from(x) as u128, 32),
            IpAddr::V6(x) => (true, u128::from(x), 128),
        };
        let len = if l.is_empty() {
            max
        } else {
            l.parse().unwrap()
        };
        Net::new(v6, addr, len)
    }

    /// The network of `addr` at `len` (host bits cleared).
    pub(crate) fn new(v6: bool, addr: u128, len: u8) -> Net {
        let bits = if v6 { 128 } else { 32 };
        assert!(len <= bits);
        let mask = if len == 0 {
            0
        } else {
            (!0u128) << (bits - len)
        };
        let all = if v6 { !0u128 } else { 0xFFFF_FFFF };
        Net {
            v6,
            addr: addr & mask & all,
            len,
        }
    }

    pub(crate) fn first(&self) -> u128 {
        self.addr
    }

    pub(crate) fn last(&self) -> u128 {
        let host = self.bits() - self.len;
        if host == 128 {
            !0
        } else {
            self.addr | ((1u128 << host) - 1)
        }
    }

    pub(crate) fn contains(&self, a: u128) -> bool {
        a >= self.first() && a <= self.last()
    }

    /// The same address at a shorter or equal length.
    pub(crate) fn truncate(&self, len: u8) -> Net {
        Net::new(self.v6, self.addr, len.min(self.len))
    }

    pub(crate) fn ip(&self) -> IpAddr {
        if self.v6 {
            IpAddr::V6(self.addr.into())
        } else {
            IpAddr::V4((self.addr as u32).into())
        }
    }
}

impl std::fmt::Display for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}", self.ip(), self.len)
    }
}

/// The networks of geo/example.csv (the example geo database's source).
pub(crate) fn example_geo_networks() -> Vec<(Net, String)> {
    let text = std::fs::read_to_string(root().join("geo/example.csv")).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("network,"))
        .map(|l| {
            let mut f = l.split(',');
            let net = Net::parse(f.next().unwrap());
            let cc = format!("{}/{}", f.next().unwrap_or(""), f.next().unwrap_or(""));
            (net, cc)
        })
        .collect()
}
