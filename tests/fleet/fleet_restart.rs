//! A restarted node serves the newest revision it accepts (#26 item 1):
//! etcd's newest if it passes its checks, else the last one it accepted,
//! read back from its state dir, and its own config file only with
//! neither. Before the fix, a restart after a refused push fell back to
//! the node's own file and answered NXDOMAIN for names its peers served.

use std::time::Duration;

use crate::fleet_config::{new_name, pushed_config, revision};
use crate::fleet_support::{fleet_ready, within, Etcd, Node};
use crate::health_support::http;

fn fleet_status(n: &Node) -> serde_json::Value {
    let (_, body) = http(n.api, "GET", "/status");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["fleet"].clone()
}

/// Push `cfg` (with `geo.mmdb` beside it) and return its revision.
fn push(cfg: &std::path::Path) -> i64 {
    // Stored is enough: these pushes are refused by some nodes on purpose.
    let (code, out, err) = crate::common::run(&[
        "fleet",
        "push",
        "--no-wait",
        "--config",
        &cfg.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .next()
        .and_then(|l| l.trim().rsplit(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{out}"))
}

#[test]
fn a_restart_after_a_refused_push_serves_the_last_accepted_revision() {
    if !fleet_ready("a_restart_after_a_refused_push_serves_the_last_accepted_revision") {
        return;
    }
    let mut etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let db = std::fs::read(crate::common::root().join("geo/example.mmdb")).unwrap();
    let a = Node::start("a", &eps);
    std::fs::write(a.config.parent().unwrap().join("geo.mmdb"), &db).unwrap();

    // Revision N: accepted.
    let dir = crate::common::TempDir::new("fleet-restart-push");
    let cfg = pushed_config(&dir.0, &eps, "new IN A 192.0.2.99\n");
    std::fs::write(dir.0.join("geo.mmdb"), &db).unwrap();
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("[geo]\ndatabase = \"geo.mmdb\"\n\n{text}")).unwrap();
    let good = push(&cfg);
    assert!(within(Duration::from_secs(10), || revision(&a) == good).is_some());
    assert_eq!(new_name(&a), ["192.0.2.99"]);

    // Revision N+1: checked against another geo database, so the node
    // refuses it.
    let mut other = db.clone();
    other.extend_from_slice(b"not the same file");
    std::fs::write(dir.0.join("geo.mmdb"), &other).unwrap();
    let bad = push(&cfg);
    assert!(bad > good);
    let refused = |a: &Node| fleet_status(a)["refused"]["revision"].as_i64() == Some(bad);
    assert!(within(Duration::from_secs(10), || refused(&a)).is_some());

    // Restarted: revision N, read back from the state dir, then etcd's
    // newest checked and refused again; never the node's own file.
    let a = a.restart();
    assert_eq!(
        new_name(&a),
        ["192.0.2.99"],
        "the restarted node lost revision {good}"
    );
    assert_eq!(revision(&a), good);
    assert!(a.server.wait_log(
        &format!("serving revision {good}, the last this node accepted"),
        Duration::from_secs(2)
    ));
    assert!(within(Duration::from_secs(10), || refused(&a)).is_some());
    let st = fleet_status(&a);
    assert_eq!(st["source"], "state_dir", "{st}");
    assert_eq!(st["revision"].as_i64(), Some(good), "{st}");
    assert_eq!(new_name(&a), ["192.0.2.99"]);

    // With etcd gone too, a restart still serves revision N.
    etcd.kill_all();
    let a = a.restart();
    assert_eq!(new_name(&a), ["192.0.2.99"]);
    assert_eq!(fleet_status(&a)["source"], "state_dir");
}

#[test]
fn a_restart_takes_etcds_newest_when_it_passes() {
    if !fleet_ready("a_restart_takes_etcds_newest_when_it_passes") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let a = Node::start("a", &eps);
    assert_eq!(fleet_status(&a)["source"], "local");
    let dir = crate::common::TempDir::new("fleet-restart-newest");
    let cfg = pushed_config(&dir.0, &eps, "new IN A 192.0.2.99\n");
    let first = push(&cfg);
    assert!(within(Duration::from_secs(10), || revision(&a) == first).is_some());
    assert_eq!(fleet_status(&a)["source"], "etcd");

    // A newer revision pushed while the node is down is served after its
    // restart.
    let mut second = 0;
    let a = a.restart_after(|| {
        let zone = std::fs::read_to_string(dir.0.join("fleet.test.zone")).unwrap();
        std::fs::write(
            dir.0.join("fleet.test.zone"),
            zone.replace("192.0.2.99", "192.0.2.77"),
        )
        .unwrap();
        second = push(&cfg);
    });
    assert!(within(Duration::from_secs(10), || revision(&a) == second).is_some());
    assert_eq!(new_name(&a), ["192.0.2.77"]);
    assert_eq!(fleet_status(&a)["source"], "etcd");
}

/// A reload (SIGHUP) of a node serving a pushed revision composes that
/// revision again with the node's own tables as they are now: an edit to
/// its own `[server]` takes effect, and the revision keeps serving. Before,
/// the reload re-read the revision as composed when it arrived.
#[test]
fn a_reload_on_a_pushed_revision_takes_the_nodes_own_edits() {
    if !fleet_ready("a_reload_on_a_pushed_revision_takes_the_nodes_own_edits") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let a = Node::start("a", &eps);
    let dir = crate::common::TempDir::new("fleet-reload-own");
    let cfg = pushed_config(&dir.0, &eps, "new IN A 192.0.2.99\n");
    let rev = push(&cfg);
    assert!(within(Duration::from_secs(10), || revision(&a) == rev).is_some());

    let version = || {
        let r = a.server.ask(
            &crate::common::QueryBuilder::new("version.bind", 16)
                .class(3)
                .build(),
        );
        r.wire.answer.first().map(|rr| rr.rdata[1..].to_vec())
    };
    assert_eq!(version(), None);
    let text = std::fs::read_to_string(&a.config).unwrap();
    let edited = text.replace("[server]\n", "[server]\nversion = \"node-a-2\"\n");
    assert_ne!(text, edited);
    std::fs::write(&a.config, edited).unwrap();
    let line = a.server.reload(Duration::from_secs(10));
    assert!(line.contains("reloaded"), "{line}");
    assert_eq!(version().as_deref(), Some(&b"node-a-2"[..]));
    assert_eq!(revision(&a), rev);
    assert_eq!(new_name(&a), ["192.0.2.99"]);
}
