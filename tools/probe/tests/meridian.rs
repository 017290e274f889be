//! meridian-probe against meridian itself (the root crate's `meridian` binary), on loopback.
//!
//! CONTRACT TESTS: they are written against the behaviour promised for meridian's bundled example
//! zone (`zones/meridian.toml`), which is being built in parallel with this tool:
//!   - `meridian serve --config zones/meridian.toml --listen 127.0.0.1:PORT` (cwd = repo root)
//!     prints a line containing `ready` on stderr once it answers;
//!   - www.example.test: static A 192.0.2.1, AAAA 2001:db8::1 (ECS scope /0);
//!   - geo.example.test: different pools for the US/DE/JP/BR default subnets, non-zero scope;
//!   - shuffle.example.test: mode all, four IPv4 members reshuffled on each answer;
//!   - one.example.test: one weighted member per answer.
//!
//! The tests add `--http-listen none` so that parallel instances do not fight over the example
//! config's fixed HTTP port. The binary is taken from $MERIDIAN_BIN, else built with
//! `cargo build --bin meridian` and taken from target/debug (falling back to an existing
//! target/{debug,release}/meridian).

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::RecordType;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// Finds (building if needed, once per test run) the meridian binary.
fn meridian_bin() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("MERIDIAN_BIN") {
            return Ok(PathBuf::from(p));
        }
        let root = repo_root();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let build = Command::new(cargo)
            .args(["build", "--bin", "meridian"])
            .current_dir(&root)
            .output();
        let debug = target.join("debug/meridian");
        let release = target.join("release/meridian");
        match build {
            Ok(o) if o.status.success() && debug.exists() => return Ok(debug),
            Ok(o) => eprintln!(
                "warning: `cargo build --bin meridian` failed; trying an existing binary:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("warning: cannot run cargo: {e}"),
        }
        [debug, release]
            .into_iter()
            .filter(|p| p.exists())
            .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
            .ok_or_else(|| {
                "no meridian binary: the root crate did not build and none exists in target/"
                    .to_string()
            })
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A running meridian; killed when dropped (also when the test panics).
struct Meridian {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Meridian {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free for both UDP and TCP on 127.0.0.1 right now.
fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn start_meridian() -> Meridian {
    let bin = meridian_bin();
    let mut last = String::new();
    for _ in 0..5 {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let mut child = Command::new(&bin)
            .args(["serve", "--config", "zones/meridian.toml", "--listen"])
            .arg(addr.to_string())
            // The example config's fixed HTTP port would collide between parallel tests.
            .args(["--http-listen", "none"])
            // CI runs as root: allow it (the example's `user` is then not applied).
            .arg("--allow-root")
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keep draining so meridian never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut log = String::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let server = Meridian { child, addr };
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    log.push_str(&line);
                    log.push('\n');
                    if line.contains("meridian: ready") {
                        return server;
                    }
                }
                // Exited (stderr closed) or never became ready: try again on another port.
                Err(_) => break,
            }
        }
        last = log;
        drop(server);
    }
    panic!("meridian did not print `ready`; its stderr:\n{last}");
}

fn probe_json(args: &[&str]) -> Value {
    let out = probe(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "probe {args:?} failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    json(&out)
}

fn results(v: &Value) -> &Vec<Value> {
    v["results"].as_array().expect("results")
}

/// Asks meridian directly (without the probe) for the ECS scope and answers, to cross-check.
fn direct_ecs(server: SocketAddr, name: &str, subnet: &str) -> (Vec<String>, Option<u8>) {
    let net: ipnet::IpNet = subnet.parse().unwrap();
    let mut q = Message::query();
    q.add_query(Query::query(common::name(name), RecordType::A));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
        net.addr(),
        net.prefix_len(),
        0,
    )));
    q.set_edns(e);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    sock.send_to(&q.to_vec().unwrap(), server).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).expect("meridian answers");
    let r = Message::from_vec(&buf[..n]).unwrap();
    let mut answers: Vec<String> = r
        .answers
        .iter()
        .filter(|r| r.record_type() == RecordType::A)
        .map(|r| r.data.to_string())
        .collect();
    answers.sort();
    let scope = query_ecs(&r).map(|cs| cs.scope_prefix());
    (answers, scope)
}

