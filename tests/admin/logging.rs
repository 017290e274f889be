//! The server's log as an operator reads it: plain text in a file (no ANSI
//! colour codes when stderr is not a terminal), one line per reload, and a
//! warning naming each changed `[server]` key that a reload cannot apply.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn config(dir: &TempDir, server: &str) -> std::path::PathBuf {
    let zone = root().join("zones/example.test.zone");
    dir.write(
        "meridian.toml",
        &format!(
            "[server]\n{server}\n\n[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n",
            zone.display().to_string()
        ),
    )
}

#[test]
fn a_log_file_has_no_colour_codes() {
    let dir = TempDir::new("log-file");
    let cfg = config(&dir, "log = \"debug\"");
    let log = dir.0.join("meridian.log");
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--http-listen", "none", "--workers", "1", "--allow-root"])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("meridian: ready") || t0.elapsed() > Duration::from_secs(20) {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("meridian: ready"), "{text}");
    // The tracing lines (the first load's report) are there, uncoloured.
    assert!(text.contains("INFO"), "no tracing line in:\n{text}");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI escape codes in a log file:\n{text:?}"
    );
}

#[test]
fn a_reload_is_reported_once() {
    let dir = TempDir::new("log-once");
    let cfg = config(&dir, "log = \"info\"");
    let s = Server::start(&cfg, &[]);
    let line = s.reload(Duration::from_secs(20));
    assert!(line.contains("meridian: reloaded (SIGHUP)"), "{line}");
    // Give a second report time to show up.
    std::thread::sleep(Duration::from_millis(300));
    let lines = s.stderr.lock().unwrap().clone();
    let n = lines
        .iter()
        .filter(|l| l.contains("reloaded (SIGHUP)"))
        .count();
    assert_eq!(n, 1, "the reload is reported {n} times:\n{lines:#?}");
}

#[test]
fn a_reload_warns_about_keys_that_need_a_restart() {
    let dir = TempDir::new("log-restart");
    let cfg = config(&dir, "log = \"info\"\nworkers = 1\ntcp_max_queries = 100");
    let s = Server::start(&cfg, &[]);
    // workers and http_listen need a restart; tcp_max_queries does not.
    config(
        &dir,
        "log = \"info\"\nworkers = 2\nhttp_listen = \"127.0.0.1:1\"\ntcp_max_queries = 200",
    );
    let line = s.reload(Duration::from_secs(20));
    assert!(line.contains("meridian: reloaded (SIGHUP)"), "{line}");
    assert!(
        s.wait_log("[server] workers changed (1 -> 2)", Duration::from_secs(2)),
        "no warning naming workers: {:#?}",
        s.stderr.lock().unwrap()
    );
    assert!(s.wait_log("[server] http_listen changed", Duration::from_secs(2)));
    let lines = s.stderr.lock().unwrap().clone();
    for l in lines.iter().filter(|l| l.contains("changed (")) {
        assert!(l.contains("restart"), "{l}");
        assert!(!l.contains("tcp_max_queries"), "{l}");
    }
    // One warning per key.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("workers changed"))
            .count(),
        1,
        "{lines:#?}"
    );
}
