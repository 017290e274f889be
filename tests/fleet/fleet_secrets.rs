//! Secrets and the privilege drop (#26 item 6). A node started as root
//! with `user = "nobody"` reads its etcd password file and its API token
//! file, both root's and mode 600, before it switches user: it follows
//! etcd, takes writes, and reloads; at start it names each file the
//! service user cannot read, and a reload that cannot read the token file
//! keeps the tokens it has and warns once, naming the file.
//!
//! Needs root (to switch users); skipped with a SKIP line otherwise.

use std::time::Duration;

use crate::common::{is_root, skip};
use crate::fleet_support::{connected, enable_auth, fleet_ready, within, Etcd, Node};
use crate::health_support::http;

#[test]
fn secrets_are_read_before_the_privilege_drop() {
    let name = "secrets_are_read_before_the_privilege_drop";
    if !fleet_ready(name) {
        return;
    }
    if !is_root() {
        skip(name, "not root: switching to user nobody needs root");
        return;
    }
    let etcd = Etcd::start(1);
    enable_auth(&etcd);
    let dir = crate::common::TempDir::new("fleet-secrets");
    let pw = dir.write("root-only.pw", "meridian-secret-2\n");
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let fleet = format!(
        "user = \"meridian\"\npassword_file = \"{}\"\n",
        pw.display()
    );
    let n = Node::start_as_nobody("s", &etcd.endpoints(), &fleet);
    let log = || n.server.stderr.lock().unwrap().join("\n");
    assert!(
        within(Duration::from_secs(10), || connected(&n) == Some(true)).is_some(),
        "{}",
        log()
    );
    // At start: each secret the service user cannot read, by name.
    for f in ["root-only.pw", "api.tokens"] {
        assert!(
            log()
                .lines()
                .any(|l| l.contains(f) && l.contains("\"nobody\"") && l.contains("restart")),
            "no start warning naming {f}: {}",
            log()
        );
    }
    // Writes take the token read before the drop, and go through etcd.
    let (code, body) = http(n.api, "POST", "/override/127.0.0.81?state=down");
    assert_eq!(code, 200, "{body}");
    // Reloads keep the tokens they cannot read again, and say so once.
    for _ in 0..2 {
        let (code, body) = http(n.api, "POST", "/reload");
        assert_eq!(code, 200, "{body}\n{}", log());
    }
    // The log reaches the test through a pipe and a reader thread: wait
    // for the line, then make sure no second one follows.
    let kept = || {
        log()
            .lines()
            .filter(|l| l.contains("api.tokens") && l.contains("keeping"))
            .count()
    };
    assert!(
        within(Duration::from_secs(2), || kept() >= 1).is_some(),
        "{}",
        log()
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(kept(), 1, "{}", log());
    assert_eq!(n.web(), ["127.0.0.82"]);
}