#[test]
fn meridian_static_name_is_uniform_scope_zero() {
    let m = start_meridian();
    let server = m.addr.to_string();
    let v = probe_json(&["ecs", "www.example.test", "--server", &server, "--json"]);
    assert_eq!(v["verdict"], "uniform", "{}", v["verdict_text"]);
    assert_eq!(v["name"], "www.example.test.");
    assert_eq!(v["qtype"], "A");
    assert_eq!(results(&v).len(), 6);
    for r in results(&v) {
        assert_eq!(r["rcode"], "NOERROR", "{r}");
        assert_eq!(r["answers"], serde_json::json!(["192.0.2.1"]), "{r}");
        assert_eq!(r["scope"], 0, "{r}");
        assert_eq!(r["ecs_echoed"], true, "{r}");
        assert_eq!(r["ecs_echo_valid"], true, "{r}");
        assert!(r["ttl"].is_u64(), "{r}");
    }

    let v = probe_json(&[
        "ecs",
        "www.example.test",
        "--type",
        "AAAA",
        "--server",
        &server,
        "--json",
    ]);
    assert_eq!(v["verdict"], "uniform", "{}", v["verdict_text"]);
    assert_eq!(v["results"][0]["subnet"], "2001:4860::/48");
    for r in results(&v) {
        assert_eq!(r["answers"], serde_json::json!(["2001:db8::1"]), "{r}");
        assert_eq!(r["scope"], 0, "{r}");
    }

    let out = probe(&["ecs", "www.example.test", "--server", &server]);
    let text = stdout(&out);
    assert!(
        text.contains("same answers for every subnet with scope /0"),
        "{text}"
    );
    assert!(text.contains("scope /0"), "{text}");
}

#[test]
fn meridian_geo_name_is_tailored_with_returned_scopes() {
    let m = start_meridian();
    let server = m.addr.to_string();
    let v = probe_json(&["ecs", "geo.example.test", "--server", &server, "--json"]);
    assert_eq!(v["verdict"], "tailored", "{}", v["verdict_text"]);
    assert!(v["distinct_answer_sets"].as_u64().unwrap() >= 2, "{v}");
    let mut scopes = Vec::new();
    for r in results(&v) {
        assert_eq!(r["rcode"], "NOERROR", "{r}");
        assert_eq!(r["ecs_echoed"], true, "{r}");
        assert_eq!(r["ecs_echo_valid"], true, "{r}");
        let scope = r["scope"].as_u64().expect("scope") as u8;
        assert!(scope > 0, "{r}");
        scopes.push(scope);

        // The probe reports what meridian really returned.
        let subnet = r["subnet"].as_str().unwrap();
        let (answers, direct_scope) = direct_ecs(m.addr, "geo.example.test.", subnet);
        assert_eq!(direct_scope, Some(scope), "{subnet}");
        let mut reported: Vec<String> = r["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        reported.sort();
        assert_eq!(reported, answers, "{subnet}");
    }
    // The verdict text names the scopes seen.
    let text = v["verdict_text"].as_str().unwrap();
    for s in &scopes {
        assert!(text.contains(&format!("/{s}")), "{text}");
    }
}

#[test]
fn meridian_shuffle_is_client_chooses() {
    let m = start_meridian();
    let v = probe_json(&[
        "rotation",
        "shuffle.example.test",
        "--server",
        &m.addr.to_string(),
        "--count",
        "20",
        "--interval",
        "0",
        "--json",
    ]);
    assert_eq!(v["verdict"], "client-chooses", "{}", v["verdict_text"]);
    assert_eq!(v["name"], "shuffle.example.test.");
    assert_eq!(v["count"], 20);
    assert_eq!(v["distinct"].as_array().unwrap().len(), 4);
    assert_eq!(v["set_sizes"], serde_json::json!({"4": 20}));
    assert!(v["first_changed"].as_u64().unwrap() > 0);
}

#[test]
fn meridian_one_is_server_chooses() {
    let m = start_meridian();
    let v = probe_json(&[
        "rotation",
        "one.example.test",
        "--server",
        &m.addr.to_string(),
        "--count",
        "20",
        "--interval",
        "0",
        "--json",
    ]);
    assert_eq!(v["verdict"], "server-chooses", "{}", v["verdict_text"]);
    assert_eq!(v["set_sizes"], serde_json::json!({"1": 20}));
    assert!(v["distinct"].as_array().unwrap().len() >= 2);
    assert!(v["first_changed"].as_u64().unwrap() > 0);
}

#[test]
fn meridian_static_rotation_is_static() {
    let m = start_meridian();
    let v = probe_json(&[
        "rotation",
        "www.example.test",
        "--server",
        &m.addr.to_string(),
        "--count",
        "10",
        "--interval",
        "0",
        "--json",
    ]);
    assert_eq!(v["verdict"], "static", "{}", v["verdict_text"]);
    assert_eq!(v["distinct"], serde_json::json!(["192.0.2.1"]));
    assert_eq!(v["first_changed"], 0);

    let out = probe(&[
        "rotation",
        "www.example.test",
        "--server",
        &m.addr.to_string(),
        "--count",
        "3",
        "--interval",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("[static]"), "{}", stdout(&out));
}
