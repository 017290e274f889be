//! `panic_below` (issue #16): when the share of members passing their
//! checks falls below the threshold, the checks are more likely wrong than
//! the members: the pool answers with every member the operator did not
//! take out, with the degraded TTL, marks itself `panic`, and says so once
//! on entering and once on leaving.

use std::time::Duration;

use crate::health_support::*;

#[test]
fn panic_answers_with_all_but_drained() {
    let mut b: Vec<Backend> = (31..=34)
        .map(|i| Backend::ok(&format!("127.0.0.{i}")))
        .collect();
    let members: Vec<String> = b.iter().map(|x| member(x, None)).collect();
    let body = format!(
        "{}\n[pool.web]\ncheck = \"tcp\"\npanic_below = 0.5\nmembers = [{m}]\n\n\
         [pool.plain]\ncheck = \"tcp\"\nmembers = [{m}]\n\n\
         [name.\"web.health.test\"]\npool = \"web\"\nmode = \"all\"\nttl = 30\ndegraded_ttl = 4\n\n\
         [name.\"plain.health.test\"]\npool = \"plain\"\nmode = \"all\"\nttl = 30\ndegraded_ttl = 4\n",
        check_table("tcp", "tcp", ""),
        m = members.join(", "),
    );
    let (_dir, cfg) = setup("panic", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    assert_eq!(ask(&s, "web.health.test.").addrs.len(), 4);
    let entering = "pool web (A): panic:";
    let leaving = "pool web (A): panic over";
    assert_eq!(s.log_count(entering), 0);

    // Two of four fail: half pass, not below 0.5: plain failover.
    b[0].stop();
    b[1].stop();
    assert!(
        wait_for(Duration::from_secs(5), || ask(&s, "web.health.test.")
            .addrs
            .len()
            == 2)
        .is_some()
    );
    // A third fails: 1 of 4 pass, below half: panic, all four answer.
    b[2].stop();
    assert!(
        wait_for(Duration::from_secs(5), || ask(&s, "plain.health.test.")
            .addrs
            .len()
            == 1)
        .is_some(),
        "the plain pool should be down to one member"
    );
    assert!(
        wait_for(Duration::from_secs(5), || ask(&s, "web.health.test.")
            .addrs
            .len()
            == 4)
        .is_some(),
        "the pool in panic should answer with all four"
    );
    let a = ask(&s, "web.health.test.");
    assert_eq!(a.ttls, vec![4; 4], "panic answers carry the degraded TTL");
    let pool = status(api)["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pool"] == "web")
        .unwrap()
        .clone();
    assert_eq!(pool["panic"], true, "{pool}");
    assert_eq!(
        member_status(api, "web", &b[0].ip())["standing"],
        "kept: panic"
    );
    let m = metrics(api);
    assert_eq!(
        metric(&m, "meridian_pool_panic{pool=\"web\",family=\"ipv4\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "meridian_pool_panic{pool=\"plain\",family=\"ipv4\"}"),
        Some(0.0)
    );
    assert!(s.wait_log_count(entering, 0, Duration::from_secs(2)));

    // The operator drains one: it stays out even in panic.
    let (code, body) = http(api, "POST", &format!("/override/{}?state=drain", b[0].ip()));
    assert_eq!(code, 200, "{body}");
    for _ in 0..20 {
        let a = ask(&s, "web.health.test.");
        assert_eq!(a.addrs.len(), 3, "{:?}", a.addrs);
        assert!(!a.addrs.contains(&b[0].ip()));
    }

    // Two come back: 2 of the 3 considered pass: panic over, once.
    b[1].restart();
    b[2].restart();
    assert!(wait_for(Duration::from_secs(5), || {
        status(api)["pools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pool"] == "web" && p["panic"] == false)
    })
    .is_some());
    assert!(s.wait_log_count(leaving, 0, Duration::from_secs(2)));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(s.log_count(entering), 1, "entering panic logged once");
    assert_eq!(s.log_count(leaving), 1, "leaving panic logged once");
    let a = ask(&s, "web.health.test.");
    assert_eq!(a.addrs.len(), 3, "{:?}", a.addrs);
}

#[test]
fn bad_thresholds_are_refused_with_their_line() {
    for value in ["0", "1.5", "-0.1", "\"half\""] {
        let body = format!(
            "[pool.p]\nmembers = [\"127.0.0.1\"]\npanic_below = {value}\n\n\
             [name.\"p.health.test\"]\npool = \"p\"\n"
        );
        let (_dir, cfg) = setup("panic-bad", &body);
        let (code, _out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_ne!(code, 0, "panic_below = {value} passed check");
        assert!(
            err.contains("panic_below") || err.contains("invalid type"),
            "{value}: {err}"
        );
        assert!(err.contains("meridian.toml:"), "no file:line: {err}");
    }
}
