//! The config file: arbitrary TOML through the strict parser and, when it
//! names only the bundled zone and geo files, through the whole engine
//! build (zones, pools, checks, geo rules, rate limiting, limits). Errors
//! must carry a line inside the text.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use meridian::config::Source;
use meridian::engine::Engine;

/// A folder with the example's zone and geo database, for relative paths.
fn dir() -> &'static PathBuf {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("meridian-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // The repository root, from the fuzz crate or from the main crate's tests.
        let m = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let root = if m.join("fuzz_targets").is_dir() {
            m.join("..")
        } else {
            m
        };
        std::fs::copy(
            root.join("zones/example.test.zone"),
            d.join("example.test.zone"),
        )
        .unwrap();
        std::fs::copy(root.join("geo/example.mmdb"), d.join("example.mmdb")).unwrap();
        d
    })
}

const FILES: [&str; 2] = ["example.test.zone", "example.mmdb"];

/// Remove the folder (the regression test calls this when it is done).
#[allow(dead_code)]
pub fn cleanup() {
    let _ = std::fs::remove_dir_all(dir());
}

pub fn run_one(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let d = dir();
    let path = d.join("meridian.toml");
    let src = Source {
        path: path.clone(),
        text: text.to_string(),
    };
    let lines = text.lines().count().max(1);
    let cfg = match src.parse() {
        Ok(c) => c,
        Err(e) => {
            assert!(
                e.line <= lines + 1,
                "error line {} past the end ({lines})",
                e.line
            );
            return;
        }
    };
    // Only files we put there: no reading of arbitrary paths (/dev/zero...).
    let zones_ok = cfg
        .zone
        .iter()
        .all(|z| FILES.contains(&z.get_ref().file.get_ref().as_str()));
    let geo_ok = cfg
        .geo
        .as_ref()
        .map(|g| FILES.contains(&g.database.get_ref().as_str()))
        .unwrap_or(true);
    if !zones_ok || !geo_ok {
        return;
    }
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(data).unwrap();
    drop(f);
    if let Err(e) = Engine::load(&path) {
        if e.file == path {
            assert!(
                e.line <= lines + 1,
                "error line {} past the end ({lines}): {e}",
                e.line
            );
        }
    }
}
