//! Unit tests of the freshness of shared health results and their lines in
//! `fleet status`; the fleet against a real etcd is in tests/fleet/.

use super::status::result_row;
use super::*;

fn shared(up: bool, at_ms: u64) -> Shared {
    Shared {
        up,
        at_ms,
        interval_ms: 1000,
    }
}

/// A checker whose clock is 10 s ahead of or behind this node's: its
/// results are fresh for a window after they arrive here, whatever their
/// `at_ms` says (review F8).
#[test]
fn freshness_follows_the_local_arrival_not_the_checkers_clock() {
    let now = 1_000_000_000;
    let window = fresh_window(1000);
    let mut m = std::collections::HashMap::new();
    m.insert(
        "ahead".to_string(),
        receive(None, shared(true, now + 10_000), now),
    );
    m.insert(
        "behind".to_string(),
        receive(None, shared(false, now - 10_000), now),
    );
    let all = ["ahead", "behind"];
    let mut fresh = fresh_results(Some(&m), &all, now + 1000, window);
    fresh.sort();
    assert_eq!(fresh, vec![(false, now), (true, now)], "both just arrived");
    assert!(
        fresh_results(Some(&m), &all, now + window + 1, window).is_empty(),
        "both older than the window here"
    );
    // Not assigned: not counted.
    assert_eq!(fresh_results(Some(&m), &["ahead"], now, window).len(), 1);
    // The same result seen again (a resync) keeps its first arrival; a
    // new one is timed by its own arrival.
    let again = receive(m.get("behind"), shared(false, now - 10_000), now + 3000);
    assert_eq!(again.received_ms, now);
    let next = receive(m.get("behind"), shared(false, now - 9000), now + 3000);
    assert_eq!(next.received_ms, now + 3000);
}

/// `fleet status` counts only fresh results in UP and DOWN, and still
/// shows the stale ones with their age.
#[test]
fn status_counts_only_fresh_results() {
    let now = 1_000_000_000;
    let rs = vec![
        ("a".to_string(), shared(true, now - 35_000)),
        ("b".to_string(), shared(true, now - 40_000)),
        ("c".to_string(), shared(false, now - 500)),
    ];
    let row = result_row("192.0.2.1#80#web", &rs, now);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[1..3], &["0", "1"], "{row}");
    assert!(row.contains("a up 35.0s ago (stale)"), "{row}");
    assert!(row.contains("c down 0.5s ago"), "{row}");
    assert!(!row.contains("c down 0.5s ago (stale)"), "{row}");
}
