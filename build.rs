// Puts the git commit into `meridian --version` (`MERIDIAN_GIT_COMMIT`);
// tools/probe/build.rs includes this file for `meridian-probe --version`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

fn main() {
    // The short hash, "+dirty" when tracked files differ from HEAD, or
    // "unknown" outside a git checkout (a crate tarball, a container copy).
    // MERIDIAN_GIT_COMMIT set at build time wins: a container build has no
    // .git (packaging/Containerfile passes it as a build argument).
    println!("cargo:rerun-if-env-changed=MERIDIAN_GIT_COMMIT");
    let given = std::env::var("MERIDIAN_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    // A given value is final: "+dirty" is added only to what git says.
    let commit = match given {
        Some(c) => c,
        None => match git(&["rev-parse", "--short", "HEAD"]).filter(|h| !h.is_empty()) {
            Some(hash) => {
                let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                    .is_some_and(|s| !s.is_empty());
                if dirty {
                    format!("{hash}+dirty")
                } else {
                    hash
                }
            }
            None => "unknown".to_string(),
        },
    };
    println!("cargo:rustc-env=MERIDIAN_GIT_COMMIT={commit}");

    // Run again when HEAD moves (checkout, commit) or the sources change.
    // Paths come from git, so a worktree (.git is a file) works too.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    if let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let mut watch = vec![Path::new(&git_dir).join("HEAD")];
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(Path::new(&common).join(head_ref));
        }
        watch.push(Path::new(&common).join("packed-refs"));
        // A missing path would make cargo run this script on every build.
        for p in watch.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}
