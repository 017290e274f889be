//! The fuzz targets' checks on the stable toolchain: every seed in
//! fuzz/corpus/<target>/ and every input that once broke a target, kept in
//! fuzz/regressions/<target>/, goes through the same invariants as under
//! `cargo fuzz` (the check modules are shared with fuzz/fuzz_targets/).

#[path = "../../fuzz/fuzz_targets/answer_check.rs"]
#[allow(unreachable_pub)] // `pub` for the fuzz crate, which this file borrows
mod answer_check;
#[path = "../../fuzz/fuzz_targets/config_check.rs"]
#[allow(unreachable_pub)] // `pub` for the fuzz crate, which this file borrows
mod config_check;
#[path = "../../fuzz/fuzz_targets/ecs_check.rs"]
#[allow(unreachable_pub)] // `pub` for the fuzz crate, which this file borrows
mod ecs_check;
#[path = "../../fuzz/fuzz_targets/limit_check.rs"]
#[allow(unreachable_pub)] // `pub` for the fuzz crate, which this file borrows
mod limit_check;
#[path = "../../fuzz/fuzz_targets/zone_check.rs"]
#[allow(unreachable_pub)] // `pub` for the fuzz crate, which this file borrows
mod zone_check;

use std::path::PathBuf;

/// Files of fuzz/corpus/<target> and fuzz/regressions/<target>.
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut v = Vec::new();
    for sub in ["corpus", "regressions"] {
        let Ok(rd) = std::fs::read_dir(root.join(sub).join(target)) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_file() {
                v.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    v.sort();
    v
}

fn replay(target: &str, min: usize, f: impl Fn(&[u8])) {
    let all = inputs(target);
    assert!(all.len() >= min, "{target}: only {} inputs", all.len());
    for (p, data) in &all {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(data)));
        assert!(r.is_ok(), "{target}: {} breaks an invariant", p.display());
    }
}

#[test]
fn answer_corpus_and_regressions() {
    let e = meridian::answer::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("zones/meridian.toml"),
        None,
    )
    .unwrap();
    replay("answer", 100, |d| answer_check::run_one(&e, d));
}

/// The `limit` target's property on the stable toolchain: every answer to
/// every seed of fuzz/corpus/answer, and to its variants (an OPT of 512
/// asking for the NSID, a TSIG with pointer names, a long QNAME, byte
/// flips), fits the limit, under every config variant (long NSIDs, UDP
/// sizes 512, 1232 and 4096).
#[test]
fn every_answer_fits_its_limit() {
    let cases = limit_check::engines(&limit_check::root(env!("CARGO_MANIFEST_DIR")));
    let mut n = 0;
    replay("answer", 100, |d| {
        for (k, c) in cases.iter().enumerate() {
            for q in limit_check::variants(d, d.len() as u64 * 31 + k as u64) {
                limit_check::run_one(c, &q);
            }
        }
    });
    for (_, d) in inputs("answer") {
        n += limit_check::variants(&d, 1).len() * cases.len();
    }
    assert!(n > 10_000, "only {n} queries");
}

#[test]
fn ecs_corpus_and_regressions() {
    replay("ecs", 10, ecs_check::run_one);
}

#[test]
fn zone_corpus_and_regressions() {
    replay("zone", 10, zone_check::run_one);
}

#[test]
fn config_corpus_and_regressions() {
    replay("config", 10, config_check::run_one);
    config_check::cleanup();
}
