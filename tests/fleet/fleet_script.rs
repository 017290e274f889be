//! The fleet example runs from one documented command (#18 item 8):
//! `tools/fleet/run.sh --check` starts a 3-member etcd cluster and three
//! nodes on loopback, drains a member through node a, and exits 0 only if
//! b and c follow within 1 s; it leaves nothing running.

#[test]
fn the_fleet_example_runs_and_checks_itself() {
    if !crate::fleet_support::fleet_ready("the_fleet_example_runs_and_checks_itself") {
        return;
    }
    for t in ["dig", "curl", "python3"] {
        if std::process::Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            crate::common::skip(
                "the_fleet_example_runs_and_checks_itself",
                &format!("{t} is not installed"),
            );
            return;
        }
    }
    let mut cmd = std::process::Command::new(crate::common::root().join("tools/fleet/run.sh"));
    cmd.arg("--check").env("MERIDIAN", crate::common::BIN);
    // etcd's data in memory, as in tests/fleet_support: a shared CI disk
    // busy writing back the build stalls its fsyncs past an election.
    if let Some(shm) = crate::fleet_support::roomy_shm() {
        cmd.env("TMPDIR", shm);
    }
    let out = cmd.output().expect("run tools/fleet/run.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("fleet check: ok"), "{text}");
    assert!(text.contains("3 node(s) registered"), "{text}");
    // Nothing left behind: no etcd or meridian of the script still runs.
    let dir = text
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.contains("/tmp/meridian-fleet."))
        })
        .map(|w| w.split("/a/").next().unwrap().to_string());
    if let Some(d) = dir {
        assert!(!std::path::Path::new(&d).exists(), "{d} left behind");
    }
}
