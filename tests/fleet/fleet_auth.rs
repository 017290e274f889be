//! A fleet on an etcd with authentication enabled (#18 item 6): a node
//! configured with the right user and password file follows etcd and
//! shares its writes; one with a wrong password never gets in, says so in
//! `/status` (not connected, and why: authentication failed; #26 item 5),
//! logs that cause once, and still answers DNS from its own config.

use std::process::Command;
use std::time::Duration;

use crate::fleet_support::{
    connected, fleet_ready, shared_but_not_with, wait_fleet_error, within, Etcd, Node,
};
use crate::health_support::http;

fn etcdctl(eps: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={eps}"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn user_and_password_to_etcd() {
    if !fleet_ready("user_and_password_to_etcd") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints().join(",");
    for args in [
        &["user", "add", "root:root-secret-1"][..],
        &["role", "add", "meridian"][..],
        &[
            "role",
            "grant-permission",
            "meridian",
            "--prefix=true",
            "readwrite",
            "/meridian-test/",
        ][..],
        &["user", "add", "meridian:meridian-secret-2"][..],
        &["user", "grant-role", "meridian", "meridian"][..],
        &["auth", "enable"][..],
    ] {
        let (ok, out) = etcdctl(&eps, args);
        assert!(ok, "etcdctl {args:?}: {out}");
    }
    // Leases need no special permission; the fleet's keys are under the prefix.
    let dir = crate::common::TempDir::new("fleet-auth");
    let good = dir.write("good.pw", "meridian-secret-2\n");
    let bad = dir.write("bad.pw", "not-the-password\n");
    let cfg = |pw: &std::path::Path| {
        format!(
            "user = \"meridian\"\npassword_file = \"{}\"\n",
            pw.display()
        )
    };
    let a = Node::start_with("a", &etcd.endpoints(), &cfg(&good), "");
    let b = Node::start_with("b", &etcd.endpoints(), &cfg(&good), "");
    let x = Node::start_with("x", &etcd.endpoints(), &cfg(&bad), "");
    for n in [&a, &b] {
        assert!(within(Duration::from_secs(10), || connected(n) == Some(true)).is_some());
    }
    // The wrong password: never in, still serving its own config.
    shared_but_not_with(&a, &b, &x);
    let (code, body) = http(x.api, "POST", "/override/127.0.0.82?state=down");
    assert_eq!(code, 503);
    assert!(
        body.contains("authentication failed") && body.contains("nothing was changed"),
        "{body}"
    );
    // The cause, in /status and once in the log (retries go on meanwhile).
    let err = wait_fleet_error(&x, "authentication failed", Duration::from_secs(5));
    assert!(
        err.contains("authentication failed") && err.contains("password_file"),
        "/status fleet.error: {err:?}"
    );
    // The log reaches the test through a reader thread: wait for the line.
    within(Duration::from_secs(2), || {
        x.server.log_count("authentication failed") >= 1
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        x.server.log_count("authentication failed"),
        1,
        "{:?}",
        x.server.stderr.lock().unwrap()
    );
    // Without a user, etcd refuses reads of the prefix.
    let (ok, out) = etcdctl(&eps, &["get", "--prefix", "/meridian-test/"]);
    assert!(!ok || out.trim().is_empty(), "{out}");
    let (ok, out) = etcdctl(
        &eps,
        &[
            "--user",
            "meridian:meridian-secret-2",
            "get",
            "--prefix",
            "/meridian-test/overrides/",
        ],
    );
    assert!(ok && out.contains("127.0.0.81"), "{out}");
}
