//! A zone's `dnssec` table in meridian.toml: keys made by `meridian dnssec
//! keygen` pass `check` and the server starts with them; `dnssec ds
//! --config --zone` prints the KSK's DS; and every bad key or setting fails
//! `check` at its line of meridian.toml, with the key file's own message.
//! Nothing is signed yet (#17).

use std::path::Path;

use crate::common::{run, Server, TempDir};
use hickory_proto::rr::RecordType;

const ZONE_FILE: &str = "$ORIGIN example.test.\n$TTL 300\n\
    @ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
    @ IN NS ns1\nns1 IN A 192.0.2.53\nwww IN A 192.0.2.80\n";

/// The line of meridian.toml that holds the `dnssec` table (the keys).
const DNSSEC_LINE: usize = 7;

/// `meridian dnssec keygen` in `dir`; the base name it printed.
fn keygen(dir: &Path, zone: &str, alg: &str, ksk: bool) -> String {
    crate::common::dnssec_keygen(dir, zone, alg, ksk)
}

/// A directory with the zone file and a KSK and ZSK for example.test.;
/// (dir, KSK base name, ZSK base name).
fn setup(tag: &str) -> (TempDir, String, String) {
    let dir = TempDir::new(tag);
    dir.write("example.test.zone", ZONE_FILE);
    let ksk = keygen(&dir.0, "example.test", "ecdsap256", true);
    let zsk = keygen(&dir.0, "example.test", "ed25519", false);
    (dir, ksk, zsk)
}

/// meridian.toml with `dnssec` (the table's inside) on DNSSEC_LINE.
fn config(dir: &TempDir, dnssec: &str) -> std::path::PathBuf {
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[[zone]]\norigin = \"example.test.\"\n\
         file = \"example.test.zone\"\ndnssec = {{ {dnssec} }}\n"
    );
    assert_eq!(
        text.lines().position(|l| l.starts_with("dnssec")),
        Some(DNSSEC_LINE - 1)
    );
    dir.write("meridian.toml", &text)
}

fn check(cfg: &Path) -> (i32, String, String) {
    run(&["check", "--config", &cfg.display().to_string()])
}

/// `check` fails with `meridian.toml:LINE:` and every one of `words`.
fn assert_fails(cfg: &Path, words: &[&str]) {
    let (code, out, err) = check(cfg);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    let first = err.lines().next().unwrap_or_default();
    let prefix = format!("{}:{DNSSEC_LINE}: ", cfg.display());
    assert!(
        first.starts_with(&prefix),
        "expected `{prefix}...`, got:\n{err}"
    );
    for w in words {
        assert!(first.contains(w), "`{w}` not in: {first}");
    }
}

fn good(ksk: &str, zsk: &str) -> String {
    format!(
        "keys = [\"{ksk}\", \"{zsk}.key\"], signature_validity = \"14d\", refresh = \"7d\", denial = \"compact\""
    )
}

#[test]
fn keygen_keys_pass_check_and_the_server_starts() {
    let (dir, ksk, zsk) = setup("dcfg-good");
    let cfg = config(&dir, &good(&ksk, &zsk));
    let (code, out, err) = check(&cfg);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("is valid"), "{out}");
    let tag = |base: &str| {
        base.rsplit('+')
            .next()
            .unwrap()
            .trim_start_matches('0')
            .to_string()
    };
    assert!(
        out.contains(&format!(
            "dnssec keys [KSK {} alg 13, ZSK {} alg 15]",
            tag(&ksk),
            tag(&zsk)
        )),
        "{out}"
    );
    // keygen writes the .private with mode 0600: no warning.
    assert!(err.is_empty(), "{err}");

    let s = Server::start(&cfg, &[]);
    let m = s.query(&crate::common::Q::new("www.example.test.", RecordType::A));
    assert_eq!(crate::common::addrs(&m), ["192.0.2.80"]);
}

#[test]
fn world_readable_private_key_is_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, ksk, zsk) = setup("dcfg-mode");
    let private = dir.0.join(format!("{zsk}.private"));
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cfg = config(&dir, &good(&ksk, &zsk));
    let (code, out, err) = check(&cfg);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("is valid"), "{out}");
    let prefix = format!("{}:{DNSSEC_LINE}: warning:", cfg.display());
    assert!(err.contains(&prefix) && err.contains("readable"), "{err}");
}

