//! `spillover` (issue #16, Envoy's priority levels): for a geo name's
//! failover list, pool i keeps min(1, healthy share × factor) of its
//! clients' answers and the rest spills to the next pool. The split is
//! random per query inside one decision block, so the ECS scope never
//! changes. Without `spillover` the hard failover at `min_up` stays.

use std::time::Duration;

use crate::health_support::*;

/// Share of `n` answers for `name` (ECS `client`) that came from `backup`,
/// checking that every answer has scope `scope`.
fn backup_share(
    s: &crate::common::Server,
    name: &str,
    client: &str,
    backup: &str,
    scope: u8,
    n: usize,
) -> f64 {
    let mut hits = 0;
    for _ in 0..n {
        let a = ask_ecs(s, name, client);
        assert_eq!(a.scope, Some(scope), "scope of {:?}", a.addrs);
        assert_eq!(a.addrs.len(), 1);
        if a.addrs[0] == backup {
            hits += 1;
        }
    }
    hits as f64 / n as f64
}

#[test]
fn healthy_share_times_factor_stays_and_the_rest_spills() {
    let mut primary: Vec<Backend> = (41..=45)
        .map(|i| Backend::ok(&format!("127.0.0.{i}")))
        .collect();
    let backup = Backend::ok("127.0.0.46");
    let pm: Vec<String> = primary.iter().map(|b| member(b, None)).collect();
    let geo = "nets = { \"20.0.0.0/8\" = [\"primary\", \"backup\"] }\ndefault = [\"backup\"]\n";
    let body = format!(
        "{}\n[pool.primary]\ncheck = \"tcp\"\nmembers = [{}]\n\n[pool.backup]\ncheck = \"tcp\"\nmembers = [{}]\n\n\
         [name.\"spill.health.test\"]\nmode = \"one\"\nttl = 30\ndegraded_ttl = 5\nspillover = 1.4\n\n\
         [name.\"spill.health.test\".geo]\n{geo}\n\
         [name.\"hard.health.test\"]\nmode = \"one\"\nttl = 30\ndegraded_ttl = 5\n\n\
         [name.\"hard.health.test\".geo]\n{geo}",
        check_table("tcp", "tcp", ""),
        pm.join(", "),
        member(&backup, None),
    );
    let (_dir, cfg) = setup("spillover", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let client = "20.1.2.3/32";
    let b = backup.ip();
    // All up: 1 × 1.4 caps at 1, nothing spills.
    assert_eq!(
        backup_share(&s, "spill.health.test.", client, &b, 8, 300),
        0.0
    );

    // Two of five down: 0.6 × 1.4 = 0.84 stays, 16 % spills.
    primary[0].stop();
    primary[1].stop();
    assert!(wait_for(Duration::from_secs(5), || {
        status(api)["pools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pool"] == "primary" && p["up_members"] == 3)
    })
    .is_some());
    let n = 3000;
    let got = backup_share(&s, "spill.health.test.", client, &b, 8, n);
    let p = 0.16;
    let tol = 5.0 * (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (got - p).abs() < tol,
        "backup share {got}, want {p} ± {tol}"
    );
    // Hard failover: primary still has min_up members, nothing moves.
    assert_eq!(
        backup_share(&s, "hard.health.test.", client, &b, 8, 300),
        0.0
    );
    // The spilled answers are degraded (a later pool), the kept ones too
    // (members out).
    for _ in 0..50 {
        assert_eq!(ask_ecs(&s, "spill.health.test.", client).ttls, vec![5]);
    }

    // Four of five down: 0.2 × 1.4 = 0.28 stays.
    primary[2].stop();
    primary[3].stop();
    assert!(wait_for(Duration::from_secs(5), || {
        status(api)["pools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pool"] == "primary" && p["up_members"] == 1)
    })
    .is_some());
    let got = backup_share(&s, "spill.health.test.", client, &b, 8, n);
    let p = 0.72;
    let tol = 5.0 * (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (got - p).abs() < tol,
        "backup share {got}, want {p} ± {tol}"
    );
}

#[test]
fn spillover_needs_geo_and_a_sane_factor() {
    for (name_table, want) in [
        (
            "pool = \"p\"\nspillover = 1.4\n",
            "spillover needs geo rules",
        ),
        (
            "spillover = 0.5\n\n[name.\"n.health.test\".geo]\ndefault = [\"p\"]\n",
            "spillover must be a factor from 1 to 10",
        ),
    ] {
        let body = format!(
            "[pool.p]\nmembers = [\"127.0.0.1\"]\n\n[name.\"n.health.test\"]\n{name_table}"
        );
        let (_dir, cfg) = setup("spillover-bad", &body);
        let (code, _out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_ne!(code, 0, "{name_table} passed check");
        assert!(err.contains(want), "{name_table}: {err}");
        assert!(err.contains("meridian.toml:"), "no file:line: {err}");
    }
}
