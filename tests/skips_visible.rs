//! A test that cannot run says so where the person running `cargo test`
//! sees it: its `SKIP: <test>: <reason>` line reaches the terminal even
//! though the test passes (the harness captures `eprintln!` of passing
//! tests, which made every skip silent), and `.ci/run` counts those lines.
//! Here `tests/systemd_unit.rs` runs without `systemd-analyze` on its PATH.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// Build the `systemd_unit` test binary (as `cargo test` would) and return its path.
fn test_binary(name: &str) -> PathBuf {
    let exe = PathBuf::from(BIN);
    let target = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["test", "--no-run", "--message-format=json", "--test", name])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("\"executable\":\"") && l.contains(&format!("\"name\":\"{name}\"")))
        .unwrap_or_else(|| panic!("no executable for {name} in {text}"));
    let at = line.find("\"executable\":\"").unwrap() + 14;
    PathBuf::from(&line[at..at + line[at..].find('"').unwrap()])
}

#[test]
fn a_skipped_test_prints_its_skip_line_through_the_harness() {
    let bin = test_binary("systemd_unit");
    let empty = TempDir::new("no-tools");
    let out = Command::new(&bin)
        .arg("unit_verifies_clean")
        .env("PATH", &empty.0)
        .env_remove("CI")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("SKIP: unit_verifies_clean: no systemd-analyze"),
        "the skip is silent:\nstdout: {stdout}\nstderr: {stderr}"
    );

    // Under CI=true a skip is a failure.
    let out = Command::new(&bin)
        .arg("unit_verifies_clean")
        .env("PATH", &empty.0)
        .env("CI", "true")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a skip passed under CI=true");
}
