//! meridian-probe's ECS verdicts on servers that answer the default case
//! differently (issue #15): meridian (the default answer has its own,
//! non-zero scope, as gdnsd's does) must be `tailored`; a server that scopes
//! its default answer /0 while other subnets get other answers (Knot's
//! geoip module) must be `broken-scope`; a server that picks per query with
//! scope /0 is rotation (`mixed`), not a scope error. And with no resolver
//! reachable, the error names the resolver and the OS error.
//!
//! Everything runs on 127.0.0.1: meridian on the bundled example, and tiny
//! fake authoritative servers (a UDP socket in this file).

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hickory_proto::op::{Edns, Message};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record};
use serde_json::Value;

fn probe_bin() -> PathBuf {
    let p = std::path::Path::new(crate::common::BIN).with_file_name("meridian-probe");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build -p meridian-probe`",
        p.display()
    );
    p
}

fn probe(args: &[&str]) -> Output {
    Command::new(probe_bin()).args(args).output().unwrap()
}

fn probe_json(args: &[&str]) -> Value {
    let out = probe(&[args, &["--json", "--timeout", "2000"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "meridian-probe {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("probe JSON ({e}): {text}"))
}

/// A one-socket authoritative server on 127.0.0.1: `answer(ecs address,
/// source prefix)` gives the A address and the scope to echo.
struct FakeAuth {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeAuth {
    fn start(answer: impl Fn(String, u8) -> (String, u8) + Send + 'static) -> FakeAuth {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop2.load(Ordering::Relaxed) {
                let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(q) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let Some(EdnsOption::Subnet(mut cs)) = q
                    .edns
                    .as_ref()
                    .and_then(|e| e.option(EdnsCode::Subnet))
                    .cloned()
                else {
                    continue;
                };
                let (ip, scope) = answer(cs.addr().to_string(), cs.source_prefix());
                let mut r = Message::response(q.metadata.id, q.metadata.op_code);
                r.add_queries(q.queries.clone());
                r.metadata.authoritative = true;
                r.metadata.recursion_desired = q.metadata.recursion_desired;
                r.add_answer(Record::from_rdata(
                    q.queries[0].name().clone(),
                    60,
                    RData::A(A(ip.parse().unwrap())),
                ));
                cs.set_scope_prefix(scope);
                let mut e = Edns::new();
                e.set_max_payload(1232);
                e.options_mut().insert(EdnsOption::Subnet(cs));
                r.set_edns(e);
                let _ = sock.send_to(&r.to_vec().unwrap(), peer);
            }
        });
        FakeAuth {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeAuth {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn subnets_and_scopes(rep: &Value) -> Vec<(String, String, u64)> {
    rep["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["subnet"].as_str().unwrap().to_string(),
                r["answers"].to_string(),
                r["scope"].as_u64().unwrap_or(999),
            )
        })
        .collect()
}

#[test]
fn default_subnets_reach_the_default_answer_and_meridian_is_tailored() {
    let server = crate::common::Server::example();
    let rep = probe_json(&[
        "ecs",
        "geo.example.test",
        "--server",
        &server.addr.to_string(),
    ]);
    let rows = subnets_and_scopes(&rep);
    println!("meridian: {rows:?} -> {}", rep["verdict_text"]);
    let subnets: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert!(subnets.contains(&"41.0.0.0/24"), "{rep}");
    assert!(subnets.contains(&"192.0.2.0/24"), "{rep}");
    // The example's default pool answers the two new subnets (ZA is in no
    // rule, 192.0.2.0/24 in no database), with scopes of their own.
    for (subnet, answers, scope) in &rows {
        if subnet == "41.0.0.0/24" || subnet == "192.0.2.0/24" {
            assert_eq!(answers, r#"["192.0.2.200"]"#, "{subnet}: {rep}");
        }
        assert!(*scope > 0 && *scope <= 32, "{subnet}: scope {scope}: {rep}");
    }
    assert_eq!(rep["distinct_answer_sets"], 5, "{rep}");
    assert_eq!(rep["verdict"], "tailored", "{rep}");
}

#[test]
fn a_zero_scope_default_answer_is_broken_scope() {
    // Knot's geoip module: the subnets its rules name get their answer with
    // the source prefix as scope; every other client the default, scope /0.
    let knot_like = FakeAuth::start(|addr, source| match addr.as_str() {
        "8.8.8.0" => ("192.0.2.1".into(), source),
        "85.214.0.0" => ("192.0.2.2".into(), source),
        "133.242.0.0" => ("192.0.2.3".into(), source),
        "200.160.0.0" => ("192.0.2.4".into(), source),
        _ => ("192.0.2.99".into(), 0),
    });
    let rep = probe_json(&[
        "ecs",
        "geo.example.test",
        "--server",
        &knot_like.addr.to_string(),
    ]);
    println!(
        "knot-like: {:?} -> {}",
        subnets_and_scopes(&rep),
        rep["verdict_text"]
    );
    assert_eq!(rep["verdict"], "broken-scope", "{rep}");
    let text = rep["verdict_text"].as_str().unwrap();
    assert!(
        text.contains("scope /0 for 41.0.0.0/24, 192.0.2.0/24"),
        "{text}"
    );
    // Each subnet was asked twice: once, and again to rule out rotation.
    for r in rep["results"].as_array().unwrap() {
        assert_eq!(r["repeat"], r["answers"], "{r}");
    }

    // The same server, right about its default (a scope of its own, as
    // gdnsd and meridian give): tailored.
    let right = FakeAuth::start(|addr, source| match addr.as_str() {
        "8.8.8.0" => ("192.0.2.1".into(), source),
        "85.214.0.0" => ("192.0.2.2".into(), source),
        _ => ("192.0.2.99".into(), 8),
    });
    let rep = probe_json(&[
        "ecs",
        "geo.example.test",
        "--server",
        &right.addr.to_string(),
    ]);
    assert_eq!(rep["verdict"], "tailored", "{rep}");
    assert!(rep["results"][0].get("repeat").is_none(), "{rep}");
}

#[test]
fn per_query_picking_with_scope_zero_is_rotation_not_broken_scope() {
    // Each answer picks the next of four addresses, whatever the subnet.
    let n = AtomicU32::new(0);
    let rotating = FakeAuth::start(move |_, _| {
        let i = n.fetch_add(1, Ordering::Relaxed) % 4;
        (format!("192.0.2.{}", 10 + i), 0)
    });
    let rep = probe_json(&[
        "ecs",
        "rr.example.test",
        "--server",
        &rotating.addr.to_string(),
    ]);
    assert_eq!(rep["verdict"], "mixed", "{rep}");
    let text = rep["verdict_text"].as_str().unwrap();
    assert!(text.contains("rotation"), "{text}");
    assert!(!text.contains("other scopes ."), "an empty list: {text}");
}

#[test]
fn unreachable_resolver_is_named_with_the_os_error() {
    // A loopback port nobody listens on: the kernel answers ICMP port
    // unreachable, the OS error is ECONNREFUSED.
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resolver = format!("127.0.0.1:{port}");
    let out = probe(&[
        "ecs",
        "www.example.test",
        "--resolver",
        &resolver,
        "--timeout",
        "300",
        "--tries",
        "1",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let err_line = stderr
        .lines()
        .find(|l| l.starts_with("meridian-probe: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    println!("{err_line}");
    assert!(
        err_line.contains(&format!("resolver {resolver}")),
        "{err_line}"
    );
    let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED).to_string();
    assert!(err_line.contains(&refused), "want {refused:?}: {err_line}");
}

/// Whether Knot's geoip module is installed: /usr/lib/<arch>/knot/modules-*/geoip.so.
fn knot_geoip_module() -> bool {
    let dirs = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    dirs(Path::new("/usr/lib")).iter().any(|arch| {
        dirs(&arch.join("knot"))
            .iter()
            .any(|m| m.join("geoip.so").is_file())
    })
}

/// The real thing: Knot 3.2's geoip module (tools/compare's configuration,
/// on the example database). Continents it has a view for get the
/// database's prefix as scope; a client the database does not know falls
/// to the zone's record with scope /0 — `broken-scope`, where the probe's
/// four old subnets said `tailored`.
#[test]
fn real_knot_default_answer_is_broken_scope() {
    const TEST: &str = "real_knot_default_answer_is_broken_scope";
    let have_knotd = Command::new("knotd")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_knotd || !knot_geoip_module() {
        crate::common::skip(
            TEST,
            "knotd 3.2 with its geoip module is not installed (apt-get install knot knot-module-geoip)",
        );
        return;
    }
    let root = crate::common::root();
    let conf_dir = root.join("tools/compare/conf/knot");
    let run = crate::common::TempDir::new("knot");
    let port = crate::common::free_port();
    let conf = std::fs::read_to_string(conf_dir.join("knot.conf.in"))
        .unwrap()
        .replace("{{PORT}}", &port.to_string())
        .replace("{{RUNDIR}}", run.0.to_str().unwrap())
        .replace("{{MMDB}}", root.join("geo/example.mmdb").to_str().unwrap());
    let conf_path = run.write("knot.conf", &conf);
    for f in ["geo.conf", "lb.test.zone"] {
        std::fs::copy(conf_dir.join(f), run.0.join(f)).unwrap();
    }
    let knot = Command::new("knotd")
        .arg("-c")
        .arg(&conf_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Kill(knot);
    let server = format!("127.0.0.1:{port}");
    // Up when it answers.
    let t0 = std::time::Instant::now();
    loop {
        let out = probe(&[
            "ecs",
            "www.lb.test",
            "--server",
            &server,
            "--timeout",
            "200",
            "--tries",
            "1",
            "--subnet",
            "8.8.8.0/24",
        ]);
        if out.status.success() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "knotd did not answer: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let rep = probe_json(&["ecs", "geo.lb.test", "--server", &server]);
    println!(
        "knot: {:?} -> {}",
        subnets_and_scopes(&rep),
        rep["verdict_text"]
    );
    assert_eq!(rep["verdict"], "broken-scope", "{rep}");
    let doc = rep["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["subnet"] == "192.0.2.0/24")
        .unwrap();
    assert_eq!(doc["scope"], 0, "{doc}");
    assert_eq!(doc["answers"], serde_json::json!(["192.0.2.99"]), "{doc}");
    // The four continents alone: what the probe saw before.
    let four = probe_json(&[
        "ecs",
        "geo.lb.test",
        "--server",
        &server,
        "--subnet",
        "8.8.8.0/24",
        "--subnet",
        "85.214.0.0/24",
        "--subnet",
        "133.242.0.0/24",
        "--subnet",
        "200.160.0.0/24",
    ]);
    assert_eq!(four["verdict"], "tailored", "{four}");
}
