//! The error penalty (issue #31): a member that fails every other probe,
//! never `fall` in a row, stays up, yet loses its share within 30 s with no
//! operator action, and regains it gradually once it recovers. A pool with
//! `error_penalty = false` over the same members is the control. Shares are
//! counted over real answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::health_support::*;

fn share(s: &crate::common::Server, name: &str, ip: &str, n: usize) -> f64 {
    (0..n)
        .filter(|_| ask(s, name).addrs == [ip.to_string()])
        .count() as f64
        / n as f64
}

fn errors_factor(api: std::net::SocketAddr, pool: &str, ip: &str) -> f64 {
    member_status(api, pool, ip)["factors"]["errors"]
        .as_f64()
        .expect("an errors factor")
}

#[test]
fn a_flapping_member_loses_its_share_and_regains_it_gradually() {
    let flap = Arc::new(AtomicBool::new(true));
    let good = Backend::ok("127.0.31.1");
    let sick = flapping("127.0.31.2", flap.clone());
    let members = format!("{}, {}", member(&good, None), member(&sick, None));
    // The setup: mode one, latency_aware (floored at 0.5 so the
    // round-trip noise of loopback cannot hide the control's even split).
    let pool = |name: &str, extra: &str| {
        format!(
            "[pool.{name}]\ncheck = \"web\"\nlatency_aware = true\nlatency_floor = 0.5\n{extra}members = [{members}]\n\n\
             [name.\"{name}.health.test\"]\npool = \"{name}\"\nmode = \"one\"\nttl = 30\n\n"
        )
    };
    let body = format!(
        "{}\n{}{}",
        FLAPPING_CHECK,
        pool("penalised", ""),
        pool("blind", "error_penalty = false\n"),
    );
    let (_dir, cfg) = setup("error-penalty", &body);
    let (s, api) = serve(&cfg);
    let t0 = Instant::now();
    settle(api);
    // The share the published weights give it (mode one picks by weight).
    let expected = || {
        let w = |ip: &str| {
            member_status(api, "penalised", ip)["effective_weight"]
                .as_f64()
                .unwrap()
        };
        let (g, b) = (w(&good.ip()), w(&sick.ip()));
        b / (g + b)
    };
    let took = wait_for(Duration::from_secs(30), || expected() <= 0.10);
    assert!(
        took.is_some(),
        "share by weight after 30 s: {}: {}",
        expected(),
        member_status(api, "penalised", &sick.ip())
    );
    eprintln!("penalised after {:?}", t0.elapsed());
    let st = member_status(api, "penalised", &sick.ip());
    assert_eq!(st["standing"], "usable", "rise/fall never ejected it: {st}");
    assert!(st["success_ratio"].as_f64().unwrap() < 0.8, "{st}");
    assert_eq!(errors_factor(api, "blind", &sick.ip()), 1.0);
    let text = metrics(api);
    let series = format!(
        "meridian_member_weight_factor{{pool=\"penalised\",address=\"{}\",factor=\"errors\"}}",
        sick.ip()
    );
    let m = metric(&text, &series).unwrap_or_else(|| panic!("no {series}"));
    assert!(m <= 0.176, "{series} = {m}");

    let n = 1000;
    let tol = 5.0 * (0.25 / n as f64).sqrt();
    let penalised = share(&s, "penalised.health.test.", &sick.ip(), n);
    let blind = share(&s, "blind.health.test.", &sick.ip(), n);
    eprintln!("sick member's share: penalised {penalised:.3}, blind {blind:.3}");
    assert!(penalised <= 0.15, "penalised share {penalised}");
    // The control: the latency floor 0.5 alone leaves it at least a third.
    assert!(blind > 1.0 / 3.0 - tol, "blind share {blind}");

    // Recovery: the factor climbs through intermediate values, not at once.
    flap.store(false, Ordering::Relaxed);
    let mut seen = Vec::new();
    let back = wait_for(Duration::from_secs(90), || {
        let f = errors_factor(api, "penalised", &sick.ip());
        if seen.last() != Some(&f) {
            seen.push(f);
        }
        std::thread::sleep(Duration::from_millis(100));
        f >= 0.999
    });
    assert!(back.is_some(), "not back after 90 s: {seen:?}");
    let between = seen.iter().filter(|f| (0.1..0.9).contains(*f)).count();
    assert!(between >= 5, "a ramp, not a step: {seen:?}");
    let after = share(&s, "penalised.health.test.", &sick.ip(), n);
    assert!(after > 1.0 / 3.0 - tol, "share once recovered {after}");
}
