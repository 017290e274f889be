//! Packaging (issue #15): `cargo install` metadata for both binaries, the
//! .deb's cargo-deb metadata and assets, and the container file. What can be
//! checked offline is checked here; `cargo deb` itself runs only where
//! cargo-deb is installed (else a visible SKIP: tests never install it).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(crate::common::root())
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn both_binaries_carry_install_metadata() {
    let meta = metadata();
    for name in ["meridian", "meridian-probe"] {
        let pkg = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no package {name}"));
        for field in ["description", "license", "readme"] {
            let v = pkg[field].as_str().unwrap_or("");
            assert!(!v.is_empty(), "{name}: no {field}");
        }
        let manifest_dir = Path::new(pkg["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .to_path_buf();
        let readme = manifest_dir.join(pkg["readme"].as_str().unwrap());
        assert!(readme.is_file(), "{name}: readme {}", readme.display());
        for field in ["keywords", "categories"] {
            let list = pkg[field].as_array().unwrap();
            // crates.io: at most five of each.
            assert!(
                !list.is_empty() && list.len() <= 5,
                "{name}: {field} {list:?}"
            );
        }
    }
}

/// The .deb's assets: a file from the repository must exist; one under
/// target/ is a release binary or written by packaging/deb-assets.sh.
#[test]
fn deb_assets_exist_or_are_generated() {
    let root = crate::common::root();
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let deb = &manifest["package"]["metadata"]["deb"];
    let script = std::fs::read_to_string(root.join("packaging/deb-assets.sh")).unwrap();
    let assets = deb["assets"].as_array().unwrap();
    let mut dests = Vec::new();
    for a in assets {
        let a = a.as_array().unwrap();
        let (src, dest) = (a[0].as_str().unwrap(), a[1].as_str().unwrap());
        dests.push(dest.to_string());
        if let Some(bin) = src.strip_prefix("target/release/") {
            assert!(["meridian", "meridian-probe"].contains(&bin), "{src}");
        } else if let Some(generated) = src.strip_prefix("target/packaging/") {
            let file = Path::new(generated).file_name().unwrap().to_str().unwrap();
            let stem = file.trim_end_matches(".gz");
            let stem = stem.rsplit_once('.').map_or(stem, |(s, _)| s);
            assert!(
                script.contains(file) || script.contains(stem.trim_start_matches('_')),
                "{src}: not written by packaging/deb-assets.sh"
            );
        } else {
            assert!(root.join(src).is_file(), "{src} is not in the repository");
        }
    }
    for want in [
        "usr/bin/",
        "etc/meridian/meridian.toml",
        "usr/share/man/man8/",
        "usr/share/man/man1/",
    ] {
        assert!(dests.iter().any(|d| d == want), "no asset to {want}");
    }
    // The systemd unit comes from the repository's, with the binary's path
    // as the package installs it.
    let unit = std::fs::read_to_string(root.join("contrib/meridian.service")).unwrap();
    assert!(unit.contains("/usr/local/bin/meridian"), "{unit}");
    assert!(script.contains("contrib/meridian.service"));
    // The example config's database path is the one the scripts rewrite.
    let example = std::fs::read_to_string(root.join("zones/meridian.toml")).unwrap();
    assert!(
        example
            .lines()
            .any(|l| l == r#"database = "../geo/example.mmdb""#),
        "zones/meridian.toml: the packaging scripts rewrite this line"
    );
}

#[test]
fn containerfile_references_files_that_exist() {
    let root = crate::common::root();
    let text = std::fs::read_to_string(root.join("packaging/Containerfile")).unwrap();
    // Join continuation lines, drop comments.
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => cur.push_str(part),
            None => {
                cur.push_str(t);
                lines.push(std::mem::take(&mut cur));
            }
        }
    }
    let mut froms = Vec::new();
    let mut copies = 0;
    for l in &lines {
        let words: Vec<&str> = l.split_whitespace().collect();
        match words.first().copied() {
            Some("FROM") => froms.push(words[1].to_string()),
            Some("COPY") if !words.iter().any(|w| w.starts_with("--from")) => {
                // Sources are relative to the build context, the repository root.
                for src in &words[1..words.len() - 1] {
                    assert!(root.join(src).exists(), "COPY {src}: not in the repository");
                    copies += 1;
                }
            }
            _ => {}
        }
    }
    assert!(copies >= 5, "{lines:?}");
    // Multi-stage, on Debian.
    assert!(froms.len() >= 2, "{froms:?}");
    assert!(froms.iter().all(|f| f.contains("bookworm")), "{froms:?}");
    assert!(
        lines.iter().any(|l| l == "EXPOSE 53/udp 53/tcp"),
        "{lines:?}"
    );
    let user = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line");
    assert!(user != "root" && user != "0", "runs as {user}");
    // Files the build stage reads by name.
    for f in [
        "zones/meridian.toml",
        "zones/example.test.zone",
        "geo/example.mmdb",
    ] {
        assert!(text.contains(f), "{f}");
        assert!(root.join(f).is_file(), "{f}");
    }
    // The build context leaves the build directory out.
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target"), "{ignore}");
}

/// packaging/deb-assets.sh writes the generated files, the packaged example
/// config passes `meridian check` laid out as in /etc/meridian, and, where
/// cargo-deb is installed, `cargo deb --no-build` packages the debug build
/// with every file in place.
#[test]
fn deb_package_builds_from_the_generated_assets() {
    let root = crate::common::root();
    let bin_dir = Path::new(crate::common::BIN).parent().unwrap();
    assert!(
        bin_dir.join("meridian-probe").exists(),
        "cargo build -p meridian-probe"
    );
    let out = Command::new(root.join("packaging/deb-assets.sh"))
        .arg(bin_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "deb-assets.sh: {out:?}");
    let generated = root.join("target/packaging");

    // /etc/meridian as the package installs it.
    let etc = crate::common::TempDir::new("deb-etc");
    std::fs::copy(generated.join("meridian.toml"), etc.0.join("meridian.toml")).unwrap();
    std::fs::copy(
        root.join("zones/example.test.zone"),
        etc.0.join("example.test.zone"),
    )
    .unwrap();
    std::fs::copy(root.join("geo/example.mmdb"), etc.0.join("example.mmdb")).unwrap();
    let check = Command::new(crate::common::BIN)
        .args(["check", "--config"])
        .arg(etc.0.join("meridian.toml"))
        .output()
        .unwrap();
    assert!(check.status.success(), "packaged config: {check:?}");
    let unit = std::fs::read_to_string(generated.join("meridian.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/meridian serve"), "{unit}");
    assert!(!unit.contains("/usr/local/bin"), "{unit}");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let have_deb = Command::new(&cargo)
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_deb {
        crate::common::skip(
            "deb_package_builds_from_the_generated_assets",
            "cargo-deb is not installed (cargo install cargo-deb --locked): only the assets were checked",
        );
        return;
    }
    // The debug build, already there, stands in for the release build:
    // a target directory of its own whose release/ holds the binaries
    // (cargo-deb warns against --profile dev), then --no-build.
    let dest = crate::common::TempDir::new("deb-out");
    let release = dest.0.join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    for b in ["meridian", "meridian-probe"] {
        let (from, to) = (bin_dir.join(b), release.join(b));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    let deb = dest.0.join("meridian.deb");
    let out = Command::new(&cargo)
        .args(["deb", "--no-build", "--fast", "--output"])
        .arg(&deb)
        .env("CARGO_TARGET_DIR", dest.0.join("target"))
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo deb: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let list = Command::new("dpkg-deb").arg("-c").arg(&deb).output();
    let Ok(list) = list.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()) else {
        crate::common::skip(
            "deb_package_builds_from_the_generated_assets",
            "dpkg-deb is missing: the package was built but not listed",
        );
        return;
    };
    for want in [
        "./usr/bin/meridian",
        "./usr/bin/meridian-probe",
        "./etc/meridian/meridian.toml",
        "./etc/meridian/example.mmdb",
        "./usr/share/man/man8/meridian.8.gz",
        "./usr/share/man/man1/meridian-probe.1.gz",
        "/systemd/system/meridian.service",
    ] {
        assert!(list.contains(want), "{want} not in the package:\n{list}");
    }
}
