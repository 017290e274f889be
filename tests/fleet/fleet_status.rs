//! `meridian fleet status` (#18): every node of a fleet registers in etcd
//! under a lease and renews it each second; the command lists the nodes
//! with their last contact, the config they serve and their view of member
//! health, then what the checkers share for each checked member, and a
//! node that dies leaves the list once its lease runs out.

use std::time::Duration;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::fleet_support::{chk_tables, fleet_ready, within, Backend, Etcd, Node};

fn status(config: &std::path::Path) -> String {
    let (code, out, err) =
        crate::common::run(&["fleet", "status", "--config", &config.display().to_string()]);
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
    let mut backend = Backend::start(0, Arc::new(AtomicU64::new(0)));
    let port = backend.port;
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let extra = chk_tables(port);
    let a = Node::start_with("a", &eps, "", &extra);
    let b = Node::start_with("b", &eps, "", &extra);
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
    // NODE CONTACT REVISION SOURCE GENERATION ENTRIES DOWN CONFIG
    let age: f64 = f[1].trim_end_matches('s').parse().unwrap();
    assert!(age < 2.5, "{row}");
    // Entries: the two web members and the two of chk.
    assert_eq!((f[2], f[3], f[5], f[6]), ("0", "local", "4", "0"), "{row}");
    assert!(f[7].ends_with("meridian.toml"), "{row}");
    assert!(out.contains("2 node(s) registered"), "{out}");

    // The checked member: both nodes are its checkers (two nodes, three
    // checkers wanted) and report it up, then down once it fails.
    let member = format!("127.0.0.91#{port}#c");
    let row_of = |out: &str| {
        out.lines()
            .find(|l| l.starts_with(&member))
            .map(|l| l.to_string())
    };
    let reported = |up: &str, down: &str| {
        let out = status(&a.config);
        row_of(&out).is_some_and(|r| {
            let f: Vec<&str> = r.split_whitespace().collect();
            f[1] == up && f[2] == down
        })
    };
    assert!(
        within(Duration::from_secs(5), || reported("2", "0")).is_some(),
        "{}",
        status(&a.config)
    );
    let row = row_of(&status(&a.config)).unwrap();
    assert!(row.contains("a up") && row.contains("b up"), "{row}");
    backend.stop();
    assert!(
        within(Duration::from_secs(5), || reported("0", "2")).is_some(),
        "{}",
        status(&a.config)
    );
    let row = row_of(&status(&a.config)).unwrap();
    assert!(row.contains("a down") && row.contains("b down"), "{row}");

    // b dies: gone once its lease (5 s) runs out.
    drop(b);
    let gone = within(Duration::from_secs(8), || !listed(&status(&a.config), "b"));
    assert!(gone.is_some(), "b still listed");
    assert!(listed(&status(&a.config), "a"));

    // etcd down: the command fails and says why.
    drop(etcd);
    let (code, _, err) = crate::common::run(&[
        "fleet",
        "status",
        "--config",
        &a.config.display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("etcd"), "{err}");
}
