//! `slow_start` (issue #16): a member that comes up (from down, or added
//! by a reload) ramps linearly from `slow_start_min` of its weight to all of
//! it, so a cold member does not take its whole share of new resolutions
//! at once. Members that stay up keep their full weight across a reload.

use std::time::{Duration, Instant};

use crate::health_support::*;

fn ramp(api: std::net::SocketAddr, b: &Backend) -> f64 {
    member_status(api, "web", &b.ip())["factors"]["slow_start"]
        .as_f64()
        .unwrap_or(-1.0)
}

fn share(s: &crate::common::Server, b: &Backend, n: usize) -> f64 {
    let ip = b.ip();
    (0..n)
        .filter(|_| ask(s, "web.health.test.").addrs == [ip.clone()])
        .count() as f64
        / n as f64
}

fn config(members: &[&Backend]) -> String {
    let m: Vec<String> = members.iter().map(|b| member(b, None)).collect();
    format!(
        "{}\n[pool.web]\ncheck = \"tcp\"\nslow_start = \"4s\"\nslow_start_min = 0.1\nmembers = [{}]\n\n\
         [name.\"web.health.test\"]\npool = \"web\"\nmode = \"one\"\nttl = 30\ndegraded_ttl = 5\n",
        check_table("tcp", "tcp", ""),
        m.join(", ")
    )
}

#[test]
fn a_returning_member_ramps_up() {
    let a = Backend::ok("127.0.0.61");
    let mut b = Backend::ok("127.0.0.62");
    let (_dir, cfg) = setup("slow-start", &config(&[&a, &b]));
    let (s, api) = serve(&cfg);
    settle(api);
    // Wait out the start-up ramp: both at full weight, even shares.
    assert!(wait_for(Duration::from_secs(8), || ramp(api, &a) == 1.0
        && ramp(api, &b) == 1.0)
    .is_some());

    b.stop();
    assert!(wait_for(Duration::from_secs(5), || member_status(
        api,
        "web",
        &b.ip()
    )["up"]
        == false)
    .is_some());
    b.restart();
    assert!(wait_for(Duration::from_secs(5), || member_status(
        api,
        "web",
        &b.ip()
    )["up"]
        == true)
    .is_some());
    let t0 = Instant::now();
    let r0 = ramp(api, &b);
    assert!(r0 < 0.5, "ramp just after coming up: {r0}");
    // Early on, b's share follows its ramp (well under half).
    let n = 800;
    let early = share(&s, &b, n);
    let r1 = ramp(api, &b);
    let bound = r1 / (1.0 + r1) + 5.0 * (0.25 / n as f64).sqrt();
    if t0.elapsed() < Duration::from_secs(2) {
        assert!(early < bound, "share {early} while the ramp was {r0}..{r1}");
    } else {
        eprintln!(
            "slow_start: machine too slow for the early window ({:?}); ramp checked only",
            t0.elapsed()
        );
    }
    // The ramp rises, then reaches 1 within slow_start (+ slack).
    assert!(
        wait_for(Duration::from_secs(8), || ramp(api, &b) == 1.0).is_some(),
        "ramp never reached 1"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(2500),
        "ramped too fast: {:?}",
        t0.elapsed()
    );
    let late = share(&s, &b, n);
    let tol = 5.0 * (0.25 / n as f64).sqrt();
    assert!((late - 0.5).abs() < tol, "share after the ramp {late}");
}

#[test]
fn a_member_added_by_reload_ramps_and_the_others_do_not() {
    let a = Backend::ok("127.0.0.63");
    let c = Backend::ok("127.0.0.64");
    let (dir, cfg) = setup("slow-start-reload", &config(&[&a]));
    let (s, api) = serve(&cfg);
    settle(api);
    assert!(wait_for(Duration::from_secs(8), || ramp(api, &a) == 1.0).is_some());
    dir.write("meridian.toml", &config_text(&config(&[&a, &c])));
    s.reload(Duration::from_secs(10));
    assert!(wait_for(Duration::from_secs(3), || member_status(
        api,
        "web",
        &c.ip()
    )["up"]
        == true)
    .is_some());
    let rc = ramp(api, &c);
    assert!(rc < 0.7, "a member added by a reload ramps: {rc}");
    assert_eq!(
        ramp(api, &a),
        1.0,
        "a member kept by the reload keeps its weight"
    );
}

#[test]
fn bad_slow_start_is_refused_with_its_line() {
    for (keys, want) in [
        ("slow_start = \"fast\"", "slow_start must be a duration"),
        ("slow_start = 0", "slow_start must be a duration"),
        ("slow_start = \"2h\"", "slow_start must be a duration"),
        ("slow_start_min = 0.2", "slow_start_min without slow_start"),
        (
            "slow_start = 10\nslow_start_min = 1.0",
            "slow_start_min must be a fraction in [0, 1)",
        ),
    ] {
        let body = format!(
            "[pool.p]\nmembers = [\"127.0.0.1\"]\n{keys}\n\n[name.\"p.health.test\"]\npool = \"p\"\n"
        );
        let (_dir, cfg) = setup("slow-start-bad", &body);
        let (code, _out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_ne!(code, 0, "{keys} passed check");
        assert!(err.contains(want), "{keys}: {err}");
        assert!(err.contains("meridian.toml:"), "no file:line: {err}");
    }
}
