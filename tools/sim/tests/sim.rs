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

/// One table cell: (variant, metric, cell text).
type Cell = (String, String, String);

/// The Markdown tables on stdout: per scenario (`## NAME: title`), its
/// cells.
fn tables(stdout: &str) -> Vec<(String, Vec<Cell>)> {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut out: Vec<(String, Vec<Cell>)> = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for l in stdout.lines() {
        if let Some(rest) = l.strip_prefix("## ") {
            let name = rest.split(':').next().unwrap_or("").to_string();
            out.push((name, Vec::new()));
        } else if l.starts_with("| variant |") {
            header = cells(l);
        } else if l.starts_with('|') && !l.starts_with("| ---") {
            let row = cells(l);
            let (_, rows) = out.last_mut().expect("a table under a heading");
            for (metric, cell) in header.iter().zip(&row).skip(1) {
                rows.push((row[0].clone(), metric.clone(), cell.clone()));
            }
        }
    }
    assert!(out.len() >= 7, "{stdout}");
    out
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
        "spillover",
        "p2c",
        "reported-load",
    ] {
        for ext in ["csv", "svg"] {
            assert!(dir.join(format!("{name}.{ext}")).is_file(), "{name}.{ext}");
        }
    }

    // Each summary CSV holds the numbers its table shows, in the units the
    // metric names give (a `%` metric in percent, not a fraction).
    for (name, rows) in tables(&stdout) {
        let s = summary(&dir, &name);
        for (variant, metric, cell) in rows {
            let v = get(&s, &variant, &metric);
            let decimals = cell.split_once('.').map_or(0, |(_, d)| d.len());
            let shown: f64 = cell.parse().unwrap();
            assert!(
                (v - shown).abs() <= 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9,
                "{name}: {variant} / {metric}: the CSV holds {v}, the table shows {cell}"
            );
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
    // Percentages, as the metric names say.
    assert!(panic < 5.0, "panic still fails {panic} %");
    assert!(none > 50.0, "without panic only {none} % failed");
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

    // Spillover sends part of the failed pool's answers to the next pool:
    // fewer bad requests and a lower peak on the survivors than hard
    // failover.
    let s = summary(&dir, "spillover");
    let (hard, spill) = (
        get(&s, "hard failover", "bad after failure %"),
        get(&s, "spillover = 1.4", "bad after failure %"),
    );
    assert!(
        spill < hard,
        "spillover bad {spill} vs hard failover {hard}"
    );
    let (hard, spill) = (
        get(&s, "hard failover", "survivor peak util %"),
        get(&s, "spillover = 1.4", "survivor peak util %"),
    );
    assert!(
        spill < hard,
        "spillover peak {spill} vs hard failover {hard}"
    );
    assert!(
        get(&s, "spillover = 1.4", "backup share %") > get(&s, "hard failover", "backup share %")
    );

    // p2c takes share from the slow member, as latency awareness does.
    let s = summary(&dir, "p2c");
    let (plain, p2c) = (
        get(&s, "one (weighted)", "slow member share %"),
        get(&s, "one + pick = p2c", "slow member share %"),
    );
    assert!(p2c < plain, "p2c {p2c} vs plain one {plain}");

    // Reported load keeps the small member below its capacity, without
    // its share swinging more than the unbalanced pool's does.
    let s = summary(&dir, "reported-load");
    let (none, reported) = (
        get(&s, "no load reporting", "small member peak util %"),
        get(&s, "load reported", "small member peak util %"),
    );
    assert!(reported < none, "reported {reported} vs none {none}");
    let (none, reported) = (
        get(&s, "no load reporting", "share std-dev last 3 min %"),
        get(&s, "load reported", "share std-dev last 3 min %"),
    );
    assert!(
        reported <= none,
        "reported load swings {reported} vs {none}"
    );

    // The error penalty (#31) takes share from a member failing checks
    // while it stays up; a shallow check leaves it its share.
    let s = summary(&dir, "flapping-member");
    let (off, on) = (
        get(&s, "error_penalty = false", "sick share %"),
        get(&s, "error penalty (default)", "sick share %"),
    );
    assert!(on < off / 3.0, "flapping: penalty {on} vs none {off}");
    let out = get(&s, "penalty + outlier_detection", "sick share %");
    assert!(out <= on, "outliers {out} vs penalty {on}");
    let s = summary(&dir, "fail-fast");
    let shallow = get(&s, "shallow check", "sick share %");
    let (off, on) = (
        get(&s, "deep check: error_penalty = false", "sick share %"),
        get(&s, "deep check: error penalty", "sick share %"),
    );
    assert!(shallow > 8.0, "a shallow check sees nothing: {shallow}");
    assert!(on < off / 1.5, "fail-fast: penalty {on} vs none {off}");

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
