//! E7: every `[server]` key is checked against its range by `meridian check`
//! (not first by `serve`), and a bad value fails with `FILE:LINE: ...`
//! naming the key's line. Before, `check` passed `http_listen = "nonsense"`,
//! `tcp_idle_timeout_ms = 0` (every TCP connection closed unanswered),
//! `tcp_max_connections = 0` and `log = "debugg"` (all logging off).

use crate::common::*;

/// A config whose `[server]` holds `line` on line 3; the zone is the
/// bundled example's.
fn config_with(dir: &TempDir, line: &str) -> std::path::PathBuf {
    let zone = root().join("zones/example.test.zone");
    dir.write(
        "meridian.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n{line}\n\n[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n",
            zone.display().to_string()
        ),
    )
}

/// `check` with `line` in `[server]` fails at line 3 naming every word.
fn refused(line: &str, words: &[&str]) {
    let dir = TempDir::new("server-settings");
    let cfg = config_with(&dir, line);
    let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(
        code, 1,
        "{line}: check passed\nstdout: {out}\nstderr: {err}"
    );
    let prefix = format!("{}:3: ", cfg.display());
    assert!(
        err.starts_with(&prefix),
        "{line}: expected `{prefix}...`, got:\n{err}"
    );
    for w in words {
        assert!(err.contains(w), "{line}: `{w}` not in: {err}");
    }
}

fn accepted(line: &str) {
    let dir = TempDir::new("server-settings");
    let cfg = config_with(&dir, line);
    let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{line}: refused: {err}");
    assert!(out.contains("is valid"), "{out}");
}

#[test]
fn http_listen_must_be_an_address() {
    refused("http_listen = \"nonsense\"", &["http_listen", "nonsense"]);
    accepted("http_listen = \"127.0.0.1:9153\"");
}

#[test]
fn http_listen_none_in_the_file_turns_the_api_off() {
    // As `--http-listen none` does, and as the manual says.
    accepted("http_listen = \"none\"");
    // And `serve` starts with it (no --http-listen on the command line).
    let dir = TempDir::new("server-settings-none");
    let port = free_port();
    let zone = root().join("zones/example.test.zone");
    let cfg = dir.write(
        "meridian.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nhttp_listen = \"none\"\n\n[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n",
            zone.display().to_string()
        ),
    );
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--config", cfg.to_str().unwrap(), "--workers", "1"])
        .arg("--allow-root")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let lines: Vec<String> = std::io::BufRead::lines(std::io::BufReader::new(err))
        .map_while(Result::ok)
        .take_while(|l| !l.contains("meridian: ready"))
        .collect();
    let ready = matches!(child.try_wait(), Ok(None));
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "serve did not start: {lines:?}");
    assert!(!lines.iter().any(|l| l.contains("http")), "{lines:?}");
}

#[test]
fn tcp_timeouts_have_a_range() {
    refused("tcp_idle_timeout_ms = 0", &["tcp_idle_timeout_ms", "100"]);
    refused("tcp_read_timeout_ms = 0", &["tcp_read_timeout_ms", "100"]);
    refused(
        "tcp_idle_timeout_ms = 99999999999",
        &["tcp_idle_timeout_ms"],
    );
    accepted("tcp_idle_timeout_ms = 100");
}

#[test]
fn tcp_max_connections_has_a_range() {
    refused("tcp_max_connections = 0", &["tcp_max_connections", "1 to"]);
    refused("tcp_max_connections = 10000000", &["tcp_max_connections"]);
    accepted("tcp_max_connections = 1");
}

#[test]
fn tcp_max_queries_has_a_range() {
    refused("tcp_max_queries = 10000000000", &["tcp_max_queries"]);
    accepted("tcp_max_queries = 0");
}

#[test]
fn workers_has_a_range() {
    refused("workers = 100000", &["workers", "256"]);
    accepted("workers = 0");
}

#[test]
fn log_filter_must_name_levels() {
    refused("log = \"debugg\"", &["log", "debugg", "not a level"]);
    refused("log = \"meridian=loud\"", &["loud", "not a level"]);
    refused("log = \"\"", &["log"]);
    refused("log = \"info,\"", &["log"]);
    accepted("log = \"meridian=debug,warn\"");
    accepted("log = \"off\"");
}

#[test]
fn listen_must_be_distinct_and_not_empty() {
    // Line 3 repeats the key: TOML refuses that, so use a one-line override.
    let dir = TempDir::new("server-settings");
    let zone = root().join("zones/example.test.zone");
    let cfg = dir.write(
        "meridian.toml",
        &format!(
            "[server]\n\nlisten = []\n\n[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n",
            zone.display().to_string()
        ),
    );
    let (code, _, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with(&format!("{}:3: ", cfg.display())), "{err}");
    assert!(err.contains("at least one"), "{err}");
    let cfg = dir.write(
        "twice.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\",\n  \"127.0.0.1:5380\"]\n\n[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n",
            zone.display().to_string()
        ),
    );
    let (code, _, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with(&format!("{}:3: ", cfg.display())), "{err}");
    assert!(err.contains("twice"), "{err}");
}

#[test]
fn edns_udp_payload_has_a_range() {
    refused("edns_udp_payload = 511", &["edns_udp_payload", "512"]);
}

#[test]
fn user_must_not_be_empty() {
    refused("user = \" \"", &["user"]);
}

#[test]
fn rrl_numbers_have_ranges() {
    // [server.rrl] as an inline table on line 3.
    refused(
        "rrl = { responses_per_second = 0 }",
        &["responses_per_second"],
    );
    refused(
        "rrl = { responses_per_second = 2000000 }",
        &["responses_per_second"],
    );
    refused("rrl = { responses_per_second = 5, slip = 11 }", &["slip"]);
    refused(
        "rrl = { responses_per_second = 5, ipv4_prefix = 33 }",
        &["ipv4_prefix"],
    );
    refused(
        "rrl = { responses_per_second = 5, ipv6_prefix = 129 }",
        &["ipv6_prefix"],
    );
    refused(
        "rrl = { responses_per_second = 5, table_size = 1 }",
        &["table_size"],
    );
    accepted("rrl = { responses_per_second = 5, slip = 0 }");
}
