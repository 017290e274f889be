//! Signed pool answers under change (#17): a health failover, each
//! `when_all_down`, and the return are re-signed off the query path and
//! validate with delv at every step; a signed answer larger than the
//! client's UDP size truncates (TC) and comes whole over TCP; `check`
//! refuses a `some K` pool whose C(n, K) sets exceed `max_subsets`; and
//! static signatures are made again in the background before they expire.

use std::time::Duration;

use crate::common::{Server, Q};
use crate::health_support::{check_table, wait_for, Backend};
use crate::signed_common::{delv, have_delv, Signed};
use hickory_proto::rr::RecordType;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A-record addresses of a DO=1 answer, sorted, and its RRSIG count.
fn signed_addrs(s: &Server, name: &str) -> (Vec<String>, usize, u8) {
    let mut q = Q::new(name, RecordType::A).edns(1232);
    q.dnssec_ok = true;
    let r = s.dig(&q);
    let mut a = r.addrs();
    a.sort();
    let sigs = r
        .answer()
        .iter()
        .filter(|x| x.split_whitespace().nth(3) == Some("RRSIG"))
        .count();
    (a, sigs, r.rcode())
}

#[test]
fn failover_and_when_all_down_stay_signed() {
    if !have_delv("failover_and_when_all_down_stay_signed") {
        return;
    }
    let mut b1 = Backend::ok("127.0.0.61");
    let mut b2 = Backend::ok("127.0.0.62");
    let member = |b: &Backend| format!("{{ address = \"{}\", port = {} }}", b.ip(), b.port());
    let extra = format!(
        "{}\n[pool.hc]\nmembers = [{}, {}]\ncheck = \"c\"\n\n\
         [name.\"hc-all.example.test\"]\npool = \"hc\"\nmode = \"all\"\nttl = 20\n\n\
         [name.\"hc-one.example.test\"]\npool = \"hc\"\nmode = \"one\"\nttl = 20\n\n\
         [name.\"hc-empty.example.test\"]\npool = \"hc\"\nmode = \"all\"\nwhen_all_down = \"empty\"\n\n\
         [name.\"hc-fail.example.test\"]\npool = \"hc\"\nmode = \"all\"\nwhen_all_down = \"servfail\"\n",
        check_table("c", "tcp", ""),
        member(&b1),
        member(&b2)
    );
    let z = Signed::new("signed-failover", "ecdsap256", &extra);
    let s = Server::start(&z.config, &[]);
    let anchors = z.anchor(&z.ksk);
    let both = vec!["127.0.0.61".to_string(), "127.0.0.62".to_string()];
    let validated = |name: &str, want: &str| {
        let got = delv(s.port(), &anchors, name, "A");
        assert_eq!(got, want, "{name}");
    };
    // Up (not the all-down answer, which also holds both): `empty` answers.
    assert!(
        wait_for(ms(5000), || signed_addrs(&s, "hc-empty.example.test.").0
            == both)
        .is_some()
    );
    for n in ["hc-all", "hc-one", "hc-empty", "hc-fail"] {
        validated(&format!("{n}.example.test"), "validated");
    }

    // One member down: the answer without it, signed for that set.
    b1.stop();
    let one_left = vec!["127.0.0.62".to_string()];
    assert!(
        wait_for(ms(5000), || signed_addrs(&s, "hc-all.example.test.").0
            == one_left)
        .is_some()
    );
    let (_, sigs, _) = signed_addrs(&s, "hc-all.example.test.");
    assert_eq!(sigs, 1);
    for _ in 0..5 {
        assert_eq!(signed_addrs(&s, "hc-one.example.test.").0, one_left);
    }
    validated("hc-all.example.test", "validated");
    validated("hc-one.example.test", "validated");

    // Both down: `all` answers every member (signed), `empty` a signed
    // NODATA, `servfail` SERVFAIL.
    b2.stop();
    assert!(
        wait_for(ms(5000), || signed_addrs(&s, "hc-fail.example.test.").2
            == 2)
        .is_some()
    );
    let (a, sigs, _) = signed_addrs(&s, "hc-all.example.test.");
    assert_eq!((a, sigs), (both.clone(), 1));
    validated("hc-all.example.test", "validated");
    validated("hc-one.example.test", "validated");
    validated("hc-empty.example.test", "negative");

    // Back: the full set again, validated.
    b1.restart();
    b2.restart();
    assert!(
        wait_for(ms(5000), || signed_addrs(&s, "hc-empty.example.test.").0
            == both)
        .is_some()
    );
    validated("hc-all.example.test", "validated");
    validated("hc-empty.example.test", "validated");
}

