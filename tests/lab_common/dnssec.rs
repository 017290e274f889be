//! DNSSEC validation through the resolver lab (issue #17, item 7): the
//! validators that must accept a signed zone before meridian's signing can
//! be called done.
//!
//! - [`TrustAnchor`]: a zone's KSK (or CSK) from its BIND `.key` file, as
//!   Unbound (`trust-anchor:` DNSKEY), the PowerDNS Recursor (`addTA()`
//!   with the DS that `meridian dnssec ds --key` prints) and delv
//!   (`trust-anchors { static-key }`) take it.
//! - [`Validators`]: Unbound and the Recursor started with that anchor in
//!   front of any authoritative server on loopback (the lab's templates,
//!   forward zones, `local-zone: "." refuse` and `dont-query` kept).
//! - [`ask_do`]: a query with RD and DO=1 (and ECS if given); the rcode,
//!   the AD flag, the answer and any Extended DNS Error.
//! - [`Named`]: BIND's named validating with that anchor, forwarding
//!   the zone to the server under test.
//! - [`delv`]: `delv @127.0.0.1 -p PORT -a anchors +root=ZONE NAME TYPE`,
//!   read for `; fully validated` / `; negative response, fully validated`.
//!   delv 9.18 has no `+subnet`: ECS answers are validated through the
//!   resolvers only.
//! - [`dnsviz`]: `dnsviz probe` and `dnsviz grok` in a network namespace
//!   that has only `lo`, the authoritative server started inside it.
//!
//! A tool that is missing is a visible `SKIP:` (`common::skip`), a failure
//! under CI=true; .ci/run installs unbound, pdns-recursor, bind9-dnsutils
//! (delv) and dnsviz.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;

use super::{tcp_exchange, Kind, Resolver};
use crate::common::{run, udp_exchange, walk, TempDir, Q};

/// The OPT option code of an Extended DNS Error (RFC 8914).
const EDE: u16 = 15;

/// A zone's secure entry point: its KSK or CSK public key and DS.
#[derive(Clone, Debug)]
pub(crate) struct TrustAnchor {
    /// The zone, with its final dot: "example.test.".
    pub(crate) zone: String,
    /// DNSKEY fields: flags, protocol, algorithm, base64 key.
    pub(crate) flags: u16,
    pub(crate) protocol: u8,
    pub(crate) algorithm: u8,
    pub(crate) key: String,
    /// DS RDATA as text ("tag alg digest-type HEX"), one per digest.
    pub(crate) ds: Vec<String>,
}

impl TrustAnchor {
    /// The anchor of a BIND `.key` file (as `meridian dnssec keygen`,
    /// `dnssec-keygen` or `ldns-keygen` write it); the DS from
    /// `meridian dnssec ds --key`.
    pub(crate) fn from_key_file(path: &Path) -> TrustAnchor {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.starts_with(';') && l.split_whitespace().any(|w| w == "DNSKEY"))
            .unwrap_or_else(|| panic!("no DNSKEY record in {}", path.display()));
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "DNSKEY").unwrap();
        assert!(
            words.len() >= at + 5,
            "short DNSKEY in {}: {line}",
            path.display()
        );
        let zone = format!("{}.", words[0].trim_end_matches('.')).to_ascii_lowercase();
        let p = path.display().to_string();
        let (code, out, err) = run(&["dnssec", "ds", "--key", &p]);
        assert_eq!(code, 0, "meridian dnssec ds --key {p}: {err}");
        let ds: Vec<String> = out
            .lines()
            .filter_map(|l| l.split_once(" DS ").map(|(_, r)| r.trim().to_string()))
            .collect();
        assert!(
            !ds.is_empty(),
            "no DS from meridian dnssec ds --key {p}: {out}"
        );
        TrustAnchor {
            zone,
            flags: words[at + 1].parse().unwrap(),
            protocol: words[at + 2].parse().unwrap(),
            algorithm: words[at + 3].parse().unwrap(),
            key: words[at + 4..].concat(),
            ds,
        }
    }

    /// The zone without its final dot.
    pub(crate) fn zone_name(&self) -> &str {
        self.zone.trim_end_matches('.')
    }

    /// "257 3 13 BASE64".
    pub(crate) fn dnskey_rdata(&self) -> String {
        format!(
            "{} {} {} {}",
            self.flags, self.protocol, self.algorithm, self.key
        )
    }

    /// The `@UNBOUND_TRUST_ANCHORS@` lines of tools/lab/unbound.conf.in:
    /// the DNSKEY as a trust anchor, and EDE on SERVFAIL (Unbound ≥ 1.16).
    pub(crate) fn unbound_lines(&self) -> String {
        format!(
            "    trust-anchor: \"{} DNSKEY {}\"\n    ede: yes\n    val-log-level: 2\n",
            self.zone,
            self.dnskey_rdata()
        )
    }

    /// The Recursor's lua-config-file: one `addTA()` per DS.
    pub(crate) fn recursor_lua(&self) -> String {
        self.ds
            .iter()
            .map(|d| format!("addTA('{}', '{d}')\n", self.zone_name()))
            .collect()
    }

    /// delv's `-a` file.
    pub(crate) fn delv_anchors(&self) -> String {
        format!(
            "trust-anchors {{\n    {} static-key {} {} {} \"{}\";\n}};\n",
            self.zone, self.flags, self.protocol, self.algorithm, self.key
        )
    }

    /// The anchor as a zone-file DNSKEY line (dnsviz grok -t).
    pub(crate) fn dnskey_line(&self) -> String {
        format!("{} IN DNSKEY {}\n", self.zone, self.dnskey_rdata())
    }
}

