//! `[fleet]` is checked like every other table (#18 item 1): `meridian
//! check` accepts a good one and refuses a bad key with
//! `FILE:LINE: message` naming the key's line. No etcd is needed to check.

use crate::common::{run, TempDir};

/// A config whose `[fleet]` table is `fleet` (its first line is line 5).
fn config(dir: &TempDir, fleet: &str) -> std::path::PathBuf {
    dir.write(
        "fleet.test.zone",
        "$ORIGIN fleet.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
         @ IN NS ns1\nns1 IN A 192.0.2.53\n",
    );
    dir.write("ca.pem", "not read by check\n");
    dir.write("password", "secret\n");
    dir.write(
        "meridian.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[fleet]\n{fleet}\n\n\
             [[zone]]\norigin = \"fleet.test.\"\nfile = \"fleet.test.zone\"\n"
        ),
    )
}

/// `check` fails with `CONFIG:LINE: ...` holding every one of `words`.
fn refused(fleet: &str, line: usize, words: &[&str]) {
    let dir = TempDir::new("fleet-settings");
    let path = config(&dir, fleet);
    let (code, out, err) = run(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{fleet}\nstdout: {out}\nstderr: {err}");
    let first = err.lines().next().unwrap_or_default();
    let prefix = format!("{}:{line}: ", path.display());
    assert!(
        first.starts_with(&prefix),
        "{fleet}: expected `{prefix}`: {err}"
    );
    for w in words {
        assert!(first.contains(w), "{fleet}: `{w}` not in: {first}");
    }
}

const BASE: &str = "etcd = [\"http://127.0.0.1:2379\"]\nnode = \"ams1\"";

#[test]
fn a_full_fleet_table_is_valid() {
    let dir = TempDir::new("fleet-settings");
    let path = config(
        &dir,
        &format!(
            "{BASE}\nprefix = \"/dns/\"\nca = \"ca.pem\"\nuser = \"meridian\"\n\
             password_file = \"password\"\ntimeout = \"3s\"\nstate_dir = \"state\"\n\
             checkers = 5\nfleet_grace = \"30s\"\nlease = \"20s\""
        ),
    );
    let (code, out, err) = run(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
}

#[test]
fn bad_endpoints_are_refused() {
    refused(
        "etcd = [\"127.0.0.1:2379\"]\nnode = \"a\"",
        5,
        &["fleet etcd endpoint", "http://HOST:PORT"],
    );
    refused(
        "etcd = [\"http://127.0.0.1:2379/v3\"]\nnode = \"a\"",
        5,
        &["fleet etcd endpoint"],
    );
    refused("etcd = []\nnode = \"a\"", 5, &["fleet etcd is empty"]);
}

#[test]
fn bad_node_names_and_prefixes_are_refused() {
    refused(
        "etcd = [\"http://127.0.0.1:2379\"]\nnode = \"a b\"",
        6,
        &["fleet node", "letters, digits"],
    );
    refused(
        &format!("{BASE}\nprefix = \"meridian\""),
        7,
        &["fleet prefix", "start and end with '/'"],
    );
}

#[test]
fn credentials_must_come_in_pairs_and_exist() {
    refused(
        &format!("{BASE}\ncert = \"ca.pem\""),
        7,
        &["cert and key go together"],
    );
    refused(
        &format!("{BASE}\nuser = \"meridian\""),
        7,
        &["user and password_file go together"],
    );
    refused(
        &format!("{BASE}\nca = \"missing.pem\""),
        7,
        &["missing.pem", "not a readable file"],
    );
}

#[test]
fn bad_timings_and_counts_are_refused() {
    refused(&format!("{BASE}\ntimeout = \"0s\""), 7, &["fleet timeout"]);
    refused(&format!("{BASE}\ntimeout = \"2m\""), 7, &["up to 60s"]);
    refused(
        &format!("{BASE}\ncheckers = 0"),
        7,
        &["checkers must be from 1 to 16, not 0"],
    );
    refused(
        &format!("{BASE}\ncheckers = 17"),
        7,
        &["checkers must be from 1 to 16, not 17"],
    );
    refused(
        &format!("{BASE}\nfleet_grace = \"soon\""),
        7,
        &["fleet_grace", "not a duration"],
    );
    for lease in ["1s", "301s", "2500ms", "forever"] {
        refused(
            &format!("{BASE}\nlease = \"{lease}\""),
            7,
            &["fleet lease", lease, "whole seconds from 2s to 300s"],
        );
    }
}
