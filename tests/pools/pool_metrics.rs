//! `meridian_pool_answers_total` keeps each pool's count under its name:
//! a reload that adds a pool sorting first does not move counts between
//! pools, a never-queried pool shows 0, a pool name with a double quote is
//! escaped in the label, and every pool is counted however many there are
//! (E2, E3). Loopback only.

use std::time::Duration;

use crate::health_support::*;

/// A pool and a name on it; `name_toml` is the pool's name as a TOML
/// (quoted) string.
fn pool(name_toml: &str, addr: &str, host: &str) -> String {
    format!(
        "[pool.{name_toml}]\nmembers = [\"{addr}\"]\n\n\
         [name.\"{host}.health.test\"]\npool = {name_toml}\nttl = 60\n\n"
    )
}

/// Pools `b` and `c"x`, and with `with_a` a pool `a` that sorts before both.
fn body(with_a: bool) -> String {
    let mut s = String::new();
    if with_a {
        s += &pool(r#""a""#, "192.0.2.1", "a");
    }
    s += &pool(r#""b""#, "192.0.2.2", "b");
    s += &pool(r#""c\"x""#, "192.0.2.3", "c");
    s
}

fn count(api: std::net::SocketAddr, label: &str) -> Option<f64> {
    metric(
        &metrics(api),
        &format!("meridian_pool_answers_total{{pool=\"{label}\"}}"),
    )
}

fn wait_count(api: std::net::SocketAddr, label: &str, want: f64) {
    let ok = wait_for(Duration::from_secs(5), || count(api, label) == Some(want));
    assert!(
        ok.is_some(),
        "pool {label}: want {want}, got {:?}\n{}",
        count(api, label),
        metrics(api)
    );
}

#[test]
fn counts_stay_with_their_pool_across_a_reload() {
    let (dir, cfg) = setup("pool-metrics", &body(false));
    let (s, api) = serve(&cfg);
    for _ in 0..3 {
        assert_eq!(ask(&s, "b.health.test.").addrs, set(&["192.0.2.2"]));
    }
    for _ in 0..5 {
        assert_eq!(ask(&s, "c.health.test.").addrs, set(&["192.0.2.3"]));
    }
    wait_count(api, "b", 3.0);
    // The quote is escaped: `pool="c\"x"`, never `pool="c"x"`.
    wait_count(api, r#"c\"x"#, 5.0);
    assert!(!metrics(api).contains(r#"pool="c"x""#));

    // Add pool `a`, which sorts first (pools are numbered in name order).
    dir.write("meridian.toml", &config_text(&body(true)));
    let line = s.reload(Duration::from_secs(20));
    assert!(line.contains("reloaded"), "{line}");
    let text = metrics(api);
    for (label, want) in [("a", 0.0), ("b", 3.0), (r#"c\"x"#, 5.0)] {
        assert_eq!(
            metric(
                &text,
                &format!("meridian_pool_answers_total{{pool=\"{label}\"}}")
            ),
            Some(want),
            "pool {label} after the reload:\n{text}"
        );
    }
    // Counting goes on under the names, for the new pool too.
    ask(&s, "a.health.test.");
    ask(&s, "b.health.test.");
    wait_count(api, "a", 1.0);
    wait_count(api, "b", 4.0);
    assert_eq!(count(api, r#"c\"x"#), Some(5.0));

    // Remove `b`: its series goes; the others keep their counts.
    let mut only = String::new();
    only += &pool(r#""a""#, "192.0.2.1", "a");
    only += &pool(r#""c\"x""#, "192.0.2.3", "c");
    dir.write("meridian.toml", &config_text(&only));
    let line = s.reload(Duration::from_secs(20));
    assert!(line.contains("reloaded"), "{line}");
    let text = metrics(api);
    assert!(!text.contains("{pool=\"b\"}"), "{text}");
    assert_eq!(count(api, "a"), Some(1.0));
    assert_eq!(count(api, r#"c\"x"#), Some(5.0));
}

#[test]
fn every_one_of_1100_pools_is_counted() {
    const N: usize = 1100;
    let mut body = String::new();
    for i in 0..N {
        let addr = format!("10.{}.{}.1", i / 256, i % 256);
        body += &pool(&format!("\"p{i:04}\""), &addr, &format!("n{i}"));
    }
    let (_dir, cfg) = setup("pool-metrics-many", &body);
    let (s, api) = serve(&cfg);
    for i in 0..N {
        let want = format!("10.{}.{}.1", i / 256, i % 256);
        assert_eq!(ask(&s, &format!("n{i}.health.test.")).addrs, set(&[&want]));
    }
    let text = wait_for(Duration::from_secs(5), || {
        metric(&metrics(api), "meridian_pool_answers_total{pool=\"p1099\"}") == Some(1.0)
    })
    .map(|_| metrics(api))
    .unwrap_or_else(|| metrics(api));
    let missing: Vec<usize> = (0..N)
        .filter(|i| {
            metric(
                &text,
                &format!("meridian_pool_answers_total{{pool=\"p{i:04}\"}}"),
            ) != Some(1.0)
        })
        .collect();
    assert!(missing.is_empty(), "pools not counted once: {missing:?}");
}
