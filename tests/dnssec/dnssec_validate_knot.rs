//! The DNSSEC validation harness (tests/lab_common/dnssec.rs) proved
//! against a known-good signer, Knot DNS, before meridian signs (#17):
//! knotd signs tests/data/dnssec/example.test.zone with an ECDSA P-256 KSK
//! and ZSK made by `meridian dnssec keygen` (imported with `keymgr
//! import-bind`), and Unbound, the PowerDNS Recursor, delv and DNSViz each
//! validate a static A, a CNAME, a wildcard, NXDOMAIN, NODATA and the
//! insecure delegation's missing DS. With the trust anchor of another key
//! every one of them must fail: the harness can tell a bad signature.
//!
//! tests/dnssec/dnssec_validate.rs runs the same checks against meridian.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;

use crate::common::{dnssec_keygen, free_port, is_root, skip, udp_exchange, TempDir, Q};
use crate::lab_common::die_with_parent;
use crate::lab_common::dnssec::{
    assert_bogus, assert_secure, assert_secure_nxdomain, delv, dnsviz, have, AnchorFiles,
    TrustAnchor, Validators,
};

const ZONE: &str = "example.test";

/// A zone for knotd: the zone file, a KSK and a ZSK (ECDSA P-256) made by
/// `meridian dnssec keygen` and imported into Knot's KASP database, and a
/// policy that signs with exactly those keys (`manual: on`).
struct KnotZone {
    dir: TempDir,
    ksk: PathBuf,
}

