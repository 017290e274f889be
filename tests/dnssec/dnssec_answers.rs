//! Signed answers (#17): for a DO=1 query to a signed zone every
//! authoritative RRset comes with its RRSIGs and denial is compact (RFC
//! 9824): one NSEC at the name, NXNAME for a name that does not exist,
//! NOERROR unless the query sets Compact Answers OK. delv validates static
//! names, every pool mode, a geo name, CNAME, wildcard, NXDOMAIN, NODATA,
//! the DS denial of an insecure delegation and the DS of a signed one,
//! against the KSK as trust anchor; with another key as anchor it fails.
//! DO=0 answers carry no DNSSEC records.

use crate::common::{Server, Q};
use crate::signed_common::{delv, have_delv, Signed};
use hickory_proto::rr::RecordType;

/// Names and types delv must validate, with the verdict.
const CASES: &[(&str, &str, &str)] = &[
    ("www.example.test", "A", "validated"),
    ("www.example.test", "AAAA", "validated"),
    ("www.example.test", "TXT", "validated"),
    ("example.test", "MX", "validated"),
    ("example.test", "SOA", "validated"),
    ("example.test", "NS", "validated"),
    ("example.test", "DNSKEY", "validated"),
    ("example.test", "CDS", "validated"),
    ("example.test", "CDNSKEY", "validated"),
    ("alias.example.test", "A", "validated"),
    ("x.wild.example.test", "A", "validated"),
    ("a.b.wild.example.test", "TXT", "validated"),
    ("all.example.test", "A", "validated"),
    ("all.example.test", "AAAA", "validated"),
    ("rotate.example.test", "A", "validated"),
    ("one.example.test", "A", "validated"),
    ("some.example.test", "A", "validated"),
    ("geo.example.test", "A", "validated"),
    ("geo.example.test", "TXT", "validated"),
    ("nope.example.test", "A", "negative"),
    ("a.nope.example.test", "AAAA", "negative"),
    ("www.example.test", "MX", "negative"),
    ("geo.example.test", "AAAA", "negative"),
    ("x.wild.example.test", "MX", "negative"),
    ("sub.example.test", "DS", "negative"),
    ("sec.example.test", "DS", "validated"),
];

#[test]
fn delv_validates_every_kind_of_answer() {
    if !have_delv("delv_validates_every_kind_of_answer") {
        return;
    }
    for zsk in ["ecdsap256", "ed25519"] {
        let z = Signed::new("signed-delv", zsk, "");
        let s = Server::start(&z.config, &[]);
        let anchors = z.anchor(&z.ksk);
        for (name, t, want) in CASES {
            let got = delv(s.port(), &anchors, name, t);
            assert_eq!(&got, want, "{name} {t} (ZSK {zsk})");
        }
    }
}

