//! `fleet push` carries any size (#26 item 4): files go to etcd as chunks
//! of their content, each request well under etcd's default 1.5 MiB
//! limit, and a small manifest last; a node reads them back byte for byte.
//! A file already stored is not sent again. Only the last
//! `keep_revisions` pushes stay in etcd, and history below them is
//! compacted. (Pruning `state_dir` is a unit test of
//! `fleet::state_dir`.)

use std::process::Command;
use std::time::Duration;

use hickory_proto::rr::{RData, RecordType};

use crate::fleet_support::{fleet_ready, within, Etcd, Node};

/// `etcdctl` against `etcd`, its stdout and stderr.
fn etcdctl(etcd: &Etcd, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", etcd.endpoints().join(",")))
        .args(["--dial-timeout=2s", "--command-timeout=10s"])
        .args(args)
        .output()
        .expect("run etcdctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Keys under `prefix` with their mod revisions.
fn keys(etcd: &Etcd, prefix: &str) -> Vec<(String, i64)> {
    let (ok, out, err) = etcdctl(
        etcd,
        &["get", "--prefix", prefix, "--keys-only", "-w", "json"],
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b64 = data_encoding::BASE64;
    v["kvs"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    let k = b64.decode(kv["key"].as_str().unwrap().as_bytes()).unwrap();
                    let rev = kv["mod_revision"].as_i64().unwrap();
                    (String::from_utf8(k).unwrap(), rev)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A pusher's config in `dir` serving the fleet zone plus `big.test`,
/// whose file is `zone`; `[fleet]` gets `fleet_extra`.
fn pusher(dir: &std::path::Path, etcd: &[String], zone: &[u8], fleet_extra: &str) -> String {
    let cfg = crate::fleet_support::node_config_with(dir, "pusher", etcd, fleet_extra, "");
    std::fs::write(dir.join("big.test.zone"), zone).unwrap();
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[api]\ntokens = \"api.tokens\"\n", "");
    let text = format!("{text}\n[[zone]]\norigin = \"big.test.\"\nfile = \"big.test.zone\"\n");
    std::fs::write(&cfg, text).unwrap();
    cfg.display().to_string()
}

/// One TXT string of `big.test`: 249 octets, distinct per record and
/// position.
fn txt(i: usize, j: usize) -> String {
    let c = (b'a' + ((i + j) % 26) as u8) as char;
    format!("{}{i:06}", c.to_string().repeat(243))
}

/// A `big.test` zone of at least `bytes` octets: TXT records of 16
/// strings; the index of the last record.
fn big_zone(bytes: usize) -> (Vec<u8>, usize) {
    let mut z = String::with_capacity(bytes + 8192);
    z += "$ORIGIN big.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
          @ IN NS ns1\nns1 IN A 192.0.2.53\n";
    let mut i = 0;
    while z.len() < bytes {
        z += &format!("t{i} IN TXT");
        for j in 0..16 {
            z += &format!(" \"{}\"", txt(i, j));
        }
        z += "\n";
        i += 1;
    }
    (z.into_bytes(), i - 1)
}

fn push(cfg: &str) -> (i32, String, String, i64) {
    let (code, out, err) =
        crate::common::run(&["fleet", "push", "--config", cfg, "--timeout", "120s"]);
    let rev = out
        .lines()
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or(-1);
    (code, out, err, rev)
}

#[test]
fn a_50_mb_zone_set_is_pushed_served_and_read_back() {
    if !fleet_ready("a_50_mb_zone_set_is_pushed_served_and_read_back") {
        return;
    }
    // etcd as Debian starts it: --max-request-bytes 1.5 MiB.
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let a = Node::start("a", &eps);
    let dir = crate::common::TempDir::new("push-size");
    let (zone, last) = big_zone(50_000_000);
    let cfg = pusher(&dir.0, &eps, &zone, "");
    let (code, out, err, rev) = push(&cfg);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("a: serves revision {rev}")), "{out}");

    // The last record (in the file's last chunk) is served.
    let m = a.server.query_tcp(&crate::common::Q::new(
        &format!("t{last}.big.test."),
        RecordType::TXT,
    ));
    let got: Vec<String> = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::TXT(t) => Some(t.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(got.len(), 1, "{m:?}");
    assert!(got[0].contains(&txt(last, 15)), "{}", got[0]);
    // Byte for byte under the node's state dir.
    let state = a.config.parent().unwrap().join("fleet-state");
    let copy = std::fs::read(state.join(format!("rev-{rev}/big.test.zone"))).unwrap();
    assert!(copy == zone, "the node's copy differs");

    // A second push with the big zone unchanged sends only what changed:
    // the fleet zone's new content, one chunk.
    let fleet_zone = std::fs::read_to_string(dir.0.join("fleet.test.zone")).unwrap();
    std::fs::write(
        dir.0.join("fleet.test.zone"),
        format!("{fleet_zone}new IN A 192.0.2.99\n"),
    )
    .unwrap();
    let (code, out, err, rev2) = push(&cfg);
    assert_eq!(code, 0, "{out}\n{err}");
    let blobs = keys(&etcd, "/meridian-test/blobs/");
    let fresh: Vec<&(String, i64)> = blobs.iter().filter(|(_, r)| *r > rev).collect();
    assert_eq!(fresh.len(), 1, "{fresh:?}");
    assert!(blobs.len() > 64, "50 MB in {} chunks?", blobs.len());
    let copy = std::fs::read(state.join(format!("rev-{rev2}/big.test.zone"))).unwrap();
    assert!(copy == zone, "the node's second copy differs");
}

#[test]
fn only_the_last_revisions_stay_in_etcd() {
    if !fleet_ready("only_the_last_revisions_stay_in_etcd") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let dir = crate::common::TempDir::new("push-prune");
    let mut revs = Vec::new();
    // K + 2 pushes, each with another big.test zone (1 MB, two chunks).
    for n in 0..4 {
        let (mut zone, _) = big_zone(1_000_000);
        zone.extend_from_slice(format!("push{n} IN A 192.0.2.1\n").as_bytes());
        let cfg = pusher(&dir.0, &eps, &zone, "keep_revisions = 2\n");
        let (code, out, err, rev) = push(&cfg);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("no node is registered"), "{out}");
        revs.push(rev);
    }
    let kept = keys(&etcd, "/meridian-test/revisions/");
    let mut kept_revs: Vec<i64> = kept.iter().map(|k| k.1).collect();
    kept_revs.sort();
    assert_eq!(kept_revs, revs[2..], "{kept:?}");
    // The blobs of the two kept pushes: their two zones, and the fleet
    // zone and config they share.
    let mut shas: Vec<String> = keys(&etcd, "/meridian-test/blobs/")
        .into_iter()
        .map(|(k, _)| k.split('/').nth(3).unwrap().to_string())
        .collect();
    shas.dedup();
    assert_eq!(shas.len(), 4, "{shas:?}");
    // History below the oldest kept push is compacted; from it on, not.
    let at = |r: i64| {
        etcdctl(
            &etcd,
            &["get", "/meridian-test/config", &format!("--rev={r}")],
        )
    };
    let (ok, _, err) = at(revs[1]);
    assert!(!ok && err.contains("compacted"), "{err}");
    assert!(at(revs[2]).0);
    // A node reads the latest revision.
    let a = Node::start("a", &eps);
    let served = || {
        a.server
            .query(&crate::common::Q::new("push3.big.test.", RecordType::A))
            .answers
            .len()
            == 1
    };
    assert!(within(Duration::from_secs(10), served).is_some());
}

/// `keep_revisions` is checked like every `[fleet]` key: its line named.
#[test]
fn a_bad_keep_revisions_names_its_line() {
    let dir = crate::common::TempDir::new("push-keep");
    let cfg = crate::fleet_support::node_config_with(
        &dir.0,
        "a",
        &["http://127.0.0.1:2379".to_string()],
        "keep_revisions = 0\n",
        "",
    );
    crate::health_support::write_tokens(&dir);
    let (code, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    let line = std::fs::read_to_string(&cfg)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("keep_revisions"))
        .unwrap()
        + 1;
    assert!(
        err.starts_with(&format!("{}:{line}: ", cfg.display()))
            && err.contains("keep_revisions must be from 1 to 1000, not 0"),
        "{err}"
    );
}

/// A node that starts after a 50 MB push reads it at its first sync.
/// Before, a node's sync read the whole prefix in one response, blobs
/// included, past the client's 4 MiB limit, and the node never followed
/// etcd: the node side reads and watches `store::node_ranges` (the prefix
/// without `blobs/`).
#[test]
fn a_node_started_after_a_50_mb_push_serves_it() {
    if !fleet_ready("a_node_started_after_a_50_mb_push_serves_it") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let dir = crate::common::TempDir::new("push-late");
    let (zone, last) = big_zone(50_000_000);
    let cfg = pusher(&dir.0, &eps, &zone, "");
    let (code, out, err, _) = push(&cfg);
    assert_eq!(code, 0, "{out}\n{err}");
    let a = Node::start("a", &eps);
    let q = crate::common::Q::new(&format!("t{last}.big.test."), RecordType::TXT);
    let served = || a.server.query_tcp(&q).answers.len() == 1;
    assert!(within(Duration::from_secs(20), served).is_some());
}

/// A node keeps the last `keep_revisions` revision folders under its state
/// dir, never the one it serves; before, none was ever deleted. The
/// pusher keeps one revision, so each push compacts etcd's history.
#[test]
fn a_node_keeps_only_the_last_revisions_on_disk() {
    if !fleet_ready("a_node_keeps_only_the_last_revisions_on_disk") {
        return;
    }
    let etcd = Etcd::start(1);
    let eps = etcd.endpoints();
    let a = Node::start_with("a", &eps, "keep_revisions = 2\n", "");
    let dir = crate::common::TempDir::new("push-prune-disk");
    let mut revs = Vec::new();
    for n in 0..4 {
        let cfg =
            crate::fleet_config::pushed_config(&dir.0, &eps, &format!("disk{n} IN A 192.0.2.1\n"));
        // The pusher keeps one revision in etcd: from the second push on it
        // compacts at the newest push, which a node's watch may not have
        // caught up with yet.
        let text = std::fs::read_to_string(&cfg).unwrap();
        let text = text.replacen("[fleet]\n", "[fleet]\nkeep_revisions = 1\n", 1);
        std::fs::write(&cfg, text).unwrap();
        let (code, out, err) =
            crate::common::run(&["fleet", "push", "--config", &cfg.display().to_string()]);
        assert_eq!(code, 0, "{out}\n{err}");
        let rev: i64 = out
            .lines()
            .next()
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("{out}"));
        revs.push(rev);
    }
    let state = a.config.parent().unwrap().join("fleet-state");
    let on_disk = || {
        let mut v: Vec<String> = std::fs::read_dir(&state)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("rev-"))
            .collect();
        v.sort();
        v
    };
    // Through pushes that compact etcd's history, the node never lost
    // etcd. (A watch that falls behind a compaction is cancelled by etcd
    // and read again on the same connection; only a loaded machine makes
    // it fall behind, so this does not force that path.)
    assert!(
        !a.server.wait_log("lost etcd", Duration::from_millis(1)),
        "{}",
        a.server.stderr.lock().unwrap().join("\n")
    );
    let want: Vec<String> = revs[2..].iter().map(|r| format!("rev-{r}")).collect();
    assert!(
        within(Duration::from_secs(5), || on_disk() == want).is_some(),
        "{:?}, want {want:?}",
        on_disk()
    );
}
