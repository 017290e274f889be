//! Pool-specific configuration errors, checked with `meridian check`: each
//! fixture in tests/data/pools/bad/ marks the line the error must name with
//! an arrow comment (`# <- MESSAGE`), and check must print exactly
//! `FILE:LINE: MESSAGE` and exit 1. (Generic config errors are covered in
//! tests/cli/config_errors.rs.)

use std::path::Path;

use crate::common::run;
use crate::pool_common::fixture;

const ARROW: &str = "# <- ";

/// The line (1-based) and message an arrow comment in `text` promises.
fn expectation(text: &str) -> (usize, String) {
    let marked: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| l.find(ARROW).map(|at| (i + 1, &l[at + ARROW.len()..])))
        .collect();
    assert_eq!(marked.len(), 1, "one arrow comment per fixture: {marked:?}");
    (marked[0].0, marked[0].1.trim().to_string())
}

fn check(path: &Path) -> (i32, String, String) {
    run(&["check", "--config", path.to_str().unwrap()])
}

#[test]
fn every_bad_pool_config_fails_at_its_file_and_line() {
    let dir = fixture("bad");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "fixtures missing in {}", dir.display());
    let zone = dir.join("../pools.test.zone");
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (line, msg) = expectation(&text);
        let msg = msg.replace("{zone}", &zone.display().to_string());
        let want = format!("{}:{line}: {msg}", f.display());
        let (rc, out, err) = check(f);
        if rc != 1 || !out.is_empty() || err.trim_end() != want {
            failures.push(format!(
                "{}\n  want (exit 1): {want}\n  got  (exit {rc}): {}{}",
                f.file_name().unwrap().to_string_lossy(),
                err.trim_end(),
                if out.is_empty() {
                    String::new()
                } else {
                    format!("\n  stdout: {out}")
                }
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn address_conflict_names_both_the_config_and_the_zone_line() {
    // A and AAAA at a pool-bound name: the error points at the binding in the
    // config and at the record in the zone file.
    for (fixture_name, binding_line, zone_line) in
        [("a_at_name.toml", 12, 10), ("aaaa_at_name.toml", 12, 13)]
    {
        let f = fixture("bad").join(fixture_name);
        let (rc, _, err) = check(&f);
        assert_eq!(rc, 1);
        assert!(
            err.starts_with(&format!("{}:{binding_line}: ", f.display())),
            "{err}"
        );
        assert!(
            err.contains(&format!("pools.test.zone:{zone_line} has address data")),
            "{err}"
        );
    }
}

#[test]
fn serve_refuses_a_bad_pool_config_with_the_same_error() {
    let f = fixture("bad/duplicate_v4.toml");
    let mut child = std::process::Command::new(crate::common::BIN)
        .args(["serve", "--config", f.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--http-listen", "none"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It must exit by itself, not serve.
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("meridian serve kept running with a bad pool config");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains(&format!(
            "{}:13: member 192.0.2.1 is listed twice in pool \"p\"",
            f.display()
        )),
        "{err}"
    );
}

#[test]
fn good_pool_configs_pass_check() {
    for (f, names) in [
        (
            fixture("modes.toml"),
            &[
                "rotate-equal.pools.test.",
                "rotate-4321.pools.test.",
                "some-1234.pools.test.",
                "some3-1234.pools.test.",
                "some8-three.pools.test.",
                "one-1234.pools.test.",
            ][..],
        ),
        (
            fixture("families.toml"),
            &[
                "mixed.pools.test.",
                "v6only.pools.test.",
                "v4only.pools.test.",
                "some.pools.test.",
            ][..],
        ),
        (
            fixture("boundaries.toml"),
            &["low.pools.test.", "high.pools.test.", "one-of.pools.test."][..],
        ),
        (
            crate::common::example_config(),
            &[
                "shuffle.example.test.",
                "rotate.example.test.",
                "one.example.test.",
                "some.example.test.",
            ][..],
        ),
    ] {
        let (rc, out, err) = check(&f);
        assert_eq!(rc, 0, "{}: {err}", f.display());
        for n in names {
            assert!(
                out.contains(&format!("name {n}: pool ")),
                "{}: {n} missing from\n{out}",
                f.display()
            );
        }
    }
}

#[test]
fn boundary_values_are_served() {
    // weight 1 and 65535, ttl 1 and 86400, count 1 and 8.
    use hickory_proto::rr::RecordType;
    let s = crate::common::Server::start(&fixture("boundaries.toml"), &[]);
    let mut c = crate::pool_common::Client::new(&s);
    let a = c.ask("low.pools.test.", RecordType::A);
    assert_eq!((a.addrs.len(), a.ttls()[0]), (1, 1));
    let a = c.ask("high.pools.test.", RecordType::A);
    assert_eq!((a.addrs.len(), a.ttls()[0]), (2, 86400));
    // 65535 : 1 — the light member is picked about once in 65536.
    let heavy = crate::pool_common::ip("192.0.2.71");
    let mut light = 0;
    c.run("one-of.pools.test.", RecordType::A, 2000, |a| {
        if a.addrs != vec![heavy] {
            light += 1;
        }
    });
    assert!(light <= 2, "light member picked {light} times in 2000");
}
