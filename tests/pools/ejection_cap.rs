//! `max_ejected` (issue #16): when the checks fail more members than the
//! cap allows, only the cap's worth leave the answers, those down longest
//! first; the others stay, marked `kept: ejection cap` in `/status` and in
//! `meridian_member_standing`. A pool without a cap loses them all.

use std::time::Duration;

use crate::health_support::*;

fn standing(api: std::net::SocketAddr, pool: &str, b: &Backend) -> String {
    member_status(api, pool, &b.ip())["standing"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn cap_keeps_all_but_the_longest_down() {
    // Ten members at 127.0.0.11..20, in two pools: one capped at 10 %
    // (one member), one without a cap.
    let mut backends: Vec<Backend> = (11..=20)
        .map(|i| Backend::ok(&format!("127.0.0.{i}")))
        .collect();
    let members: Vec<String> = backends.iter().map(|b| member(b, None)).collect();
    let body = format!(
        "{}\n[pool.capped]\ncheck = \"tcp\"\nmax_ejected = 0.1\nmembers = [{m}]\n\n\
         [pool.open]\ncheck = \"tcp\"\nmembers = [{m}]\n\n\
         [name.\"capped.health.test\"]\npool = \"capped\"\nmode = \"all\"\nttl = 30\ndegraded_ttl = 5\n\n\
         [name.\"open.health.test\"]\npool = \"open\"\nmode = \"all\"\nttl = 30\ndegraded_ttl = 5\n",
        check_table("tcp", "tcp", ""),
        m = members.join(", "),
    );
    let (_dir, cfg) = setup("ejection-cap", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    assert_eq!(ask(&s, "capped.health.test.").addrs.len(), 10);

    // A bad deploy: the first member goes down, then two more a moment later.
    backends[0].stop();
    let first = backends[0].ip();
    assert!(
        wait_for(Duration::from_secs(5), || !ask(&s, "capped.health.test.")
            .addrs
            .contains(&first))
        .is_some(),
        "the first failed member never left the capped pool"
    );
    // Then two more, one after the other (so which is down longer is known).
    backends[1].stop();
    assert!(wait_for(Duration::from_secs(5), || standing(
        api,
        "capped",
        &backends[1]
    ) == "kept: ejection cap")
    .is_some());
    backends[2].stop();
    let (b1, b2) = (backends[1].ip(), backends[2].ip());
    // The pool without a cap loses all three ...
    assert!(
        wait_for(Duration::from_secs(5), || ask(&s, "open.health.test.")
            .addrs
            .len()
            == 7)
        .is_some(),
        "the open pool never lost its three failed members"
    );
    // ... and the checks have failed them in the capped pool too.
    assert!(wait_for(Duration::from_secs(5), || {
        standing(api, "capped", &backends[1]) == "kept: ejection cap"
            && standing(api, "capped", &backends[2]) == "kept: ejection cap"
    })
    .is_some());
    // The capped pool answers with nine: only the one down longest left.
    for _ in 0..20 {
        let a = ask(&s, "capped.health.test.");
        assert_eq!(a.addrs.len(), 9, "{:?}", a.addrs);
        assert!(!a.addrs.contains(&first));
        assert!(a.addrs.contains(&b1) && a.addrs.contains(&b2));
        // Members out of their checks: a degraded answer.
        assert_eq!(a.ttls[0], 5);
    }
    assert_eq!(standing(api, "capped", &backends[0]), "ejected");
    assert_eq!(standing(api, "open", &backends[1]), "ejected");
    let m = metrics(api);
    let series = format!(
        "meridian_member_standing{{pool=\"capped\",address=\"{b1}\",standing=\"kept: ejection cap\"}}"
    );
    assert_eq!(metric(&m, &series), Some(1.0), "{series} in\n{m}");

    // The first one comes back: a second may leave, and the one down
    // longest of the two does.
    backends[0].restart();
    assert!(
        wait_for(Duration::from_secs(5), || {
            let a = ask(&s, "capped.health.test.").addrs;
            a.len() == 9 && a.contains(&first) && !a.contains(&b1) && a.contains(&b2)
        })
        .is_some(),
        "after the first came back, {b1} (down longer than {b2}) should have left: {:?}",
        ask(&s, "capped.health.test.").addrs
    );
}

#[test]
fn bad_caps_are_refused_with_their_line() {
    for (value, want) in [
        (
            "0",
            "max_ejected must be a whole count >= 1 or a fraction in (0, 1]",
        ),
        ("-2", "max_ejected must be"),
        ("1.5", "max_ejected must be"),
        ("\"lots\"", "max_ejected must be"),
        ("3", "max_ejected = 3 is more than the pool's 1 member(s)"),
    ] {
        let body = format!(
            "[pool.p]\nmembers = [\"127.0.0.1\"]\nmax_ejected = {value}\n\n\
             [name.\"p.health.test\"]\npool = \"p\"\n"
        );
        let (dir, cfg) = setup("ejection-cap-bad", &body);
        let (code, _out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_ne!(code, 0, "max_ejected = {value} passed check");
        assert!(err.contains(want), "max_ejected = {value}: {err}");
        // file:line of the key.
        assert!(err.contains("meridian.toml:"), "no file:line: {err}");
        drop(dir);
    }
}