#[test]
fn ds_from_the_config_is_the_ksks() {
    let (dir, ksk, zsk) = setup("dcfg-ds");
    let cfg = config(&dir, &good(&ksk, &zsk));
    let key = dir.0.join(format!("{ksk}.key")).display().to_string();
    let (code, by_key, err) = run(&["dnssec", "ds", "--key", &key]);
    assert_eq!(code, 0, "{err}");
    let c = cfg.display().to_string();
    for zone in ["example.test", "Example.Test."] {
        let (code, by_config, err) = run(&["dnssec", "ds", "--config", &c, "--zone", zone]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(by_config, by_key);
    }
    // Both digests, and a zone with only a ZSK gives that key's DS.
    let (_, by_key384, _) = run(&["dnssec", "ds", "--key", &key, "--digest", "sha384"]);
    let (_, by_config384, _) = run(&[
        "dnssec",
        "ds",
        "--config",
        &c,
        "--zone",
        "example.test",
        "--digest",
        "sha384",
    ]);
    assert_eq!(by_config384, by_key384);
    let only_zsk = config(&dir, &format!("keys = [\"{zsk}\"]"));
    let zkey = dir.0.join(format!("{zsk}.key")).display().to_string();
    let (_, zsk_ds, _) = run(&["dnssec", "ds", "--key", &zkey]);
    let c = only_zsk.display().to_string();
    let (code, out, err) = run(&["dnssec", "ds", "--config", &c, "--zone", "example.test"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, zsk_ds);
    // A zone the config does not serve.
    let (code, _, err) = run(&["dnssec", "ds", "--config", &c, "--zone", "other.test"]);
    assert_eq!(code, 1);
    assert!(err.contains("no [[zone]] has origin other.test."), "{err}");
}

#[test]
fn missing_key_file() {
    let (dir, ksk, _) = setup("dcfg-missing");
    let cfg = config(&dir, "keys = [\"Kexample.test.+013+00001\"]");
    assert_fails(&cfg, &["Kexample.test.+013+00001", "missing key file"]);
    // The .private gone: the key file's own message, naming it.
    std::fs::remove_file(dir.0.join(format!("{ksk}.private"))).unwrap();
    let cfg = config(&dir, &format!("keys = [\"{ksk}\"]"));
    assert_fails(&cfg, &[&format!("{ksk}.private"), "missing key file"]);
}

#[test]
fn key_of_another_zone() {
    let (dir, _, _) = setup("dcfg-other");
    let other = keygen(&dir.0, "other.test", "ecdsap256", true);
    let cfg = config(&dir, &format!("keys = [\"{other}\"]"));
    assert_fails(
        &cfg,
        &[
            &format!("dnssec key \"{other}\""),
            "key for zone other.test., expected example.test.",
        ],
    );
}

#[test]
fn algorithm_mismatch() {
    let (dir, ksk, _) = setup("dcfg-alg");
    let private = dir.0.join(format!("{ksk}.private"));
    let text = std::fs::read_to_string(&private).unwrap();
    let text = text.replace("Algorithm: 13 (ECDSAP256SHA256)", "Algorithm: 15 (ED25519)");
    std::fs::write(&private, text).unwrap();
    let cfg = config(&dir, &format!("keys = [\"{ksk}\"]"));
    assert_fails(&cfg, &["algorithm mismatch"]);
}

#[test]
fn expired_key() {
    let (dir, ksk, zsk) = setup("dcfg-expired");
    let private = dir.0.join(format!("{zsk}.private"));
    let mut text = std::fs::read_to_string(&private).unwrap();
    text.push_str("Inactive: 20200101000000\n");
    std::fs::write(&private, text).unwrap();
    let cfg = config(&dir, &good(&ksk, &zsk));
    assert_fails(
        &cfg,
        &[
            &format!("{zsk}.key"),
            "the key expired",
            "Inactive 20200101000000",
        ],
    );
}

#[test]
fn bad_durations() {
    let (dir, ksk, _) = setup("dcfg-duration");
    let k = format!("keys = [\"{ksk}\"]");
    let cases = [
        ("signature_validity = \"fortnight\"", "is not a duration"),
        (
            "signature_validity = \"30m\"",
            "signature_validity must be from 1h to 90d",
        ),
        (
            "signature_validity = \"91d\"",
            "signature_validity must be from 1h to 90d",
        ),
        (
            "signature_validity = \"7d\", refresh = \"7d\"",
            "refresh must be more than 0 and less than signature_validity",
        ),
        ("refresh = \"0s\"", "refresh must be more than 0"),
    ];
    for (setting, words) in cases {
        let cfg = config(&dir, &format!("{k}, {setting}"));
        assert_fails(&cfg, &[words]);
    }
}

#[test]
fn unknown_denial() {
    let (dir, ksk, _) = setup("dcfg-denial");
    let cfg = config(&dir, &format!("keys = [\"{ksk}\"], denial = \"nsec3\""));
    assert_fails(&cfg, &["denial \"nsec3\" is not supported", "compact"]);
}

#[test]
fn empty_keys() {
    let (dir, _, _) = setup("dcfg-empty");
    let cfg = config(&dir, "keys = []");
    assert_fails(&cfg, &["keys is empty"]);
}

#[test]
fn unknown_setting() {
    let (dir, ksk, _) = setup("dcfg-unknown");
    let cfg = config(&dir, &format!("keys = [\"{ksk}\"], nsec3 = true"));
    assert_fails(&cfg, &["nsec3"]);
}

/// Rollovers go by the `keys`/`publish` lists and reloads: a key whose
/// file schedules it for later (dnssec-keygen -P/-A) is accepted, with a
/// warning at its line that it is used from now.
#[test]
fn future_key_times_warn() {
    let (dir, ksk, zsk) = setup("dcfg-future");
    let private = dir.0.join(format!("{zsk}.private"));
    let text = std::fs::read_to_string(&private).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("Activate:") {
                "Activate: 20991231000000".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&private, text).unwrap();
    let cfg = config(&dir, &good(&ksk, &zsk));
    let (code, out, err) = check(&cfg);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let line = err
        .lines()
        .find(|l| l.contains("Activate 20991231000000 is in the future"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(
        line.starts_with(&format!("{}:{DNSSEC_LINE}: warning: ", cfg.display())),
        "{line}"
    );
    assert!(line.contains("list it under publish"), "{line}");
    // The same key under publish: a future Activate says nothing, a future
    // Publish warns that it is published from now.
    let cfg = config(&dir, &format!("keys = [\"{ksk}\"], publish = [\"{zsk}\"]"));
    let (code, _, err) = check(&cfg);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("is in the future"), "{err}");
    let text = std::fs::read_to_string(&private).unwrap();
    let text = text.replace("Activate: 20991231000000", "Publish: 20991231000000");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("Publish:") || l.ends_with("20991231000000"))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&private, text).unwrap();
    let (code, _, err) = check(&cfg);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Publish 20991231000000 is in the future, but the key is published from now"),
        "{err}"
    );
}

/// A key under `publish` whose algorithm no key under `keys` has puts an
/// algorithm in the DNSKEY set that signs nothing (RFC 4035 §2.2, #25
/// item 5): a warning at its line; the same key under `keys` signs, and
/// says nothing.
#[test]
fn a_published_only_algorithm_warns() {
    let (dir, ksk, zsk) = setup("dcfg-publish-alg");
    let cfg = config(&dir, &format!("keys = [\"{ksk}\"], publish = [\"{zsk}\"]"));
    let (code, out, err) = check(&cfg);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let line = err
        .lines()
        .find(|l| l.contains("is published only"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(
        line.starts_with(&format!("{}:{DNSSEC_LINE}: warning: ", cfg.display())),
        "{line}"
    );
    assert!(line.contains("algorithm 15"), "{line}");
    let cfg = config(&dir, &good(&ksk, &zsk));
    let (code, _, err) = check(&cfg);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("published only"), "{err}");
}
