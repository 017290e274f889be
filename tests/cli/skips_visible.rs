//! A test that cannot run says so where the person running `cargo test`
//! sees it: its `SKIP: <test>: <reason>` line reaches the terminal even
//! though the test passes (the harness captures `eprintln!` of passing
//! tests, which made every skip silent), and `.ci/run` counts those lines.
//! Here `tests/cli/systemd_unit.rs` runs without `systemd-analyze` on its PATH.

use std::process::Command;

use crate::common::*;

#[test]
fn a_skipped_test_prints_its_skip_line_through_the_harness() {
    // `systemd_unit` is a module of this same test binary.
    let bin = std::env::current_exe().unwrap();
    let empty = TempDir::new("no-tools");
    let out = Command::new(&bin)
        .args(["--exact", "systemd_unit::unit_verifies_clean"])
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
        .args(["--exact", "systemd_unit::unit_verifies_clean"])
        .env("PATH", &empty.0)
        .env("CI", "true")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a skip passed under CI=true");
}
