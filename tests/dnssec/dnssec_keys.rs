//! DNSSEC key files end to end: `meridian dnssec keygen` and `ds`, keys
//! made by BIND's `dnssec-keygen` and ldns's `ldns-keygen` loaded back, DS
//! records equal to `dnssec-dsfromkey -2`'s, and every load error naming
//! its file (and line).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{run, skip, TempDir};
use meridian::dnssec::keys::{self, KeyAlgorithm};

const ZONE: &str = "example.test.";

fn have(tool: &str) -> bool {
    crate::common::on_path(tool)
}

/// Runs `meridian dnssec keygen` in `dir`; the path of the `.key` file.
fn keygen(dir: &Path, alg: &str, ksk: bool) -> PathBuf {
    let out = crate::common::dnssec_keygen(dir, ZONE, alg, ksk);
    let base = out.trim();
    assert!(base.starts_with("Kexample.test.+0"), "{out}");
    dir.join(format!("{base}.key"))
}

/// Runs a key generator that prints the base name, in `dir`.
fn external(dir: &Path, cmd: &str, args: &[&str]) -> PathBuf {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
    let base = String::from_utf8_lossy(&out.stdout).trim().to_string();
    dir.join(format!("{base}.key"))
}

/// Loads `key` for ZONE and checks what a caller relies on.
fn load_ok(key: &Path, alg: KeyAlgorithm) -> keys::KeyPair {
    let loaded = keys::load(key, ZONE).unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let k = loaded.key;
    assert_eq!(k.algorithm, alg);
    assert_eq!(k.dnskey.owner, ZONE);
    let sig = k.sign(b"a test message").unwrap();
    assert!(k.verify(b"a test message", &sig));
    assert!(!k.verify(b"another message", &sig));
    k
}

fn ds_of(key: &Path) -> String {
    let (code, out, err) = run(&["dnssec", "ds", "--key", &key.display().to_string()]);
    assert_eq!(code, 0, "ds: {err}");
    out
}

