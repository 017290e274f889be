//! `pick = "p2c"` on `one` (issue #16): two members drawn by weight, the
//! one with the lower check round-trip estimate ÷ weight answers. The
//! slowest member of a pool loses every draw it is in, yet stays usable;
//! the others still share the answers, at random, so independent servers
//! do not herd onto one member.

use std::time::Duration;

use crate::health_support::*;

fn backend(ip: &str, delay_ms: u64) -> Backend {
    Backend::http(
        ip,
        handler(move |_| Reply::Custom {
            delay: Duration::from_millis(delay_ms),
            code: 200,
            headers: Vec::new(),
            body: "ok".into(),
        }),
    )
}

fn counts(s: &crate::common::Server, name: &str, ips: &[String], n: usize) -> Vec<usize> {
    let mut c = vec![0; ips.len()];
    for _ in 0..n {
        let a = ask(s, name).addrs;
        assert_eq!(a.len(), 1);
        let i = ips.iter().position(|x| *x == a[0]).expect("a pool member");
        c[i] += 1;
    }
    c
}

#[test]
fn the_slow_member_loses_its_draws_and_the_fast_ones_share() {
    let f1 = backend("127.0.0.91", 0);
    let f2 = backend("127.0.0.92", 0);
    let slow = backend("127.0.0.93", 60);
    let ips = [f1.ip(), f2.ip(), slow.ip()];
    let members = format!(
        "{}, {}, {}",
        member(&f1, None),
        member(&f2, None),
        member(&slow, None)
    );
    let body = format!(
        "{}\n[pool.web]\ncheck = \"web\"\nmembers = [{members}]\n\n\
         [name.\"p2c.health.test\"]\npool = \"web\"\nmode = \"one\"\npick = \"p2c\"\nttl = 30\n\n\
         [name.\"plain.health.test\"]\npool = \"web\"\nmode = \"one\"\nttl = 30\n",
        check_table("web", "http", ""),
    );
    let (_dir, cfg) = setup("p2c", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    // Every member has an estimate (the slow one's well above the others).
    assert!(wait_for(Duration::from_secs(5), || {
        member_status(api, "web", &slow.ip())["rtt_estimate_ms"]
            .as_f64()
            .is_some_and(|r| r > 40.0)
            && member_status(api, "web", &f1.ip())["rtt_estimate_ms"]
                .as_f64()
                .is_some()
            && member_status(api, "web", &f2.ip())["rtt_estimate_ms"]
                .as_f64()
                .is_some()
    })
    .is_some());
    // A probe or two after the estimates exist, the decision carries them.
    std::thread::sleep(Duration::from_millis(300));
    let n = 1500;
    let p2c = counts(&s, "p2c.health.test.", &ips, n);
    assert_eq!(p2c[2], 0, "the slowest member lost every draw: {p2c:?}");
    assert!(
        p2c[0] > n / 10 && p2c[1] > n / 10,
        "both fast members answer: {p2c:?}"
    );
    assert_eq!(member_status(api, "web", &slow.ip())["standing"], "usable");
    // Plain `one`: a third each.
    let plain = counts(&s, "plain.health.test.", &ips, n);
    let tol = 5.0 * ((1.0 / 3.0) * (2.0 / 3.0) / n as f64).sqrt();
    for c in &plain {
        assert!(
            ((*c as f64 / n as f64) - 1.0 / 3.0).abs() < tol,
            "{plain:?}"
        );
    }
}

#[test]
fn bad_picks_are_refused_with_their_line() {
    for (keys, want) in [
        (
            "mode = \"one\"\npick = \"fastest\"",
            "unknown pick \"fastest\" (weighted or p2c)",
        ),
        (
            "mode = \"all\"\npick = \"p2c\"",
            "pick = \"p2c\" applies only to mode \"one\"",
        ),
        (
            "mode = \"one\"\npick = \"p2c\"\nsticky = true",
            "pick = \"p2c\" and sticky = true exclude each other",
        ),
    ] {
        let body = format!(
            "[pool.p]\nmembers = [\"127.0.0.1\", \"127.0.0.2\"]\n\n[name.\"p.health.test\"]\npool = \"p\"\n{keys}\n"
        );
        let (_dir, cfg) = setup("p2c-bad", &body);
        let (code, _out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_ne!(code, 0, "{keys} passed check");
        assert!(err.contains(want), "{keys}: {err}");
        assert!(err.contains("meridian.toml:"), "no file:line: {err}");
    }
}
