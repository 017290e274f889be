//! The systemd unit in contrib/: systemd's own checker accepts it (with its
//! paths pointed at the built binary), and its sandbox keeps the exposure
//! score that `systemd-analyze security` gives it at 2.0 or lower ("OK").
//! The unit's run time behaviour (DynamicUser, CAP_NET_BIND_SERVICE only,
//! port 53) is what tests/transport/privileges.rs exercises without systemd.
//!
//! Needs `systemd-analyze` (Debian package systemd); skipped loudly where it
//! is missing (a failure under CI=true).

use std::process::Command;

use crate::common::*;

fn unit_for_test(dir: &TempDir) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join("contrib/meridian.service")).unwrap();
    assert!(text.contains("/usr/local/bin/meridian"));
    dir.write(
        "meridian.service",
        &text.replace("/usr/local/bin/meridian", BIN),
    )
}

/// The unit in a temporary folder, or None (with a note) without systemd-analyze.
fn unit_or_skip(test: &str, tag: &str) -> Option<(TempDir, std::path::PathBuf)> {
    let have = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        skip(test, "no systemd-analyze (Debian package systemd)");
        return None;
    }
    let dir = TempDir::new(tag);
    let unit = unit_for_test(&dir);
    Some((dir, unit))
}

#[test]
fn unit_verifies_clean() {
    let Some((_dir, unit)) = unit_or_skip("unit_verifies_clean", "unit") else {
        return;
    };
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verify failed: {err}");
    // Any complaint about the unit (unknown key, bad value) is printed.
    assert!(
        !err.contains("meridian.service"),
        "verify complained: {err}"
    );
}

#[test]
fn unit_sandbox_exposure_is_at_most_2_0() {
    let Some((_dir, unit)) = unit_or_skip("unit_sandbox_exposure_is_at_most_2_0", "unit-sec")
    else {
        return;
    };
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20"])
        .arg(&unit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let overall = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or("(no overall line)");
    assert!(out.status.success(), "exposure above 2.0: {overall}");
    // The sandbox options that matter most for a network daemon are on.
    for key in [
        "DynamicUser=",
        "NoNewPrivileges=",
        "ProtectSystem=",
        "CapabilityBoundingSet=~CAP_SYS_ADMIN",
        "SystemCallFilter=~@privileged",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key} not assessed:\n{text}"));
        assert!(line.trim_start().starts_with('✓'), "{line}");
    }
}