/// `dnssec-dsfromkey -2 key`, or None when bind9-utils is missing.
fn bind_ds(key: &Path) -> Option<String> {
    if !have("dnssec-dsfromkey") {
        return None;
    }
    let out = Command::new("dnssec-dsfromkey")
        .args(["-2", &key.display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn keygen_writes_pairs_that_load_back() {
    let dir = TempDir::new("dnssec-keygen");
    for (alg, want, ksk) in [
        ("ecdsap256", KeyAlgorithm::EcdsaP256Sha256, false),
        ("ecdsap256", KeyAlgorithm::EcdsaP256Sha256, true),
        ("ed25519", KeyAlgorithm::Ed25519, false),
        ("ed25519", KeyAlgorithm::Ed25519, true),
    ] {
        let key = keygen(&dir.0, alg, ksk);
        let k = load_ok(&key, want);
        assert_eq!(k.is_ksk(), ksk);
        assert_eq!(k.dnskey.flags, if ksk { 257 } else { 256 });
        assert!(k.timing.activate.is_some() && !k.timing.expired(i64::MAX - 1));
        let mode = std::fs::metadata(&k.private_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", k.private_file.display());
        let ds = ds_of(&key);
        assert!(
            ds.starts_with(&format!("{ZONE} IN DS {} {} 2 ", k.tag, want.number())),
            "{ds}"
        );
        if let Some(bind) = bind_ds(&key) {
            assert_eq!(ds, bind, "{}", key.display());
        }
    }
}

#[test]
fn bind_dnssec_keygen_keys_load_and_ds_matches() {
    let test = "bind_dnssec_keygen_keys_load_and_ds_matches";
    if !have("dnssec-keygen") {
        return skip(test, "dnssec-keygen (bind9-utils) is not installed");
    }
    let dir = TempDir::new("dnssec-bind");
    for (args, alg) in [
        (
            &["-a", "ECDSAP256SHA256"][..],
            KeyAlgorithm::EcdsaP256Sha256,
        ),
        (&["-a", "ED25519", "-f", "KSK"][..], KeyAlgorithm::Ed25519),
        (
            &["-a", "RSASHA256", "-b", "2048"][..],
            KeyAlgorithm::RsaSha256,
        ),
    ] {
        let mut a = vec!["-q"];
        a.extend_from_slice(args);
        a.push(ZONE);
        let key = external(&dir.0, "dnssec-keygen", &a);
        load_ok(&key, alg);
        assert_eq!(Some(ds_of(&key)), bind_ds(&key), "{}", key.display());
    }
}

#[test]
fn ldns_keygen_keys_load_and_ds_matches() {
    let test = "ldns_keygen_keys_load_and_ds_matches";
    if !have("ldns-keygen") {
        return skip(test, "ldns-keygen (ldnsutils) is not installed");
    }
    let dir = TempDir::new("dnssec-ldns");
    for (args, alg) in [
        (
            &["-a", "ECDSAP256SHA256"][..],
            KeyAlgorithm::EcdsaP256Sha256,
        ),
        (&["-a", "ED25519", "-k"][..], KeyAlgorithm::Ed25519),
        (
            &["-a", "RSASHA256", "-b", "2048"][..],
            KeyAlgorithm::RsaSha256,
        ),
    ] {
        let mut a = args.to_vec();
        a.push(ZONE);
        let key = external(&dir.0, "ldns-keygen", &a);
        load_ok(&key, alg);
        if let Some(bind) = bind_ds(&key) {
            assert_eq!(ds_of(&key), bind, "{}", key.display());
        }
    }
}

/// A fresh ECDSA key pair in its own directory: (dir, .key, .private).
fn fresh(tag: &str) -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new(tag);
    let key = keygen(&dir.0, "ecdsap256", false);
    let private = keys::key_paths(&key).1;
    (dir, key, private)
}

fn load_err(key: &Path, zone: &str) -> String {
    keys::load(key, zone)
        .map(|l| l.key.tag)
        .expect_err("the key must be refused")
        .to_string()
}

/// Replaces `from` by `to` in `file`.
fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{from} not in {text}");
    std::fs::write(file, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn missing_files_are_named() {
    let (_dir, key, private) = fresh("dnssec-missing");
    std::fs::remove_file(&private).unwrap();
    let e = load_err(&key, ZONE);
    assert_eq!(e, format!("{}: missing key file", private.display()));
    std::fs::remove_file(&key).unwrap();
    let e = load_err(&key, ZONE);
    assert_eq!(e, format!("{}: missing key file", key.display()));
}

#[test]
fn key_for_another_zone_is_refused_at_its_line() {
    let (_dir, key, _) = fresh("dnssec-zone");
    let e = load_err(&key, "other.test");
    // The record is on line 5, after BIND's four comment lines.
    let want = format!(
        "{}:5: key for zone {ZONE}, expected other.test.",
        key.display()
    );
    assert_eq!(e, want);
}

#[test]
fn algorithm_mismatch_is_refused_at_its_line() {
    let (_dir, key, private) = fresh("dnssec-alg");
    edit(
        &private,
        "Algorithm: 13 (ECDSAP256SHA256)",
        "Algorithm: 15 (ED25519)",
    );
    let e = load_err(&key, ZONE);
    assert!(
        e.starts_with(&format!("{}:2: algorithm mismatch", private.display())),
        "{e}"
    );
}

#[test]
fn bad_base64_is_refused_at_its_line() {
    let (_dir, key, private) = fresh("dnssec-b64");
    let text = std::fs::read_to_string(&private).unwrap();
    let line = text.lines().find(|l| l.starts_with("PrivateKey:")).unwrap();
    edit(&private, line, "PrivateKey: not*base64");
    let e = load_err(&key, ZONE);
    assert!(
        e.starts_with(&format!(
            "{}:3: bad base64 in PrivateKey",
            private.display()
        )),
        "{e}"
    );
    // And in the public key.
    let (_dir, key, _) = fresh("dnssec-b64-pub");
    edit(&key, "IN DNSKEY 256 3 13 ", "IN DNSKEY 256 3 13 *");
    let e = load_err(&key, ZONE);
    assert!(
        e.starts_with(&format!("{}:5: bad base64", key.display())),
        "{e}"
    );
}

#[test]
fn tag_mismatch_is_refused() {
    let (dir, key, private) = fresh("dnssec-tag");
    let name = keys::KeyName::parse(key.file_stem().unwrap().to_str().unwrap()).unwrap();
    let wrong = keys::KeyName {
        tag: name.tag.wrapping_add(1),
        ..name.clone()
    };
    let key2 = dir.0.join(format!("{}.key", wrong.base()));
    std::fs::rename(&key, &key2).unwrap();
    std::fs::rename(&private, keys::key_paths(&key2).1).unwrap();
    let e = load_err(&key2, ZONE);
    let want = format!(
        "{}:5: key tag mismatch: the record's tag is {} but the file name says {}",
        key2.display(),
        name.tag,
        wrong.tag
    );
    assert_eq!(e, want);
}

#[test]
fn unsupported_algorithm_is_refused() {
    let dir = TempDir::new("dnssec-unsupported");
    // Algorithm 14 (ECDSA P-384) with a made-up key.
    let key = dir.write(
        "Kexample.test.+014+00001.key",
        "example.test. IN DNSKEY 256 3 14 AAAA\n",
    );
    dir.write("Kexample.test.+014+00001.private", "Algorithm: 14\n");
    let e = load_err(&key, ZONE);
    assert!(
        e.starts_with(&format!("{}:1: unsupported algorithm 14", key.display())),
        "{e}"
    );
}

#[test]
fn private_key_of_another_pair_is_refused() {
    let (_d1, key, private) = fresh("dnssec-swap1");
    let (_d2, _, other) = fresh("dnssec-swap2");
    std::fs::copy(&other, &private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = load_err(&key, ZONE);
    assert!(
        e.starts_with(&format!(
            "{}: the private key does not match the public key",
            private.display()
        )),
        "{e}"
    );
}

#[test]
fn bad_file_name_is_refused() {
    let (dir, key, private) = fresh("dnssec-name");
    let renamed = dir.0.join("zsk.key");
    std::fs::rename(&key, &renamed).unwrap();
    std::fs::rename(&private, dir.0.join("zsk.private")).unwrap();
    let e = load_err(&renamed, ZONE);
    assert!(
        e.starts_with(&format!("{}: the file name is not K", renamed.display())),
        "{e}"
    );
}

#[test]
fn world_readable_private_key_warns() {
    let (_dir, key, private) = fresh("dnssec-mode");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o644)).unwrap();
    let loaded = keys::load(&key, ZONE).unwrap();
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    let w = &loaded.warnings[0];
    assert!(w.starts_with(&format!("{}: ", private.display())), "{w}");
    assert!(w.contains("readable by other users"), "{w}");
}

#[test]
fn timing_metadata_is_returned() {
    let (_dir, key, private) = fresh("dnssec-timing");
    let mut text = std::fs::read_to_string(&private).unwrap();
    text.push_str("Inactive: 20200101000000\nDelete: 20300101000000\n");
    std::fs::write(&private, text).unwrap();
    let k = keys::load(&key, ZONE).unwrap().key;
    assert_eq!(k.timing.inactive, keys::parse_timestamp("20200101000000"));
    assert_eq!(k.timing.delete, Some(1_893_456_000));
    let now = keys::parse_timestamp("20261201000000").unwrap();
    assert!(k.timing.expired(now));
    // A bad time is an error at its line.
    edit(&private, "Delete: 20300101000000", "Delete: soon");
    let e = load_err(&key, ZONE);
    assert!(
        e.starts_with(&format!("{}:8: bad Delete time", private.display())),
        "{e}"
    );
}

#[test]
fn ds_of_a_missing_key_names_the_file() {
    let dir = TempDir::new("dnssec-ds-missing");
    let key = dir.0.join("Kexample.test.+013+00001.key");
    let (code, _, err) = run(&["dnssec", "ds", "--key", &key.display().to_string()]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        format!("meridian: {}: missing key file", key.display())
    );
}
