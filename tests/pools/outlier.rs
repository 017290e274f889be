//! Success-rate outlier ejection (issue #31, `outlier_detection`): two of
//! four members fail every other probe (never `fall` in a row, so their
//! checks keep them up). With outlier detection both leave the answers and
//! their ejections grow; `max_ejected` and `panic_below` bound it like
//! every other ejection.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::health_support::*;

fn standings(api: std::net::SocketAddr, pool: &str, ips: &[String]) -> BTreeSet<String> {
    ips.iter()
        .map(|ip| {
            member_status(api, pool, ip)["standing"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn outliers_leave_bounded_by_cap_and_panic() {
    let flap = Arc::new(AtomicBool::new(true));
    let good = [Backend::ok("127.0.31.11"), Backend::ok("127.0.31.12")];
    let sick = [
        flapping("127.0.31.13", flap.clone()),
        flapping("127.0.31.14", flap.clone()),
    ];
    let members: Vec<String> = good.iter().chain(&sick).map(|b| member(b, None)).collect();
    let members = members.join(", ");
    // Two at 1 and two at x: the line (1 + 3x) / 4 at k = 0.5 is above x.
    let outlier = "outlier_detection = true\noutlier_k = 0.5\noutlier_min_members = 3\n\
                   outlier_min_samples = 10\noutlier_ejection = \"1s\"\n";
    let pool = |name: &str, extra: &str| {
        format!(
            "[pool.{name}]\ncheck = \"web\"\n{outlier}{extra}members = [{members}]\n\n\
             [name.\"{name}.health.test\"]\npool = \"{name}\"\nmode = \"all\"\nttl = 30\n\n"
        )
    };
    let body = format!(
        "{}\n{}{}{}",
        FLAPPING_CHECK,
        pool("free", ""),
        pool("capped", "max_ejected = 1\n"),
        pool("panicky", "panic_below = 0.75\n"),
    );
    let (_dir, cfg) = setup("outlier", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let sick_ips: Vec<String> = sick.iter().map(Backend::ip).collect();
    let good_ips: Vec<String> = good.iter().map(Backend::ip).collect();
    let out = BTreeSet::from(["ejected: outlier".to_string()]);
    assert!(
        wait_for(Duration::from_secs(20), || standings(
            api, "free", &sick_ips
        ) == out)
        .is_some(),
        "not ejected: {}",
        status(api)
    );
    // Out of every answer, while the healthy ones answer.
    for _ in 0..200 {
        assert_eq!(ask(&s, "free.health.test.").addrs, good_ips);
    }
    // The cap keeps one; panic (2 of 4 passing < 0.75) keeps both.
    let capped = BTreeSet::from([
        "ejected: outlier".to_string(),
        "kept: ejection cap".to_string(),
    ]);
    assert_eq!(standings(api, "capped", &sick_ips), capped);
    let mut all: Vec<String> = good_ips.iter().chain(&sick_ips).cloned().collect();
    all.sort();
    assert_eq!(ask(&s, "capped.health.test.").addrs.len(), 3);
    let panic = BTreeSet::from(["kept: panic".to_string()]);
    assert_eq!(standings(api, "panicky", &sick_ips), panic);
    assert_eq!(ask(&s, "panicky.health.test.").addrs, all);
    // Still sick when the first ejection (1 s) ends: ejected again, longer.
    let count = |ip: &str| {
        member_status(api, "free", ip)["outlier_ejections"]
            .as_u64()
            .unwrap()
    };
    assert!(
        wait_for(Duration::from_secs(20), || count(&sick_ips[0]) >= 2).is_some(),
        "ejections: {}",
        member_status(api, "free", &sick_ips[0])
    );
    assert_eq!(standings(api, "free", &sick_ips), out);
    assert_eq!(
        metric(
            &metrics(api),
            &format!(
                "meridian_member_standing{{pool=\"free\",address=\"{}\",standing=\"ejected: outlier\"}}",
                sick_ips[0]
            )
        ),
        Some(1.0)
    );
    // Healthy again: back in once its ratio is past 0.9 (about 30 s at
    // τ = 15 s) and the current ejection ends.
    flap.store(false, Ordering::Relaxed);
    assert!(
        wait_for(Duration::from_secs(90), || {
            ask(&s, "free.health.test.").addrs == all
        })
        .is_some(),
        "not back: {}",
        status(api)
    );
    for ip in &good_ips {
        assert_eq!(member_status(api, "free", ip)["outlier_ejections"], 0);
    }
}
