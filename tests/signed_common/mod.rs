//! Shared by tests/dnssec_*.rs: a signed example.test (tests/data/signed/)
//! with keys made by `meridian dnssec keygen` per run, a trust anchor
//! written from the KSK, and `delv` (bind9-dnsutils) validating answers
//! from the running server against it. Everything is on loopback.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{dnssec_keygen, root, skip, TempDir};

/// A directory with the signed zone, its keys and meridian.toml.
pub(crate) struct Signed {
    pub(crate) dir: TempDir,
    pub(crate) ksk: String,
    pub(crate) zsk: String,
    pub(crate) config: PathBuf,
}

/// The config template with `keys` (base names), extra `dnssec` settings
/// (`, name = value` pairs) and extra tables.
pub(crate) fn config_text(keys: &[&str], dnssec_extra: &str, extra: &str) -> String {
    let t = std::fs::read_to_string(root().join("tests/data/signed/meridian.toml.in")).unwrap();
    let keys: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
    t.replace("@KEYS@", &keys.join(", "))
        .replace("@DNSSEC_EXTRA@", dnssec_extra)
        .replace("@EXTRA@", extra)
}

impl Signed {
    /// The zone with a KSK (ECDSA P-256) and a ZSK (`zsk_alg`), and `extra`
    /// tables in meridian.toml.
    pub(crate) fn new(tag: &str, zsk_alg: &str, extra: &str) -> Signed {
        let dir = TempDir::new(tag);
        let zone =
            std::fs::read_to_string(root().join("tests/data/signed/example.test.zone")).unwrap();
        dir.write("example.test.zone", &zone);
        let ksk = dnssec_keygen(&dir.0, "example.test", "ecdsap256", true);
        let zsk = dnssec_keygen(&dir.0, "example.test", zsk_alg, false);
        let config = dir.write("meridian.toml", &config_text(&[&ksk, &zsk], "", extra));
        Signed {
            dir,
            ksk,
            zsk,
            config,
        }
    }

    /// A trust anchor file for delv holding the DNSKEY of `key` (a base
    /// name in the directory).
    pub(crate) fn anchor(&self, key: &str) -> PathBuf {
        anchor_file(&self.dir.0, &[key])
    }
}

/// The flags, algorithm and public key (base64) of a `.key` file.
pub(crate) fn public_key(dir: &Path, key: &str) -> (u16, u8, String) {
    let text = std::fs::read_to_string(dir.join(format!("{key}.key"))).unwrap();
    let line = text
        .lines()
        .find(|l| !l.starts_with(';') && l.contains("DNSKEY"))
        .unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    let i = f.iter().position(|w| *w == "DNSKEY").unwrap();
    (
        f[i + 1].parse().unwrap(),
        f[i + 3].parse().unwrap(),
        f[i + 4..].concat(),
    )
}

/// delv's `trust-anchors` file for `keys`.
pub(crate) fn anchor_file(dir: &Path, keys: &[&str]) -> PathBuf {
    let mut s = String::from("trust-anchors {\n");
    for k in keys {
        let (flags, alg, pk) = public_key(dir, k);
        s.push_str(&format!(
            "  example.test. static-key {flags} 3 {alg} \"{pk}\";\n"
        ));
    }
    s.push_str("};\n");
    let p = dir.join(format!("anchors-{}.conf", keys.join("-")));
    std::fs::write(&p, s).unwrap();
    p
}

/// Is delv here? Prints a visible SKIP line when not.
pub(crate) fn have_delv(test: &str) -> bool {
    let ok = Command::new("delv").arg("-v").output().is_ok();
    if !ok {
        skip(test, "delv (bind9-dnsutils) is not installed");
    }
    ok
}

/// delv's verdict on NAME TYPE from the server at `port`: "validated"
/// (a positive answer), "negative" (a validated denial), or the failure
/// text.
pub(crate) fn delv(port: u16, anchors: &Path, name: &str, qtype: &str) -> String {
    let out = Command::new("delv")
        .args(["@127.0.0.1", "-p", &port.to_string(), "-a"])
        .arg(anchors)
        .args(["+root=example.test", name, qtype])
        .output()
        .expect("run delv");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if text.contains("; negative response, fully validated") {
        "negative".into()
    } else if text.contains("; fully validated") {
        "validated".into()
    } else {
        text
    }
}