// ---------------------------------------------------------------------------
// Validating resolvers
// ---------------------------------------------------------------------------

/// Unbound and the PowerDNS Recursor, each validating with one anchor and
/// forwarding its zone to one authoritative server; killed on drop.
pub(crate) struct Validators {
    pub(crate) unbound: Resolver,
    pub(crate) recursor: Resolver,
}

impl Validators {
    pub(crate) fn start(upstream: SocketAddr, anchor: &TrustAnchor) -> Validators {
        let zones = [anchor.zone.as_str()];
        Validators {
            unbound: Resolver::start_with(Kind::Unbound, upstream, &zones, Some(anchor)),
            recursor: Resolver::start_with(Kind::Recursor, upstream, &zones, Some(anchor)),
        }
    }

    pub(crate) fn all(&self) -> [&Resolver; 2] {
        [&self.unbound, &self.recursor]
    }
}

/// BIND's named as a validating resolver: `anchor` as its trust anchor,
/// the anchor's zone forwarded to `upstream`; killed on drop.
pub(crate) struct Named {
    pub(crate) addr: SocketAddr,
    log: PathBuf,
    child: std::process::Child,
    _dir: TempDir,
}

impl Named {
    /// Started on a free loopback port; ready when the zone's SOA (asked
    /// with CD=1) comes back through it.
    pub(crate) fn start(upstream: SocketAddr, anchor: &TrustAnchor) -> Named {
        assert!(
            upstream.ip().is_loopback(),
            "named forwards to loopback only"
        );
        let mut last = String::new();
        for _ in 0..5 {
            let dir = TempDir::new("lab-named");
            let port = crate::common::free_port();
            let d = dir.0.display();
            let conf = dir.write(
                "named.conf",
                &format!(
                    "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  \
                     session-keyfile \"{d}/session.key\";\n  \
                     listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  \
                     recursion yes;\n  allow-query {{ 127.0.0.1; }};\n  dnssec-validation yes;\n}};\n\
                     controls {{ }};\n{}zone \"{}\" {{\n  type forward;\n  forward only;\n  \
                     forwarders {{ {} port {}; }};\n}};\n",
                    anchor.delv_anchors(),
                    anchor.zone_name(),
                    upstream.ip(),
                    upstream.port()
                ),
            );
            let log = dir.0.join("named.log");
            let out = std::fs::File::create(&log).unwrap();
            let mut cmd = Command::new("named");
            cmd.arg("-g").arg("-n").arg("1").arg("-c").arg(&conf);
            cmd.stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out);
            super::die_with_parent(&mut cmd, libc::SIGKILL);
            let child = cmd.spawn().expect("named (package bind9)");
            let mut n = Named {
                addr: format!("127.0.0.1:{port}").parse().unwrap(),
                log,
                child,
                _dir: dir,
            };
            if n.ready(&anchor.zone) {
                return n;
            }
            last = n.log();
        }
        panic!("named did not start; last log:\n{last}");
    }

    fn ready(&mut self, zone: &str) -> bool {
        let mut q = Q::new(zone, RecordType::SOA).rd().edns(1232).to_bytes();
        q[3] |= 0x10; // CD: a wrong anchor must not keep it from starting
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Some(raw) = udp_exchange(self.addr, &q, Duration::from_millis(500)) {
                if Message::from_vec(&raw).is_ok_and(|m| !m.answers.is_empty()) {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// named's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response to a DO=1 query, as a validation test reads it.
#[derive(Clone, Debug)]
pub(crate) struct Validated {
    /// The 4-bit header RCODE.
    pub(crate) rcode: u8,
    /// The AD flag: the resolver validated the answer (RFC 4035 §3.2.3).
    pub(crate) ad: bool,
    /// Answer records as text ("www.example.test. 300 IN A 192.0.2.1"), or
    /// "owner TYPE" when hickory cannot print the message.
    pub(crate) answers: Vec<String>,
    /// The answer's record types, in order.
    pub(crate) types: Vec<u16>,
    /// A/AAAA addresses of the answer, sorted.
    pub(crate) addrs: Vec<String>,
    /// Authority record types, in order (NSEC, SOA, RRSIG...).
    pub(crate) authority_types: Vec<u16>,
    /// Extended DNS Errors: (INFO-CODE, EXTRA-TEXT).
    pub(crate) ede: Vec<(u16, String)>,
}

impl Validated {
    /// Does the answer hold a record of `t`?
    pub(crate) fn has(&self, t: RecordType) -> bool {
        self.types.contains(&u16::from(t))
    }
}

impl std::fmt::Display for Validated {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "rcode {} ad {} ede {:?} answer {:?} authority types {:?}",
            self.rcode, self.ad, self.ede, self.answers, self.authority_types
        )
    }
}

/// Ask `server` for `name`/`qtype` with RD, DO=1 and EDNS 1232 (and ECS
/// `subnet`, "a.b.c.d/len", if given). Retries on silence (4 × 5 s: a
/// validator may fetch the DNSKEY first) and over TCP on TC; panics if the
/// server never answers.
pub(crate) fn ask_do(
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
    subnet: Option<&str>,
) -> Validated {
    let mut q = Q::new(name, qtype).rd().edns(1232);
    q.dnssec_ok = true;
    if let Some(s) = subnet {
        q = q.ecs(s);
    }
    for _ in 0..4 {
        q.id = q.id.wrapping_add(1);
        let req = q.to_bytes();
        let Some(mut raw) = udp_exchange(server, &req, Duration::from_secs(5)) else {
            continue;
        };
        if raw.len() >= 4 && raw[2] & 0x02 != 0 {
            match tcp_exchange(server, &req) {
                Some(r) => raw = r,
                None => continue,
            }
        }
        if raw.len() < 2 || u16::from_be_bytes([raw[0], raw[1]]) != q.id {
            continue;
        }
        return parse(&raw)
            .unwrap_or_else(|e| panic!("{server} sent a bad response ({e}): {raw:?}"));
    }
    panic!("{server} never answered {name} {qtype} (DO=1, ecs {subnet:?})");
}

fn parse(raw: &[u8]) -> Result<Validated, String> {
    let w = walk(raw)?;
    let msg = Message::from_vec(raw).ok();
    let answers = match &msg {
        Some(m) => m.answers.iter().map(|r| r.to_string()).collect(),
        None => w
            .answer
            .iter()
            .map(|r| format!("{} {}", r.owner, RecordType::from(r.rtype)))
            .collect(),
    };
    let mut addrs: Vec<String> = w
        .answer
        .iter()
        .filter_map(|r| match (r.rtype, r.rdata.len()) {
            (1, 4) => Some(
                std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&r.rdata[..]).unwrap()).to_string(),
            ),
            (28, 16) => Some(
                std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&r.rdata[..]).unwrap()).to_string(),
            ),
            _ => None,
        })
        .collect();
    addrs.sort();
    let mut ede = Vec::new();
    for opt in w.additional.iter().filter(|r| r.rtype == 41) {
        let rd = &opt.rdata;
        let mut i = 0;
        while i + 4 <= rd.len() {
            let code = u16::from_be_bytes([rd[i], rd[i + 1]]);
            let len = u16::from_be_bytes([rd[i + 2], rd[i + 3]]) as usize;
            let b = rd.get(i + 4..i + 4 + len).ok_or("short OPT option")?;
            if code == EDE && b.len() >= 2 {
                ede.push((
                    u16::from_be_bytes([b[0], b[1]]),
                    String::from_utf8_lossy(&b[2..]).to_string(),
                ));
            }
            i += 4 + len;
        }
    }
    Ok(Validated {
        rcode: w.header.response_code.low(),
        ad: w.header.authentic_data,
        answers,
        types: w.answer.iter().map(|r| r.rtype).collect(),
        addrs,
        authority_types: w.authority.iter().map(|r| r.rtype).collect(),
        ede,
    })
}

