//! Pool members from a registry (#31 item 4): pools with
//! `members_from = "etcd"` take members registered under
//! `{prefix}members/POOL/ID` with leases in a real etcd. A registration
//! answers only after its first passing check; one whose lease expires is
//! ejected at once and leaves after `members_grace`; a mass expiry is
//! bounded by `max_ejected` and `panic_below`; malformed registrations
//! are ignored with a warning naming the key and never remove members.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::fleet_support::{fleet_ready, within, Etcd, Node};
use crate::health_support::{http, Backend};

const PREFIX: &str = "/meridian-test/members/";

/// A TCP check every 200 ms (rise and fall 1) and three registry pools:
/// `reg` (cap 2, grace 2 s), `cap` (cap 1) and `pan` (panic below 0.5).
fn tables() -> String {
    let pool = |name: &str, policy: &str| {
        format!(
            "[pool.{name}]\nmembers_from = \"etcd\"\ncheck = \"r\"\nmembers_grace = \"2s\"\n{policy}\n\n\
             [name.\"{name}.fleet.test\"]\npool = \"{name}\"\nmode = \"all\"\nttl = 5\n\n"
        )
    };
    format!(
        "[check.r]\ntype = \"tcp\"\ninterval_ms = 200\ntimeout_ms = 150\nrise = 1\nfall = 1\n\n{}{}{}",
        pool("reg", "max_ejected = 2"),
        pool("cap", "max_ejected = 1"),
        pool("pan", "panic_below = 0.5"),
    )
}

