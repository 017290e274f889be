//! A reload slower than the lease keeps every node registered (#26 item
//! 3). Every node gets a push at once; when the lease was renewed in the
//! same loop that served the pushed config, a reload longer than the lease
//! dropped every registration together. The daemon's test hook
//! `MERIDIAN_TEST_RELOAD_DELAY_MS` makes each reload 6 s long, against a
//! lease of 2 s.

use std::time::{Duration, Instant};

use crate::fleet_config::{new_name, pushed_config, revision};
use crate::fleet_support::{fleet_ready, within, Etcd, Node};

#[test]
fn a_reload_longer_than_the_lease_keeps_every_node_registered() {
    if !fleet_ready("a_reload_longer_than_the_lease_keeps_every_node_registered") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let slow = [("MERIDIAN_TEST_RELOAD_DELAY_MS", "6000")];
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|n| Node::start_env(n, &eps, "lease = \"2s\"\n", "", &slow))
        .collect();
    let registered = || {
        let kv = etcd.get_prefix("/meridian-test/nodes/");
        ["a", "b", "c"]
            .iter()
            .filter(|n| kv.contains(&format!("/meridian-test/nodes/{n}\n")))
            .count()
    };
    assert!(within(Duration::from_secs(5), || registered() == 3).is_some());

    let dir = crate::common::TempDir::new("fleet-slow-reload");
    let cfg = pushed_config(&dir.0, &eps, "new IN A 192.0.2.99\n");
    // Not waiting for the nodes: the slow reloads are watched below.
    let (code, out, err) = crate::common::run(&[
        "fleet",
        "push",
        "--no-wait",
        "--config",
        &cfg.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rev: i64 = out
        .lines()
        .next()
        .and_then(|l| l.trim().rsplit(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));

    // Through the three reloads (6 s each, against a 2 s lease), every
    // node stays registered, and each answers from its running config.
    let t0 = Instant::now();
    let mut samples = 0;
    while nodes.iter().any(|n| revision(n) != rev) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "revision {rev} not served"
        );
        assert_eq!(
            registered(),
            3,
            "a registration expired during a slow reload"
        );
        samples += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        t0.elapsed() > Duration::from_secs(5),
        "the reload hook did not slow the reload"
    );
    assert!(samples > 10);
    for n in &nodes {
        assert_eq!(new_name(n), ["192.0.2.99"]);
        // Not one lease ran out. (A request that times out on a loaded
        // machine may still make a node reconnect: its registration stays,
        // under the old lease until the new one is granted.)
        assert!(
            !n.server.wait_log("lease expired", Duration::from_millis(1)),
            "{}",
            n.server.stderr.lock().unwrap().join("\n")
        );
    }
}
