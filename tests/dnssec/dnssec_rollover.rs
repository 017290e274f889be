//! Key rollovers done by reloads (#17, docs/src/dnssec/rollover.md):
//!
//! - ZSK pre-publish (RFC 6781 §4.1.1.1): the new ZSK is published
//!   (`publish`), then signs while the old one stays published, then the
//!   old one leaves; every step validates and the RRSIGs carry the key tag
//!   of the signing ZSK.
//! - KSK double-DS (RFC 6781 §4.1.2): the new KSK's DS goes to the parent
//!   beside the old one (`dnssec ds --key` prints it before the key is
//!   used), then a reload swaps the KSKs; a parent holding both DS keeps
//!   validating, one holding only the old DS fails, and CDS/CDNSKEY follow.
//!
//! Also: a reload after the switch to `[server] user` keeps the keys whose
//! `.private` files only root can read.

use std::time::Duration;

use crate::common::{Server, Q};
use crate::signed_common::{anchor_file, config_text, delv, have_delv, Signed};
use hickory_proto::rr::RecordType;

fn reload(s: &Server) {
    let line = s.reload(Duration::from_secs(10));
    assert!(line.contains("reloaded"), "{line}");
}

/// Key tags of the RRSIGs over `name` `qtype`, and of the DNSKEY RRset.
fn sig_tags(s: &Server, name: &str, qtype: RecordType) -> Vec<u16> {
    let mut q = Q::new(name, qtype).edns(1232);
    q.dnssec_ok = true;
    let mut v: Vec<u16> = s
        .dig(&q)
        .answer()
        .iter()
        .filter(|r| r.split_whitespace().nth(3) == Some("RRSIG"))
        .map(|r| r.split_whitespace().nth(10).unwrap().parse().unwrap())
        .collect();
    v.sort();
    v
}

fn dnskey_count(s: &Server) -> usize {
    let mut q = Q::new("example.test.", RecordType::DNSKEY).edns(1232);
    q.dnssec_ok = true;
    s.dig(&q)
        .answer()
        .iter()
        .filter(|r| r.split_whitespace().nth(3) == Some("DNSKEY"))
        .count()
}

fn tag(base: &str) -> u16 {
    base.rsplit('+').next().unwrap().parse().unwrap()
}

#[test]
fn zsk_pre_publish_by_reloads() {
    if !have_delv("zsk_pre_publish_by_reloads") {
        return;
    }
    let z = Signed::new("roll-zsk", "ecdsap256", "");
    let zsk2 = crate::common::dnssec_keygen(&z.dir.0, "example.test", "ecdsap256", false);
    let s = Server::start(&z.config, &[]);
    let anchors = z.anchor(&z.ksk);
    let step = |keys: &[&str], publish: &str, signer: &str, dnskeys: usize| {
        let extra = if publish.is_empty() {
            String::new()
        } else {
            format!(", publish = [\"{publish}\"]")
        };
        std::fs::write(&z.config, config_text(keys, &extra, "")).unwrap();
        reload(&s);
        assert_eq!(dnskey_count(&s), dnskeys);
        assert_eq!(
            sig_tags(&s, "www.example.test.", RecordType::A),
            vec![tag(signer)]
        );
        assert_eq!(
            sig_tags(&s, "all.example.test.", RecordType::A),
            vec![tag(signer)]
        );
        for (n, t, want) in [
            ("www.example.test", "A", "validated"),
            ("all.example.test", "A", "validated"),
            ("nope.example.test", "A", "negative"),
        ] {
            assert_eq!(
                delv(s.port(), &anchors, n, t),
                want,
                "{n} signed by {signer}"
            );
        }
    };
    assert_eq!(
        sig_tags(&s, "www.example.test.", RecordType::A),
        vec![tag(&z.zsk)]
    );
    // 1. Publish the new ZSK; the old one signs.
    step(&[&z.ksk, &z.zsk], &zsk2, &z.zsk, 3);
    // 2. (After the DNSKEY TTL) the new one signs; the old one stays
    //    published while its signatures may be cached.
    step(&[&z.ksk, &zsk2], &z.zsk, &zsk2, 3);
    // 3. (After the largest TTL) the old one leaves.
    step(&[&z.ksk, &zsk2], "", &zsk2, 2);
}