impl KnotZone {
    fn new(tag: &str) -> KnotZone {
        let dir = TempDir::new(tag);
        std::fs::copy(
            crate::common::data("dnssec/example.test.zone"),
            dir.0.join("example.test.zone"),
        )
        .unwrap();
        let keys = dir.0.join("keys");
        std::fs::create_dir_all(&keys).unwrap();
        std::fs::create_dir_all(dir.0.join("db")).unwrap();
        let ksk = dnssec_keygen(&keys, ZONE, "ecdsap256", true);
        let zsk = dnssec_keygen(&keys, ZONE, "ecdsap256", false);
        let z = KnotZone {
            ksk: keys.join(format!("{ksk}.key")),
            dir,
        };
        let conf = z.config(53);
        for base in [&ksk, &zsk] {
            let out = Command::new("keymgr")
                .arg("-c")
                .arg(&conf)
                .arg(format!("{ZONE}."))
                .arg("import-bind")
                .arg(keys.join(base))
                .output()
                .expect("keymgr (package knot)");
            assert!(
                out.status.success(),
                "keymgr import-bind {base}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        z
    }

    /// knotd's config for 127.0.0.1@`port`, written as knot-PORT.conf.
    fn config(&self, port: u16) -> PathBuf {
        let d = self.dir.0.display();
        let run = self.dir.0.join(format!("run-{port}"));
        std::fs::create_dir_all(&run).unwrap();
        self.dir.write(
            &format!("knot-{port}.conf"),
            &format!(
                "server:\n    rundir: {run}\n    listen: 127.0.0.1@{port}\n\
                 database:\n    storage: {d}/db\n\
                 log:\n  - target: stderr\n    any: info\n\
                 policy:\n  - id: manual\n    manual: on\n\
                 zone:\n  - domain: {ZONE}.\n    storage: {d}\n    file: example.test.zone\n    \
                 dnssec-signing: on\n    dnssec-policy: manual\n    zonefile-sync: -1\n    \
                 zonefile-load: whole\n    journal-content: none\n",
                run = run.display()
            ),
        )
    }

    fn anchor(&self) -> TrustAnchor {
        TrustAnchor::from_key_file(&self.ksk)
    }
}

/// knotd serving a `KnotZone` on a free loopback port; killed on drop.
struct Knot {
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
}

impl Knot {
    fn start(zone: &KnotZone) -> Knot {
        for _ in 0..5 {
            let port = free_port();
            let conf = zone.config(port);
            let log = zone.dir.0.join(format!("knotd-{port}.log"));
            let out = std::fs::File::create(&log).unwrap();
            let mut cmd = Command::new("knotd");
            cmd.arg("-c")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out);
            die_with_parent(&mut cmd, libc::SIGKILL);
            let mut k = Knot {
                addr: format!("127.0.0.1:{port}").parse().unwrap(),
                child: cmd.spawn().expect("knotd (package knot)"),
                log,
            };
            if k.wait_signed() {
                return k;
            }
            eprintln!("knotd on {port} did not come up:\n{}", k.log());
        }
        panic!("knotd did not start");
    }

    /// Ready when the apex DNSKEY comes back with its RRSIG.
    fn wait_signed(&mut self) -> bool {
        let mut q = Q::new(&format!("{ZONE}."), RecordType::DNSKEY).edns(1232);
        q.dnssec_ok = true;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Some(raw) = udp_exchange(self.addr, &q.to_bytes(), Duration::from_millis(500)) {
                if let Ok(w) = crate::common::walk(&raw) {
                    if w.answer.iter().any(|r| r.rtype == 46) {
                        return true;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have_knot(test: &str) -> bool {
    for t in ["knotd", "keymgr"] {
        if !have(t) {
            skip(
                test,
                &format!("{t} is not installed (apt-get install knot)"),
            );
            return false;
        }
    }
    true
}

/// A trust anchor of another key for the same zone.
fn forged_anchor(dir: &Path) -> TrustAnchor {
    let base = dnssec_keygen(dir, ZONE, "ecdsap256", true);
    TrustAnchor::from_key_file(&dir.join(format!("{base}.key")))
}

#[test]
fn resolvers_validate_knot() {
    if !have_knot("resolvers_validate_knot") {
        return;
    }
    let zone = KnotZone::new("dval-knot");
    let knot = Knot::start(&zone);
    let anchor = zone.anchor();
    let v = Validators::start(knot.addr, &anchor);
    for r in v.all() {
        let a = assert_secure(r, "www.example.test.", RecordType::A, None);
        assert_eq!(a.addrs, ["192.0.2.1"], "{}: {a}", r.name());
        assert!(
            a.has(RecordType::RRSIG),
            "{}: no RRSIG for DO=1: {a}",
            r.name()
        );
        let a = assert_secure(r, "www.example.test.", RecordType::AAAA, None);
        assert_eq!(a.addrs, ["2001:db8::1"], "{}: {a}", r.name());
        let a = assert_secure(r, "alias.example.test.", RecordType::A, None);
        assert!(a.has(RecordType::CNAME), "{}: {a}", r.name());
        assert_eq!(a.addrs, ["192.0.2.1"], "{}: {a}", r.name());
        let a = assert_secure(r, "x.wild.example.test.", RecordType::A, None);
        assert_eq!(a.addrs, ["192.0.2.7"], "{}: {a}", r.name());
        // NODATA: www has A, AAAA and TXT.
        let a = assert_secure(r, "www.example.test.", RecordType::MX, None);
        assert!(
            a.addrs.is_empty() && !a.has(RecordType::MX),
            "{}: {a}",
            r.name()
        );
        // The insecure delegation: no DS, proven by the NSEC at sub.
        let a = assert_secure(r, "sub.example.test.", RecordType::DS, None);
        assert!(!a.has(RecordType::DS), "{}: {a}", r.name());
        // NXDOMAIN (Knot: NSEC chain, so the rcode is NXDOMAIN).
        let a = assert_secure_nxdomain(r, "nope.example.test.", RecordType::A);
        assert_eq!(a.rcode, 3, "{}: {a}", r.name());
        assert_secure_nxdomain(r, "a.b.nope.example.test.", RecordType::AAAA);
    }
}

#[test]
fn resolvers_refuse_knot_with_a_wrong_trust_anchor() {
    if !have_knot("resolvers_refuse_knot_with_a_wrong_trust_anchor") {
        return;
    }
    let zone = KnotZone::new("dval-knot-forged");
    let knot = Knot::start(&zone);
    let forged = forged_anchor(&zone.dir.0);
    assert_ne!(forged.key, zone.anchor().key);
    let v = Validators::start(knot.addr, &forged);
    for r in v.all() {
        assert_bogus(r, "www.example.test.", RecordType::A);
        assert_bogus(r, "nope.example.test.", RecordType::A);
        assert_bogus(r, "alias.example.test.", RecordType::A);
    }
}

#[test]
fn delv_validates_knot_and_refuses_a_wrong_anchor() {
    const T: &str = "delv_validates_knot_and_refuses_a_wrong_anchor";
    if !have_knot(T) {
        return;
    }
    if !have("delv") {
        return skip(T, "delv is not installed (apt-get install bind9-dnsutils)");
    }
    let zone = KnotZone::new("dval-knot-delv");
    let knot = Knot::start(&zone);
    let anchor = zone.anchor();
    let files = AnchorFiles::new(&anchor);
    for (name, t) in [
        ("www.example.test.", RecordType::A),
        ("alias.example.test.", RecordType::A),
        ("x.wild.example.test.", RecordType::A),
        ("example.test.", RecordType::DNSKEY),
    ] {
        let d = delv(knot.addr, &anchor, &files, name, t);
        assert!(d.validated, "delv {name} {t}:\n{}", d.output);
    }
    for (name, t) in [
        ("nope.example.test.", RecordType::A),
        ("www.example.test.", RecordType::MX),
        ("sub.example.test.", RecordType::DS),
    ] {
        let d = delv(knot.addr, &anchor, &files, name, t);
        assert!(d.negative, "delv {name} {t}:\n{}", d.output);
    }
    let forged = forged_anchor(&zone.dir.0);
    let ffiles = AnchorFiles::new(&forged);
    for (name, t) in [
        ("www.example.test.", RecordType::A),
        ("nope.example.test.", RecordType::A),
    ] {
        let d = delv(knot.addr, &forged, &ffiles, name, t);
        assert!(
            !d.validated && !d.negative,
            "delv {name} {t} validated with a wrong anchor:\n{}",
            d.output
        );
    }
}

#[test]
fn dnsviz_finds_no_error_in_knot_and_bogus_with_a_wrong_anchor() {
    const T: &str = "dnsviz_finds_no_error_in_knot_and_bogus_with_a_wrong_anchor";
    if !have_knot(T) {
        return;
    }
    if !is_root() {
        return skip(T, "DNSViz runs in its own network namespace: needs root");
    }
    if !have("dnsviz") {
        return skip(T, "dnsviz is not installed (apt-get install dnsviz)");
    }
    let zone = KnotZone::new("dval-knot-dnsviz");
    let anchor = zone.anchor();
    let files = AnchorFiles::new(&anchor);
    // knotd on 127.0.0.1:53 inside the namespace.
    let cmd = format!("knotd -c {}", zone.config(53).display());
    let names = [
        "example.test",
        "www.example.test",
        "alias.example.test",
        "x.wild.example.test",
        "nope.example.test",
    ];
    let v = dnsviz(&anchor, &files, &cmd, &names);
    assert!(v.clean(), "{}", v.report());
    let forged = forged_anchor(&zone.dir.0);
    let ffiles = AnchorFiles::new(&forged);
    let v = dnsviz(&forged, &ffiles, &cmd, &names);
    assert!(
        !v.bogus.is_empty(),
        "DNSViz found nothing bogus with a wrong anchor; log:\n{}",
        v.log
    );
}
