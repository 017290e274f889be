//! What a node says when etcd fails (#26 items 5 and 9): with no etcd
//! listening, `/status` gives the cause ("connection refused") and the log
//! says it once, not on every retry; with 2 of 3 members killed (no
//! quorum), a write through the API is a 503 whose body is a sentence
//! naming the cause and saying that nothing was changed.

use std::time::Duration;

use crate::fleet_support::{connected, fleet_error, fleet_ready, within, Etcd, Node};
use crate::health_support::http;

#[test]
fn refused_etcd_is_named_once() {
    if !fleet_ready("refused_etcd_is_named_once") {
        return;
    }
    // A port nothing listens on: bound, then closed.
    let port = crate::common::free_port();
    let n = Node::start("r", &[format!("http://127.0.0.1:{port}")]);
    let err = within(Duration::from_secs(10), || {
        fleet_error(&n).contains("connection refused")
    });
    assert!(err.is_some(), "/status fleet.error: {:?}", fleet_error(&n));
    assert_eq!(connected(&n), Some(false));
    // Retries go on (back-off up to 5 s); the cause is logged once.
    std::thread::sleep(Duration::from_secs(4));
    let lines = n.server.log_count("connection refused");
    assert_eq!(
        lines,
        1,
        "the cause once in the log: {:?}",
        n.server.stderr.lock().unwrap()
    );
}

#[test]
fn a_write_without_quorum_is_a_503_sentence() {
    if !fleet_ready("a_write_without_quorum_is_a_503_sentence") {
        return;
    }
    let mut etcd = Etcd::start(3);
    let a = Node::start("q", &etcd.endpoints());
    assert!(within(Duration::from_secs(10), || connected(&a) == Some(true)).is_some());
    let (code, body) = http(a.api, "POST", "/override/127.0.0.81?state=down");
    assert_eq!(code, 200, "{body}");
    etcd.kill(1);
    etcd.kill(2);
    let (code, body) = http(a.api, "POST", "/override/127.0.0.82?state=down");
    assert_eq!(code, 503, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("a JSON body");
    let msg = v["error"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("etcd has no quorum or cannot be reached (")
            && msg.ends_with("): nothing was changed"),
        "{msg}"
    );
    // Nothing was changed here either.
    assert_eq!(a.web(), ["127.0.0.82"]);
}
