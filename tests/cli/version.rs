//! `meridian --version` and `meridian-probe --version` name the package
//! version and the git commit they were built from (build.rs): the short
//! hash (with `+dirty` when the tree had changes), or `unknown` outside a
//! checkout.

use std::path::Path;
use std::process::Command;

/// The version line of `bin`, split into (name, semver, commit).
fn version_of(bin: &Path) -> (String, String, String) {
    let out = Command::new(bin).arg("--version").output().unwrap();
    assert!(out.status.success(), "{}: {out:?}", bin.display());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.trim_end();
    assert_eq!(text.lines().count(), 1, "one line: {text:?}");
    // `<name> <semver> (<commit>)`
    let (name, rest) = line.split_once(' ').expect("name and version");
    let (semver, commit) = rest.split_once(" (").expect("version (commit)");
    let commit = commit.strip_suffix(')').expect("closing parenthesis");
    let parts: Vec<&str> = semver.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u64>().is_ok()),
        "semver: {line}"
    );
    assert_eq!(semver, env!("CARGO_PKG_VERSION"), "{line}");
    let hash = commit.strip_suffix("+dirty").unwrap_or(commit);
    assert!(
        commit == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "commit: {line}"
    );
    (name.to_string(), semver.to_string(), commit.to_string())
}

/// `git rev-parse --short HEAD` in the repository, if git and the
/// checkout are there.
fn head() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(crate::common::root())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit() {
    // `cargo test --test cli` builds only this package: bring the probe
    // up to date too (after a commit its build script must run again).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let release = Path::new(crate::common::BIN)
        .parent()
        .is_some_and(|d| d.ends_with("release"));
    let built = Command::new(cargo)
        .args(["build", "--quiet", "-p", "meridian-probe"])
        .args(release.then_some("--release"))
        .current_dir(crate::common::root())
        .status()
        .unwrap();
    assert!(built.success(), "cargo build -p meridian-probe");
    let probe = Path::new(crate::common::BIN).with_file_name("meridian-probe");
    assert!(probe.exists(), "{}", probe.display());
    for (bin, want_name) in [
        (Path::new(crate::common::BIN), "meridian"),
        (probe.as_path(), "meridian-probe"),
    ] {
        let (name, _, commit) = version_of(bin);
        assert_eq!(name, want_name);
        match head() {
            // Built from this checkout: the same commit (the build script
            // runs again when HEAD moves). `+dirty` says whether tracked
            // files had changed when the binary's sources last did.
            Some(head) => assert_eq!(
                commit.strip_suffix("+dirty").unwrap_or(&commit),
                head,
                "{want_name} --version names another commit: a stale binary? \
                 (cargo test --workspace rebuilds it; or cargo build -p meridian-probe)"
            ),
            None => crate::common::skip(
                "version_names_the_commit",
                "no git or no checkout: only the format was checked",
            ),
        }
    }
}
