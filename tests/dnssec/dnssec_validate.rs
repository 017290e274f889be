//! meridian's signed answers validated by real resolvers (#17 item 7):
//! Unbound and the PowerDNS Recursor in front of meridian with the zone's
//! KSK as trust anchor must answer every case NOERROR with AD and no EDE:
//! a static A, a pool in each mode (all, rotate, one, some with count 2), a
//! geo name per region through ECS, a failover after the override API
//! takes a pool's members down, `when_all_down = "all"`, a CNAME, a
//! wildcard, the insecure delegation's missing DS, NODATA, and NXDOMAIN
//! (compact denial, RFC 9824: NOERROR or NXDOMAIN, either with AD). delv
//! validates the static, pool and negative answers against meridian
//! directly, and DNSViz finds no error in the zone. With the trust anchor
//! of another key every resolver must answer SERVFAIL and delv fail.
//!
//! The same harness passes against Knot (tests/dnssec/dnssec_validate_knot.rs),
//! so a failure here is meridian's.
//!
//! Fixture: tests/data/dnssec/meridian.toml.in and example.test.zone; the
//! keys (ECDSA P-256 KSK and ZSK) are made per run by `meridian dnssec
//! keygen` in a temp dir.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;

use crate::common::{dnssec_keygen, is_root, skip, TempDir, BIN};
use crate::lab_common::dnssec::{
    ask_do, assert_bogus, assert_secure, assert_secure_nxdomain, delv, dnsviz, have, AnchorFiles,
    Named, TrustAnchor, Validators,
};
use crate::lab_common::{ask, render, Meridian, Resolver};

const ZONE: &str = "example.test";
const TOKEN: &str = "tester-write-0123456789abcdef";

/// Geo cases: (ECS subnet a client sends, the region's member).
const GEO: [(&str, &str); 5] = [
    ("8.8.8.0/24", "192.0.2.100"),       // NA
    ("81.2.3.0/24", "198.51.100.100"),   // EU
    ("36.1.2.0/24", "203.0.113.100"),    // AS
    ("200.200.1.0/24", "203.0.113.200"), // SA
    ("41.1.2.0/24", "192.0.2.200"),      // AF: default
];

/// A TCP listener on `addr` that accepts and drops connections (a health
/// check target) until dropped.
struct Backend {
    stop: Arc<AtomicBool>,
}

