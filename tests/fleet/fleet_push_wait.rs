//! `meridian fleet push` says what happened (#26 item 2): it waits for the
//! registered nodes to serve or refuse the revision, prints a line per
//! node (with the reason of a refusal) and a summary, and exits 0 only if
//! every node serves it (3 when one refused or did not answer);
//! `--no-wait` returns once the revision is stored. `fleet status` shows
//! each node's last refusal.

use std::time::Duration;

use crate::fleet_support::{fleet_ready, node_config, within, Etcd, Node};

/// A config a pusher holds in `dir` for the fleet on `etcd`: the fleet
/// zone with `extra` records and, with `geo`, a geo database whose content
/// is `geo`.
fn pusher(dir: &std::path::Path, etcd: &[String], extra: &str, geo: Option<&[u8]>) -> String {
    let cfg = node_config(dir, "pusher", etcd);
    let zone = std::fs::read_to_string(dir.join("fleet.test.zone")).unwrap();
    std::fs::write(dir.join("fleet.test.zone"), format!("{zone}{extra}")).unwrap();
    let mut text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[api]\ntokens = \"api.tokens\"\n", "");
    if let Some(db) = geo {
        std::fs::write(dir.join("geo.mmdb"), db).unwrap();
        text = format!("[geo]\ndatabase = \"geo.mmdb\"\n\n{text}");
    }
    std::fs::write(&cfg, text).unwrap();
    cfg.display().to_string()
}

fn push(cfg: &str, extra: &[&str]) -> (i32, String, String, i64) {
    let mut args = vec!["fleet", "push", "--config", cfg];
    args.extend_from_slice(extra);
    let (code, out, err) = crate::common::run(&args);
    let rev = out
        .lines()
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or(-1);
    (code, out, err, rev)
}

/// The line of `out` that starts with `node: `.
fn line_of<'a>(out: &'a str, node: &str) -> &'a str {
    let p = format!("{node}: ");
    out.lines()
        .find(|l| l.starts_with(&p))
        .unwrap_or_else(|| panic!("no line for {node}:\n{out}"))
}

fn geo_db() -> Vec<u8> {
    std::fs::read(crate::common::root().join("geo/example.mmdb")).unwrap()
}

#[test]
fn push_reports_each_node_and_fails_when_they_refuse() {
    if !fleet_ready("push_reports_each_node_and_fails_when_they_refuse") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|n| Node::start(n, &eps))
        .collect();
    // Every node holds another geo database than the pusher's.
    let mut theirs = geo_db();
    theirs.extend_from_slice(b"not the pusher's copy");
    for n in &nodes {
        std::fs::write(n.config.parent().unwrap().join("geo.mmdb"), &theirs).unwrap();
    }

    // A good push: every node serves it, the push says so and exits 0.
    let dir = crate::common::TempDir::new("push-wait-good");
    let good = pusher(&dir.0, &eps, "new IN A 192.0.2.99\n", None);
    let (code, out, err, rev) = push(&good, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(rev > 0, "{out}");
    for n in ["a", "b", "c"] {
        assert_eq!(line_of(&out, n), format!("{n}: serves revision {rev}"));
    }
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with(&format!("3 of 3 node(s) serve revision {rev}")),
        "{out}"
    );

    // A config every node refuses (its geo checksum is not theirs): each
    // refusal with its reason, and a failure.
    let bad_dir = crate::common::TempDir::new("push-wait-geo");
    let bad = pusher(&bad_dir.0, &eps, "", Some(&geo_db()));
    let (code, out, err, bad_rev) = push(&bad, &[]);
    assert_eq!(code, 3, "{out}\n{err}");
    for n in ["a", "b", "c"] {
        let l = line_of(&out, n);
        assert!(
            l.starts_with(&format!(
                "{n}: refused revision {bad_rev}: the geo database"
            )) && l.contains("SHA-256"),
            "{l}"
        );
    }
    assert!(out.contains("0 of 3 node(s) serve"), "{out}");

    // `fleet status` shows the refusal under the table.
    let (code, status, err) = crate::common::run(&["fleet", "status", "--config", &good]);
    assert_eq!(code, 0, "{err}");
    for n in ["a", "b", "c"] {
        let want =
            format!("{n} refused revision {bad_rev} (still serving {rev}): the geo database");
        assert!(status.contains(&want), "{want}\n{status}");
    }

    // --no-wait: stored, nothing waited for, success whatever the nodes
    // will say.
    let (code, out, err, next) = push(&bad, &["--no-wait"]);
    assert_eq!(code, 0, "{err}");
    assert!(next > bad_rev);
    assert_eq!(out.lines().count(), 1, "{out}");
}

#[test]
fn a_node_that_does_not_answer_fails_the_push() {
    if !fleet_ready("a_node_that_does_not_answer_fails_the_push") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let mut nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|n| Node::start_with(n, &eps, "lease = \"30s\"\n", ""))
        .collect();
    let dir = crate::common::TempDir::new("push-wait-dead");
    let cfg = pusher(&dir.0, &eps, "new IN A 192.0.2.99\n", None);
    // Every node registered, then c killed: its registration outlives it.
    let registered = || {
        let (_, s, _) = crate::common::run(&["fleet", "status", "--config", &cfg]);
        s.contains("3 node(s) registered")
    };
    assert!(within(Duration::from_secs(5), registered).is_some());
    drop(nodes.remove(2));
    let (code, out, err, rev) = push(&cfg, &["--timeout", "2s"]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert_eq!(line_of(&out, "a"), format!("a: serves revision {rev}"));
    assert_eq!(line_of(&out, "b"), format!("b: serves revision {rev}"));
    assert_eq!(line_of(&out, "c"), "c: no answer within 2s");
    assert!(
        out.contains(&format!(
            "2 of 3 node(s) serve revision {rev}, 0 refused it, 1 did not answer"
        )),
        "{out}"
    );
}

/// `--config meridian.toml`, a bare name in the current folder, pushes
/// (before, the config's folder was taken as "" and the push failed with
/// "No such file or directory").
#[test]
fn a_config_named_without_a_folder_pushes() {
    if !fleet_ready("a_config_named_without_a_folder_pushes") {
        return;
    }
    let etcd = Etcd::start(1);
    let dir = crate::common::TempDir::new("push-bare-name");
    pusher(&dir.0, &etcd.endpoints(), "", None);
    let out = std::process::Command::new(crate::common::BIN)
        .args(["fleet", "push", "--no-wait", "--config", "meridian.toml"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("pushed meridian.toml as revision "),
        "{stdout}"
    );
}