#[test]
fn another_key_as_trust_anchor_fails() {
    if !have_delv("another_key_as_trust_anchor_fails") {
        return;
    }
    let z = Signed::new("signed-forged", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    // A KSK meridian does not hold: nothing may validate.
    let other = crate::common::dnssec_keygen(&z.dir.0, "example.test", "ecdsap256", true);
    let anchors = z.anchor(&other);
    for (name, t, _) in CASES.iter().take(4) {
        let got = delv(s.port(), &anchors, name, t);
        assert!(
            got != "validated" && got != "negative",
            "{name} {t} validated against a foreign anchor"
        );
    }
}

fn types_in(s: &[String], t: &str) -> usize {
    s.iter()
        .filter(|r| r.split_whitespace().nth(3) == Some(t))
        .count()
}

#[test]
fn signatures_only_for_do() {
    let z = Signed::new("signed-do", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    for name in [
        "www.example.test.",
        "all.example.test.",
        "one.example.test.",
    ] {
        let plain = s.dig(&Q::new(name, RecordType::A).edns(1232));
        assert_eq!(types_in(&plain.answer(), "RRSIG"), 0, "{name} DO=0");
        let mut q = Q::new(name, RecordType::A).edns(1232);
        q.dnssec_ok = true;
        let signed = s.dig(&q);
        // One RRSIG per ZSK (one here) after the addresses.
        assert_eq!(
            types_in(&signed.answer(), "RRSIG"),
            1,
            "{name} DO=1: {:?}",
            signed.answer()
        );
        assert!(types_in(&signed.answer(), "A") >= 1);
    }
    // DNSKEY: signed by the KSK only.
    let mut q = Q::new("example.test.", RecordType::DNSKEY).edns(1232);
    q.dnssec_ok = true;
    let r = s.dig(&q);
    assert_eq!(types_in(&r.answer(), "DNSKEY"), 2);
    assert_eq!(types_in(&r.answer(), "RRSIG"), 1);
}

#[test]
fn compact_denial_and_the_co_bit() {
    let z = Signed::new("signed-compact", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    // DO=0: a plain NXDOMAIN with the SOA.
    let r = s.dig(&Q::new("nope.example.test.", RecordType::A).edns(1232));
    assert_eq!(r.rcode(), 3);
    assert_eq!(r.authority().len(), 1);
    // DO=1: NOERROR, SOA + RRSIG, and one NSEC at the name with
    // `\000.<name>` next and RRSIG NSEC NXNAME, + RRSIG.
    let mut q = Q::new("nope.example.test.", RecordType::A).edns(1232);
    q.dnssec_ok = true;
    let d = s.dig(&q);
    assert_eq!(d.rcode(), 0, "{:?}", d.authority());
    let auth = d.authority();
    assert_eq!(types_in(&auth, "NSEC"), 1, "{auth:?}");
    assert_eq!(types_in(&auth, "RRSIG"), 2, "{auth:?}");
    let nsec = auth
        .iter()
        .find(|r| r.split_whitespace().nth(3) == Some("NSEC"))
        .unwrap();
    assert!(nsec.starts_with("nope.example.test."), "{nsec}");
    assert!(nsec.contains("\\000.nope.example.test."), "{nsec}");
    // hickory prints NXNAME (128), which it does not know, as Unknown.
    assert!(nsec.ends_with("RRSIG NSEC Unknown"), "{nsec}");
    // NODATA: the NSEC lists the name's types, not the asked one.
    let mut q = Q::new("www.example.test.", RecordType::MX).edns(1232);
    q.dnssec_ok = true;
    let auth = s.dig(&q).authority();
    let nsec = auth
        .iter()
        .find(|r| r.split_whitespace().nth(3) == Some("NSEC"))
        .unwrap();
    for t in ["A", "AAAA", "TXT", "RRSIG", "NSEC"] {
        assert!(nsec.split_whitespace().any(|w| w == t), "{t} in {nsec}");
    }
    assert!(
        !nsec.split_whitespace().skip(5).any(|w| w == "MX"),
        "{nsec}"
    );
    assert!(!nsec.contains("Unknown"), "{nsec}");
    // Compact Answers OK (EDNS flag 0x4000): NXDOMAIN, and CO set back.
    let req = meridian_wire::build::QueryBuilder::new("nope.example.test.", 1)
        .id(7)
        .opt(meridian_wire::build::Opt {
            udp_size: 1232,
            flags: 0xC000,
            ..Default::default()
        })
        .build();
    let r = s.ask(&req);
    assert_eq!(r.rcode(), 3);
    let (_, ttl, _) = r.opt().unwrap();
    assert_eq!(ttl & 0xC000, 0xC000, "DO and CO in the response's OPT");
    // Without DO, the CO bit changes nothing and is not answered.
    let req = meridian_wire::build::QueryBuilder::new("nope.example.test.", 1)
        .id(8)
        .opt(meridian_wire::build::Opt {
            udp_size: 1232,
            flags: 0x4000,
            ..Default::default()
        })
        .build();
    let r = s.ask(&req);
    assert_eq!(r.rcode(), 3);
    assert_eq!(r.opt().unwrap().1 & 0x4000, 0);
}

/// The Extended DNS Error codes in a response's OPT (RFC 8914).
fn ede_codes(r: &crate::common::Resp) -> Vec<u16> {
    let Some((_, _, rd)) = r.opt() else {
        return vec![];
    };
    let (mut out, mut i) = (vec![], 0);
    while i + 4 <= rd.len() {
        let len = u16::from_be_bytes([rd[i + 2], rd[i + 3]]) as usize;
        if u16::from_be_bytes([rd[i], rd[i + 1]]) == 15 && len >= 2 {
            out.push(u16::from_be_bytes([rd[i + 4], rd[i + 5]]));
        }
        i += 4 + len;
    }
    out
}

/// QTYPE=NSEC (#25 item 3): the name's own NSEC as the answer, its bitmap
/// with the name's types, RRSIG and NSEC (RFC 4035 §2.3), at a static
/// name, an alias, pool and geo names, a wildcard's expansion and a name
/// that does not exist (NXNAME); delv validates each. DO=0: NODATA as
/// before. Other types' NODATA still leaves out the asked type.
#[test]
fn nsec_query_answers_the_names_nsec() {
    let z = Signed::new("signed-nsec-query", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    let cases: &[(&str, &[&str])] = &[
        (
            "example.test.",
            &["SOA", "NS", "MX", "DNSKEY", "CDS", "CDNSKEY"],
        ),
        ("www.example.test.", &["A", "AAAA", "TXT"]),
        ("alias.example.test.", &["CNAME"]),
        ("all.example.test.", &["A", "AAAA"]),
        ("geo.example.test.", &["A", "TXT"]),
        ("x.wild.example.test.", &["A", "TXT"]),
        // hickory prints NXNAME (128), which it does not know, as Unknown.
        ("nope.example.test.", &["Unknown"]),
    ];
    for (name, types) in cases {
        let mut q = Q::new(name, RecordType::NSEC).edns(1232);
        q.dnssec_ok = true;
        let r = s.dig(&q);
        let an = r.answer();
        assert_eq!(r.rcode(), 0, "{name}: {an:?}");
        assert_eq!(types_in(&an, "NSEC"), 1, "{name}: {an:?}");
        assert_eq!(types_in(&an, "RRSIG"), 1, "{name}: {an:?}");
        assert!(r.authority().is_empty(), "{name}: {:?}", r.authority());
        let nsec = an
            .iter()
            .find(|r| r.split_whitespace().nth(3) == Some("NSEC"))
            .unwrap();
        assert!(nsec.starts_with(name), "{nsec}");
        let bitmap: Vec<&str> = nsec.split_whitespace().skip(5).collect();
        for t in types.iter().chain(&["RRSIG", "NSEC"]) {
            assert!(bitmap.contains(t), "{t} in {nsec}");
        }
        assert_eq!(bitmap.len(), types.len() + 2, "{nsec}");
        let plain = s.dig(&Q::new(name, RecordType::NSEC).edns(1232));
        assert!(
            plain.answer().is_empty(),
            "{name} DO=0: {:?}",
            plain.answer()
        );
    }
    if !have_delv("nsec_query_answers_the_names_nsec") {
        return;
    }
    let anchors = z.anchor(&z.ksk);
    for (name, _) in cases {
        assert_eq!(
            delv(s.port(), &anchors, name, "NSEC"),
            "validated",
            "{name}"
        );
    }
}

/// QTYPE=RRSIG (#25 item 4): REFUSED with EDE 21 (Not Supported) in a
/// signed zone, DO=1 or not, as Knot's online signing answers; an unsigned
/// zone's name has no RRSIGs: NODATA.
#[test]
fn rrsig_query_is_refused_in_a_signed_zone() {
    let z = Signed::new("signed-rrsig-query", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    for name in [
        "www.example.test.",
        "all.example.test.",
        "nope.example.test.",
    ] {
        for dnssec_ok in [false, true] {
            let mut q = Q::new(name, RecordType::RRSIG).edns(1232);
            q.dnssec_ok = dnssec_ok;
            let r = s.dig(&q);
            assert_eq!(r.rcode(), 5, "{name} DO={dnssec_ok}: {:?}", r.answer());
            assert!(r.answer().is_empty() && r.authority().is_empty());
            assert_eq!(ede_codes(&r), [21], "{name} DO={dnssec_ok}");
        }
    }
    let u = Server::example();
    let r = u.dig(&Q::new("www.example.test.", RecordType::RRSIG).edns(1232));
    assert_eq!(r.rcode(), 0, "{:?}", r.answer());
    assert!(r.answer().is_empty());
    if !have_delv("rrsig_query_is_refused_in_a_signed_zone") {
        return;
    }
    // delv gets REFUSED, not something it could take for data.
    let got = delv(s.port(), &z.anchor(&z.ksk), "www.example.test", "RRSIG");
    assert!(got.contains("REFUSED") || got.contains("refused"), "{got}");
}

/// The algorithms of the RRSIGs covering `covered` in `records`.
fn sig_algorithms(records: &[String], covered: &str) -> Vec<String> {
    let mut v: Vec<String> = records
        .iter()
        .map(|r| r.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.get(3) == Some(&"RRSIG") && w.get(4) == Some(&covered))
        .map(|w| w[5].to_string())
        .collect();
    v.sort();
    v
}

/// A second algorithm with only a ZSK (#25 item 5): each algorithm in the
/// DNSKEY set signs every RRset (RFC 4035 §2.2), the key RRsets included,
/// so the Ed25519 ZSK signs DNSKEY, CDS and CDNSKEY beside the P-256 KSK.
/// The DS stays the KSK's.
#[test]
fn every_algorithm_signs_every_rrset() {
    let z = Signed::new("signed-two-algs", "ecdsap256", "");
    let ed = crate::common::dnssec_keygen(&z.dir.0, "example.test", "ed25519", false);
    let text = crate::signed_common::config_text(&[&z.ksk, &z.zsk, &ed], "", "");
    std::fs::write(&z.config, text).unwrap();
    let s = Server::start(&z.config, &[]);
    let both = ["ECDSAP256SHA256", "ED25519"];
    let ask = |name: &str, t: RecordType| {
        let mut q = Q::new(name, t).edns(4096);
        q.dnssec_ok = true;
        s.dig_tcp(&q)
    };
    for t in [RecordType::DNSKEY, RecordType::CDS, RecordType::CDNSKEY] {
        let an = ask("example.test.", t).answer();
        assert_eq!(sig_algorithms(&an, &t.to_string()), both, "{t}: {an:?}");
    }
    assert_eq!(
        types_in(&ask("example.test.", RecordType::CDS).answer(), "CDS"),
        1
    );
    for (name, t) in [
        ("www.example.test.", RecordType::A),
        ("example.test.", RecordType::SOA),
        ("all.example.test.", RecordType::A),
        ("geo.example.test.", RecordType::A),
    ] {
        let an = ask(name, t).answer();
        assert_eq!(
            sig_algorithms(&an, &t.to_string()),
            both,
            "{name} {t}: {an:?}"
        );
    }
    let auth = ask("nope.example.test.", RecordType::A).authority();
    assert_eq!(sig_algorithms(&auth, "NSEC"), both, "{auth:?}");
    if !have_delv("every_algorithm_signs_every_rrset") {
        return;
    }
    let anchors = z.anchor(&z.ksk);
    for (name, t, want) in CASES {
        assert_eq!(&delv(s.port(), &anchors, name, t), want, "{name} {t}");
    }
}

#[test]
fn insecure_referral_proves_no_ds_and_signed_one_carries_it() {
    let z = Signed::new("signed-referral", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    let mut q = Q::new("host.sub.example.test.", RecordType::A).edns(1232);
    q.dnssec_ok = true;
    let r = s.dig(&q);
    let auth = r.authority();
    assert_eq!(types_in(&auth, "NS"), 1, "{auth:?}");
    let nsec = auth
        .iter()
        .find(|r| r.split_whitespace().nth(3) == Some("NSEC"))
        .expect("NSEC for the cut");
    assert!(nsec.starts_with("sub.example.test."), "{nsec}");
    assert!(
        !nsec.split_whitespace().skip(5).any(|w| w == "DS"),
        "{nsec}"
    );
    assert_eq!(
        types_in(&auth, "RRSIG"),
        1,
        "only the NSEC is signed: {auth:?}"
    );
    // A signed delegation: its DS and the DS's RRSIG, NS unsigned.
    let mut q = Q::new("host.sec.example.test.", RecordType::A).edns(1232);
    q.dnssec_ok = true;
    let auth = s.dig(&q).authority();
    assert_eq!(types_in(&auth, "DS"), 1, "{auth:?}");
    assert_eq!(types_in(&auth, "RRSIG"), 1, "{auth:?}");
    assert_eq!(types_in(&auth, "NSEC"), 0, "{auth:?}");
}

#[test]
fn ecs_scope_is_the_same_signed_or_not() {
    let z = Signed::new("signed-ecs", "ecdsap256", "");
    let s = Server::start(&z.config, &[]);
    for (subnet, want) in [
        ("20.1.2.0/24", "198.51.100.100"),
        ("30.1.2.0/24", "192.0.2.100"),
        ("40.1.2.0/24", "192.0.2.100"),
    ] {
        let q = Q::new("geo.example.test.", RecordType::A).ecs(subnet);
        let plain = s.dig(&q);
        let mut q = q.clone();
        q.dnssec_ok = true;
        let signed = s.dig(&q);
        assert_eq!(plain.scope(), signed.scope(), "{subnet}");
        let mut a = signed.addrs();
        a.sort();
        assert_eq!(a[0], want, "{subnet}");
        assert_eq!(plain.addrs().len(), a.len(), "{subnet}");
        assert_eq!(types_in(&signed.answer(), "RRSIG"), 1, "{subnet}");
    }
}

#[test]
fn a_bad_ds_record_fails_check_at_its_line() {
    let z = Signed::new("signed-bad-ds", "ecdsap256", "");
    let zone = std::fs::read_to_string(z.dir.0.join("example.test.zone")).unwrap();
    let line = zone.lines().count() + 1;
    for (bad, words) in [
        (
            "sec IN DS 12345 13 2 0123",
            "a digest of type 2 has 32 octets, not 2",
        ),
        ("sec IN DS 12345 13 2 XYZ1", "not hex"),
        (
            "sec IN DS 12345 13",
            "expected key tag, algorithm, digest type and digest",
        ),
    ] {
        z.dir.write("example.test.zone", &format!("{zone}{bad}\n"));
        let (code, _, err) =
            crate::common::run(&["check", "--config", &z.config.display().to_string()]);
        assert_eq!(code, 1, "{bad}: {err}");
        assert!(
            err.contains(&format!("example.test.zone:{line}: ")) && err.contains(words),
            "{bad}: {err}"
        );
    }
}

/// RFC 4035 §3.1.1: a signed RRset in the additional section carries its
/// RRSIGs (glue, unsigned, has none); when they do not fit, the RRset
/// stays, the RRSIGs go, and the answer is not truncated.
#[test]
fn additional_addresses_carry_their_rrsigs() {
    let z = Signed::new("signed-additional", "ecdsap256", "");
    // `many`: eight mail exchangers in the zone, whose signed addresses
    // cannot all fit in 1232 octets.
    let mut zone = std::fs::read_to_string(z.dir.0.join("example.test.zone")).unwrap();
    for i in 1..=8 {
        zone += &format!(
            "many IN MX {i} m{i}.many\nm{i}.many IN A 192.0.2.{}\n",
            100 + i
        );
    }
    std::fs::write(z.dir.0.join("example.test.zone"), zone).unwrap();
    let s = Server::start(&z.config, &[]);
    let covered = |add: &[String], owner: &str, t: &str| {
        add.iter()
            .filter(|r| {
                let f: Vec<&str> = r.split_whitespace().collect();
                f[0] == owner && f[3] == "RRSIG" && f[4] == t
            })
            .count()
    };
    let signed = |name: &str, t: RecordType, payload: u16| {
        let mut q = Q::new(name, t).edns(payload);
        q.dnssec_ok = true;
        s.dig(&q)
    };
    // MX: the exchange's address and its RRSIG.
    let r = signed("example.test.", RecordType::MX, 1232);
    let add = r.additional();
    assert_eq!(types_in(&add, "A"), 1, "{add:?}");
    assert_eq!(covered(&add, "mail.example.test.", "A"), 1, "{add:?}");
    // NS: the in-zone name server's address, signed (authoritative data).
    let add = signed("example.test.", RecordType::NS, 1232).additional();
    assert_eq!(covered(&add, "ns1.example.test.", "A"), 1, "{add:?}");
    // DO=0: addresses only.
    let add = s
        .dig(&Q::new("example.test.", RecordType::MX).edns(1232))
        .additional();
    assert_eq!((types_in(&add, "A"), types_in(&add, "RRSIG")), (1, 0));
    // A referral's glue is not signed.
    let r = signed("host.sub.example.test.", RecordType::A, 1232);
    let add = r.additional();
    assert_eq!(types_in(&add, "A"), 1, "{add:?}");
    assert_eq!(types_in(&add, "RRSIG"), 0, "glue signed: {add:?}");
    // Over TCP all eight addresses and their RRSIGs.
    let mut q = Q::new("many.example.test.", RecordType::MX).edns(1232);
    q.dnssec_ok = true;
    let add = s.dig_tcp(&q).additional();
    assert_eq!(
        (types_in(&add, "A"), types_in(&add, "RRSIG")),
        (8, 8),
        "{add:?}"
    );
    // Over UDP at 1232: addresses with their RRSIGs while they fit, then
    // one address whose RRSIG did not fit, then nothing; never TC.
    let r = signed("many.example.test.", RecordType::MX, 1232);
    assert!(!r.flags().contains("tc"), "{}", r.flags());
    assert!(r.raw.len() <= 1232, "{}", r.raw.len());
    let add = r.additional();
    let (a, sigs) = (types_in(&add, "A"), types_in(&add, "RRSIG"));
    assert!(sigs < 8 && sigs + 1 == a, "{a} A, {sigs} RRSIG: {add:?}");
    let last = add.last().unwrap();
    assert_eq!(last.split_whitespace().nth(3), Some("A"), "{add:?}");
    for (k, rr) in add.iter().enumerate() {
        if rr.split_whitespace().nth(3) == Some("A") && k + 1 < add.len() {
            let owner = rr.split_whitespace().next().unwrap();
            assert_eq!(covered(&add[k + 1..k + 2], owner, "A"), 1, "{add:?}");
        }
    }
}