impl Backend {
    fn start(addr: SocketAddr) -> Option<Backend> {
        let l = TcpListener::bind(addr).ok()?;
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => drop(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Some(Backend { stop })
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The rendered fixture, its keys and the backends its checks probe.
struct Fixture {
    dir: TempDir,
    config: std::path::PathBuf,
    ksk: std::path::PathBuf,
    _backends: [Backend; 2],
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        Fixture::with_zsks(tag, &["ecdsap256"])
    }

    /// The fixture with a P-256 KSK and a ZSK of each of `zsks`.
    fn with_zsks(tag: &str, zsks: &[&str]) -> Fixture {
        let dir = TempDir::new(tag);
        let ksk = dnssec_keygen(&dir.0, ZONE, "ecdsap256", true);
        let mut keys = format!("\"{ksk}.key\"");
        for alg in zsks {
            let zsk = dnssec_keygen(&dir.0, ZONE, alg, false);
            keys += &format!(", \"{zsk}.key\"");
        }
        let (port, backends) = (0..20)
            .find_map(|_| {
                let port = crate::common::free_port();
                let a = Backend::start(format!("127.0.0.2:{port}").parse().unwrap())?;
                let b = Backend::start(format!("127.0.0.3:{port}").parse().unwrap())?;
                Some((port, [a, b]))
            })
            .expect("no port free on 127.0.0.2 and 127.0.0.3");
        {
            use std::os::unix::fs::PermissionsExt;
            let t = dir.write("api.tokens", &format!("tester write {TOKEN}\n"));
            std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let text = std::fs::read_to_string(crate::common::data("dnssec/meridian.toml.in")).unwrap();
        let config = dir.write(
            "meridian.toml",
            &render(
                &text,
                &[
                    ("ROOT", crate::common::root().display().to_string()),
                    ("KEYS", keys),
                    ("CHECK_PORT", port.to_string()),
                ],
            ),
        );
        Fixture {
            ksk: dir.0.join(format!("{ksk}.key")),
            dir,
            config,
            _backends: backends,
        }
    }

    fn anchor(&self) -> TrustAnchor {
        TrustAnchor::from_key_file(&self.ksk)
    }

    /// A trust anchor of another key for the zone.
    fn forged(&self) -> TrustAnchor {
        let base = dnssec_keygen(&self.dir.0, ZONE, "ecdsap256", true);
        TrustAnchor::from_key_file(&self.dir.0.join(format!("{base}.key")))
    }
}

/// `POST target` on meridian's HTTP API with the write token; the status.
fn post(http: SocketAddr, target: &str) -> u16 {
    let mut s = TcpStream::connect(http).expect("connect to the HTTP API");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "POST {target} HTTP/1.1\r\nHost: {http}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Wait until meridian itself answers `name` with exactly `want`.
fn wait_direct(m: &Meridian, name: &str, want: &[&str]) {
    let t0 = Instant::now();
    loop {
        let a = ask(m.addr(), name, RecordType::A, None, false);
        if a.addrs == want {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "meridian never answered {name} with {want:?}: {a:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Poll `r` until `name` validates with exactly `want` (a cached answer
/// lives its TTL); panics after `limit`.
fn wait_secure(r: &Resolver, name: &str, want: &[&str], limit: Duration) {
    let t0 = Instant::now();
    loop {
        let v = assert_secure(r, name, RecordType::A, None);
        if v.addrs == want {
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "{}: {name} still {:?} after {limit:?}, want {want:?}",
            r.name(),
            v.addrs
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Not yet signed, the fixture already serves every case (checked directly,
/// DO=0): the signed tests only wait for signatures.
#[test]
fn fixture_serves_every_case() {
    let f = Fixture::new("dval-fixture");
    let (code, out, err) =
        crate::common::run(&["check", "--config", &f.config.display().to_string()]);
    assert_eq!(code, 0, "meridian check: {out}{err}");
    let m = Meridian::start(&f.config);
    let direct = |name: &str, ecs: Option<&str>| ask(m.addr(), name, RecordType::A, ecs, false);
    assert_eq!(direct("www.example.test.", None).addrs, ["192.0.2.1"]);
    assert_eq!(direct("alias.example.test.", None).addrs, ["192.0.2.1"]);
    assert_eq!(direct("x.wild.example.test.", None).addrs, ["192.0.2.7"]);
    assert_eq!(
        direct("all.example.test.", None).addrs,
        ["192.0.2.10", "192.0.2.11", "192.0.2.12"]
    );
    assert_eq!(direct("rotate.example.test.", None).addrs.len(), 3);
    assert_eq!(direct("one.example.test.", None).addrs.len(), 1);
    assert_eq!(direct("some.example.test.", None).addrs.len(), 2);
    for (ecs, want) in GEO {
        assert_eq!(
            direct("geo.example.test.", Some(ecs)).addrs,
            [want],
            "ecs {ecs}"
        );
    }
    wait_direct(&m, "failover.example.test.", &["127.0.0.2", "127.0.0.3"]);
    wait_direct(&m, "alldown.example.test.", &["127.0.0.5"]);
    assert_eq!(direct("nope.example.test.", None).rcode, 3);
    let nodata = ask(m.addr(), "www.example.test.", RecordType::MX, None, false);
    assert!(nodata.rcode == 0 && nodata.addrs.is_empty(), "{nodata:?}");
    assert_eq!(post(m.http, "/override/127.0.0.2?state=down"), 200);
    assert_eq!(post(m.http, "/override/127.0.0.3?state=down"), 200);
    wait_direct(&m, "failover.example.test.", &["127.0.0.4"]);
}

/// Every positive and negative case through both validating resolvers.
#[test]
fn resolvers_validate_meridian() {
    if !crate::common::need(
        "resolvers_validate_meridian",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let f = Fixture::new("dval-meridian");
    let m = Meridian::start(&f.config);
    let anchor = f.anchor();
    let v = Validators::start(m.addr(), &anchor);
    wait_direct(&m, "failover.example.test.", &["127.0.0.2", "127.0.0.3"]);
    wait_direct(&m, "alldown.example.test.", &["127.0.0.5"]);
    for r in v.all() {
        let who = r.name();
        // The apex keys: DNSKEY signed by the KSK.
        let k = assert_secure(r, "example.test.", RecordType::DNSKEY, None);
        assert!(
            k.has(RecordType::DNSKEY) && k.has(RecordType::RRSIG),
            "{who}: {k}"
        );
        // Static.
        let a = assert_secure(r, "www.example.test.", RecordType::A, None);
        assert_eq!(a.addrs, ["192.0.2.1"], "{who}: {a}");
        assert!(a.has(RecordType::RRSIG), "{who}: no RRSIG for DO=1: {a}");
        assert_secure(r, "www.example.test.", RecordType::AAAA, None);
        // Pools: every mode signs the set it hands out.
        let a = assert_secure(r, "all.example.test.", RecordType::A, None);
        assert_eq!(
            a.addrs,
            ["192.0.2.10", "192.0.2.11", "192.0.2.12"],
            "{who}: {a}"
        );
        assert_secure(r, "all.example.test.", RecordType::AAAA, None);
        let a = assert_secure(r, "rotate.example.test.", RecordType::A, None);
        assert_eq!(a.addrs.len(), 3, "{who}: {a}");
        let a = assert_secure(r, "one.example.test.", RecordType::A, None);
        assert_eq!(a.addrs.len(), 1, "{who}: {a}");
        let a = assert_secure(r, "some.example.test.", RecordType::A, None);
        assert_eq!(a.addrs.len(), 2, "{who}: {a}");
        // Geo through ECS: each region's answer validates.
        for (ecs, want) in GEO {
            let a = assert_secure(r, "geo.example.test.", RecordType::A, Some(ecs));
            assert_eq!(a.addrs, [want], "{who} ecs {ecs}: {a}");
        }
        // A pool that is down, answered anyway.
        let a = assert_secure(r, "alldown.example.test.", RecordType::A, None);
        assert_eq!(a.addrs, ["127.0.0.5"], "{who}: {a}");
        // CNAME and wildcard.
        let a = assert_secure(r, "alias.example.test.", RecordType::A, None);
        assert!(a.has(RecordType::CNAME), "{who}: {a}");
        assert_eq!(a.addrs, ["192.0.2.1"], "{who}: {a}");
        let a = assert_secure(r, "x.wild.example.test.", RecordType::A, None);
        assert_eq!(a.addrs, ["192.0.2.7"], "{who}: {a}");
        // NODATA at a static name, at a pool name, and the insecure
        // delegation's missing DS (NSEC: NS RRSIG NSEC).
        for (name, t) in [
            ("www.example.test.", RecordType::MX),
            ("all.example.test.", RecordType::TXT),
            ("sub.example.test.", RecordType::DS),
        ] {
            let a = assert_secure(r, name, t, None);
            assert!(!a.has(t), "{who}: {name} {t}: {a}");
        }
        // QTYPE=NSEC: the name's own NSEC (#25 item 3).
        for name in ["www.example.test.", "all.example.test."] {
            let a = assert_secure(r, name, RecordType::NSEC, None);
            assert!(a.has(RecordType::NSEC), "{who}: {name} NSEC: {a}");
        }
        // NXDOMAIN: compact denial (NOERROR or NXDOMAIN, with AD).
        assert_secure_nxdomain(r, "nope.example.test.", RecordType::A);
        assert_secure_nxdomain(r, "a.b.nope.example.test.", RecordType::AAAA);
    }
    // Failover: the main pool's members go down; within the TTL both
    // resolvers validate the backup pool's answer.
    for r in v.all() {
        wait_secure(
            r,
            "failover.example.test.",
            &["127.0.0.2", "127.0.0.3"],
            Duration::from_secs(10),
        );
    }
    assert_eq!(post(m.http, "/override/127.0.0.2?state=down"), 200);
    assert_eq!(post(m.http, "/override/127.0.0.3?state=down"), 200);
    wait_direct(&m, "failover.example.test.", &["127.0.0.4"]);
    for r in v.all() {
        wait_secure(
            r,
            "failover.example.test.",
            &["127.0.0.4"],
            Duration::from_secs(10),
        );
    }
}

#[test]
fn resolvers_refuse_meridian_with_a_wrong_trust_anchor() {
    if !crate::common::need(
        "resolvers_refuse_meridian_with_a_wrong_trust_anchor",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let f = Fixture::new("dval-meridian-forged");
    let m = Meridian::start(&f.config);
    let forged = f.forged();
    let v = Validators::start(m.addr(), &forged);
    for r in v.all() {
        assert_bogus(r, "www.example.test.", RecordType::A);
        assert_bogus(r, "all.example.test.", RecordType::A);
        assert_bogus(r, "nope.example.test.", RecordType::A);
        let g = ask_do(r.addr, "geo.example.test.", RecordType::A, Some(GEO[0].0));
        assert!(
            g.rcode == 2 && !g.ad,
            "{}: geo with a wrong anchor: {g}",
            r.name()
        );
    }
}

#[test]
fn delv_validates_meridian() {
    const T: &str = "delv_validates_meridian";
    if !have("delv") {
        return skip(T, "delv is not installed (apt-get install bind9-dnsutils)");
    }
    let f = Fixture::new("dval-meridian-delv");
    let m = Meridian::start(&f.config);
    let anchor = f.anchor();
    let files = AnchorFiles::new(&anchor);
    for (name, t) in [
        ("example.test.", RecordType::DNSKEY),
        ("www.example.test.", RecordType::A),
        ("alias.example.test.", RecordType::A),
        ("x.wild.example.test.", RecordType::A),
        ("all.example.test.", RecordType::A),
        ("rotate.example.test.", RecordType::A),
        ("one.example.test.", RecordType::A),
        ("some.example.test.", RecordType::A),
        ("geo.example.test.", RecordType::A),
    ] {
        let d = delv(m.addr(), &anchor, &files, name, t);
        assert!(d.validated, "delv {name} {t}:\n{}", d.output);
    }
    for (name, t) in [
        ("nope.example.test.", RecordType::A),
        ("www.example.test.", RecordType::MX),
        ("sub.example.test.", RecordType::DS),
    ] {
        let d = delv(m.addr(), &anchor, &files, name, t);
        assert!(d.negative, "delv {name} {t}:\n{}", d.output);
    }
    let forged = f.forged();
    let ffiles = AnchorFiles::new(&forged);
    let d = delv(
        m.addr(),
        &forged,
        &ffiles,
        "www.example.test.",
        RecordType::A,
    );
    assert!(
        !d.validated,
        "delv validated with a wrong anchor:\n{}",
        d.output
    );
}

/// BIND's named validating in front of meridian (#25 item 3): QTYPE=NSEC
/// at a static name, an alias, a wildcard's expansion, pool and geo names
/// and a name that does not exist comes back with AD and the NSEC (named
/// and delv refused the NODATA whose NSEC left NSEC out); positive, NODATA
/// and NXDOMAIN answers validate too. QTYPE=RRSIG, which meridian refuses,
/// comes back as a failure. delv agrees on the NSEC answers.
#[test]
fn named_validates_nsec_queries() {
    const T: &str = "named_validates_nsec_queries";
    for t in ["named", "delv"] {
        if !have(t) {
            return skip(T, &format!("{t} is not installed (.ci/run installs bind9)"));
        }
    }
    let f = Fixture::new("dval-meridian-named");
    let m = Meridian::start(&f.config);
    let anchor = f.anchor();
    let n = Named::start(m.addr(), &anchor);
    let secure = |name: &str, t: RecordType| {
        let v = ask_do(n.addr, name, t, None);
        assert!(
            (v.rcode == 0 || v.rcode == 3) && v.ad,
            "named: {name} {t} is not validated: {v}\nlog:\n{}",
            n.log()
        );
        v
    };
    assert_eq!(
        secure("www.example.test.", RecordType::A).addrs,
        ["192.0.2.1"]
    );
    assert!(!secure("www.example.test.", RecordType::MX).has(RecordType::MX));
    secure("nope.example.test.", RecordType::A);
    let files = AnchorFiles::new(&anchor);
    for name in [
        "www.example.test.",
        "alias.example.test.",
        "x.wild.example.test.",
        "all.example.test.",
        "geo.example.test.",
        "nope.example.test.",
    ] {
        let v = secure(name, RecordType::NSEC);
        assert!(
            v.rcode == 0 && v.has(RecordType::NSEC),
            "named: {name} NSEC: {v}"
        );
        let d = delv(m.addr(), &anchor, &files, name, RecordType::NSEC);
        assert!(d.validated, "delv {name} NSEC:\n{}", d.output);
    }
    // named answers QTYPE=RRSIG from its cache when it holds the name's
    // RRSIGs; for a name it has not seen, meridian's REFUSED comes through
    // as a failure, never as data.
    let v = ask_do(n.addr, "one.example.test.", RecordType::RRSIG, None);
    assert!(
        v.rcode != 0 && !v.ad && !v.has(RecordType::RRSIG),
        "named: RRSIG: {v}"
    );
}

#[test]
fn dnsviz_finds_no_error_in_meridian() {
    const T: &str = "dnsviz_finds_no_error_in_meridian";
    if !is_root() {
        return skip(T, "DNSViz runs in its own network namespace: needs root");
    }
    for t in ["dnsviz", "knotd"] {
        if !have(t) {
            return skip(T, &format!("{t} is not installed (.ci/run installs it)"));
        }
    }
    // A second algorithm with only a ZSK (#25 item 5): it must sign the
    // DNSKEY set too, or DNSViz reports MISSING_RRSIG_FOR_ALG_DNSKEY.
    let f = Fixture::with_zsks("dval-meridian-dnsviz", &["ecdsap256", "ed25519"]);
    let anchor = f.anchor();
    let files = AnchorFiles::new(&anchor);
    // meridian on 127.0.0.1:53 inside DNSViz's namespace.
    let cmd = format!(
        "{BIN} serve --config {} --listen 127.0.0.1:53 --http-listen none --workers 1 --allow-root",
        f.config.display()
    );
    let names = [
        "example.test",
        "www.example.test",
        "alias.example.test",
        "x.wild.example.test",
        "all.example.test",
        "one.example.test",
        "geo.example.test",
        "nope.example.test",
    ];
    let v = dnsviz(&anchor, &files, &cmd, &names);
    assert!(v.clean(), "{}", v.report());
}
