//! Config distribution in a fleet (#18): `meridian fleet push` checks a
//! config as `meridian check` does and stores it with its zone files in
//! etcd as a new revision; every node serves it (keeping its own
//! `[server]`, `[api]` and `[fleet]`), reports the revision in `/status`,
//! in `meridian_fleet_config_revision` and in `fleet status`, and comes
//! back on it after a restart. A bad config is refused by the push and
//! nothing changes on any node.

use std::time::Duration;

use crate::fleet_support::{fleet_ready, within, Etcd, Node};
use crate::health_support::http;

pub(crate) fn revision(n: &Node) -> i64 {
    let (_, body) = http(n.api, "GET", "/status");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["fleet"]["revision"].as_i64().unwrap_or(-1)
}

pub(crate) fn new_name(n: &Node) -> Vec<String> {
    let m = n.server.query(&crate::common::Q::new(
        "new.fleet.test.",
        hickory_proto::rr::RecordType::A,
    ));
    crate::common::addrs(&m)
}

/// The config a pusher holds: the fleet zone with one more name and a
/// third pool member.
pub(crate) fn pushed_config(
    dir: &std::path::Path,
    etcd: &[String],
    extra_zone: &str,
) -> std::path::PathBuf {
    let cfg = crate::fleet_support::node_config(dir, "pusher", etcd);
    let zone = std::fs::read_to_string(dir.join("fleet.test.zone")).unwrap();
    std::fs::write(dir.join("fleet.test.zone"), format!("{zone}{extra_zone}")).unwrap();
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[api]\ntokens = \"api.tokens\"\n", "")
        .replace(
            "members = [\"127.0.0.81\", \"127.0.0.82\"]",
            "members = [\"127.0.0.81\", \"127.0.0.82\", \"127.0.0.83\"]",
        );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

#[test]
fn a_pushed_config_is_served_by_every_node() {
    if !fleet_ready("a_pushed_config_is_served_by_every_node") {
        return;
    }
    let etcd = Etcd::start(3);
    let eps = etcd.endpoints();
    let mut nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|n| Node::start(n, &eps))
        .collect();
    for n in &nodes {
        assert_eq!(revision(n), 0);
        assert!(new_name(n).is_empty());
    }
    let dir = crate::common::TempDir::new("fleet-push");
    let cfg = pushed_config(&dir.0, &eps, "new IN A 192.0.2.99\n");
    let (code, out, err) =
        crate::common::run(&["fleet", "push", "--config", &cfg.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    // The first line says the revision; one line per node follows.
    let rev: i64 = out
        .lines()
        .next()
        .unwrap_or_default()
        .rsplit(' ')
        .next()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    for n in &nodes {
        assert!(
            within(Duration::from_secs(5), || revision(n) == rev).is_some(),
            "revision {rev} not served"
        );
        assert_eq!(new_name(n), ["192.0.2.99"]);
        assert_eq!(n.web().len(), 3);
        let (_, m) = http(n.api, "GET", "/metrics");
        assert!(
            m.contains(&format!("meridian_fleet_config_revision {rev}")),
            "{m}"
        );
    }
    // `fleet status` lists every node on the revision (registrations are
    // rewritten each second).
    let on_rev = || {
        let (_, status, _) =
            crate::common::run(&["fleet", "status", "--config", &cfg.display().to_string()]);
        ["a", "b", "c"].iter().all(|node| {
            status.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.first() == Some(node) && f.get(2) == Some(&rev.to_string().as_str())
            })
        })
    };
    assert!(within(Duration::from_secs(3), on_rev).is_some());

    // A bad config: refused by the push, nothing changes anywhere.
    let bad = crate::common::TempDir::new("fleet-push-bad");
    let bad_cfg = pushed_config(&bad.0, &eps, "broken IN A 999.1.2.3\n");
    let (code, _, err) =
        crate::common::run(&["fleet", "push", "--config", &bad_cfg.display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("fleet.test.zone:") && err.contains("999.1.2.3"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(500));
    for n in &nodes {
        assert_eq!(revision(n), rev);
    }

    // A node restarted serves the pushed revision again.
    let health_support_dir;
    {
        let Node {
            server,
            config,
            _dir_keep: d,
            ..
        } = nodes.remove(2);
        drop(server);
        health_support_dir = d;
        let (server, api) = crate::health_support::serve(&config);
        nodes.push(Node {
            server,
            api,
            config,
            _dir_keep: None,
        });
    }
    let c = &nodes[2];
    assert!(within(Duration::from_secs(5), || revision(c) == rev).is_some());
    assert_eq!(new_name(c), ["192.0.2.99"]);
    drop(health_support_dir);
}

#[test]
fn a_node_whose_geo_database_differs_refuses_the_revision() {
    if !fleet_ready("a_node_whose_geo_database_differs_refuses_the_revision") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let db = std::fs::read(crate::common::root().join("geo/example.mmdb")).unwrap();
    let a = Node::start("a", &eps);
    let b = Node::start("b", &eps);
    // a holds the same database as the pusher, b another one.
    std::fs::write(a.config.parent().unwrap().join("geo.mmdb"), &db).unwrap();
    let mut other = db.clone();
    other.extend_from_slice(b"not the same file");
    std::fs::write(b.config.parent().unwrap().join("geo.mmdb"), &other).unwrap();

    let dir = crate::common::TempDir::new("fleet-push-geo");
    let cfg = pushed_config(&dir.0, &eps, "new IN A 192.0.2.99\n");
    std::fs::write(dir.0.join("geo.mmdb"), &db).unwrap();
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("[geo]\ndatabase = \"geo.mmdb\"\n\n{text}")).unwrap();
    // Stored, served by a, refused by b: the push says so and fails (3).
    let (code, out, err) =
        crate::common::run(&["fleet", "push", "--config", &cfg.display().to_string()]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(out.contains("\na: serves revision "), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("b: refused revision ") && l.contains("SHA-256")),
        "{out}"
    );

    assert!(within(Duration::from_secs(5), || revision(&a) > 0).is_some());
    assert_eq!(new_name(&a), ["192.0.2.99"]);
    let refused = within(Duration::from_secs(5), || {
        let (_, body) = http(b.api, "GET", "/status");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["fleet"]["refused"]["why"]
            .as_str()
            .is_some_and(|w| w.contains("SHA-256"))
    });
    assert!(refused.is_some(), "b did not refuse");
    assert_eq!(revision(&b), 0);
    assert!(new_name(&b).is_empty(), "b serves the refused revision");
    assert!(b.server.wait_log("refused", Duration::from_secs(1)));
}