/// `name`/`qtype` through `r` must come back NOERROR with AD and no EDE;
/// the response. `what` names the case in the failure message.
pub(crate) fn assert_secure(
    r: &Resolver,
    name: &str,
    qtype: RecordType,
    subnet: Option<&str>,
) -> Validated {
    let v = ask_do(r.addr, name, qtype, subnet);
    assert!(
        v.rcode == 0 && v.ad && v.ede.is_empty(),
        "{}: {name} {qtype} (ecs {subnet:?}) is not a validated NOERROR: {v}\nlog:\n{}",
        r.name(),
        tail(&r.log())
    );
    v
}

/// A name that does not exist through `r`: NXDOMAIN, or NOERROR with an
/// empty answer (compact denial, RFC 9824, when the resolver does not
/// restore the rcode), either way with AD and no EDE.
pub(crate) fn assert_secure_nxdomain(r: &Resolver, name: &str, qtype: RecordType) -> Validated {
    let v = ask_do(r.addr, name, qtype, None);
    let empty = !v.types.contains(&u16::from(qtype));
    assert!(
        (v.rcode == 3 || (v.rcode == 0 && empty)) && v.ad && v.ede.is_empty(),
        "{}: {name} {qtype} is not a validated denial: {v}\nlog:\n{}",
        r.name(),
        tail(&r.log())
    );
    v
}

