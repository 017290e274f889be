//! The noise floor for latency (issue #31): round-trip estimates of
//! identical members differ by noise, and that noise must not move shares.
//! Four identical loopback backends, checked by TCP, answer through
//! `latency_aware` (weighted `one`) and through `pick = "p2c"` (with and
//! without `latency_aware`); each keeps a quarter of a few thousand
//! answers within ±5 percentage points. Before the floor, p2c split such a
//! pool about 50/33/17/0 % (the strict order of the noisy estimates).

use std::time::Duration;

use crate::health_support::*;

const IPS: [&str; 4] = ["127.0.31.1", "127.0.31.2", "127.0.31.3", "127.0.31.4"];

/// Answers per name: the ±5-point band is about 7 binomial sigmas.
const N: usize = 4000;

fn counts(s: &crate::common::Server, name: &str, n: usize) -> [usize; 4] {
    let mut c = [0; 4];
    for _ in 0..n {
        let a = ask(s, name).addrs;
        assert_eq!(a.len(), 1, "{name}: {a:?}");
        let i = IPS.iter().position(|x| *x == a[0]).expect("a pool member");
        c[i] += 1;
    }
    c
}

fn estimates(api: std::net::SocketAddr) -> Vec<Option<f64>> {
    IPS.iter()
        .map(|ip| member_status(api, "aware", ip)["rtt_estimate_ms"].as_f64())
        .collect()
}

#[test]
fn identical_members_keep_equal_shares_under_latency_aware_and_p2c() {
    let backends: Vec<Backend> = IPS.iter().map(|ip| Backend::ok(ip)).collect();
    let members: Vec<String> = backends.iter().map(|b| member(b, None)).collect();
    let members = members.join(", ");
    let body = format!(
        "{}\n[pool.aware]\ncheck = \"t\"\nlatency_aware = true\nmembers = [{members}]\n\n\
         [pool.plain]\ncheck = \"t\"\nmembers = [{members}]\n\n\
         [name.\"aware.health.test\"]\npool = \"aware\"\nmode = \"one\"\nttl = 30\n\n\
         [name.\"p2c.health.test\"]\npool = \"plain\"\nmode = \"one\"\npick = \"p2c\"\nttl = 30\n\n\
         [name.\"both.health.test\"]\npool = \"aware\"\nmode = \"one\"\npick = \"p2c\"\nttl = 30\n",
        check_table("t", "tcp", ""),
    );
    let (_dir, cfg) = setup("latency-noise", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    // Every member has an estimate: without one, nothing here is tested.
    assert!(
        wait_for(Duration::from_secs(5), || estimates(api)
            .iter()
            .all(Option::is_some))
        .is_some(),
        "no estimates: {:?}",
        estimates(api)
    );
    // A probe or two later, the published decision carries them.
    std::thread::sleep(ms(3 * INTERVAL_MS));
    let before = estimates(api);
    let mut shares = Vec::new();
    for name in [
        "aware.health.test.",
        "p2c.health.test.",
        "both.health.test.",
    ] {
        let c = counts(&s, name, N);
        let share: Vec<f64> = c.iter().map(|&k| k as f64 / N as f64).collect();
        shares.push((name, c, share));
    }
    let after = estimates(api);
    // Printed for the record (cargo test --nocapture): the noise is real.
    println!("estimates (ms) before {before:?}, after {after:?}");
    for (name, c, _) in &shares {
        println!("{name} {c:?}");
    }
    for (name, c, share) in &shares {
        for &p in share {
            assert!(
                (p - 0.25).abs() < 0.05,
                "{name}: shares {share:?} ({c:?} of {N}), estimates (ms) {before:?} then {after:?}"
            );
        }
    }
    for ip in IPS {
        let m = member_status(api, "aware", ip);
        assert_eq!(m["factors"]["latency"].as_f64(), Some(1.0), "{m}");
    }
}
