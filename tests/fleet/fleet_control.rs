//! Fleet mode (#18): operator overrides and runtime weights live in a
//! real 3-member etcd cluster shared by 3 meridian nodes on loopback.
//! An override posted on node A is served by B and C within 1 s and shows
//! in every node's `/status` with who set it, where and when; clearing it
//! on B frees it everywhere; a write without a valid token changes nothing
//! on any node (nor in etcd); a restarted node comes back with the shared
//! state; killing the etcd leader loses no query and no state, and writes
//! work again once a new leader is elected; with all of etcd down the
//! nodes keep answering with their last state and refuse writes (503)
//! without changing anything.

use std::time::Duration;

use crate::fleet_support::{fleet_ready, within, Etcd, Node};
use crate::health_support::{http, http_with};

fn both() -> Vec<String> {
    vec!["127.0.0.81".into(), "127.0.0.82".into()]
}

fn only82() -> Vec<String> {
    vec!["127.0.0.82".into()]
}

fn status(n: &Node) -> serde_json::Value {
    let (code, body) = http(n.api, "GET", "/status");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn fleet_connected(n: &Node) -> bool {
    status(n)["fleet"]["connected"].as_bool() == Some(true)
}

#[test]
fn overrides_and_weights_are_shared_through_etcd() {
    if !fleet_ready("overrides_and_weights_are_shared_through_etcd") {
        return;
    }
    let mut etcd = Etcd::start(3);
    let eps = etcd.endpoints();
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|n| Node::start(n, &eps))
        .collect();
    for n in &nodes {
        assert!(within(Duration::from_secs(10), || fleet_connected(n)).is_some());
        assert_eq!(n.web(), both());
    }

    // Drain .81 through A: B and C follow within 1 s.
    let (code, body) = http(nodes[0].api, "POST", "/override/127.0.0.81?state=down");
    assert_eq!(code, 200, "{body}");
    assert_eq!(nodes[0].web(), only82(), "A applies before replying");
    for n in &nodes[1..] {
        let t = within(Duration::from_secs(1), || n.web() == only82());
        assert!(t.is_some(), "not served within 1 s");
    }
    // Every node's /status says who set it, on which node, when.
    for n in &nodes {
        let st = status(n);
        let o = &st["fleet"]["overrides"][0];
        assert_eq!(o["address"], "127.0.0.81", "{st}");
        assert_eq!(o["state"], "down");
        assert_eq!(o["set_by"], "tester");
        assert_eq!(o["set_on"], "a");
        assert!(o["set_at_ms"].as_u64().unwrap() > 1_700_000_000_000);
    }
    assert!(etcd
        .get_prefix("/meridian-test/overrides/")
        .contains("127.0.0.81"));

    // A runtime weight through C reaches A.
    let (code, body) = http(nodes[2].api, "POST", "/weight/127.0.0.82?weight=3");
    assert_eq!(code, 200, "{body}");
    assert!(within(Duration::from_secs(1), || {
        status(&nodes[0])["fleet"]["weights"][0]["weight"].as_f64() == Some(3.0)
    })
    .is_some());

    // A write without a valid token changes nothing anywhere.
    let (code, _) = http_with(
        nodes[1].api,
        "DELETE",
        "/override/127.0.0.81",
        &[("Authorization", "Bearer not-the-token-0123456789")],
    );
    assert_eq!(code, 403);
    let (code, _) = http_with(nodes[1].api, "POST", "/override/127.0.0.82?state=down", &[]);
    assert_eq!(code, 403);
    std::thread::sleep(Duration::from_millis(1200));
    for n in &nodes {
        assert_eq!(n.web(), only82());
    }
    assert!(!etcd
        .get_prefix("/meridian-test/overrides/")
        .contains("127.0.0.82"));

    // A restarted node comes back with the shared state.
    let mut nodes = nodes;
    let Node {
        server,
        config: b_cfg,
        _dir_keep: dir,
        ..
    } = nodes.remove(1);
    drop(server);
    let (server, api) = crate::health_support::serve(&b_cfg);
    let b = Node {
        server,
        api,
        config: b_cfg,
        _dir_keep: dir,
    };
    assert!(within(Duration::from_secs(5), || b.web() == only82()).is_some());

    // Kill the etcd leader: queries never fail, state stays, and a write
    // succeeds once a new leader is up.
    let leader = etcd.leader().expect("a leader");
    etcd.kill(leader);
    for _ in 0..50 {
        for n in [&nodes[0], &b, &nodes[1]] {
            assert_eq!(n.web(), only82(), "a query lost or the state changed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let written = within(Duration::from_secs(10), || {
        http(nodes[0].api, "DELETE", "/override/127.0.0.81").0 == 200
    });
    assert!(written.is_some(), "no write after the leader died");
    // A node whose watch ran through the dead member reconnects first
    // (its stream breaks, it reads the prefix again): a few seconds.
    for (k, n) in [&nodes[0], &b, &nodes[1]].into_iter().enumerate() {
        assert!(
            within(Duration::from_secs(5), || n.web() == both()).is_some(),
            "node {k}: {:?}",
            n.server.stderr.lock().unwrap()
        );
    }

    // All of etcd down: nodes answer with the last state; writes are
    // refused and change nothing.
    let drained = within(Duration::from_secs(5), || {
        http(nodes[0].api, "POST", "/override/127.0.0.82?state=drain").0 == 200
    });
    assert!(drained.is_some());
    for n in [&nodes[0], &b, &nodes[1]] {
        assert!(within(Duration::from_secs(5), || n.web()
            == vec!["127.0.0.81".to_string()])
        .is_some());
    }
    etcd.kill_all();
    let (code, body) = http(b.api, "POST", "/override/127.0.0.81?state=down");
    assert_eq!(code, 503, "{body}");
    for n in [&nodes[0], &b, &nodes[1]] {
        assert_eq!(n.web(), vec!["127.0.0.81".to_string()]);
    }
}