#[test]
fn ksk_double_ds_by_reloads() {
    if !have_delv("ksk_double_ds_by_reloads") {
        return;
    }
    let z = Signed::new("roll-ksk", "ecdsap256", "");
    let ksk2 = crate::common::dnssec_keygen(&z.dir.0, "example.test", "ecdsap256", true);
    let s = Server::start(&z.config, &[]);
    let old = anchor_file(&z.dir.0, &[&z.ksk]);
    let both = anchor_file(&z.dir.0, &[&z.ksk, &ksk2]);
    let new = anchor_file(&z.dir.0, &[&ksk2]);
    // 0. The parent has the old DS; the new KSK's DS is printed before the
    //    key is in use and added beside it.
    let (code, ds, err) = crate::common::run(&[
        "dnssec",
        "ds",
        "--key",
        &z.dir.0.join(format!("{ksk2}.key")).display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(ds.contains(&format!(" DS {} 13 2 ", tag(&ksk2))), "{ds}");
    for a in [&old, &both] {
        assert_eq!(delv(s.port(), a, "www.example.test", "A"), "validated");
    }
    assert_eq!(
        sig_tags(&s, "example.test.", RecordType::DNSKEY),
        vec![tag(&z.ksk)]
    );
    // 1. Swap the KSKs by a reload.
    std::fs::write(&z.config, config_text(&[&ksk2, &z.zsk], "", "")).unwrap();
    reload(&s);
    assert_eq!(
        sig_tags(&s, "example.test.", RecordType::DNSKEY),
        vec![tag(&ksk2)]
    );
    assert_eq!(delv(s.port(), &both, "www.example.test", "A"), "validated");
    assert_eq!(delv(s.port(), &new, "www.example.test", "A"), "validated");
    let stale = delv(s.port(), &old, "www.example.test", "A");
    assert!(
        stale != "validated",
        "the old KSK alone still validates: {stale}"
    );
    // CDS and CDNSKEY name the new KSK only.
    let mut q = Q::new("example.test.", RecordType::CDS).edns(1232);
    q.dnssec_ok = true;
    let cds: Vec<String> = s
        .dig(&q)
        .answer()
        .into_iter()
        .filter(|r| r.split_whitespace().nth(3) == Some("CDS"))
        .collect();
    assert_eq!(cds.len(), 1, "{cds:?}");
    assert!(
        cds[0].contains(&format!("CDS {} 13 2", tag(&ksk2))),
        "{cds:?}"
    );
    // 2. The parent drops the old DS: still valid.
    assert_eq!(delv(s.port(), &new, "example.test", "DNSKEY"), "validated");
}

#[test]
fn reload_as_user_keeps_root_only_keys() {
    if !crate::common::is_root() {
        crate::common::skip(
            "reload_as_user_keeps_root_only_keys",
            "not root; `user` is only applied when started as root",
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let z = Signed::new("roll-user", "ecdsap256", "");
    // nobody may enter the folder and read the zone and config, not the
    // private keys (keygen writes them 0600).
    std::fs::set_permissions(&z.dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in ["example.test.zone", "meridian.toml"] {
        std::fs::set_permissions(z.dir.0.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let private = z.dir.0.join(format!("{}.private", z.zsk));
    assert_eq!(
        std::fs::metadata(&private).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(&z.config)
        .unwrap()
        .replace("[server]\n", "[server]\nuser = \"nobody\"\n");
    std::fs::write(&z.config, text).unwrap();
    let s = crate::common::start_without_allow_root(&z.config);
    assert!(s.wait_log("switched to user nobody", Duration::from_secs(2)));
    // A zone change, reloaded as nobody: the new name is signed by the
    // keys read as root.
    let zone = std::fs::read_to_string(z.dir.0.join("example.test.zone")).unwrap();
    z.dir
        .write("example.test.zone", &format!("{zone}new IN A 192.0.2.77\n"));
    std::fs::set_permissions(
        z.dir.0.join("example.test.zone"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    reload(&s);
    assert_eq!(
        sig_tags(&s, "new.example.test.", RecordType::A),
        vec![tag(&z.zsk)]
    );
    if have_delv("reload_as_user_keeps_root_only_keys") {
        assert_eq!(
            delv(s.port(), &z.anchor(&z.ksk), "new.example.test", "A"),
            "validated"
        );
    }
}