/// `name`/`qtype` through `r` must fail validation: SERVFAIL.
pub(crate) fn assert_bogus(r: &Resolver, name: &str, qtype: RecordType) -> Validated {
    let v = ask_do(r.addr, name, qtype, None);
    assert!(
        v.rcode == 2 && !v.ad,
        "{}: {name} {qtype} with a wrong trust anchor is not SERVFAIL: {v}",
        r.name()
    );
    v
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

// ---------------------------------------------------------------------------
// delv
// ---------------------------------------------------------------------------

/// What delv said about one name.
#[derive(Clone, Debug)]
pub(crate) struct Delv {
    /// `; fully validated` (a positive answer).
    pub(crate) validated: bool,
    /// `; negative response, fully validated` (NXDOMAIN or NODATA).
    pub(crate) negative: bool,
    /// stdout and stderr.
    pub(crate) output: String,
}

/// Is `tool` on PATH? (`tool -h` or `--version` need not succeed.)
pub(crate) fn have(tool: &str) -> bool {
    crate::common::on_path(tool)
}

/// The files delv and dnsviz read: the anchors, in a temp dir.
pub(crate) struct AnchorFiles {
    pub(crate) dir: TempDir,
    pub(crate) delv: PathBuf,
    pub(crate) dnskey: PathBuf,
}

impl AnchorFiles {
    pub(crate) fn new(anchor: &TrustAnchor) -> AnchorFiles {
        let dir = TempDir::new("anchors");
        let delv = dir.write("anchors.conf", &anchor.delv_anchors());
        let dnskey = dir.write("anchor.key", &anchor.dnskey_line());
        AnchorFiles { dir, delv, dnskey }
    }
}

/// `delv @SERVER -p PORT -a ANCHORS +root=ZONE NAME TYPE` against the
/// authoritative server itself (delv queries it iteratively, RD=0).
pub(crate) fn delv(
    server: SocketAddr,
    anchor: &TrustAnchor,
    files: &AnchorFiles,
    name: &str,
    qtype: RecordType,
) -> Delv {
    let out = Command::new("timeout")
        .arg("60")
        .arg("delv")
        .arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .arg("-a")
        .arg(&files.delv)
        .arg(format!("+root={}", anchor.zone_name()))
        .arg(name)
        .arg(qtype.to_string())
        .output()
        .expect("delv (package bind9-dnsutils)");
    let output =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Delv {
        validated: output.lines().any(|l| l.trim() == "; fully validated"),
        negative: output
            .lines()
            .any(|l| l.trim() == "; negative response, fully validated"),
        output,
    }
}

// ---------------------------------------------------------------------------
// DNSViz
// ---------------------------------------------------------------------------

/// DNSViz's verdict on a zone.
#[derive(Clone, Debug)]
pub(crate) struct DnsViz {
    /// Every non-empty `errors` list in `dnsviz grok` output, with its path.
    pub(crate) errors: Vec<String>,
    /// Every `status` of BOGUS, with its path, but the zone's own DS query
    /// (asked of the unsigned stand-in root, see [`dnsviz`]).
    pub(crate) bogus: Vec<String>,
    /// How many statuses were SECURE (0 means nothing was validated).
    pub(crate) secure: usize,
    /// The grok JSON; the probe's, grok's and the servers' output.
    pub(crate) grok: String,
    pub(crate) log: String,
}

impl DnsViz {
    /// No error and nothing bogus, and something validated.
    pub(crate) fn clean(&self) -> bool {
        self.errors.is_empty() && self.bogus.is_empty() && self.secure > 0
    }

    /// What a failed assertion shows: errors, bogus statuses, the SECURE
    /// count and the log.
    pub(crate) fn report(&self) -> String {
        format!(
            "DNSViz: errors {:#?}\nbogus {:#?}\nsecure {}\nlog:\n{}",
            self.errors, self.bogus, self.secure, self.log
        )
    }
}

/// Probe `names` of `anchor`'s zone with DNSViz (`dnsviz probe -A`, the
/// authoritative servers asked directly) and grok the result against the
/// anchor (`dnsviz grok -t`).
///
/// DNSViz asks port 53 only, bootstraps through /etc/resolv.conf and looks
/// up the zone's ancestors, and must not reach the network. So it runs in
/// a new network and mount namespace (`unshare -n -m`, root only) that has
/// only `lo`, with two servers started inside it: `server_cmd` (a shell
/// command line, the server under test listening on 127.0.0.1:53) and a
/// Knot serving an unsigned stand-in root on 127.0.0.2:53 that delegates
/// the zone to ns1.<zone> at 127.0.0.1; /etc/resolv.conf is bound to
/// 127.0.0.2 there. The zone's NS must be ns1.<zone>, A 127.0.0.1.
///
/// Debian 12's dnsviz 0.9.4 looks for `pygraphviz.release`, which its
/// pygraphviz 1.7 no longer has: a sitecustomize.py on PYTHONPATH adds it.
pub(crate) fn dnsviz(
    anchor: &TrustAnchor,
    files: &AnchorFiles,
    server_cmd: &str,
    names: &[&str],
) -> DnsViz {
    let d = &files.dir.0;
    let zone = &anchor.zone;
    let resolv = files.dir.write("resolv.conf", "nameserver 127.0.0.2\n");
    let shim = d.join("pyshim");
    std::fs::create_dir_all(&shim).unwrap();
    std::fs::write(
        shim.join("sitecustomize.py"),
        "import sys, types\ntry:\n    import pygraphviz\n    if not hasattr(pygraphviz, 'release'):\n        \
         m = types.ModuleType('pygraphviz.release')\n        m.version = pygraphviz.__version__\n        \
         sys.modules['pygraphviz.release'] = m\n        pygraphviz.release = m\nexcept ImportError:\n    pass\n",
    )
    .unwrap();
    let rootdir = d.join("root");
    std::fs::create_dir_all(&rootdir).unwrap();
    std::fs::write(
        rootdir.join("root.zone"),
        format!(
            ". 300 IN SOA a.root. hostmaster.root. 1 7200 1800 1209600 300\n\
             . 300 IN NS a.root.\na.root. 300 IN A 127.0.0.2\n\
             {zone} 300 IN NS ns1.{zone}\nns1.{zone} 300 IN A 127.0.0.1\n"
        ),
    )
    .unwrap();
    let rootconf = rootdir.join("knot.conf");
    std::fs::write(
        &rootconf,
        format!(
            "server:\n    rundir: {r}\n    listen: 127.0.0.2@53\ndatabase:\n    storage: {r}\n\
             zone:\n  - domain: .\n    storage: {r}\n    file: root.zone\n    \
             journal-content: none\n    zonefile-sync: -1\n",
            r = rootdir.display()
        ),
    )
    .unwrap();
    let probe = d.join("probe.json");
    let grok = d.join("grok.json");
    let log = d.join("dnsviz.log");
    let script = format!(
        "ip link set lo up\nip addr add 127.0.0.2/8 dev lo 2>/dev/null\n\
         mount --bind {resolv} /etc/resolv.conf || exit 1\n\
         knotd -c {rootconf} >{root_log} 2>&1 &\nrpid=$!\n\
         {server_cmd} >{server_log} 2>&1 &\nspid=$!\n\
         trap 'kill $spid $rpid 2>/dev/null' EXIT\n\
         for i in $(seq 100); do\n  \
           dig +time=1 +tries=1 +short @127.0.0.1 {zone} SOA | grep -q . && \
           dig +time=1 +tries=1 +short @127.0.0.2 . SOA | grep -q . && break\n  sleep 0.1\ndone\n\
         timeout 120 dnsviz probe -A -x {zone}:ns1.{zone}=127.0.0.1 -x .:a.root=127.0.0.2 {names} >{probe} 2>>{log}\n\
         echo \"probe exit $?\" >>{log}\n\
         PYTHONPATH={shim} dnsviz grok -t {anchor} <{probe} >{grok} 2>>{log}\n\
         echo \"grok exit $?\" >>{log}\n",
        resolv = resolv.display(),
        rootconf = rootconf.display(),
        root_log = d.join("root.log").display(),
        server_log = d.join("server.log").display(),
        names = names.join(" "),
        probe = probe.display(),
        grok = grok.display(),
        log = log.display(),
        shim = shim.display(),
        anchor = files.dnskey.display(),
    );
    let sh = files.dir.write("dnsviz.sh", &script);
    let st = Command::new("timeout")
        .arg("180")
        .arg("unshare")
        .arg("-n")
        .arg("-m")
        .arg("sh")
        .arg(&sh)
        .stdin(Stdio::null())
        .status()
        .expect("unshare (util-linux)");
    let text = std::fs::read_to_string(&grok).unwrap_or_default();
    let log = [log, d.join("server.log"), d.join("root.log")]
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
        + &format!("\nunshare: {st}");
    let mut v = DnsViz {
        errors: Vec::new(),
        bogus: Vec::new(),
        secure: 0,
        grok: text,
        log,
    };
    match serde_json::from_str::<serde_json::Value>(&v.grok) {
        Ok(j) => {
            let apex_ds = format!("/queries/{zone}/IN/DS/");
            let mut statuses = Vec::new();
            collect(&j, "", &mut v.errors, &mut statuses);
            for (p, st) in statuses {
                match st.as_str() {
                    "SECURE" => v.secure += 1,
                    "BOGUS" if !p.contains(&apex_ds) => v.bogus.push(p),
                    _ => {}
                }
            }
        }
        Err(e) => v.errors.push(format!("no grok output ({e})")),
    }
    v
}

fn collect(
    v: &serde_json::Value,
    path: &str,
    errors: &mut Vec<String>,
    statuses: &mut Vec<(String, String)>,
) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}/{k}");
                if k == "errors" && x.as_array().is_some_and(|a| !a.is_empty()) {
                    errors.push(format!("{p}: {x}"));
                }
                if k == "status" {
                    if let Some(s) = x.as_str() {
                        statuses.push((path.to_string(), s.to_string()));
                    }
                }
                collect(x, &p, errors, statuses);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect(x, &format!("{path}[{i}]"), errors, statuses);
            }
        }
        _ => {}
    }
}
