//! `meridian fleet status` (#18): every node of a fleet registers in etcd
//! under a lease and renews it each second; the command lists the nodes
//! with their last contact, the config they serve and their view of member
//! health, and a node that dies leaves the list once its lease runs out.

mod common;
mod fleet_support;
mod health_support;

use std::time::Duration;

use fleet_support::{fleet_ready, within, Etcd, Node};

fn status(config: &std::path::Path) -> String {
    let (code, out, err) =
        common::run(&["fleet", "status", "--config", &config.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    out
}

fn listed(out: &str, node: &str) -> bool {
    out.lines()
        .any(|l| l.split_whitespace().next() == Some(node))
}

#[test]
fn fleet_status_lists_live_nodes() {
    if !fleet_ready("fleet_status_lists_live_nodes") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let a = Node::start("a", &eps);
    let b = Node::start("b", &eps);
    assert!(within(Duration::from_secs(5), || {
        let out = status(&a.config);
        listed(&out, "a") && listed(&out, "b")
    })
    .is_some());
    let out = status(&a.config);
    let row = out
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap()
        .to_string();
    let f: Vec<&str> = row.split_whitespace().collect();
    // NODE CONTACT REVISION GENERATION ENTRIES DOWN CONFIG
    let age: f64 = f[1].trim_end_matches('s').parse().unwrap();
    assert!(age < 2.5, "{row}");
    assert_eq!((f[2], f[4], f[5]), ("0", "2", "0"), "{row}");
    assert!(f[6].ends_with("meridian.toml"), "{row}");
    assert!(out.contains("2 node(s) registered"), "{out}");

    // b dies: gone once its lease (5 s) runs out.
    drop(b);
    let gone = within(Duration::from_secs(8), || !listed(&status(&a.config), "b"));
    assert!(gone.is_some(), "b still listed");
    assert!(listed(&status(&a.config), "a"));

    // etcd down: the command fails and says why.
    drop(etcd);
    let (code, _, err) = common::run(&[
        "fleet",
        "status",
        "--config",
        &a.config.display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("etcd"), "{err}");
}