/// `etcdctl` on `etcd`: (success, stdout).
fn ctl(etcd: &Etcd, args: &[&str]) -> (bool, String) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", etcd.endpoints().join(",")))
        .args(args)
        .output()
        .expect("run etcdctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A lease of `ttl` seconds, in hex as etcdctl takes it.
fn lease(etcd: &Etcd, ttl: u32) -> String {
    let (ok, out) = ctl(etcd, &["lease", "grant", &ttl.to_string()]);
    assert!(ok, "lease grant: {out}");
    out.split_whitespace().nth(1).expect("lease id").to_string()
}

/// Keep `id` alive until the child is killed (then it expires within its TTL).
fn keep_alive(etcd: &Etcd, id: &str) -> KeepAlive {
    let child = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", etcd.endpoints().join(",")))
        .args(["lease", "keep-alive", id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcdctl lease keep-alive");
    KeepAlive(child)
}

struct KeepAlive(Child);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Register `value` as `members/{pool}/{id}` under `lease`.
fn register(etcd: &Etcd, pool: &str, id: &str, value: &str, lease: &str) {
    let key = format!("{PREFIX}{pool}/{id}");
    let (ok, out) = ctl(etcd, &["put", &format!("--lease={lease}"), &key, value]);
    assert!(ok, "put {key}: {out}");
}

/// The sorted addresses `n` answers for `{pool}.fleet.test`.
fn answers(n: &Node, pool: &str) -> Vec<String> {
    let m = n.server.query(&crate::common::Q::new(
        &format!("{pool}.fleet.test."),
        hickory_proto::rr::RecordType::A,
    ));
    let mut a = crate::common::addrs(&m);
    a.sort();
    a
}

/// `GET /members/POOL`: (address, hold) of each member, sorted.
fn members(n: &Node, pool: &str) -> Vec<(String, String)> {
    let (code, body) = http(n.api, "GET", &format!("/members/{pool}"));
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut out: Vec<(String, String)> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("address"), s("hold"))
        })
        .collect();
    out.sort();
    out
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn registry_register_expire_reregister() {
    if !fleet_ready("registry_register_expire_reregister") {
        return;
    }
    let etcd = Etcd::start(1);
    let node = Node::start_with("m1", &etcd.endpoints(), "", &tables());
    let (a, b) = (Backend::ok("127.0.0.101"), Backend::ok("127.0.0.102"));
    let mut c = Backend::stopped("127.0.0.103");
    let long = lease(&etcd, 60);
    let short = lease(&etcd, 2);
    let keeper = keep_alive(&etcd, &short);
    register(&etcd, "reg", "a", &a.addr.to_string(), &long);
    register(&etcd, "reg", "b", &b.addr.to_string(), &short);
    // c registers, but nothing listens: it never answers.
    register(&etcd, "reg", "c", &c.addr.to_string(), &long);
    let ab = strs(&["127.0.0.101", "127.0.0.102"]);
    assert!(
        within(Duration::from_secs(10), || answers(&node, "reg") == ab).is_some(),
        "registered members never answered: {:?}",
        answers(&node, "reg")
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(answers(&node, "reg"), ab, "an unproven member answered");
    // In `pan` (panic below 0.5) three registrations that never pass do
    // not count: were they failing members, 2 of 5 passing would panic
    // and every one would answer.
    let (d, e) = (
        Backend::stopped("127.0.0.104"),
        Backend::stopped("127.0.0.105"),
    );
    for (id, bk) in [("a", &a), ("b", &b), ("c", &c), ("d", &d), ("e", &e)] {
        register(&etcd, "pan", id, &bk.addr.to_string(), &long);
    }
    assert!(within(Duration::from_secs(10), || answers(&node, "pan") == ab).is_some());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        answers(&node, "pan"),
        ab,
        "unproven members answered in panic"
    );
    let listed = members(&node, "reg");
    assert!(
        listed.contains(&("127.0.0.103".into(), "unproven".into())),
        "{listed:?}"
    );
    let (code, out, err) =
        crate::common::run(&["ctl", "--api", &node.api.to_string(), "members", "reg"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("etcd /meridian-test/members/reg/a"), "{out}");

    // c's backend comes up: c enters after its first passing check.
    c.restart();
    let abc = strs(&["127.0.0.101", "127.0.0.102", "127.0.0.103"]);
    assert!(within(Duration::from_secs(5), || answers(&node, "reg") == abc).is_some());

    // b's lease expires: out of the answers at once, listed as gone,
    // then gone from the pool after the grace (2 s).
    drop(keeper);
    let ac = strs(&["127.0.0.101", "127.0.0.103"]);
    assert!(
        within(Duration::from_secs(8), || answers(&node, "reg") == ac).is_some(),
        "an expired member kept answering: {:?}",
        answers(&node, "reg")
    );
    assert!(
        within(Duration::from_secs(8), || members(&node, "reg").len() == 2).is_some(),
        "the expired member never left: {:?}",
        members(&node, "reg")
    );

    // b registers again.
    register(&etcd, "reg", "b", &b.addr.to_string(), &long);
    assert!(within(Duration::from_secs(8), || answers(&node, "reg") == abc).is_some());
}

#[test]
fn registry_mass_expiry_is_capped() {
    if !fleet_ready("registry_mass_expiry_is_capped") {
        return;
    }
    let etcd = Etcd::start(1);
    let node = Node::start_with("m2", &etcd.endpoints(), "", &tables());
    let backends: Vec<Backend> = (111..115)
        .map(|i| Backend::ok(&format!("127.0.0.{i}")))
        .collect();
    // One broken agent holds every registration under one lease.
    let agent = lease(&etcd, 2);
    let keeper = keep_alive(&etcd, &agent);
    for (i, b) in backends.iter().enumerate() {
        for pool in ["cap", "pan"] {
            register(&etcd, pool, &format!("m{i}"), &b.addr.to_string(), &agent);
        }
    }
    let all: Vec<String> = (111..115).map(|i| format!("127.0.0.{i}")).collect();
    for pool in ["cap", "pan"] {
        assert!(
            within(Duration::from_secs(10), || answers(&node, pool) == all).is_some(),
            "{pool}: {:?}",
            answers(&node, pool)
        );
    }
    // Every lease at once: the cap keeps 3 of 4, panic keeps all, and
    // neither pool empties after several graces.
    drop(keeper);
    assert!(
        within(Duration::from_secs(8), || members(&node, "cap")
            .iter()
            .all(|(_, h)| h == "gone"))
        .is_some(),
        "{:?}",
        members(&node, "cap")
    );
    for _ in 0..4 {
        std::thread::sleep(Duration::from_secs(2));
        let cap = answers(&node, "cap");
        assert_eq!(cap.len(), 3, "cap: {cap:?}");
        assert_eq!(answers(&node, "pan"), all, "panic");
    }
    assert_eq!(members(&node, "cap").len(), 4);
}

#[test]
fn registry_ignores_bad_registrations() {
    if !fleet_ready("registry_ignores_bad_registrations") {
        return;
    }
    let etcd = Etcd::start(1);
    let node = Node::start_with("m3", &etcd.endpoints(), "", &tables());
    let a = Backend::ok("127.0.0.121");
    let long = lease(&etcd, 60);
    register(&etcd, "reg", "a", &a.addr.to_string(), &long);
    let only_a = strs(&["127.0.0.121"]);
    assert!(within(Duration::from_secs(10), || answers(&node, "reg") == only_a).is_some());
    let bad = [
        ("bad-address", "not-an-address".to_string()),
        ("bad-port", "127.0.0.122:0".to_string()),
        (
            "bad-weight",
            r#"{"address":"127.0.0.123","weight":0}"#.to_string(),
        ),
        (
            "bad-json",
            r#"{"address":"127.0.0.124","weight":"#.to_string(),
        ),
        // A malformed value over a valid key: the last valid one stays.
        ("a", "127.0.0.121:notaport".to_string()),
    ];
    for (id, v) in &bad {
        register(&etcd, "reg", id, v, &long);
    }
    for (id, _) in &bad {
        let needle = format!("registry: ignoring {PREFIX}reg/{id}:");
        assert!(
            node.server.wait_log(&needle, Duration::from_secs(5)),
            "no warning naming {id}"
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(answers(&node, "reg"), only_a);
    assert_eq!(
        members(&node, "reg"),
        vec![("127.0.0.121".into(), "none".into())]
    );
    // Once per key and value, however often it is seen again.
    register(&etcd, "reg", "bad-address", "not-an-address", &long);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        node.server
            .log_count(&format!("registry: ignoring {PREFIX}reg/bad-address:")),
        1
    );
}
