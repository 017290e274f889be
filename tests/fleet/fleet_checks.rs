//! Health checks divided among a fleet's nodes (#18 item 4): each
//! (member, check) is probed by `checkers` live nodes chosen by rendezvous
//! hashing; the others take the majority of the fresh shared results
//! through rise/fall. With 8 nodes and checkers = 3 a backend sees 3 × the
//! check rate instead of 8 ×; a backend that fails is taken out by every
//! node; a killed checker's share moves within lease TTL + interval; and
//! with all of etcd gone the nodes fall back to probing every member
//! themselves after `fleet_grace`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fleet_support::{chk, chk_tables, fleet_ready, within, Backend, Etcd, Node};

/// Probes per second the backend sees over `secs`.
fn rate(probes: &AtomicU64, secs: f64) -> f64 {
    let a = probes.load(Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    (probes.load(Ordering::Relaxed) - a) as f64 / t0.elapsed().as_secs_f64()
}

#[test]
fn checks_are_divided_among_the_nodes() {
    if !fleet_ready("checks_are_divided_among_the_nodes") {
        return;
    }
    let probes = Arc::new(AtomicU64::new(0));
    let mut backend = Backend::start(0, probes.clone());
    let port = backend.port;
    let mut etcd = Etcd::start(3);
    let eps = etcd.endpoints();
    let extra = chk_tables(port);
    let fleet = "checkers = 3\nfleet_grace = \"1s\"\n";
    let names = ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"];
    let mut nodes: Vec<Node> = names
        .iter()
        .map(|n| Node::start_with(n, &eps, fleet, &extra))
        .collect();
    let both = vec!["127.0.0.91".to_string(), "127.0.0.92".to_string()];
    for n in &nodes {
        assert!(within(Duration::from_secs(5), || chk(n) == both).is_some());
    }
    // Settled (every node registered, shares taken): 3 checkers × 5/s.
    std::thread::sleep(Duration::from_secs(3));
    let shared = rate(&probes, 4.0);
    eprintln!(
        "probe load per backend, 8 nodes, interval 200 ms: {shared:.1}/s divided (checkers = 3); every node probing would be {:.1}/s",
        8.0 * 5.0
    );
    assert!((10.0..=22.0).contains(&shared), "{shared}/s");

    // The backend fails: every node takes it out (7 of them from shared
    // results), and back.
    backend.stop();
    let only92 = vec!["127.0.0.92".to_string()];
    for n in &nodes {
        assert!(
            within(Duration::from_secs(4), || chk(n) == only92).is_some(),
            "a node kept the failed member"
        );
    }
    let mut backend = Backend::start(port, probes.clone());
    for n in &nodes {
        assert!(within(Duration::from_secs(4), || chk(n) == both).is_some());
    }

    // Kill one of the checkers: its share moves within lease TTL (5 s) +
    // the interval (0.2 s), so the load is 3 × rate again.
    let key = format!("127.0.0.91#{port}#c");
    #[cfg(feature = "fleet")]
    let assigned = meridian::fleet::checkers_of(&key, names.iter().copied(), 3);
    // Without the feature fleet_ready returned above: never used.
    #[cfg(not(feature = "fleet"))]
    let assigned: Vec<&str> = vec![&key];
    let victim = names.iter().position(|n| *n == assigned[0]).unwrap();
    drop(nodes.remove(victim));
    std::thread::sleep(Duration::from_millis(5200));
    let after = rate(&probes, 3.0);
    eprintln!(
        "from 5.2 s after killing checker {}: {after:.1}/s",
        assigned[0]
    );
    assert!((12.0..=22.0).contains(&after), "{after}/s");

    // All of etcd down: past fleet_grace (1 s) every node probes itself.
    etcd.kill_all();
    std::thread::sleep(Duration::from_secs(6));
    let alone = rate(&probes, 3.0);
    eprintln!("etcd down, 7 nodes probing alone: {alone:.1}/s");
    assert!(alone >= 25.0, "{alone}/s");
    for n in &nodes {
        assert_eq!(chk(n), both, "answers kept");
        let (_, st) = crate::health_support::http(n.api, "GET", "/metrics");
        assert!(st.contains("meridian_fleet_local_probes 1"), "{st}");
    }

    // etcd back: each node returns to its share.
    etcd.restart_all();
    for n in &nodes {
        assert!(
            within(Duration::from_secs(15), || {
                let (_, st) = crate::health_support::http(n.api, "GET", "/metrics");
                st.contains("meridian_fleet_local_probes 0")
            })
            .is_some(),
            "a node kept probing alone"
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let back = rate(&probes, 3.0);
    eprintln!("etcd back: {back:.1}/s");
    assert!((10.0..=22.0).contains(&back), "{back}/s");
    backend.stop();
}
