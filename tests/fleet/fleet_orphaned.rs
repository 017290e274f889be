//! A member whose checkers all vanished is probed locally rather than
//! trusted blindly (#18 item 5). Four nodes, checkers = 3, and a lease of
//! 60 s, so the three killed checkers stay registered (and assigned) for
//! the whole test: what takes the failed backend out on the fourth node is
//! its own probing, started when the shared results went stale, not a
//! re-assignment after the leases ran out.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::fleet_support::{chk, chk_tables, fleet_ready, within, Backend, Etcd, Node};

/// `/status`'s `probed_here` for the checked member of `n`.
fn probed_here(n: &Node) -> Option<bool> {
    let (_, body) = crate::health_support::http(n.api, "GET", "/status");
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["members"]
        .as_array()?
        .iter()
        .find(|m| m["address"] == "127.0.0.91")?["probed_here"]
        .as_bool()
}

#[test]
fn a_member_whose_checkers_vanished_is_probed_locally() {
    if !fleet_ready("a_member_whose_checkers_vanished_is_probed_locally") {
        return;
    }
    let probes = Arc::new(AtomicU64::new(0));
    let mut backend = Backend::start(0, probes.clone());
    let port = backend.port;
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let extra = chk_tables(port);
    let fleet = "checkers = 3\nlease = \"60s\"\n";
    let names = ["n1", "n2", "n3", "n4"];
    let key = format!("127.0.0.91#{port}#c");
    #[cfg(feature = "fleet")]
    let assigned = meridian::fleet::checkers_of(&key, names.iter().copied(), 3);
    // Without the feature fleet_ready returned above: never used.
    #[cfg(not(feature = "fleet"))]
    let assigned: Vec<&str> = vec![&key];
    let lone = *names
        .iter()
        .find(|n| !assigned.contains(n))
        .expect("one node is not a checker");
    let lone_node = Node::start_with(lone, &eps, fleet, &extra);
    let checkers: Vec<Node> = assigned
        .iter()
        .map(|n| Node::start_with(n, &eps, fleet, &extra))
        .collect();
    let lone_node = &lone_node;
    let both = vec!["127.0.0.91".to_string(), "127.0.0.92".to_string()];
    let only92 = vec!["127.0.0.92".to_string()];

    // Settled: the lone node follows the checkers' shared results.
    assert!(within(Duration::from_secs(5), || chk(lone_node) == both).is_some());
    assert!(
        within(Duration::from_secs(5), || probed_here(lone_node)
            == Some(false))
        .is_some(),
        "{lone} probes the member itself although its checkers report"
    );
    for node in &checkers {
        assert_eq!(probed_here(node), Some(true), "a checker");
    }
    // The shared results are counted: the backend fails, the lone node
    // takes it out from them, and back.
    backend.stop();
    assert!(within(Duration::from_secs(4), || chk(lone_node) == only92).is_some());
    let mut backend = Backend::start(port, probes.clone());
    assert!(within(Duration::from_secs(4), || chk(lone_node) == both).is_some());

    // Kill all three checkers (SIGKILL: no lease is revoked). Their
    // registrations stay in etcd for the lease (60 s): still assigned,
    // silent.
    drop(checkers);
    let registered = etcd.get_prefix("/meridian-test/nodes/");
    for n in &assigned {
        assert!(
            registered.contains(&format!("/meridian-test/nodes/{n}")),
            "{n} left etcd: {registered}"
        );
    }
    // Within the staleness window (3 × 200 ms + 1 s) plus a tick, the lone
    // node probes the member itself and says so.
    let t = within(Duration::from_secs(5), || {
        probed_here(lone_node) == Some(true)
    });
    assert!(
        t.is_some(),
        "the lone node went on trusting silent checkers"
    );
    eprintln!("probing locally {:?} after the checkers died", t.unwrap());
    assert!(
        within(Duration::from_secs(2), || {
            lone_node
                .server
                .stderr
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("none of its checkers") && l.contains("probing it here"))
        })
        .is_some(),
        "no log line: {:?}",
        lone_node.server.stderr.lock().unwrap()
    );
    // Its own probes now decide: the backend fails and the lone node takes
    // it out, long before the dead checkers' leases run out.
    backend.stop();
    let t = within(Duration::from_secs(4), || chk(lone_node) == only92);
    assert!(t.is_some(), "the failed member stayed in the answers");
    let _backend = Backend::start(port, probes.clone());
    assert!(within(Duration::from_secs(4), || chk(lone_node) == both).is_some());
    // And it shares what it finds under its own lease (at its next
    // contact, once a second).
    let mine = format!("/meridian-test/health/{key}/{lone}");
    assert!(
        within(Duration::from_secs(3), || etcd
            .get_prefix(&format!("/meridian-test/health/{key}/"))
            .contains(&mine))
        .is_some(),
        "{lone} did not share its results: {}",
        etcd.get_prefix("/meridian-test/health/")
    );
}
