//! Runs the simulator binary at a reduced scale (500 resolvers) and checks
//! the direction of each result that must hold, from the numbers the run
//! wrote (`NAME-summary.csv`), never from constants.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// (variant, metric) -> value, from one scenario's summary.
fn summary(dir: &Path, name: &str) -> HashMap<(String, String), f64> {
    let p = dir.join(format!("{name}-summary.csv"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 3, "{l}");
            ((f[0].to_string(), f[1].to_string()), f[2].parse().unwrap())
        })
        .collect()
}

fn get(s: &HashMap<(String, String), f64>, variant: &str, metric: &str) -> f64 {
    *s.get(&(variant.to_string(), metric.to_string()))
        .unwrap_or_else(|| panic!("no {metric:?} for {variant:?} in {s:?}"))
}

#[test]
fn rules_move_traffic_the_right_way() {
    let dir = std::env::temp_dir().join(format!("meridian-sim-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_meridian-sim"))
        .args(["all", "--resolvers", "500", "--out"])
        .arg(&dir)
        .output()
        .expect("run meridian-sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in [
        "bad-deploy",
        "broken-checks",
        "slow-member",
        "returning-member",
    ] {
        for ext in ["csv", "svg"] {
            assert!(dir.join(format!("{name}.{ext}")).is_file(), "{name}.{ext}");
        }
    }

    // The ejection cap keeps the healthy members under capacity.
    let s = summary(&dir, "bad-deploy");
    let (open, capped) = (
        get(&s, "no cap", "bad during deploy %"),
        get(&s, "max_ejected = 0.1", "bad during deploy %"),
    );
    assert!(capped < open, "cap {capped} vs no cap {open}");

    // Panic answers (nearly) every client when every check fails; without
    // it (and without failing open) they fail.
    let s = summary(&dir, "broken-checks");
    let (panic, none) = (
        get(
            &s,
            "every check: panic_below = 0.5 (servfail)",
            "bad while checks fail %",
        ),
        get(
            &s,
            "every check: no panic (servfail)",
            "bad while checks fail %",
        ),
    );
    assert!(panic < 0.05, "panic still fails {panic}");
    assert!(none > 0.5, "without panic only {none} failed");
    assert!(get(&s, "every check: panic_below = 0.5 (servfail)", "panic s") > 0.0);

    // Latency awareness takes share from the slow member.
    let s = summary(&dir, "slow-member");
    let (off, on) = (
        get(&s, "latency_aware off", "slow member share %"),
        get(&s, "latency_aware = true", "slow member share %"),
    );
    assert!(on < off, "latency_aware {on} vs off {off}");

    // Slow start gives the returning member less in its first window.
    let s = summary(&dir, "returning-member");
    let (cold, ramped) = (
        get(&s, "no slow_start", "share first 60 s %"),
        get(&s, "slow_start = \"60s\"", "share first 60 s %"),
    );
    assert!(ramped < cold, "slow start {ramped} vs none {cold}");

    // Sticky answers: either run for real, or said to be missing.
    if dir.join("sticky-removal-summary.csv").is_file() {
        let s = summary(&dir, "sticky-removal");
        let sticky = get(&s, "sticky = true (rendezvous)", "blocks moved %");
        let modulo = get(&s, "modulo baseline (hash mod n)", "blocks moved %");
        assert!(sticky < modulo / 2.0, "sticky {sticky} vs modulo {modulo}");
    } else {
        assert!(
            stdout.contains("sticky answers not in this build"),
            "{stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