#[test]
fn oversize_signed_answer_truncates_then_comes_over_tcp() {
    let members: Vec<String> = (1..=40).map(|i| format!("\"192.0.2.{i}\"")).collect();
    let extra = format!(
        "[pool.big]\nmembers = [{}]\n\n[name.\"big.example.test\"]\npool = \"big\"\nmode = \"all\"\n",
        members.join(", ")
    );
    let z = Signed::new("signed-tc", "ecdsap256", &extra);
    let s = Server::start(&z.config, &[]);
    let mut q = Q::new("big.example.test.", RecordType::A).edns(512);
    q.dnssec_ok = true;
    let udp = s.dig(&q);
    assert!(udp.flags().contains("tc"), "{}", udp.flags());
    assert!(udp.answer().is_empty());
    let tcp = s.dig_tcp(&q);
    assert_eq!(tcp.addrs().len(), 40);
    let sigs = tcp
        .answer()
        .iter()
        .filter(|x| x.contains(" RRSIG "))
        .count();
    assert_eq!(sigs, 1);
    if have_delv("oversize_signed_answer_truncates_then_comes_over_tcp") {
        assert_eq!(
            delv(s.port(), &z.anchor(&z.ksk), "big.example.test", "A"),
            "validated"
        );
    }
}

#[test]
fn check_refuses_some_pools_over_max_subsets() {
    let members: Vec<String> = (1..=20).map(|i| format!("\"192.0.2.{i}\"")).collect();
    let extra = format!(
        "[pool.twenty]\nmembers = [{}]\n\n[name.\"pick.example.test\"]\npool = \"twenty\"\nmode = \"some\"\ncount = 4\n",
        members.join(", ")
    );
    let z = Signed::new("signed-limit", "ecdsap256", &extra);
    // C(20, 4) = 4845 > 4096 (the default).
    let cfg = z.config.display().to_string();
    let (code, _, err) = crate::common::run(&["check", "--config", &cfg]);
    assert_eq!(code, 1, "{err}");
    let text = std::fs::read_to_string(&z.config).unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("[name.\"pick.example.test\"]"))
        .unwrap()
        + 1;
    assert!(err.starts_with(&format!("{cfg}:{line}: ")), "{err}");
    assert!(err.contains("4845") && err.contains("max_subsets"), "{err}");
    // Raised, it is accepted and every set is signed.
    let text = crate::signed_common::config_text(&[&z.ksk, &z.zsk], ", max_subsets = 5000", &extra);
    std::fs::write(&z.config, text).unwrap();
    let (code, out, err) = crate::common::run(&["check", "--config", &cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("dnssec keys"), "{out}");
}

#[test]
fn static_signatures_are_made_again_before_they_expire() {
    // Validity 1 h, refresh 3599 s: every signature is due a second after
    // it is made, so the background re-signs about every second.
    let z = Signed::new("signed-refresh", "ecdsap256", "");
    let text = crate::signed_common::config_text(
        &[&z.ksk, &z.zsk],
        ", signature_validity = \"1h\", refresh = \"3599s\"",
        "",
    );
    std::fs::write(&z.config, text).unwrap();
    let s = Server::start(&z.config, &[]);
    let sig = || {
        let mut q = Q::new("www.example.test.", RecordType::A).edns(1232);
        q.dnssec_ok = true;
        s.dig(&q)
            .answer()
            .into_iter()
            .find(|x| x.contains(" RRSIG "))
            .unwrap()
    };
    let first = sig();
    assert!(
        wait_for(ms(8000), || sig() != first).is_some(),
        "the signature was never made again"
    );
    assert!(s.wait_log("re-signed", ms(2000)));
    if have_delv("static_signatures_are_made_again_before_they_expire") {
        assert_eq!(
            delv(s.port(), &z.anchor(&z.ksk), "www.example.test", "A"),
            "validated"
        );
    }
}
